// StreamSession (src/server/stream_session.h): what an open event stream
// sends each round, without a socket: time is hand-made time points, the
// store a scripted poll. The same rules over HTTP: api_test.cc (events),
// http_limits_test.cc (a throwing stream), auth_write_test.cc (a revoked
// token ends a stream).
#include "server/stream_session.h"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

namespace kestrel::server {
namespace {

using Clock = StreamSession::Clock;
using std::chrono::milliseconds;

class StreamSessionTest : public ::testing::Test {
 protected:
  StreamSessionTest() {
    options_.stream_auth_check_ms = 1'000;
    options_.stream_keepalive_ms = 500;
    options_.stream_max_ms = 10'000;
  }

  // A stream whose poll hands out `queued_` (events after the id asked for)
  // and records the ids it was asked for.
  StreamSession Open(int64_t last_id = 0) {
    EventStream s;
    s.last_id = last_id;
    s.poll = [this](int64_t after) -> Result<std::vector<StreamEvent>> {
      asked_.push_back(after);
      if (!poll_status_.IsOk()) return poll_status_;
      if (poll_throws_) throw std::runtime_error("the store went away");
      std::vector<StreamEvent> out;
      for (const StreamEvent& e : queued_)
        if (e.id > after) out.push_back(e);
      queued_.clear();
      return out;
    };
    if (with_token_) {
      s.still_allowed = [this] {
        ++token_checks_;
        if (token_throws_) throw 7;
        return token_valid_;
      };
    }
    return StreamSession(
        std::move(s), options_, [this](const std::string& l) { log_ += l + "\n"; }, t0_);
  }
  Clock::time_point At(int64_t ms) const { return t0_ + milliseconds(ms); }

  ServerOptions options_;
  const Clock::time_point t0_ = Clock::now();
  std::vector<StreamEvent> queued_;
  std::vector<int64_t> asked_;
  Status poll_status_;
  bool poll_throws_ = false;
  bool with_token_ = false;
  bool token_valid_ = true;
  bool token_throws_ = false;
  int token_checks_ = 0;
  std::string log_;
};

TEST_F(StreamSessionTest, FirstRoundSendsTheHeadThenTheEventsAfterLastEventId) {
  queued_ = {{4, "state", "{\"a\":1}"}, {5, "", "x"}};
  StreamSession s = Open(/*last_id=*/3);
  const std::string first = s.Poll(At(0));
  const std::string head =
      "HTTP/1.1 200 OK\r\nServer: kestrel\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n"
      "X-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\n"
      "X-Accel-Buffering: no\r\nConnection: close\r\n\r\n"
      "retry: 1000\n\n";
  EXPECT_EQ(first, head + "id: 4\nevent: state\ndata: {\"a\":1}\n\nid: 5\ndata: x\n\n");
  EXPECT_EQ(asked_, std::vector<int64_t>({3}));
  EXPECT_EQ(s.LastId(), 5);
  EXPECT_FALSE(s.Ending());
  // The next round asks after the last id sent; nothing new, no keep-alive yet.
  s.Wrote(At(10));
  EXPECT_EQ(s.Poll(At(100)), "");
  EXPECT_EQ(asked_, std::vector<int64_t>({3, 5}));
}

TEST_F(StreamSessionTest, AKeepAliveAfterSilenceCountedFromTheLastWrite) {
  StreamSession s = Open();
  ASSERT_FALSE(s.Poll(At(0)).empty());  // the head
  s.Wrote(At(300));
  EXPECT_EQ(s.Poll(At(700)), "");  // 400 ms since the write
  EXPECT_EQ(s.Poll(At(800)), ": keep-alive\n\n");
  s.Wrote(At(800));
  queued_ = {{1, "", "e"}};
  EXPECT_EQ(s.Poll(At(1'400)), "id: 1\ndata: e\n\n");  // an event, no keep-alive with it
}

TEST_F(StreamSessionTest, AtItsLifetimeTheStreamSaysReconnectAndEnds) {
  StreamSession s = Open();
  (void)s.Poll(At(0));
  queued_ = {{9, "", "last"}};
  const std::string out = s.Poll(At(10'000));
  EXPECT_EQ(out,
            "id: 9\ndata: last\n\n: the stream's time is up; reconnect with Last-Event-ID\nretry: 1000\n\n");
  EXPECT_TRUE(s.Ending());
  // Ended: no further poll of the store.
  EXPECT_EQ(s.Poll(At(10'500)), "");
  EXPECT_EQ(asked_.size(), 2u);
}

TEST_F(StreamSessionTest, ARevokedTokenEndsTheStreamAtTheNextCheckWithoutPolling) {
  with_token_ = true;
  StreamSession s = Open();
  (void)s.Poll(At(0));
  s.Wrote(At(600));
  EXPECT_EQ(token_checks_, 0);  // checked when the period is up, not at once
  token_valid_ = false;
  EXPECT_EQ(s.Poll(At(999)), "");
  EXPECT_EQ(token_checks_, 0);
  queued_ = {{1, "", "not sent"}};
  EXPECT_EQ(s.Poll(At(1'000)), ": the stream's token is no longer valid\n\n");
  EXPECT_EQ(token_checks_, 1);
  EXPECT_TRUE(s.Ending());
  EXPECT_EQ(asked_, std::vector<int64_t>({0, 0}));  // the rounds at 0 and 999; the revoked one read none
}

TEST_F(StreamSessionTest, AThrowingTokenCheckIsLoggedAndEndsTheStream) {
  with_token_ = true;
  token_throws_ = true;
  StreamSession s = Open();
  (void)s.Poll(At(0));
  EXPECT_EQ(s.Poll(At(1'000)), ": the stream's token is no longer valid\n\n");
  EXPECT_TRUE(s.Ending());
  EXPECT_EQ(log_, "the stream's token check threw: an exception that is not a std::exception\n");
}

TEST_F(StreamSessionTest, AFailedOrThrowingPollEndsTheStreamAfterWhatIsPending) {
  poll_status_ = Status::Unavailable("store down");
  StreamSession failed = Open();
  const std::string head = failed.Poll(At(0));
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << head;  // the head still goes out
  EXPECT_TRUE(failed.Ending());
  EXPECT_EQ(log_, "");

  poll_status_ = Status();
  poll_throws_ = true;
  StreamSession threw = Open();
  (void)threw.Poll(At(0));
  EXPECT_TRUE(threw.Ending());
  EXPECT_EQ(log_, "the stream's poll threw: the store went away\n");
}

TEST_F(StreamSessionTest, TakePendingGivesTheUnsentHeadOnceWithoutPolling) {
  StreamSession s = Open();
  EXPECT_EQ(s.TakePending().rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
  EXPECT_EQ(s.TakePending(), "");
  EXPECT_TRUE(asked_.empty());
}

}  // namespace
}  // namespace kestrel::server
