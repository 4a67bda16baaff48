// The Beast/Asio half of the server, kept to this one file: Asio and Beast
// headers cost seconds per translation unit, and nothing outside needs them.
#include "server/http_server.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/file_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <cctype>
#include <chrono>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <list>
#include <optional>
#include <thread>
#include <utility>

#include "core/terminate.h"
#include "core/thread_annotations.h"
#include "server/request_head.h"
#include "server/stream_session.h"

namespace kestrel::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {
class Session;
}  // namespace

// Threads: the I/O thread owns the connections and every counter here
// ("I/O thread only"); a blocking handler on the pool touches none of them
// and hands its answer back with asio::post, so they need no lock. The
// caller's thread writes host, port and allowed_hosts before the I/O thread
// starts, and Stop() is the one state several threads share under a mutex.
struct HttpServer::Impl {
  Impl(const ServerOptions& o, const Router& r, HttpMetrics& m)
      : options(o),
        router(r),
        metrics(m),
        max_connections(o.max_connections > 0 ? o.max_connections : DefaultMaxConnections()),
        acceptor(ioc),
        accept_backoff(ioc),
        blocking_limit(std::max(1, o.blocking_threads)),
        blocking(static_cast<std::size_t>(blocking_limit)) {}

  void Run();
  void Accept();
  void OnAcceptError(const beast::error_code& ec);
  void Shutdown();
  // A server log line (ServerOptions::log, else stderr); any thread.
  void Log(const std::string& line) const;
  // The 500 "internal" answer to a request whose handler threw, logged.
  Response HandlerFailed(const std::string& request, const std::exception_ptr& error) const;

  ServerOptions options;
  const Router& router;
  HttpMetrics& metrics;
  // Declared before ioc: a Session released while ioc is destroyed still counts itself out.
  const int max_connections;   // ServerOptions::max_connections, resolved
  int connections = 0;         // I/O thread only: sessions being served (each holds a socket)
  int refusing = 0;            // I/O thread only: sessions answering 503 for being over the cap
  bool accept_paused = false;  // I/O thread only: accept failed (no descriptors), retrying on a timer
  asio::io_context ioc;
  tcp::acceptor acceptor;
  asio::steady_timer accept_backoff;           // the wait before accepting again after a failed accept
  std::list<std::weak_ptr<Session>> sessions;  // I/O thread only
  bool stopping = false;                       // I/O thread only
  const int blocking_limit;                    // blocking handlers at once (ServerOptions::blocking_threads)
  int blocking_busy = 0;                       // I/O thread only: blocking handlers started, not yet answered
  asio::thread_pool blocking;                  // runs them
  std::thread thread;
  std::string host;
  int port = 0;
  // options.allowed_hosts made usable (Start); read by the I/O thread.
  AllowedHosts allowed_hosts;
  // Held by Stop() until it has joined: a second Stop() (another thread, the
  // destructor) returns only once the server is down, and never joins twice.
  Mutex stop_mu;
  bool stopped GUARDED_BY(stop_mu) = false;  // Stop() ran
};

namespace {

std::chrono::milliseconds Ms(int64_t ms) { return std::chrono::milliseconds(ms); }

// Refused connections being answered at once (each holds a descriptor for
// up to DrainThenClose's 2 s); further ones beyond the cap are closed unanswered.
constexpr int kMaxRefusing = 64;
// How long accepting pauses after it failed for want of descriptors.
constexpr std::chrono::milliseconds kAcceptBackoff{100};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpServer::Impl& server)
      : stream_(std::move(socket)), server_(server), timer_(server.ioc) {
    ++server_.connections;
  }
  // Released on the I/O thread (blocking handlers post the session back).
  ~Session() {
    if (refused_)
      --server_.refusing;
    else
      --server_.connections;
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void Start() { Read(); }

  // Over ServerOptions::max_connections: 503 without reading the request,
  // then close (after draining what the client sends, as for any refusal).
  void Refuse() {
    refused_ = true;
    --server_.connections;
    ++server_.refusing;
    unread_request_ = true;
    Response r = ErrorResponse(503, "unavailable",
                               "the server has " + std::to_string(server_.max_connections) +
                                   " connections open, as many as it allows (--max-connections); "
                                   "try again in a few seconds");
    r.headers.emplace_back("Retry-After", "5");
    Send(std::move(r), "", Clock::now(), false);
  }

  // Graceful shutdown (I/O thread): an idle connection closes now, one
  // writing a response closes after it, a stream ends after its current
  // write, one waiting for a blocking handler answers and closes after it.
  void Shutdown() {
    if (closed_ || waiting_) return;
    if (streaming_) {
      timer_.cancel();
      if (!writing_) Close();
    } else if (!writing_) {
      Close();  // waiting for a request: cancels the read
    }
  }

 private:
  // The header first: the body's limit depends on the route (an upload
  // route's body goes to a file, with its own limit), so OnHeader sets it.
  void Read() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_.options.header_limit_bytes));
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    stream_.expires_after(Ms(server_.options.request_timeout_ms));
    ReadHead();
  }

  // The head is read and checked (request_head.h) before Beast parses it
  // from the buffer: a refused head (a framing that could smuggle a second
  // request, a host not answered) is answered and the connection closes,
  // so nothing after it is ever read as a request.
  void ReadHead() {
    const auto data = buffer_.data();
    HeadParse got =
        ParseRequestHead(std::string_view(static_cast<const char*>(data.data()), data.size()),
                         server_.allowed_hosts, static_cast<size_t>(server_.options.header_limit_bytes));
    if (got.state == HeadParse::State::kIncomplete) {
      stream_.async_read_some(buffer_.prepare(8192),
                              [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                                if (self->closed_) return;
                                if (ec) {
                                  self->OnRead(ec);
                                  return;
                                }
                                self->buffer_.commit(n);
                                self->ReadHead();
                              });
      return;
    }
    if (got.state == HeadParse::State::kError) {
      unread_request_ = true;
      const HeadError& e = got.error;
      Send(ErrorResponse(e.status, e.code, e.message, e.field), "", Clock::now(), false);
      return;
    }
    buffer_.consume(got.head.skipped);
    head_ = std::move(got.head);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnHeader(ec); });
  }

  // The request as the router takes it: method, path and query from the
  // checked head (an absolute-form target's too), headers from Beast's
  // message, "host" the authority the head named.
  template <class Fields>
  void FillRequest(const Fields& msg, Request* req) const {
    req->method = head_.method;
    req->path = head_.path;
    req->query = head_.query;
    CopyHeaders(msg, req);
    if (!head_.authority.empty()) req->headers["host"] = head_.authority;
  }

  void OnHeader(beast::error_code ec) {
    if (closed_) return;
    if (ec) {
      OnRead(ec);
      return;
    }
    const auto& msg = parser_->get();
    Request head;
    FillRequest(msg, &head);
    const bool upload =
        !server_.options.upload_dir.empty() && server_.router.TakesUpload(head.method, head.path);
    limit_ = upload ? server_.options.upload_limit_bytes : server_.options.body_limit_bytes;
    const auto length = parser_->content_length();
    if (length && *length > static_cast<std::uint64_t>(limit_)) {
      OnRead(http::error::body_limit);
      return;
    }
    if (!upload) {
      parser_->body_limit(static_cast<std::uint64_t>(limit_));
      http::async_read(stream_, buffer_, *parser_,
                       [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnRead(ec); });
      return;
    }
    // An upload: refused before its body is read when the token may not
    // send it, else streamed to a file that is removed after the response.
    msg_expect_ = head.Header("expect");
    if (auto denied = Authorize(head)) {
      unread_request_ = true;
      Send(std::move(*denied), head.method, Clock::now(), false);
      return;
    }
    // Its import could not start now: refused before the client sends the body.
    if (server_.router.Blocks(head.method, head.path) && server_.blocking_busy >= server_.blocking_limit) {
      unread_request_ = true;
      Send(BusyResponse(), head.method, Clock::now(), false);
      return;
    }
    static std::atomic<uint64_t> counter{0};
    std::error_code fs_ec;
    std::filesystem::create_directories(server_.options.upload_dir, fs_ec);
    upload_file_ = server_.options.upload_dir + "/upload-" + std::to_string(::getpid()) + "-" +
                   std::to_string(counter.fetch_add(1)) + ".part";
    upload_parser_.emplace(std::move(*parser_));
    parser_.reset();
    upload_parser_->body_limit(static_cast<std::uint64_t>(limit_));
    upload_parser_->get().body().open(upload_file_.c_str(), beast::file_mode::write, ec);
    if (ec) {
      upload_file_.clear();
      unread_request_ = true;
      Send(ErrorResponse(500, "internal", "cannot store the upload: " + ec.message()), head.method,
           Clock::now(), false);
      return;
    }
    stream_.expires_after(Ms(server_.options.upload_timeout_ms));
    std::string expect(msg_expect_);
    for (char& c : expect) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (expect != "100-continue") {
      ReadUpload();
      return;
    }
    // A client that asked (curl does for large bodies) sends the body only now.
    auto cont = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
    asio::async_write(stream_, asio::buffer(*cont),
                      [self = shared_from_this(), cont](beast::error_code ec, std::size_t) {
                        if (ec) {
                          self->Close();
                          return;
                        }
                        self->ReadUpload();
                      });
  }

  void ReadUpload() {
    http::async_read(stream_, buffer_, *upload_parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnUpload(ec); });
  }

  void OnUpload(beast::error_code ec) {
    if (closed_) {
      RemoveUpload();
      return;
    }
    if (ec) {
      RemoveUpload();
      OnRead(ec);
      return;
    }
    auto& msg = upload_parser_->get();
    msg.body().close();
    const auto start = Clock::now();
    Request req;
    FillRequest(msg, &req);
    req.body_file = upload_file_;
    const bool keep_alive = msg.keep_alive();
    upload_parser_.reset();
    const std::string method = req.method;
    Router::Dispatched d = Dispatch(std::move(req));
    if (d.deferred) {
      RunBlocking(std::move(d.deferred), method, start, keep_alive);  // removes the upload when done
      return;
    }
    RemoveUpload();
    Send(std::move(*d.response), method, start, keep_alive);
  }

  // The router's answer, or its deferred blocking call; a handler (or the
  // authorizer, or the fallback) that throws, whatever it throws, is a 500
  // "internal" for this request and a log line, never the server's end.
  Router::Dispatched Dispatch(Request req) {
    request_line_ = req.method + " " + req.path;
    try {
      return server_.router.DispatchOrDefer(std::move(req));
    } catch (...) {
      return {server_.HandlerFailed(request_line_, std::current_exception()), nullptr};
    }
  }
  std::optional<Response> Authorize(const Request& head) {
    try {
      return server_.router.Authorize(head);
    } catch (...) {
      return server_.HandlerFailed(head.method + " " + head.path, std::current_exception());
    }
  }

  static Response BusyResponse() {
    Response r = ErrorResponse(503, "unavailable",
                               "the server is running as many dataset imports as it allows at once; "
                               "try again in a few seconds");
    r.headers.emplace_back("Retry-After", "5");
    return r;
  }

  // A blocking route's handler (RouteDoc::blocking) on the pool, off the I/O
  // thread; its response is sent from the I/O thread when it returns. 503
  // when every blocking thread is busy. While it runs the connection reads
  // nothing (HTTP/1.1 answers in order) and Shutdown leaves it be.
  void RunBlocking(std::function<Response()> call, const std::string& method, Clock::time_point start,
                   bool keep_alive) {
    if (server_.blocking_busy >= server_.blocking_limit) {
      RemoveUpload();
      Send(BusyResponse(), method, start, keep_alive);
      return;
    }
    ++server_.blocking_busy;
    waiting_ = true;
    // Keeps the I/O thread's run() going until the answer is posted back,
    // also when Stop() has closed everything else.
    auto work = asio::make_work_guard(server_.ioc);
    asio::post(server_.blocking, [self = shared_from_this(), call = std::move(call), method, start,
                                  keep_alive, work = std::move(work), what = request_line_]() mutable {
      Response resp;
      try {
        if (self->server_.options.before_blocking_handler) self->server_.options.before_blocking_handler();
        resp = call();
      } catch (...) {
        // Anything escaping a pool thread would end the process (std::terminate).
        resp = self->server_.HandlerFailed(what, std::current_exception());
      }
      // The session is released on the I/O thread (self moves there), never here.
      asio::io_context& ioc = self->server_.ioc;
      asio::post(ioc, [self = std::move(self), resp = std::move(resp), method, start, keep_alive]() mutable {
        --self->server_.blocking_busy;
        self->waiting_ = false;
        self->RemoveUpload();
        if (self->closed_) return;
        self->Send(std::move(resp), method, start, keep_alive);
      });
      work.reset();
    });
  }

  void RemoveUpload() {
    if (upload_file_.empty()) return;
    std::error_code ec;
    std::filesystem::remove(upload_file_, ec);
    upload_file_.clear();
  }

  template <class Fields>
  static void CopyHeaders(const Fields& msg, Request* req) {
    for (const auto& f : msg) {
      std::string name(f.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      req->headers[name] = std::string(f.value());
    }
  }

  void OnRead(beast::error_code ec) {
    if (closed_) return;
    const auto start = Clock::now();
    if (ec == http::error::header_limit) {
      unread_request_ = true;
      Send(ErrorResponse(
               431, "header_too_large",
               "request headers exceed " + std::to_string(server_.options.header_limit_bytes) + " bytes"),
           "", start, false);
      return;
    }
    if (ec == http::error::body_limit) {
      unread_request_ = true;
      Send(ErrorResponse(413, "body_too_large", "request body exceeds " + std::to_string(limit_) + " bytes"),
           "", start, false);
      return;
    }
    if (ec == beast::error::timeout || ec == http::error::end_of_stream ||
        ec == asio::error::operation_aborted || ec == asio::error::eof ||
        ec == asio::error::connection_reset) {
      Close();
      return;
    }
    if (ec) {
      Send(ErrorResponse(400, "bad_request", "malformed HTTP request: " + ec.message()), "", start, false);
      return;
    }
    const auto& msg = parser_->get();
    Request req;
    FillRequest(msg, &req);
    req.body = msg.body();
    const bool keep_alive = msg.keep_alive();
    const std::string method = req.method;
    Router::Dispatched d = Dispatch(std::move(req));
    if (d.deferred) {
      RunBlocking(std::move(d.deferred), method, start, keep_alive);
      return;
    }
    Response resp = std::move(*d.response);
    if (resp.stream && resp.status == 200 && method != "HEAD") {  // a HEAD opens no stream
      StartStream(std::move(resp), method, start);
      return;
    }
    Send(std::move(resp), method, start, keep_alive);
  }

  void Send(Response resp, const std::string& method, Clock::time_point start, bool keep_alive) {
    auto msg =
        std::make_shared<http::response<http::string_body>>(static_cast<http::status>(resp.status), 11);
    msg->set(http::field::server, "kestrel");
    msg->set(http::field::content_type, resp.content_type);
    msg->set(http::field::cache_control, "no-store");
    // Every response (docs/server.md "Security headers"): no content
    // sniffing, no framing; a route may say more (the UI's HTML: a CSP).
    msg->set("X-Content-Type-Options", "nosniff");
    msg->set("X-Frame-Options", "DENY");
    for (const auto& [k, v] : resp.headers) msg->set(k, v);
    msg->body() = std::move(resp.body);
    msg->keep_alive(keep_alive && !server_.stopping);
    msg->prepare_payload();
    // HEAD: the GET's header, its Content-Length too, and no body (RFC 9110
    // §9.3.2); an event stream's length is its connection's, so none.
    if (method == "HEAD") {
      if (resp.stream) msg->erase(http::field::content_length);
      msg->body().clear();
    }
    writing_ = true;
    stream_.expires_after(Ms(server_.options.request_timeout_ms));
    http::async_write(stream_, *msg,
                      [self = shared_from_this(), msg, method, route = std::move(resp.route),
                       status = resp.status, start](beast::error_code ec, std::size_t) {
                        self->writing_ = false;
                        self->server_.metrics.RecordRequest(
                            method.empty() ? "-" : method, route, status,
                            std::chrono::duration<double>(Clock::now() - start).count());
                        if (!ec && self->unread_request_) {
                          self->DrainThenClose();
                          return;
                        }
                        if (ec || !msg->keep_alive() || self->server_.stopping) {
                          self->Close();
                          return;
                        }
                        self->Read();
                      });
  }

  // An event stream: its head, then events as the store has them, each
  // round's text from the StreamSession (stream_session.h), written here.
  void StartStream(Response resp, const std::string& method, Clock::time_point start) {
    streaming_ = true;
    stream_.expires_never();
    server_.metrics.StreamOpened();
    server_.metrics.RecordRequest(method, resp.route, 200,
                                  std::chrono::duration<double>(Clock::now() - start).count());
    HttpServer::Impl* server = &server_;
    events_.emplace(
        std::move(*resp.stream), server_.options,
        [server, what = request_line_](const std::string& line) { server->Log(what + ": " + line); },
        Clock::now());
    // A client that closes its end makes the socket readable: the stream
    // ends then, not at the next failed write.
    stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
      if (!ec) self->Close();
    });
    Poll();
  }

  // One round of a stream (StreamSession::Poll; only what is pending once
  // the server is stopping), written; then the timer, or the close.
  void Poll() {
    if (closed_) return;
    std::string text = server_.stopping ? events_->TakePending() : events_->Poll(Clock::now());
    if (text.empty()) {
      if (events_->Ending())
        Close();
      else
        Wait();
      return;
    }
    writing_ = true;
    auto out = std::make_shared<std::string>(std::move(text));
    stream_.expires_after(Ms(server_.options.request_timeout_ms));
    asio::async_write(stream_, asio::buffer(*out),
                      [self = shared_from_this(), out](beast::error_code ec, std::size_t) {
                        self->writing_ = false;
                        self->stream_.expires_never();
                        self->events_->Wrote(Clock::now());
                        if (ec || self->server_.stopping || self->events_->Ending()) {
                          self->Close();
                          return;
                        }
                        self->Wait();
                      });
  }

  void Wait() {
    if (server_.stopping) {
      Close();
      return;
    }
    timer_.expires_after(Ms(server_.options.stream_poll_ms));
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec) {
        if (!self->writing_) self->Close();
        return;
      }
      self->Poll();
    });
  }

  // After refusing a request whose rest was not read (a body or headers over
  // the limit), the client may still be sending it: closing at once would
  // reset the connection, and a reset can destroy the refusal in the client's
  // receive buffer before it reads it. So stop sending, discard what arrives
  // until the client closes (or 2 s pass), then close.
  void DrainThenClose() {
    if (closed_) return;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(std::chrono::seconds(2));
    Drain();
  }
  void Drain() {
    stream_.async_read_some(asio::buffer(drain_),
                            [self = shared_from_this()](beast::error_code ec, std::size_t) {
                              if (ec || self->closed_) {
                                self->Close();
                                return;
                              }
                              self->Drain();
                            });
  }

  void Close() {
    RemoveUpload();
    if (closed_) return;
    closed_ = true;
    timer_.cancel();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
    if (streaming_) server_.metrics.StreamClosed();
  }

  beast::tcp_stream stream_;
  HttpServer::Impl& server_;
  beast::flat_buffer buffer_;
  // The request being read, as ReadHead checked it: method, target, host.
  RequestHead head_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::request_parser<http::file_body>> upload_parser_;  // an upload route's request
  std::string upload_file_;  // where upload_parser_ writes; removed after the response
  int64_t limit_ = 0;        // the body limit of the request being read
  std::string msg_expect_;   // an upload's Expect header
  asio::steady_timer timer_;
  bool writing_ = false;
  bool waiting_ = false;  // a blocking handler is working on this connection's request
  bool closed_ = false;
  bool unread_request_ = false;   // the request was refused before it was read to its end
  std::array<char, 8192> drain_;  // DrainThenClose's discard buffer
  bool streaming_ = false;
  bool refused_ = false;      // over the connection cap: counted in server_.refusing, not connections
  std::string request_line_;  // "GET /path" of the request being handled (log lines)
  std::optional<StreamSession> events_;  // an event stream's state (StartStream)
};

}  // namespace

int DefaultMaxConnections() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return 1 << 20;
  const int64_t soft = static_cast<int64_t>(std::min<rlim_t>(lim.rlim_cur, rlim_t{1} << 30));
  return static_cast<int>(std::max<int64_t>(1, soft - std::min<int64_t>(128, soft / 2)));
}

void HttpServer::Impl::Log(const std::string& line) const {
  if (options.log) {
    options.log(line);
    return;
  }
  std::cerr << "kestrel serve: " + line + "\n" << std::flush;
}

Response HttpServer::Impl::HandlerFailed(const std::string& request, const std::exception_ptr& error) const {
  const std::string what = DescribeException(error);
  Log(request + ": internal error (the handler threw): " + what);
  return ErrorResponse(500, "internal", "internal error: " + what);
}

// The I/O thread. Dispatch, the streams and the blocking pool catch what
// handlers throw; anything else escaping a completion handler ends only
// that handler (its connection closes), is logged, and the loop goes on.
void HttpServer::Impl::Run() {
  for (;;) {
    try {
      ioc.run();
      return;
    } catch (...) {
      Log("the I/O thread caught an exception, serving on: " + DescribeException(std::current_exception()));
    }
  }
}

void HttpServer::Impl::Accept() {
  acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (stopping) return;  // the acceptor was closed
    if (ec) {
      OnAcceptError(ec);
      return;
    }
    if (accept_paused) {
      accept_paused = false;
      Log("accepting connections again (" + std::to_string(connections) + " open)");
    }
    sessions.remove_if([](const std::weak_ptr<Session>& w) { return w.expired(); });
    if (connections >= max_connections && refusing >= kMaxRefusing) {
      beast::error_code ignored;
      socket.close(ignored);  // already answering as many refusals as it may: closed unanswered
    } else {
      auto s = std::make_shared<Session>(std::move(socket), *this);
      sessions.push_back(s);
      if (connections > max_connections)
        s->Refuse();
      else
        s->Start();
    }
    Accept();
  });
}

void HttpServer::Impl::OnAcceptError(const beast::error_code& ec) {
  // The client gave up before it was accepted: the next one.
  if (ec == asio::error::connection_aborted) {
    Accept();
    return;
  }
  // No descriptor (EMFILE, ENFILE), no memory, or another failure that
  // trying again at once would meet again: the connection waits in the
  // listen queue, accepting pauses (retrying at once spun a core), and
  // it is said once until an accept succeeds.
  if (!accept_paused) {
    accept_paused = true;
    Log("cannot accept a connection (" + ec.message() + ", " + std::to_string(connections) +
        " open): retrying every " + std::to_string(kAcceptBackoff.count()) + " ms until one succeeds");
  }
  accept_backoff.expires_after(kAcceptBackoff);
  accept_backoff.async_wait([this](beast::error_code wait_ec) {
    if (wait_ec || stopping) return;
    Accept();
  });
}

void HttpServer::Impl::Shutdown() {
  stopping = true;
  beast::error_code ec;
  acceptor.close(ec);
  accept_backoff.cancel();
  for (auto& w : sessions) {
    if (auto s = w.lock()) s->Shutdown();
  }
  sessions.clear();
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const ServerOptions& options, const Router& router,
                                                      HttpMetrics& metrics) {
  auto impl = std::make_unique<Impl>(options, router, metrics);
  if (options.port < 0 || options.port > 65535)
    return Status::InvalidArgument("port " + std::to_string(options.port) + " is not in [0, 65535]",
                                   {"command line", 0, "port"});
  beast::error_code ec;
  tcp::resolver resolver(impl->ioc);
  auto found = resolver.resolve(options.host, std::to_string(options.port), ec);
  if (ec || found.empty())
    return Status::Unavailable("cannot resolve host '" + options.host + "': " + ec.message(),
                               {"command line", 0, "host"});
  const tcp::endpoint ep = found.begin()->endpoint();
  std::array<char, 256> machine{};
  if (::gethostname(machine.data(), machine.size() - 1) != 0) machine[0] = '\0';
  auto allowed = MakeAllowedHosts(options.allowed_hosts, {options.host, ep.address().to_string()},
                                  ep.address().is_unspecified(), machine.data());
  if (!allowed.IsOk()) return allowed.GetStatus();
  impl->allowed_hosts = std::move(allowed).Value();
  impl->acceptor.open(ep.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(ep, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return Status::Unavailable(
        "cannot listen on " + options.host + ":" + std::to_string(options.port) + ": " + ec.message(),
        {"command line", 0, "port"});
  const tcp::endpoint bound = impl->acceptor.local_endpoint(ec);
  impl->host = bound.address().to_string();
  impl->port = bound.port();
  impl->Accept();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Run(); });
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

std::string HttpServer::Host() const { return impl_->host; }
int HttpServer::Port() const { return impl_->port; }

void HttpServer::Stop() {
  if (impl_ == nullptr) return;
  MutexLock lock(impl_->stop_mu);
  if (impl_->stopped) return;
  impl_->stopped = true;
  Impl* raw = impl_.get();
  asio::post(impl_->ioc, [raw] { raw->Shutdown(); });
  // The I/O thread ends when the last connection has closed and the last
  // blocking handler has answered; then the pool has nothing left to run.
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->blocking.join();
}

}  // namespace kestrel::server
