// An open event stream's protocol state, apart from its socket: what it
// sends next (the response head, the new events, keep-alive comments), when
// it asks its route's authorizer again, and when its lifetime is up
// (docs/server.md "Events"). http_server.cc drives one per stream: Poll on
// the stream's timer, write what it returns, Wrote once that is sent, close
// after it when Ending(). No sockets, no Boost: tested with a fake poll and
// hand-made time points (tests/server/stream_session_test.cc).
//
// Thread-safety: none; one thread (the server's I/O thread) uses it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "server/http_server.h"
#include "server/router.h"

namespace kestrel::server {

class StreamSession {
 public:
  using Clock = std::chrono::steady_clock;
  using Log = std::function<void(const std::string& line)>;

  // `events`: the route's EventStream. From `options` it keeps
  // stream_auth_check_ms, stream_keepalive_ms and stream_max_ms. `log`
  // receives a line when the stream's poll or token check throws. `now`: the
  // stream opens (its lifetime, token checks and keep-alives count from it).
  StreamSession(EventStream events, const ServerOptions& options, Log log, Clock::time_point now);

  // One round at `now`; returns what to write now ("" = nothing), the
  // response head and "retry: 1000" before anything else:
  // - every stream_auth_check_ms, still_allowed() asked again; false (or a
  //   throw) sends a comment saying the token is no longer valid and ends;
  // - the events after the last one sent, as SSE text; a failed or throwing
  //   poll ends the stream (after what is pending, the head on a first round);
  // - at stream_max_ms, a last "retry: 1000" and the end (the client
  //   reconnects with Last-Event-ID and misses nothing);
  // - nothing else to send and stream_keepalive_ms since the last write: a
  //   ": keep-alive" comment.
  // After the end it only returns what is still pending.
  std::string Poll(Clock::time_point now);
  // What is pending, without a round (the server is stopping: the head, if
  // it has not been sent, goes out and the connection closes).
  std::string TakePending();
  // The last write went out at `now`: keep-alives count from it.
  void Wrote(Clock::time_point now) { last_write_ = now; }
  // Whether the connection closes once what Poll returned is written.
  bool Ending() const { return ending_; }
  // The id of the last event sent (the next poll's after_id).
  int64_t LastId() const { return events_.last_id; }

 private:
  EventStream events_;
  Log log_;
  std::chrono::milliseconds auth_check_;
  std::chrono::milliseconds keepalive_;
  std::chrono::milliseconds max_;
  Clock::time_point started_;
  Clock::time_point auth_checked_;  // when still_allowed was last asked
  Clock::time_point last_write_;
  std::string pending_;
  bool ending_ = false;
};

}  // namespace kestrel::server
