// The transport's limits and safety nets over real HTTP on loopback (issue
// 26, docs/failure-behaviour.md "Hostile HTTP and JSON"): a handler that
// throws (on the I/O thread or a blocking thread) is a 500 for that request
// and a log line; the connection cap answers 503; running out of file
// descriptors pauses accepting instead of spinning (the real `kestrel serve`
// under a 64-descriptor limit, its CPU time read from /proc); an event
// stream ends when its token is revoked and at its lifetime, and a
// reconnect with Last-Event-ID misses nothing; security headers on every
// kind of response.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "app/jobs.h"
#include "app/tokens.h"
#include "birds_home.h"
#include "http_client.h"
#include "server/api.h"
#include "server/http_server.h"
#include "server/router.h"
#include "server/static_files.h"

namespace kestrel::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::Get;
using testing::HttpReply;
using testing::SendRaw;
using testing::SseClient;
using Clock = std::chrono::steady_clock;

// A keep-alive connection: requests one after another on one socket.
class Conn {
 public:
  explicit Conn(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) Close();
  }
  ~Conn() { Close(); }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  bool Ok() const { return fd_ >= 0; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // GET `target` (keep-alive) and its response; status 0 when none came.
  HttpReply Request(const std::string& target) {
    HttpReply r;
    const std::string raw = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    if (fd_ < 0 || ::send(fd_, raw.data(), raw.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(raw.size()))
      return r;
    std::string in;
    size_t head_end = std::string::npos;
    size_t want = 0;
    while (head_end == std::string::npos || in.size() < head_end + 4 + want) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 5000) <= 0) return r;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return r;
      in.append(buf, static_cast<size_t>(n));
      if (head_end == std::string::npos && (head_end = in.find("\r\n\r\n")) != std::string::npos) {
        std::string head = in.substr(0, head_end);
        for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        const size_t cl = head.find("content-length:");
        if (cl != std::string::npos) want = std::stoul(head.substr(cl + 15));
        r.status = std::stoi(in.substr(9, 3));
      }
    }
    r.body = in.substr(head_end + 4, want);
    return r;
  }

 private:
  int fd_ = -1;
};

json Body(const HttpReply& r) { return json::parse(r.body, nullptr, false); }

// Log lines the server wrote (ServerOptions::log), from any thread.
struct LogLines {
  void Add(const std::string& line) {
    std::lock_guard<std::mutex> lock(mu);
    lines.push_back(line);
  }
  std::string All() {
    std::lock_guard<std::mutex> lock(mu);
    std::string out;
    for (const auto& l : lines) out += l + "\n";
    return out;
  }
  std::mutex mu;
  std::vector<std::string> lines;
};

struct NotAStdException {
  int code = 7;
};

// ---------------------------------------------------------------------------
// 1b. A handler that throws.

class ThrowingHandlerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto add = [&](const std::string& path, bool blocking, std::function<void()> body) {
      RouteDoc doc;
      doc.access = Access::kOpen;
      doc.blocking = blocking;
      ASSERT_TRUE(router_
                      .Add("GET", path, doc,
                           [body](const Request&, const PathParams&) {
                             body();
                             return JsonResponse({{"ok", true}});
                           })
                      .IsOk());
    };
    for (bool blocking : {false, true}) {
      const std::string prefix = blocking ? "/blocking" : "/io";
      add(prefix + "/runtime-error", blocking, [] { throw std::runtime_error("the handler broke"); });
      add(prefix + "/not-std", blocking, [] { throw NotAStdException{}; });
      // What nlohmann throws for a number past double's range.
      add(prefix + "/json-out-of-range", blocking, [] {
        const json parsed = json::parse("1e400");
        (void)parsed;
      });
      add(prefix + "/ok", blocking, [] {});
    }
    RouteDoc stream_doc;
    stream_doc.access = Access::kOpen;
    ASSERT_TRUE(router_
                    .Add("GET", "/stream", stream_doc,
                         [](const Request&, const PathParams&) {
                           Response r;
                           r.content_type = "text/event-stream";
                           EventStream s;
                           s.poll = [](int64_t) -> Result<std::vector<StreamEvent>> {
                             throw std::logic_error("the stream's reader broke");
                           };
                           r.stream = std::move(s);
                           return r;
                         })
                    .IsOk());
    ServerOptions o;
    o.port = 0;
    o.stream_poll_ms = 20;
    o.log = [this](const std::string& line) { log_.Add(line); };
    auto srv = HttpServer::Start(o, router_, metrics_);
    ASSERT_TRUE(srv.IsOk()) << srv.GetStatus().ToString();
    server_ = std::move(srv).Value();
    port_ = server_->Port();
  }

  Router router_;
  HttpMetrics metrics_;
  LogLines log_;
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

TEST_F(ThrowingHandlerTest, AnExceptionFromAHandlerIsA500AndTheServerServesOn) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"runtime-error", "the handler broke"},
      {"not-std", "not a std::exception"},
      {"json-out-of-range", "1e400"},
  };
  for (const std::string prefix : {"/io", "/blocking"}) {
    for (const auto& [name, said] : cases) {
      const std::string target = prefix + "/" + name;
      HttpReply r = Get(port_, target);
      EXPECT_EQ(r.status, 500) << target << ": " << r.body;
      EXPECT_EQ(r.headers["content-type"], "application/json") << target;
      const json doc = Body(r);
      ASSERT_FALSE(doc.is_discarded()) << target << ": " << r.body;
      EXPECT_EQ(doc["ok"], false) << target;
      EXPECT_EQ(doc["error"]["code"], "internal") << target;
      EXPECT_NE(doc["error"]["message"].get<std::string>().find(said), std::string::npos) << r.body;
      // The next request, on the same kind of thread, is served.
      EXPECT_EQ(Get(port_, prefix + "/ok").status, 200) << "after " << target;
      const std::string log = log_.All();
      EXPECT_NE(log.find("GET " + target + ": internal error"), std::string::npos) << log;
    }
  }
  EXPECT_EQ(Get(port_, "/io/ok").status, 200);
}

TEST_F(ThrowingHandlerTest, AThrowingStreamEndsThatStreamOnly) {
  SseClient stream(port_, "/stream");
  ASSERT_EQ(stream.Status(), 200);
  EXPECT_TRUE(stream.ReadUntilClosed(5000));
  EXPECT_NE(log_.All().find("the stream's reader broke"), std::string::npos) << log_.All();
  EXPECT_EQ(Get(port_, "/io/ok").status, 200);
}

// ---------------------------------------------------------------------------
// 5. The connection cap, and running out of descriptors.

class ConnectionCapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RouteDoc doc;
    doc.access = Access::kOpen;
    ASSERT_TRUE(router_
                    .Add("GET", "/ok", doc,
                         [](const Request&, const PathParams&) {
                           return JsonResponse({{"ok", true}});
                         })
                    .IsOk());
    ServerOptions o;
    o.port = 0;
    o.max_connections = 2;
    o.log = [](const std::string&) {};
    auto srv = HttpServer::Start(o, router_, metrics_);
    ASSERT_TRUE(srv.IsOk()) << srv.GetStatus().ToString();
    server_ = std::move(srv).Value();
    port_ = server_->Port();
  }
  Router router_;
  HttpMetrics metrics_;
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

TEST_F(ConnectionCapTest, OneConnectionOverTheCapGets503AndAClosedOneMakesRoom) {
  Conn a(port_), b(port_);
  ASSERT_TRUE(a.Ok() && b.Ok());
  // Answered: both are accepted and stay open (keep-alive).
  ASSERT_EQ(a.Request("/ok").status, 200);
  ASSERT_EQ(b.Request("/ok").status, 200);

  HttpReply over = Get(port_, "/ok");
  EXPECT_EQ(over.status, 503) << over.body;
  EXPECT_EQ(over.headers["retry-after"], "5");
  EXPECT_EQ(over.headers["connection"], "close");
  EXPECT_EQ(over.headers["x-content-type-options"], "nosniff");
  const json doc = Body(over);
  ASSERT_FALSE(doc.is_discarded()) << over.body;
  EXPECT_EQ(doc["error"]["code"], "unavailable");
  EXPECT_NE(doc["error"]["message"].get<std::string>().find("--max-connections"), std::string::npos);

  // The connections within the cap are still served.
  EXPECT_EQ(b.Request("/ok").status, 200);

  // Once the server has seen `a` close, a new connection is served.
  a.Close();
  int status = 0;
  for (const auto deadline = Clock::now() + std::chrono::seconds(10); Clock::now() < deadline;) {
    if ((status = Get(port_, "/ok").status) == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(status, 200);
}

TEST(DefaultMaxConnectionsTest, IsTheDescriptorLimitLessAReserve) {
  rlimit lim{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &lim), 0);
  if (lim.rlim_cur == RLIM_INFINITY) GTEST_SKIP() << "no descriptor limit";
  const int64_t soft = static_cast<int64_t>(lim.rlim_cur);
  EXPECT_EQ(DefaultMaxConnections(), soft - std::min<int64_t>(128, soft / 2));
  EXPECT_LT(DefaultMaxConnections(), soft);
}

// CPU seconds (user + system) the process has used, from /proc/PID/stat.
double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');  // the command name may hold spaces
  if (paren == std::string::npos) return -1;
  std::istringstream fields(stat.substr(paren + 2));
  std::string f;
  long utime = 0, stime = 0;
  // Fields 3.. after the name: state is 3, utime 14, stime 15.
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::stol(f);
    if (i == 15) stime = std::stol(f);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

int OpenDescriptors(pid_t pid) {
  std::error_code ec;
  int n = 0;
  for (fs::directory_iterator it("/proc/" + std::to_string(pid) + "/fd", ec), end; !ec && it != end;
       it.increment(ec))
    ++n;
  return n;
}

int CountOf(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t i = text.find(what); i != std::string::npos; i = text.find(what, i + 1)) ++n;
  return n;
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The real `kestrel serve` under a 64-descriptor limit (set in the forked
// child before exec): 100 connections exhaust it; accepting then pauses on a
// timer instead of failing in a loop (before: ~1 CPU-s per second), it says
// so once, and serves again once connections close.
TEST(DescriptorExhaustionTest, ServeDoesNotSpinWhenDescriptorsRunOutAndServesAgainAfter) {
  const fs::path dir =
      fs::temp_directory_path() / ("kestrel_http_limits_" + std::to_string(::getpid()) + "_emfile");
  fs::remove_all(dir);
  fs::create_directories(dir / "home");
  const std::string err_file = (dir / "stderr.txt").string();
  constexpr rlim_t kLimit = 64;
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    rlimit lim{kLimit, kLimit};
    if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) ::_exit(126);
    ::dup2(out[1], 1);
    ::close(out[0]);
    ::close(out[1]);
    std::FILE* err = std::fopen(err_file.c_str(), "w");
    if (err != nullptr) ::dup2(::fileno(err), 2);
    const std::string home = (dir / "home").string();
    ::execl(KESTREL_CLI, KESTREL_CLI, "--home", home.c_str(), "serve", "--port", "0", "--public-read",
            "--max-connections", "100000", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  std::string first;
  char c = 0;
  while (::read(out[0], &c, 1) == 1 && c != '\n') first += c;
  const size_t colon = first.rfind(':');
  const int port = colon == std::string::npos ? 0 : std::atoi(first.c_str() + colon + 1);
  auto stop = [&] {
    ::kill(pid, SIGTERM);
    int status = 0;
    for (int i = 0; i < 500 && ::waitpid(pid, &status, WNOHANG) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (::waitpid(pid, &status, WNOHANG) == 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
    }
    ::close(out[0]);
    return status;
  };
  ASSERT_GT(port, 0) << "first line: " << first << "\nstderr: " << ReadFile(err_file);
  ASSERT_EQ(Get(port, "/healthz").status, 200);

  std::vector<std::unique_ptr<Conn>> conns;
  for (int i = 0; i < 100; ++i) conns.push_back(std::make_unique<Conn>(port));
  // Every descriptor in use: the server has accepted all it can.
  bool exhausted = false;
  for (const auto deadline = Clock::now() + std::chrono::seconds(10); Clock::now() < deadline;) {
    if (OpenDescriptors(pid) >= static_cast<int>(kLimit) &&
        ReadFile(err_file).find("cannot accept a connection") != std::string::npos) {
      exhausted = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(exhausted) << OpenDescriptors(pid) << " descriptors open\nstderr: " << ReadFile(err_file);

  // CPU over wall time while exhausted: a spin is ~1.0.
  const double cpu0 = CpuSeconds(pid);
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double cpu1 = CpuSeconds(pid);
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const double ratio = (cpu1 - cpu0) / wall;
  std::printf("[ measured ] kestrel serve at %d descriptors: %.3f CPU-s per second\n", OpenDescriptors(pid),
              ratio);
  EXPECT_GE(cpu0, 0);
  EXPECT_LT(ratio, 0.3) << "the accept loop spins";
  const std::string log = ReadFile(err_file);
  EXPECT_EQ(CountOf(log, "cannot accept a connection"), 1) << log;

  conns.clear();
  int status = 0;
  for (const auto deadline = Clock::now() + std::chrono::seconds(10); Clock::now() < deadline;) {
    if ((status = Get(port, "/healthz").status) == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(status, 200) << "serves again once connections close";
  EXPECT_NE(ReadFile(err_file).find("accepting connections again"), std::string::npos);
  const int exit_status = stop();
  EXPECT_TRUE(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0) << exit_status;
  fs::remove_all(dir);
}

// ---------------------------------------------------------------------------
// 8. Event streams: the token checked again, a lifetime.

class StreamLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::OpenHomeWithBirds("kestrel_http_limits_", 2, &dir_, &home_, &meta_, &blobs_);
    if (HasFatalFailure()) return;
    auto d = app::DraftJob({"data=birds", "epochs=1"}, nullptr);
    ASSERT_TRUE(d.IsOk()) << d.GetStatus().ToString();
    auto s = app::SubmitJob(*meta_, std::move(d).Value(), 1000);
    ASSERT_TRUE(s.IsOk()) << s.GetStatus().ToString();
    job_id_ = s->job.id;
    mark_ = AppendEvent("{\"mark\":0}");  // the streams start after it
  }
  void TearDown() override {
    server_.reset();
    meta_.reset();
    fs::remove_all(dir_);
  }
  void Start(bool public_read, int64_t auth_check_ms, int64_t max_ms) {
    ServerOptions o;
    o.port = 0;
    o.stream_poll_ms = 20;
    o.stream_auth_check_ms = auth_check_ms;
    o.stream_max_ms = max_ms;
    o.request_timeout_ms = 2000;
    o.public_read = public_read;
    auto srv = ApiServer::Start(home_, o);
    ASSERT_TRUE(srv.IsOk()) << srv.GetStatus().ToString();
    server_ = std::move(srv).Value();
    port_ = server_->Port();
  }
  int64_t AppendEvent(const std::string& payload) {
    store::EventRecord ev;
    ev.job_id = job_id_;
    ev.attempt = 1;
    ev.kind = "metric";
    ev.payload_json = payload;
    ev.created_ms = 5000;
    auto id = meta_->AppendEvent(ev);
    EXPECT_TRUE(id.IsOk()) << id.GetStatus().ToString();
    return id.IsOk() ? *id : 0;
  }
  std::string Token(const std::string& name) {
    auto c = app::CreateToken(*meta_, name, true, 1000);
    EXPECT_TRUE(c.IsOk()) << c.GetStatus().ToString();
    return c.IsOk() ? c->token : std::string();
  }
  std::string Events() const { return "/api/events?last_event_id=" + std::to_string(mark_); }

  fs::path dir_;
  std::string home_;
  std::unique_ptr<store::MetadataStore> meta_;
  std::unique_ptr<store::ArtifactStore> blobs_;
  std::unique_ptr<ApiServer> server_;
  int port_ = 0;
  int64_t job_id_ = 0;
  int64_t mark_ = 0;
};

TEST_F(StreamLimitsTest, ARevokedTokensOpenStreamEnds) {
  Start(false, 100, 600'000);
  if (HasFatalFailure()) return;
  const std::string token = Token("watcher");
  SseClient stream(port_, Events(), {"Authorization: Bearer " + token});
  ASSERT_EQ(stream.Status(), 200);
  const int64_t first = AppendEvent("{\"n\":1}");
  auto got = stream.ReadEvents(1, 5000);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id, std::to_string(first));

  ASSERT_TRUE(app::RevokeToken(*meta_, "watcher", 2000).IsOk());
  EXPECT_TRUE(stream.ReadUntilClosed(5000)) << "the stream outlived its token";
  // And a new stream with it is refused.
  EXPECT_EQ(Get(port_, Events(), {"Authorization: Bearer " + token}).status, 401);
}

TEST_F(StreamLimitsTest, PublicReadStreamsWithoutATokenAreNotEndedByTheTokenCheck) {
  Start(true, 50, 600'000);
  if (HasFatalFailure()) return;
  SseClient open(port_, Events());  // no token: --public-read
  ASSERT_EQ(open.Status(), 200);
  const std::string token = Token("watcher");
  SseClient with_token(port_, Events(), {"Authorization: Bearer " + token});
  ASSERT_EQ(with_token.Status(), 200);
  ASSERT_TRUE(app::RevokeToken(*meta_, "watcher", 2000).IsOk());
  // A token presented is checked even where none is needed.
  EXPECT_TRUE(with_token.ReadUntilClosed(5000));
  // The tokenless stream, opened first, has been checked as often: still live.
  const int64_t id = AppendEvent("{\"n\":1}");
  auto got = open.ReadEvents(1, 5000);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id, std::to_string(id));
}

std::vector<int64_t> EventIds(const std::string& body) {
  std::vector<int64_t> ids;
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("id: ", 0) == 0) ids.push_back(std::stoll(line.substr(4)));
  return ids;
}

TEST_F(StreamLimitsTest, AStreamEndsAtItsLifetimeAndAReconnectMissesNothing) {
  Start(true, 30'000, 400);
  if (HasFatalFailure()) return;
  std::vector<int64_t> appended;
  appended.push_back(AppendEvent("{\"n\":1}"));
  appended.push_back(AppendEvent("{\"n\":2}"));
  // The whole stream, until the server ends it.
  HttpReply first = SendRaw(port_, "GET " + Events() + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 5000);
  ASSERT_EQ(first.status, 200);
  EXPECT_EQ(first.headers["x-content-type-options"], "nosniff");
  const size_t retry = first.body.rfind("retry: 1000\n\n");
  ASSERT_NE(retry, std::string::npos) << first.body;
  EXPECT_EQ(retry + 13, first.body.size()) << "ends with a retry hint: " << first.body;
  std::vector<int64_t> seen = EventIds(first.body);
  EXPECT_EQ(seen, appended);

  // While it was closed: more events; the reconnect starts after the last seen.
  appended.push_back(AppendEvent("{\"n\":3}"));
  appended.push_back(AppendEvent("{\"n\":4}"));
  HttpReply second =
      SendRaw(port_,
              "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nLast-Event-ID: " + std::to_string(seen.back()) +
                  "\r\n\r\n",
              5000);
  ASSERT_EQ(second.status, 200);
  for (int64_t id : EventIds(second.body)) seen.push_back(id);
  EXPECT_EQ(seen, appended) << "no event replayed, none missed";
}

// ---------------------------------------------------------------------------
// 10. Security headers.

TEST_F(ThrowingHandlerTest, EveryResponseSaysNosniffAndDenyFraming) {
  for (const std::string target : {"/io/ok", "/io/runtime-error", "/nowhere"}) {
    HttpReply r = Get(port_, target);
    EXPECT_EQ(r.headers["x-content-type-options"], "nosniff") << target;
    EXPECT_EQ(r.headers["x-frame-options"], "DENY") << target;
  }
  // An event stream's head too.
  HttpReply s = SendRaw(port_, "GET /stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 5000);
  EXPECT_EQ(s.status, 200);
  EXPECT_EQ(s.headers["x-content-type-options"], "nosniff");
  EXPECT_EQ(s.headers["x-frame-options"], "DENY");
}

TEST(SecurityHeadersTest, TheUiHtmlCarriesACspWithItsInlineScriptsHash) {
  const fs::path dir = fs::temp_directory_path() / ("kestrel_http_limits_csp_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "assets");
  // The SHA-256 of "alert(1)" (CSP Level 3's example), base64.
  std::ofstream(dir / "index.html") << "<!doctype html><html><head><script>alert(1)</script>"
                                       "<script type=\"module\" src=\"/assets/a.js\"></script></head></html>";
  std::ofstream(dir / "assets" / "a.js") << "console.log(1)\n";
  EXPECT_EQ(InlineScriptHashes(ReadFile(dir / "index.html")),
            std::vector<std::string>{"'sha256-bhHHL3z2vDgxUt0W3dWQOrprscmda2Y5pLsLg4GF+pI='"});

  auto files = StaticFiles::Open(dir.string());
  ASSERT_TRUE(files.IsOk()) << files.GetStatus().ToString();
  Router router;
  router.SetFallback([f = *files](const Request& req, const PathParams&) { return f.Serve(req); });
  HttpMetrics metrics;
  ServerOptions o;
  o.port = 0;
  auto srv = HttpServer::Start(o, router, metrics);
  ASSERT_TRUE(srv.IsOk()) << srv.GetStatus().ToString();
  const int port = (*srv)->Port();

  HttpReply html = Get(port, "/");
  ASSERT_EQ(html.status, 200);
  const std::string csp = html.headers["content-security-policy"];
  EXPECT_NE(
      csp.find("script-src 'self' 'wasm-unsafe-eval' 'sha256-bhHHL3z2vDgxUt0W3dWQOrprscmda2Y5pLsLg4GF+pI='"),
      std::string::npos)
      << csp;
  EXPECT_NE(csp.find("default-src 'self'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("connect-src 'self'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos) << csp;
  EXPECT_EQ(csp.find("'unsafe-eval'"), std::string::npos) << csp;
  EXPECT_EQ(csp.find("script-src 'self' 'unsafe-inline'"), std::string::npos) << csp;
  EXPECT_EQ(html.headers["x-frame-options"], "DENY");
  EXPECT_EQ(html.headers["x-content-type-options"], "nosniff");

  HttpReply js = Get(port, "/assets/a.js");
  ASSERT_EQ(js.status, 200);
  EXPECT_EQ(js.headers["x-content-type-options"], "nosniff");
  EXPECT_EQ(js.headers.count("content-security-policy"), 0u) << "only the HTML carries the policy";
  HttpReply missing = Get(port, "/nothing-here.png");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.headers["x-content-type-options"], "nosniff");
  (*srv)->Stop();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kestrel::server
