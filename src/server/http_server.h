// HTTP/1.1 transport for a Router, on Boost.Beast/Asio (the only file that
// includes them is http_server.cc). One I/O thread serves every connection
// asynchronously: a handler runs on it to completion (the read API's
// handlers are short store reads), and an event stream is a timer per
// stream, never a thread per client. A blocking route's handler
// (RouteDoc::blocking) runs on a small pool instead (blocking_threads);
// its response is written from the I/O thread when it returns.
//
// Thread-safety: Start, Port and Stop may be called from any thread; the
// router, its handlers and the metrics are used from the I/O thread only
// (metrics also from Render's caller), but for blocking handlers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "server/metrics.h"
#include "server/router.h"

namespace kestrel::server {

struct ServerOptions {
  std::string host = "127.0.0.1";                   // an address or a name; loopback by default
  int port = 8080;                                  // 0: any free port (Port() says which)
  int64_t header_limit_bytes = int64_t{16} * 1024;  // larger request headers: 431
  int64_t body_limit_bytes = int64_t{1024} * 1024;  // larger request bodies: 413
  int64_t request_timeout_ms = 30'000;  // to read a request or write a response, then the connection closes
  int64_t stream_keepalive_ms =
      15'000;                    // an event stream sends a ": keep-alive" comment after this much silence
  int64_t stream_poll_ms = 250;  // how often an event stream polls for new events
  // An open event stream asks its route's authorizer again this often
  // (EventStream::still_allowed: the token revoked or expired since) and
  // ends when the answer is no; checked at the stream's next poll after the
  // period, so at most stream_poll_ms later.
  int64_t stream_auth_check_ms = 30'000;
  // An event stream ends after this long, cleanly: its last events, then
  // "retry: 1000", then the connection closes; an EventSource reconnects
  // with Last-Event-ID and misses nothing (docs/server.md "Events").
  int64_t stream_max_ms = int64_t{3600} * 1000;
  // Connections open at once; one more is answered 503 "unavailable" (with
  // Retry-After and Connection: close) without its request being read.
  // 0: DefaultMaxConnections(), from the process's file-descriptor limit.
  int max_connections = 0;
  // A server log line (a handler's exception, descriptors running out):
  // empty writes it to stderr as "kestrel serve: ...". Called on the I/O
  // thread or a blocking thread.
  std::function<void(const std::string&)> log;
  bool public_read = false;             // read routes without a token (ApiServer; docs/server.md "Auth")
  std::string web_dir;                  // the web UI's built files (static_files.h); "" serves none
  std::vector<std::string> data_roots;  // folders POST /api/datasets/import may read (data_roots.h)
  // The hosts a request may name (its Host, or an absolute-form target's
  // authority), without ports; another one is answered 421 (request_head.h,
  // docs/server.md "Request heads"). Empty: localhost, 127.0.0.1, [::1] and
  // `host` (bound to 0.0.0.0 or ::, also the machine's name and any IP
  // address). "*": any host.
  std::vector<std::string> allowed_hosts;
  // Upload routes (RouteDoc::upload): the body is streamed to a file in
  // upload_dir (Request::body_file, removed after the response), up to
  // upload_limit_bytes (larger: 413, before a byte is written when the
  // Content-Length says so), refused before the body when the token may not
  // write. upload_dir "" refuses uploads (413 at body_limit_bytes).
  std::string upload_dir;
  int64_t upload_limit_bytes = int64_t{512} << 20;
  int64_t upload_timeout_ms = 600'000;  // to read an upload's body
  // Blocking routes (RouteDoc::blocking: dataset imports and uploads) run
  // on this many threads of their own, never on the I/O thread, so an import
  // stalls no other request or stream. One more while all are busy is
  // answered 503 "unavailable" with Retry-After (an upload before its body
  // is read when they are busy then already); nothing queues.
  int blocking_threads = 2;
  // Tests only: runs on a blocking thread before each blocking handler (a
  // test holds an import there on a latch); empty in the product.
  std::function<void()> before_blocking_handler;
};

// The default ServerOptions::max_connections: the soft RLIMIT_NOFILE less
// a reserve for what else the process opens (the store and each blocking
// thread's store, blobs and uploads being read or written, static files,
// local workers' pipes, the listening socket): min(128, limit / 2), at
// least 1. 1024 descriptors: 896 connections.
int DefaultMaxConnections();

class HttpServer {
 public:
  // Binds host:port, starts accepting on the I/O thread. `router` and
  // `metrics` are borrowed and must outlive the server. kUnavailable (field
  // `port` / `host`) when the address cannot be resolved or bound.
  static Result<std::unique_ptr<HttpServer>> Start(const ServerOptions& options, const Router& router,
                                                   HttpMetrics& metrics);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The bound address and port.
  std::string Host() const;
  int Port() const;

  // Graceful shutdown: stops accepting, lets responses being written and
  // blocking handlers running (an import) finish and answer, closes idle
  // connections and ends event streams, then joins the I/O thread and the
  // blocking pool. Idempotent; when two threads call it at once, both
  // return once the server is down.
  void Stop();

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kestrel::server
