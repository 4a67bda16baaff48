// Webhook delivery against a loopback HTTP server (webhook_test_support.h:
// POSIX sockets, one thread): bodies, signatures, retries with backoff, one
// delivery per event across dispatchers, cursors across restarts, and a dead
// URL that must not hold up a good one. Runs on SQLite, and on PostgreSQL
// when KESTREL_TEST_PG is set (scripts/pg-test-server.sh start).
#include "jobs/webhook.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "core/fault_env.h"
#include "core/hash.h"
#include "webhook_test_support.h"

namespace kestrel::jobs {
namespace {

using nlohmann::json;
using testing::Clock;
using testing::LoopbackServer;

class WebhookTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why = scratch_.Init(GetParam(), "kestrel_wh_");
    if (scratch_.Skipped()) GTEST_SKIP() << why;
    ASSERT_EQ(why, "");
    url_ = scratch_.Url();
    store_ = Open();
    ASSERT_NE(store_, nullptr);
    opt_.poll_interval_ms = 0;  // read the store on every PollOnce
    opt_.initial_backoff_ms = 20;
    opt_.max_backoff_ms = 1000;
    opt_.timeout_ms = 5000;
  }
  void TearDown() override { store_.reset(); }

  std::unique_ptr<store::MetadataStore> Open() {
    auto s = store::MetadataStore::Open(url_);
    EXPECT_TRUE(s.IsOk()) << s.GetStatus().ToString();
    return s.IsOk() ? std::move(s).Value() : nullptr;
  }
  std::unique_ptr<WebhookDispatcher> Dispatcher(Env& env = Env::Default()) {
    return std::make_unique<WebhookDispatcher>(Open(), env, opt_);
  }
  int64_t NowMs() { return Env::Default().UnixSeconds() * 1000; }

  // Submit, claim and complete one job: three state events (queued, running,
  // then succeeded or failed_permanent).
  int64_t RunJob(bool success) {
    store::JobSpec spec;
    spec.dataset_version = Sha256Hex("birds");
    spec.config_json = R"({"n":)" + std::to_string(next_job_++) + "}";
    bool created = false;
    auto j = store_->SubmitJob(spec, NowMs(), &created);
    EXPECT_TRUE(j.IsOk()) << j.GetStatus().ToString();
    store::ClaimRequest req;
    req.worker = "w1";
    req.devices = {{"cpu", 0, 0}};
    req.now_ms = NowMs();
    auto c = store_->ClaimJob(req);
    EXPECT_TRUE(c.IsOk()) << c.GetStatus().ToString();
    store::AttemptOutcome o;
    if (success) {
      o.success = true;
      o.result_json = R"({"map50":0.9,"map50_95":0.6})";
    } else {
      o.failure_class = store::FailureClass::kPermanent;
      o.stage = store::FailureStage::kData;
      o.reason = FailureReason::kDatasetErrors;
      o.exit_code = 3;
      o.message = "3 bad labels";
    }
    auto done = store_->CompleteAttempt(j->id, 1, "w1", o, NowMs());
    EXPECT_TRUE(done.IsOk()) << done.GetStatus().ToString();
    return j->id;
  }

  // Polls every dispatcher until `done` or the deadline; false on timeout.
  static bool PollUntil(const std::function<bool()>& done, const std::vector<WebhookDispatcher*>& ds,
                        int timeout_ms = 15000) {
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!done()) {
      if (Clock::now() > deadline) return false;
      for (auto* d : ds) {
        Status s = d->PollOnce(10);
        EXPECT_TRUE(s.IsOk()) << s.ToString();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
  }
  static std::vector<int64_t> EventIds(const std::vector<LoopbackServer::Request>& reqs) {
    std::vector<int64_t> ids;
    for (const auto& r : reqs) ids.push_back(json::parse(r.body)["event_id"].get<int64_t>());
    return ids;
  }

  testing::ScratchStore scratch_;  // outlives store_ (declared first)
  std::string url_;
  std::unique_ptr<store::MetadataStore> store_;
  WebhookOptions opt_;
  int next_job_ = 0;
};

TEST_P(WebhookTest, ConfigurationIsSharedAndValidated) {
  EXPECT_TRUE(LoadWebhooks(*store_)->empty());
  EXPECT_EQ(AddWebhook(*store_, {"ftp://x", ""}, NowMs()).Code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(AddWebhook(*store_, {"http://a.example/h", "s1"}, NowMs()).IsOk());
  ASSERT_TRUE(AddWebhook(*store_, {"https://b.example/h", ""}, NowMs()).IsOk());
  ASSERT_TRUE(AddWebhook(*store_, {"http://a.example/h", "s2"}, NowMs()).IsOk());  // replaces the secret
  auto other = Open();
  auto hooks = LoadWebhooks(*other);
  ASSERT_TRUE(hooks.IsOk());
  ASSERT_EQ(hooks->size(), 2u);
  EXPECT_EQ((*hooks)[0].secret, "s2");
  EXPECT_EQ(RemoveWebhook(*store_, "http://nope", NowMs()).Code(), StatusCode::kNotFound);
  ASSERT_TRUE(RemoveWebhook(*store_, "https://b.example/h", NowMs()).IsOk());
  EXPECT_EQ(LoadWebhooks(*store_)->size(), 1u);
  ASSERT_TRUE(store_->PutSetting(kWebhooksSetting, "{not json", NowMs()).IsOk());
  EXPECT_EQ(LoadWebhooks(*store_).GetStatus().Code(), StatusCode::kCorruption);
}

TEST_P(WebhookTest, LatestEventIdFindsTheNewestEvent) {
  EXPECT_EQ(*LatestEventId(*store_), 0);
  for (int i = 1; i <= 37; ++i) {
    store::EventRecord ev;
    ev.job_id = 1;
    ev.kind = "log";
    ev.payload_json = "{}";
    ASSERT_TRUE(store_->AppendEvent(ev).IsOk());
    ASSERT_EQ(*LatestEventId(*store_), i);
  }
}

TEST_P(WebhookTest, DeliversSignedStateEventsWithMetricsAndFailureClass) {
  LoopbackServer server;
  ASSERT_TRUE(server.ok());
  RunJob(true);  // before the hook exists: history is not sent
  ASSERT_TRUE(AddWebhook(*store_, {server.Url(), "s3cret"}, NowMs()).IsOk());
  int64_t ok_job = RunJob(true);
  int64_t bad_job = RunJob(false);
  auto d = Dispatcher();
  ASSERT_TRUE(PollUntil([&] { return d->GetStats().delivered >= 6; }, {d.get()}));
  // Nothing more arrives (no history, no duplicates).
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(d->PollOnce(5).IsOk());
  auto reqs = server.Requests();
  ASSERT_EQ(reqs.size(), 6u);
  std::vector<std::string> states;
  int64_t last_id = 0;
  for (const auto& r : reqs) {
    EXPECT_EQ(r.headers.at("x-kestrel-signature"), "sha256=" + HmacSha256Hex("s3cret", r.body));
    EXPECT_NE(r.headers.at("x-kestrel-signature"), "sha256=" + HmacSha256Hex("wrong", r.body));
    EXPECT_EQ(r.headers.at("content-type"), "application/json");
    EXPECT_EQ(r.headers.at("x-kestrel-event-type"), "job.state");
    json b = json::parse(r.body);
    EXPECT_EQ(r.headers.at("x-kestrel-event"), std::to_string(b["event_id"].get<int64_t>()));
    EXPECT_GT(b["event_id"].get<int64_t>(), last_id);  // in event order
    last_id = b["event_id"].get<int64_t>();
    EXPECT_EQ(b["type"], "job.state");
    EXPECT_GT(b["time_ms"].get<int64_t>(), 0);
    states.push_back(b["state"].get<std::string>());
    if (b["state"] == "succeeded") {
      EXPECT_EQ(b["job_id"].get<int64_t>(), ok_job);
      EXPECT_EQ(b["attempt"].get<int64_t>(), 1);
      EXPECT_DOUBLE_EQ(b["metrics"]["map50"].get<double>(), 0.9);
      EXPECT_FALSE(b.contains("failure_class"));
    }
    if (b["state"] == "failed_permanent") {
      EXPECT_EQ(b["job_id"].get<int64_t>(), bad_job);
      EXPECT_EQ(b["reason"], "dataset_errors");
      EXPECT_EQ(b["failure_class"], "permanent");
      EXPECT_EQ(b["stage"], "data");
      EXPECT_EQ(b["exit_code"].get<int>(), 3);
      EXPECT_EQ(b["infrastructure"].get<bool>(), false);
      EXPECT_FALSE(b.contains("metrics"));
    }
  }
  EXPECT_EQ(states, (std::vector<std::string>{"queued", "running", "succeeded", "queued", "running",
                                              "failed_permanent"}));
  EXPECT_EQ(d->GetStats().delivered, 6);
  EXPECT_TRUE(d->GetStats().leader);
  // The cursor records the last delivered event.
  EXPECT_EQ(*store_->GetSetting(WebhookCursorSetting(server.Url())), std::to_string(last_id));
}

TEST_P(WebhookTest, RetriesWithExponentialBackoffAfterServerErrors) {
  LoopbackServer server;
  server.Script({500, 503, 200});
  ASSERT_TRUE(AddWebhook(*store_, {server.Url(), "k"}, NowMs()).IsOk());
  RunJob(true);
  auto d = Dispatcher();
  // 3 attempts for the first event, then the other two events.
  ASSERT_TRUE(PollUntil([&] { return d->GetStats().delivered >= 3; }, {d.get()}));
  auto reqs = server.Requests();
  ASSERT_EQ(reqs.size(), 5u);
  // The same event, byte for byte, with the attempt number in a header.
  EXPECT_EQ(reqs[0].body, reqs[1].body);
  EXPECT_EQ(reqs[1].body, reqs[2].body);
  EXPECT_EQ(reqs[0].headers.at("x-kestrel-delivery-attempt"), "1");
  EXPECT_EQ(reqs[2].headers.at("x-kestrel-delivery-attempt"), "3");
  EXPECT_EQ(reqs[3].headers.at("x-kestrel-delivery-attempt"), "1");
  // Backoff 20 ms, then 40 ms (the clock only runs forward; allow slack below).
  EXPECT_GE(reqs[1].at - reqs[0].at, std::chrono::milliseconds(18));
  EXPECT_GE(reqs[2].at - reqs[1].at, std::chrono::milliseconds(38));
  auto ids = EventIds(reqs);
  EXPECT_EQ(std::set<int64_t>(ids.begin(), ids.end()).size(), 3u);
  EXPECT_EQ(d->GetStats().failed_attempts, 2);
  EXPECT_EQ(d->GetStats().delivered, 3);
}

TEST_P(WebhookTest, GivesUpOnAnEventAfterMaxAttemptsAndMovesOn) {
  LoopbackServer server;
  server.Script({500, 500});
  opt_.max_attempts = 2;
  ASSERT_TRUE(AddWebhook(*store_, {server.Url(), "k"}, NowMs()).IsOk());
  RunJob(true);
  auto d = Dispatcher();
  ASSERT_TRUE(PollUntil([&] { return d->GetStats().delivered >= 2; }, {d.get()}));
  auto ids = EventIds(server.Requests());
  ASSERT_EQ(ids.size(), 4u);
  EXPECT_EQ(ids[0], ids[1]);  // two attempts for the first event, then the next events
  EXPECT_LT(ids[1], ids[2]);
  EXPECT_EQ(d->GetStats().dropped, 1);
  EXPECT_EQ(d->GetStats().delivered, 2);
}

TEST_P(WebhookTest, TwoDispatchersNeverDeliverAnEventTwice) {
  LoopbackServer server;
  ASSERT_TRUE(AddWebhook(*store_, {server.Url(), "k"}, NowMs()).IsOk());
  auto a = Dispatcher();
  auto b = Dispatcher();
  // Both poll concurrently while jobs run.
  std::atomic<bool> stop{false};
  auto loop = [&](WebhookDispatcher* d) {
    while (!stop) {
      Status s = d->PollOnce(5);
      EXPECT_TRUE(s.IsOk()) << s.ToString();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  std::thread ta(loop, a.get()), tb(loop, b.get());
  for (int i = 0; i < 10; ++i) RunJob(i % 3 != 0);
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (a->GetStats().delivered + b->GetStats().delivered < 30 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a duplicate would show up meanwhile
  stop = true;
  ta.join();
  tb.join();
  auto ids = EventIds(server.Requests());
  EXPECT_EQ(ids.size(), 30u);
  EXPECT_EQ(std::set<int64_t>(ids.begin(), ids.end()).size(), ids.size());
  EXPECT_EQ(a->GetStats().delivered + b->GetStats().delivered, 30);
  EXPECT_NE(a->GetStats().leader, b->GetStats().leader);  // exactly one holds the lease

  // The leader stops (releasing the lease); the other takes over from the
  // shared cursor: no event twice, none lost.
  WebhookDispatcher* follower = a->GetStats().leader ? b.get() : a.get();
  (a->GetStats().leader ? a : b)->Stop();
  for (int i = 0; i < 3; ++i) RunJob(true);
  ASSERT_TRUE(PollUntil([&] { return follower->GetStats().delivered >= 9; }, {follower}));
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(follower->PollOnce(5).IsOk());
  ids = EventIds(server.Requests());
  EXPECT_EQ(ids.size(), 39u);
  EXPECT_EQ(std::set<int64_t>(ids.begin(), ids.end()).size(), ids.size());
  EXPECT_EQ(follower->GetStats().delivered, 9);  // it had delivered nothing while it followed
  EXPECT_TRUE(follower->GetStats().leader);
}

TEST_P(WebhookTest, AHungLeadersLeaseExpiresAndTheNextOneContinues) {
  LoopbackServer server;
  opt_.lease_ms = 5'000;
  ASSERT_TRUE(AddWebhook(*store_, {server.Url(), ""}, NowMs()).IsOk());
  RunJob(true);
  auto a = Dispatcher();
  ASSERT_TRUE(PollUntil([&] { return a->GetStats().delivered >= 3; }, {a.get()}));
  // `a` hangs (stops polling). `b` lives 60 s later, past a's lease.
  FakeClockEnv later(Env::Default(), Env::Default().UnixSeconds() + 60);
  auto b = Dispatcher(later);
  ASSERT_TRUE(b->PollOnce(0).IsOk());
  EXPECT_TRUE(b->GetStats().leader);
  RunJob(true);
  ASSERT_TRUE(PollUntil([&] { return b->GetStats().delivered >= 3; }, {b.get()}));
  // `a` wakes up, finds the lease taken and delivers nothing.
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(a->PollOnce(5).IsOk());
  EXPECT_FALSE(a->GetStats().leader);
  auto ids = EventIds(server.Requests());
  EXPECT_EQ(ids.size(), 6u);
  EXPECT_EQ(std::set<int64_t>(ids.begin(), ids.end()).size(), 6u);
  EXPECT_EQ(a->GetStats().delivered, 3);
  EXPECT_EQ(b->GetStats().delivered, 3);
}

TEST_P(WebhookTest, CursorSurvivesARestart) {
  LoopbackServer server;
  ASSERT_TRUE(AddWebhook(*store_, {server.Url(), "k"}, NowMs()).IsOk());
  RunJob(true);
  {
    auto d = Dispatcher();
    ASSERT_TRUE(PollUntil([&] { return d->GetStats().delivered >= 3; }, {d.get()}));
  }  // destroyed: releases the lease, the cursor stays in the store
  RunJob(false);
  auto again = Dispatcher();
  ASSERT_TRUE(PollUntil([&] { return again->GetStats().delivered >= 3; }, {again.get()}));
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(again->PollOnce(5).IsOk());
  auto ids = EventIds(server.Requests());
  ASSERT_EQ(ids.size(), 6u);
  EXPECT_EQ(std::set<int64_t>(ids.begin(), ids.end()).size(), 6u);
  EXPECT_EQ(again->GetStats().delivered, 3);  // only the new events
  EXPECT_GT(ids[3], ids[2]);
}

TEST_P(WebhookTest, ADeadUrlDoesNotHoldUpAGoodOne) {
  LoopbackServer good;
  LoopbackServer black_hole(/*answer=*/false);
  opt_.timeout_ms = 30'000;  // the dead URL's request hangs far longer than the test waits
  ASSERT_TRUE(AddWebhook(*store_, {black_hole.Url(), "k"}, NowMs()).IsOk());
  ASSERT_TRUE(AddWebhook(*store_, {"http://127.0.0.1:1/refused", "k"}, NowMs()).IsOk());
  ASSERT_TRUE(AddWebhook(*store_, {good.Url(), "k"}, NowMs()).IsOk());
  for (int i = 0; i < 5; ++i) RunJob(true);
  auto d = Dispatcher();
  // Within 10 s although the black hole holds its request for 30 s.
  ASSERT_TRUE(PollUntil([&] { return d->GetStats().delivered >= 15; }, {d.get()}, 10'000));
  auto ids = EventIds(good.Requests());
  EXPECT_EQ(std::set<int64_t>(ids.begin(), ids.end()).size(), 15u);
  // The refused URL keeps failing and backing off; the black hole's first
  // request is still in flight.
  EXPECT_GE(d->GetStats().failed_attempts, 1);
  EXPECT_EQ(d->GetStats().delivered, 15);
}

TEST_P(WebhookTest, BackgroundThreadDeliversAndStopReleasesTheLease) {
  LoopbackServer server;
  ASSERT_TRUE(AddWebhook(*store_, {server.Url(), "k"}, NowMs()).IsOk());
  opt_.poll_interval_ms = 20;
  opt_.lease_ms = 1000;
  auto d = StartWebhookDispatcher(url_, Env::Default(), opt_);
  ASSERT_TRUE(d.IsOk()) << d.GetStatus().ToString();
  RunJob(true);
  auto deadline = Clock::now() + std::chrono::seconds(15);
  while ((*d)->GetStats().delivered < 3 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(server.Count(), 3u);
  (*d)->Stop();
  EXPECT_EQ(*store_->GetSetting(kWebhookLeaseSetting), "");
  WebhookOptions bad = opt_;
  bad.lease_ms = 10;  // shorter than 3 poll intervals
  EXPECT_EQ(StartWebhookDispatcher(url_, Env::Default(), bad).GetStatus().Code(),
            StatusCode::kInvalidArgument);
}

TEST_P(WebhookTest, PostWebhookSendsASignedPing) {
  LoopbackServer server;
  DeliveryResult r = PostWebhook({server.Url(), "pw"}, "ping-1", "ping", R"({"type":"ping"})", opt_);
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.http_status, 200);
  ASSERT_EQ(server.Count(), 1u);
  auto req = server.Requests()[0];
  EXPECT_EQ(req.headers.at("x-kestrel-event"), "ping-1");
  EXPECT_EQ(req.headers.at("x-kestrel-event-type"), "ping");
  EXPECT_EQ(req.headers.at("x-kestrel-signature"), WebhookSignature("pw", req.body));
  // Unsigned hooks send no signature header.
  ASSERT_TRUE(PostWebhook({server.Url(), ""}, "ping-2", "ping", "{}", opt_).ok);
  EXPECT_EQ(server.Requests()[1].headers.count("x-kestrel-signature"), 0u);
  server.Script({404});
  r = PostWebhook({server.Url(), "pw"}, "ping-3", "ping", "{}", opt_);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.http_status, 404);
  r = PostWebhook({"http://127.0.0.1:1/x", "pw"}, "ping-4", "ping", "{}", opt_);
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.error.empty());
}

INSTANTIATE_TEST_SUITE_P(Backends, WebhookTest, ::testing::Values("sqlite", "postgres"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace kestrel::jobs
