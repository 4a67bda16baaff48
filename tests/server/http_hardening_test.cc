// Request heads over real HTTP on loopback (issue 26; docs/server.md
// "Request heads"): framings that could smuggle a second request (unknown
// transfer codings, Content-Length with Transfer-Encoding, two lengths,
// obs-fold) are refused and the connection closes with the second request
// never run; HEAD answers headers only, on routes, static files and event
// streams, and the connection stays usable; the Host check (missing,
// duplicate, not allowed, ports, IPv6, --allowed-hosts, wildcard binds);
// absolute-form targets. ParseRequestHead and MakeAllowedHosts also alone.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "http_client.h"
#include "server/api.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/request_head.h"
#include "server/static_files.h"

namespace kestrel::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// What came back on one connection: every byte until the server closed it
// (`closed`) or 5 s passed without one.
struct Exchange {
  std::string bytes;
  bool closed = false;
};

// Over IPv4 (127.0.0.1), or IPv6 (::1) when `ipv6`.
Exchange Talk(int port, const std::string& raw, bool ipv6 = false) {
  Exchange ex;
  const int fd = ::socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return ex;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sockaddr_in6 addr6{};
  addr6.sin6_family = AF_INET6;
  addr6.sin6_port = htons(static_cast<uint16_t>(port));
  addr6.sin6_addr = in6addr_loopback;
  const int connected = ipv6 ? ::connect(fd, reinterpret_cast<sockaddr*>(&addr6), sizeof addr6)
                             : ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  if (connected != 0 ||
      ::send(fd, raw.data(), raw.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(raw.size())) {
    ::close(fd);
    return ex;
  }
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) break;
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      ex.closed = true;  // EOF (or a reset): the server ended the connection
      break;
    }
    ex.bytes.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return ex;
}

struct Reply {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lowercased
  std::string body;
};

// Splits the bytes of a connection into its responses, framed as a client
// frames them: the i-th answers a HEAD when head_only[i] (no body whatever
// it says), else its Content-Length, else the rest. Whatever does not parse
// as a response is left in *rest.
std::vector<Reply> SplitReplies(std::string bytes, const std::vector<bool>& head_only, std::string* rest) {
  std::vector<Reply> out;
  while (!bytes.empty()) {
    const size_t end = bytes.find("\r\n\r\n");
    if (bytes.rfind("HTTP/1.1 ", 0) != 0 || end == std::string::npos) break;
    Reply r;
    r.status = std::atoi(bytes.substr(9, 3).c_str());
    for (size_t i = bytes.find("\r\n") + 2; i < end;) {
      const size_t j = bytes.find("\r\n", i);
      const std::string line = bytes.substr(i, j - i);
      const size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      r.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
      i = j + 2;
    }
    bytes.erase(0, end + 4);
    size_t n = bytes.size();
    if (out.size() < head_only.size() && head_only[out.size()])
      n = 0;
    else if (r.headers.count("content-length"))
      n = std::min(n, static_cast<size_t>(std::stoul(r.headers["content-length"])));
    r.body = bytes.substr(0, n);
    bytes.erase(0, n);
    out.push_back(std::move(r));
  }
  *rest = bytes;
  return out;
}

json ErrorOf(const Reply& r) {
  json j = json::parse(r.body, nullptr, false);
  return j.is_object() && j.contains("error") ? j["error"] : json();
}

class HttpHardeningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::temp_directory_path() / ("kestrel_http_hardening_" + std::to_string(::getpid()) + "_" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "web");
    std::ofstream(dir_ / "web" / "index.html") << "<!doctype html><title>k</title>";
    std::ofstream(dir_ / "web" / "app.js") << "console.log('kestrel')";

    RouteDoc open;
    open.access = Access::kOpen;
    ASSERT_TRUE(router_
                    .Add("GET", "/healthz", open,
                         [](const Request&, const PathParams&) {
                           return JsonResponse({{"ok", true}});
                         })
                    .IsOk());
    ASSERT_TRUE(router_
                    .Add("GET", "/api/secret", {},
                         [this](const Request&, const PathParams&) {
                           ++secret_reads_;
                           return JsonResponse({{"secret", "s3cret"}});
                         })
                    .IsOk());
    ASSERT_TRUE(router_
                    .Add("POST", "/api/items", {},
                         [this](const Request& req, const PathParams&) {
                           ++writes_;
                           return JsonResponse({{"stored", req.body}}, 201);
                         })
                    .IsOk());
    ASSERT_TRUE(router_
                    .Add("GET", "/api/echo", {},
                         [](const Request& req, const PathParams&) {
                           return JsonResponse(
                               {{"path", req.path}, {"query", req.query}, {"host", req.Header("host")}});
                         })
                    .IsOk());
    ASSERT_TRUE(router_
                    .Add("GET", "/api/events", {},
                         [this](const Request&, const PathParams&) {
                           Response r;
                           r.content_type = "text/event-stream";
                           EventStream s;
                           s.poll = [this](int64_t) -> Result<std::vector<StreamEvent>> {
                             ++polls_;
                             return std::vector<StreamEvent>{};
                           };
                           r.stream = std::move(s);
                           return r;
                         })
                    .IsOk());
    auto files = StaticFiles::Open((dir_ / "web").string());
    ASSERT_TRUE(files.IsOk()) << files.GetStatus().ToString();
    router_.SetFallback([files = std::move(files).Value()](const Request& req, const PathParams&) {
      return files.Serve(req);
    });
    ServerOptions o;
    o.port = 0;
    o.stream_poll_ms = 20;
    Serve(o);
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }

  void Serve(const ServerOptions& o) {
    server_.reset();
    auto s = HttpServer::Start(o, router_, metrics_);
    ASSERT_TRUE(s.IsOk()) << s.GetStatus().ToString();
    server_ = std::move(s).Value();
    port_ = server_->Port();
  }

  // One request, its head lines given, Connection: close; one reply expected.
  Reply Ask(const std::string& request_line, const std::string& lines) {
    Exchange ex = Talk(port_, request_line + "\r\n" + lines + "Connection: close\r\n\r\n");
    std::string rest;
    std::vector<Reply> got = SplitReplies(ex.bytes, {}, &rest);
    EXPECT_EQ(got.size(), 1u) << ex.bytes;
    EXPECT_EQ(rest, "");
    return got.empty() ? Reply{} : got[0];
  }
  Reply AskHost(const std::string& host_line) {
    return Ask("GET /api/secret HTTP/1.1", host_line.empty() ? "" : host_line + "\r\n");
  }

  fs::path dir_;
  Router router_;
  HttpMetrics metrics_;
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
  std::atomic<int> secret_reads_{0};
  std::atomic<int> writes_{0};
  std::atomic<int> polls_{0};
};

const std::string kSmuggled = "GET /api/secret HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

// The harness can see a second request run: a well-framed chunked body
// followed by the same GET runs both.
TEST_F(HttpHardeningTest, AChunkedBodyThenASecondRequestRunsBoth) {
  Exchange ex = Talk(port_,
                     "POST /api/items HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "3\r\nabc\r\n0\r\n\r\n" +
                         kSmuggled);
  std::string rest;
  std::vector<Reply> got = SplitReplies(ex.bytes, {}, &rest);
  ASSERT_EQ(got.size(), 2u) << ex.bytes;
  EXPECT_EQ(got[0].status, 201);
  EXPECT_EQ(json::parse(got[0].body)["stored"], "abc");
  EXPECT_EQ(got[1].status, 200);
  EXPECT_EQ(writes_, 1);
  EXPECT_EQ(secret_reads_, 1);
}

// Issue 26 item 3: with "Transfer-Encoding: gzip" the body counted as
// empty and its bytes ran as a second request.
TEST_F(HttpHardeningTest, SmuggledRequestBehindAnUnusableFramingNeverRuns) {
  struct Case {
    std::string framing;  // header lines of the POST
    int status;
    std::string code;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"Transfer-Encoding: gzip\r\n", 400, "bad_request", "Transfer-Encoding"},
      {"Transfer-Encoding: gzip, chunked\r\n", 501, "not_implemented", "Transfer-Encoding"},
      {"Transfer-Encoding: identity\r\n", 400, "bad_request", "Transfer-Encoding"},
      {"Transfer-Encoding: chunked, gzip\r\n", 400, "bad_request", "Transfer-Encoding"},
      {"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", 400, "bad_request",
       "Transfer-Encoding"},
      {"Transfer-Encoding: deflate,gzip, chunked\r\n", 501, "not_implemented", "Transfer-Encoding"},
      {"Content-Length: 0\r\nTransfer-Encoding: chunked\r\n", 400, "bad_request", "Transfer-Encoding"},
      {"Transfer-Encoding: chunked\r\nContent-Length: 0\r\n", 400, "bad_request", "Transfer-Encoding"},
      {"Content-Length: 0\r\nContent-Length: 0\r\n", 400, "bad_request", "Content-Length"},
      {"Content-Length: 0, 44\r\n", 400, "bad_request", "Content-Length"},
      {"Content-Length: 0,0\r\n", 400, "bad_request", "Content-Length"},
      {"Content-Length: +0\r\n", 400, "bad_request", "Content-Length"},
      {"Content-Length: 0x0\r\n", 400, "bad_request", "Content-Length"},
      {"Content-Length: 99999999999999999999\r\n", 400, "bad_request", "Content-Length"},
      {"X-Note: a\r\n Content-Length: 0\r\n", 400, "bad_request", "X-Note"},  // obs-fold
      {"X-Note: a\r\n\tb\r\n", 400, "bad_request", "X-Note"},
      {"Content-Length : 0\r\n", 400, "bad_request", ""},  // space before the colon
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.framing);
    Exchange ex =
        Talk(port_, "POST /api/items HTTP/1.1\r\nHost: 127.0.0.1\r\n" + c.framing + "\r\n" + kSmuggled);
    std::string rest;
    std::vector<Reply> got = SplitReplies(ex.bytes, {}, &rest);
    ASSERT_EQ(got.size(), 1u) << ex.bytes;
    EXPECT_EQ(rest, "") << "one answer, nothing after it";
    EXPECT_EQ(got[0].status, c.status);
    EXPECT_EQ(got[0].headers["connection"], "close");
    EXPECT_EQ(ErrorOf(got[0])["code"], c.code) << got[0].body;
    EXPECT_EQ(ErrorOf(got[0])["field"], c.field) << got[0].body;
    EXPECT_TRUE(ex.closed) << "the connection closes after the refusal";
  }
  // An HTTP/1.0 request with a Transfer-Encoding (RFC 9112 §6.1).
  Exchange ex =
      Talk(port_, "POST /api/items HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + kSmuggled);
  std::string rest;
  std::vector<Reply> got = SplitReplies(ex.bytes, {}, &rest);
  ASSERT_EQ(got.size(), 1u) << ex.bytes;
  EXPECT_EQ(got[0].status, 400);
  EXPECT_TRUE(ex.closed);
  EXPECT_EQ(writes_, 0) << "neither the refused POST nor a smuggled one ran";
  EXPECT_EQ(secret_reads_, 0) << "the smuggled GET never ran";
}

TEST_F(HttpHardeningTest, MalformedRequestLinesAndFieldLinesAre400) {
  for (const std::string& raw : {
           std::string("GET /healthz HTTP/1.1\nHost: 127.0.0.1\n\n"),              // bare LF
           std::string("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\rX: y\r\n\r\n"),  // bare CR
           std::string("GET  /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),       // two spaces
           std::string("GET /healthz HTTP/1.1 \r\nHost: 127.0.0.1\r\n\r\n"),
           std::string("G(T /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
           std::string("GET /hea\x01lthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
           std::string("GET /healthz HTTP/1.x\r\nHost: 127.0.0.1\r\n\r\n"),
           std::string("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: a\x01z\r\n\r\n"),
           std::string("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nno colon\r\n\r\n"),
           std::string(
               "GET /healthz HTTP/1.1\r\n Host: 127.0.0.1\r\n\r\n"),  // whitespace before the first field
           std::string("GET * HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
           std::string("GET /api/%zz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
       }) {
    SCOPED_TRACE(json(raw).dump(-1, ' ', true));
    Exchange ex = Talk(port_, raw);
    std::string rest;
    std::vector<Reply> got = SplitReplies(ex.bytes, {}, &rest);
    ASSERT_EQ(got.size(), 1u) << ex.bytes;
    EXPECT_EQ(got[0].status, 400);
    EXPECT_EQ(ErrorOf(got[0])["code"], "bad_request");
    EXPECT_FALSE(ErrorOf(got[0])["message"].get<std::string>().empty());
    EXPECT_TRUE(ex.closed);
  }
  Reply v2 = Ask("GET /healthz HTTP/2.0", "Host: 127.0.0.1\r\n");
  EXPECT_EQ(v2.status, 505);
  EXPECT_EQ(ErrorOf(v2)["code"], "http_version_not_supported");
  // Empty lines before the request line are ignored (RFC 9112 §2.2).
  Exchange ex = Talk(port_, "\r\n\r\nGET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(ex.bytes.rfind("HTTP/1.1 200 ", 0), 0u) << ex.bytes;
}

// Issue 26 item 4: HEAD /healthz sent 17 bytes of body, HEAD /api/events streamed.
TEST_F(HttpHardeningTest, HeadAnswersHeadersOnlyAndTheConnectionGoesOn) {
  const std::string get_line = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  for (const std::string target : {"/healthz", "/api/secret", "/app.js", "/", "/api/nothing-here"}) {
    SCOPED_TRACE(target);
    testing::HttpReply get = testing::Get(port_, target);
    Exchange ex = Talk(port_, "HEAD " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" + get_line);
    std::string rest;
    std::vector<Reply> got = SplitReplies(ex.bytes, {true, false}, &rest);
    ASSERT_EQ(got.size(), 2u) << ex.bytes;
    EXPECT_EQ(got[0].status, get.status);
    EXPECT_EQ(got[0].headers["content-length"], std::to_string(get.body.size())) << "the GET's length";
    EXPECT_EQ(got[0].headers["content-type"], get.headers["content-type"]);
    EXPECT_EQ(got[1].status, 200) << "the next response starts right after the HEAD's header";
    EXPECT_EQ(json::parse(got[1].body, nullptr, false)["ok"], true) << got[1].body;
    EXPECT_EQ(rest, "");
  }
  // An event stream: its header, no stream opened, the connection goes on.
  Exchange ex = Talk(port_, "HEAD /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" + get_line);
  std::string rest;
  std::vector<Reply> got = SplitReplies(ex.bytes, {true, false}, &rest);
  ASSERT_EQ(got.size(), 2u) << ex.bytes;
  EXPECT_EQ(got[0].status, 200);
  EXPECT_EQ(got[0].headers["content-type"], "text/event-stream");
  EXPECT_EQ(got[0].headers.count("content-length"), 0u) << "a stream has no length";
  EXPECT_EQ(got[1].status, 200);
  EXPECT_EQ(rest, "");
  EXPECT_EQ(polls_, 0) << "no stream was opened";
  EXPECT_EQ(metrics_.StreamClients(), 0);
  EXPECT_EQ(secret_reads_, 2) << "/api/secret's GET and HEAD: a HEAD runs the GET handler";
}

// Issue 26 item 7: no Host, two, or attacker.example all read the data.
TEST_F(HttpHardeningTest, HostMustBeOneAllowedHost) {
  for (const std::string& ok : std::vector<std::string>{
           "Host: 127.0.0.1", "Host: localhost", "Host: LocalHost.", "Host: localhost:8080",
           "Host: 127.0.0.1:" + std::to_string(port_), "Host: [::1]", "Host: [::1]:8080",
           "Host: [0:0:0:0:0:0:0:1]:1", "host:\t127.0.0.1  "}) {
    EXPECT_EQ(AskHost(ok).status, 200) << ok;
  }
  const int reads = secret_reads_;
  struct Bad {
    std::string lines;
    int status;
    std::string code;
  };
  for (const Bad& b : std::vector<Bad>{
           {"Host: attacker.example", 421, "misdirected_request"},
           {"Host: attacker.example:8080", 421, "misdirected_request"},
           {"Host: 127.0.0.2", 421, "misdirected_request"},
           {"Host: [::2]", 421, "misdirected_request"},
           {"Host: localhost.attacker.example", 421, "misdirected_request"},
           {"Host: ", 421, "misdirected_request"},
           {"", 400, "bad_request"},
           {"Host: 127.0.0.1\r\nHost: 127.0.0.1", 400, "bad_request"},
           {"Host: attacker.example\r\nHost: 127.0.0.1", 400, "bad_request"},
           {"Host: [::1", 400, "bad_request"},
           {"Host: localhost:80x", 400, "bad_request"},
           {"Host: local host", 400, "bad_request"},
           {"Host: user@localhost", 400, "bad_request"},
       }) {
    SCOPED_TRACE(b.lines);
    Reply r = AskHost(b.lines);
    EXPECT_EQ(r.status, b.status);
    EXPECT_EQ(ErrorOf(r)["code"], b.code) << r.body;
    EXPECT_EQ(ErrorOf(r)["field"], "Host") << r.body;
    EXPECT_EQ(r.body.find("s3cret"), std::string::npos);
  }
  EXPECT_EQ(secret_reads_, reads) << "no refused request reached the handler";
  // HTTP/1.0 needs no Host; one it sends is checked.
  EXPECT_EQ(Ask("GET /api/secret HTTP/1.0", "").status, 200);
  EXPECT_EQ(Ask("GET /api/secret HTTP/1.0", "Host: attacker.example\r\n").status, 421);
}

TEST_F(HttpHardeningTest, AllowedHostsOptionReplacesTheDefaults) {
  ServerOptions o;
  o.port = 0;
  o.allowed_hosts = {"Kestrel.LAN", "10.0.0.7", "fe80::1"};
  Serve(o);
  EXPECT_EQ(AskHost("Host: kestrel.lan:8080").status, 200);
  EXPECT_EQ(AskHost("Host: 10.0.0.7").status, 200);
  EXPECT_EQ(AskHost("Host: [FE80::1]:80").status, 200);
  EXPECT_EQ(AskHost("Host: 127.0.0.1").status, 421) << "the defaults are replaced";
  EXPECT_EQ(AskHost("Host: attacker.example").status, 421);

  o.allowed_hosts = {"*"};
  Serve(o);
  EXPECT_EQ(AskHost("Host: attacker.example").status, 200);
  EXPECT_EQ(AskHost("").status, 400) << "'*' still wants a Host in HTTP/1.1";

  for (const std::string bad : {"kestrel.lan:8080", "", "a b", "[::1]:80", "[::1"}) {
    o.allowed_hosts = {"localhost", bad};
    auto s = HttpServer::Start(o, router_, metrics_);
    ASSERT_FALSE(s.IsOk()) << bad;
    EXPECT_EQ(s.GetStatus().Code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.GetStatus().Where().field, "allowed-hosts");
  }
}

// Bound to every interface: any IP address (no DNS name to rebind) and
// the machine's name too, still not another name.
TEST_F(HttpHardeningTest, AWildcardBindAlsoAllowsAddressesAndTheMachinesName) {
  ServerOptions o;
  o.host = "0.0.0.0";
  o.port = 0;
  Serve(o);
  char name[256] = {};
  ASSERT_EQ(::gethostname(name, sizeof name - 1), 0);
  EXPECT_EQ(AskHost(std::string("Host: ") + name + ":8080").status, 200) << name;
  EXPECT_EQ(AskHost("Host: 192.168.1.20:8080").status, 200);
  EXPECT_EQ(AskHost("Host: [2001:db8::5]").status, 200);
  EXPECT_EQ(AskHost("Host: localhost").status, 200);
  EXPECT_EQ(AskHost("Host: attacker.example").status, 421);
}

// A server on ::1, reached over IPv6: the bracketed literal with a port is
// its own name; the IPv4 loopback names still are by default.
TEST_F(HttpHardeningTest, AnIpv6LoopbackServerAnswersItsBracketedLiteral) {
  ServerOptions o;
  o.host = "::1";
  o.port = 0;
  auto s = HttpServer::Start(o, router_, metrics_);
  if (!s.IsOk()) GTEST_SKIP() << "no IPv6 loopback here: " << s.GetStatus().ToString();
  const int port = (*s)->Port();
  EXPECT_EQ((*s)->Host(), "::1");
  auto status = [port](const std::string& host) {
    Exchange ex =
        Talk(port, "GET /api/secret HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n", true);
    std::string rest;
    std::vector<Reply> got = SplitReplies(ex.bytes, {}, &rest);
    return got.size() == 1 ? got[0].status : 0;
  };
  EXPECT_EQ(status("[::1]:" + std::to_string(port)), 200);
  EXPECT_EQ(status("[0000::0001]"), 200);
  EXPECT_EQ(status("localhost:" + std::to_string(port)), 200);
  EXPECT_EQ(status("::1"), 400) << "an IPv6 literal needs its brackets";
  EXPECT_EQ(status("[::2]:" + std::to_string(port)), 421);
  (*s)->Stop();
}

// The DNS-rebinding case of the issue: --public-read, a page on
// attacker.example whose name now resolves to 127.0.0.1.
TEST_F(HttpHardeningTest, PublicReadApiRefusesARebindingHost) {
  const fs::path home = dir_ / "home";
  fs::create_directories(home);
  ServerOptions o;
  o.port = 0;
  o.public_read = true;
  auto api = ApiServer::Start(home.string(), o);
  ASSERT_TRUE(api.IsOk()) << api.GetStatus().ToString();
  const int port = (*api)->Port();
  const std::string get = "GET /api/datasets HTTP/1.1\r\nConnection: close\r\n";
  testing::HttpReply ours =
      testing::SendRaw(port, get + "Host: localhost:" + std::to_string(port) + "\r\n\r\n");
  EXPECT_EQ(ours.status, 200) << ours.body;
  testing::HttpReply theirs =
      testing::SendRaw(port, get + "Host: attacker.example:" + std::to_string(port) + "\r\n\r\n");
  EXPECT_EQ(theirs.status, 421);
  EXPECT_EQ(json::parse(theirs.body)["error"]["code"], "misdirected_request");
  EXPECT_EQ(json::parse(theirs.body)["ok"], false);
  EXPECT_NE(json::parse(theirs.body)["error"]["message"].get<std::string>().find("attacker.example"),
            std::string::npos);
  (*api)->Stop();
}

// Issue 26 item 12: absolute-form targets were refused with 400.
TEST_F(HttpHardeningTest, AbsoluteFormTargetsAreServedAndTheirAuthorityIsTheHost) {
  const std::string authority = "127.0.0.1:" + std::to_string(port_);
  Reply r = Ask("GET http://" + authority + "/healthz HTTP/1.1", "Host: " + authority + "\r\n");
  EXPECT_EQ(r.status, 200) << r.body;
  Reply echo = Ask("GET HTTP://LocalHost:1/api/echo?x=a%20b&y=%2F HTTP/1.1", "Host: localhost:1\r\n");
  ASSERT_EQ(echo.status, 200) << echo.body;
  const json e = json::parse(echo.body);
  EXPECT_EQ(e["path"], "/api/echo");
  EXPECT_EQ(e["query"]["x"], "a b");
  EXPECT_EQ(e["query"]["y"], "/");
  EXPECT_EQ(e["host"], "LocalHost:1");
  EXPECT_EQ(Ask("GET http://localhost?x=1 HTTP/1.1", "Host: localhost\r\n").status, 200)
      << "path '/': index.html";
  // The target's authority replaces the Host for the check (RFC 9112 §3.2.2).
  EXPECT_EQ(Ask("GET http://attacker.example/api/secret HTTP/1.1", "Host: 127.0.0.1\r\n").status, 421);
  EXPECT_EQ(Ask("GET http://127.0.0.1/api/secret HTTP/1.1", "Host: attacker.example\r\n").status, 200);
  EXPECT_EQ(Ask("GET http://127.0.0.1/api/secret HTTP/1.1", "").status, 400) << "HTTP/1.1 still needs a Host";
  EXPECT_EQ(Ask("GET http://127.0.0.1/api/secret HTTP/1.0", "").status, 200);
  for (const std::string bad : {"http://user@127.0.0.1/healthz", "http:///healthz", "ftp://127.0.0.1/healthz",
                                "http://127.0.0.1:x/healthz", "127.0.0.1:80"}) {
    EXPECT_EQ(Ask("GET " + bad + " HTTP/1.1", "Host: 127.0.0.1\r\n").status, 400) << bad;
  }
}

// The parser alone, as the fuzzer drives it.
TEST(ParseRequestHeadTest, ReadsAHeadAndSaysWhenItNeedsMore) {
  Result<AllowedHosts> hosts = MakeAllowedHosts({}, {"127.0.0.1"}, false, "box");
  ASSERT_TRUE(hosts.IsOk());
  const std::string raw =
      "\r\nPOST http://127.0.0.1:9/api/x?q=1 HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: Chunked\r\n"
      "X-Empty:\r\n\r\nBODY";
  for (size_t n = 0; n < raw.size() - 4; ++n)
    EXPECT_EQ(ParseRequestHead(raw.substr(0, n), *hosts, 1024).state, HeadParse::State::kIncomplete) << n;
  HeadParse p = ParseRequestHead(raw, *hosts, 1024);
  ASSERT_EQ(p.state, HeadParse::State::kHead) << p.error.message;
  EXPECT_EQ(p.head.skipped, 2u);
  EXPECT_EQ(p.head.size, raw.size() - 4);
  EXPECT_EQ(p.head.method, "POST");
  EXPECT_EQ(p.head.path, "/api/x");
  EXPECT_EQ(p.head.query.at("q"), "1");
  EXPECT_EQ(p.head.authority, "127.0.0.1:9");
  EXPECT_EQ(p.head.host, "127.0.0.1");
  EXPECT_TRUE(p.head.chunked);
  EXPECT_FALSE(p.head.content_length);
  ASSERT_EQ(p.head.fields.size(), 3u);
  EXPECT_EQ(p.head.fields[1], (std::pair<std::string, std::string>{"transfer-encoding", "Chunked"}));
  EXPECT_EQ(p.head.fields[2], (std::pair<std::string, std::string>{"x-empty", ""}));

  EXPECT_EQ(ParseRequestHead(std::string(2000, 'a'), *hosts, 1024).error.status, 431);
  const std::string big = "GET / HTTP/1.1\r\nHost: localhost\r\nX: " + std::string(1100, 'a') + "\r\n\r\n";
  EXPECT_EQ(ParseRequestHead(big, *hosts, 1024).error.status, 431);
  EXPECT_EQ(ParseRequestHead("GET / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 12\r\n\r\n", *hosts, 1024)
                .head.content_length,
            12u);
}

TEST(AllowedHostsTest, CanonicalFormsAndDefaults) {
  EXPECT_EQ(CanonicalHost("LOCALHOST."), "localhost");
  EXPECT_EQ(CanonicalHost("[0:0::1]"), "[::1]");
  EXPECT_EQ(CanonicalHost("[FE80::A]"), "[fe80::a]");
  EXPECT_EQ(CanonicalHost("[::1"), "");
  EXPECT_EQ(CanonicalHost("[v1.x]"), "");
  EXPECT_EQ(CanonicalHost("a/b"), "");
  EXPECT_EQ(CanonicalHost("."), "");

  Result<AllowedHosts> local = MakeAllowedHosts({}, {"::1", "kestrel-box"}, false, "ignored");
  ASSERT_TRUE(local.IsOk());
  for (const char* h : {"localhost", "127.0.0.1", "[::1]", "kestrel-box"}) EXPECT_TRUE(local->Allows(h)) << h;
  for (const char* h : {"ignored", "10.0.0.1", "", "attacker.example"}) EXPECT_FALSE(local->Allows(h)) << h;

  Result<AllowedHosts> any = MakeAllowedHosts({}, {"0.0.0.0"}, true, "Box");
  ASSERT_TRUE(any.IsOk());
  for (const char* h : {"box", "10.0.0.1", "[2001:db8::1]", "localhost"}) EXPECT_TRUE(any->Allows(h)) << h;
  for (const char* h : {"attacker.example", "", "box.attacker.example"}) EXPECT_FALSE(any->Allows(h)) << h;
}

}  // namespace
}  // namespace kestrel::server
