#include "server/stream_session.h"

#include <exception>
#include <utility>
#include <vector>

#include "core/terminate.h"

namespace kestrel::server {
namespace {

// The head of every event stream. Its body ends with the connection (no
// chunked encoding; every EventSource reads that), so it says close; the
// security headers are those Session::Send puts on every other response.
constexpr char kStreamHead[] =
    "HTTP/1.1 200 OK\r\nServer: kestrel\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n"
    "X-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\n"
    "X-Accel-Buffering: no\r\nConnection: close\r\n\r\n"
    "retry: 1000\n\n";

}  // namespace

StreamSession::StreamSession(EventStream events, const ServerOptions& options, Log log, Clock::time_point now)
    : events_(std::move(events)),
      log_(std::move(log)),
      auth_check_(options.stream_auth_check_ms),
      keepalive_(options.stream_keepalive_ms),
      max_(options.stream_max_ms),
      started_(now),
      auth_checked_(now),
      last_write_(now),
      pending_(kStreamHead) {}

std::string StreamSession::TakePending() { return std::exchange(pending_, std::string()); }

std::string StreamSession::Poll(Clock::time_point now) {
  if (ending_) return TakePending();
  if (events_.still_allowed && now - auth_checked_ >= auth_check_) {
    auth_checked_ = now;
    bool allowed = false;
    try {
      allowed = events_.still_allowed();
    } catch (...) {
      log_("the stream's token check threw: " + DescribeException(std::current_exception()));
    }
    if (!allowed) {
      pending_ += ": the stream's token is no longer valid\n\n";
      ending_ = true;
    }
  }
  if (!ending_) {
    Result<std::vector<StreamEvent>> got = Status::Internal("the stream's poll threw");
    try {
      got = events_.poll(events_.last_id);
    } catch (...) {
      log_("the stream's poll threw: " + DescribeException(std::current_exception()));
    }
    if (!got.IsOk()) {
      ending_ = true;
    } else {
      for (const auto& ev : *got) {
        pending_ += FormatStreamEvent(ev);
        events_.last_id = ev.id;
      }
    }
    // Every event read so far is in pending_: after it the client
    // reconnects with Last-Event-ID and misses nothing.
    if (!ending_ && now - started_ >= max_) {
      pending_ += ": the stream's time is up; reconnect with Last-Event-ID\nretry: 1000\n\n";
      ending_ = true;
    }
  }
  if (pending_.empty() && now - last_write_ >= keepalive_) pending_ = ": keep-alive\n\n";
  return TakePending();
}

}  // namespace kestrel::server
