// Webhooks end to end: jobs submitted to a real store are claimed and run by
// a real Worker (real fork/exec children: a /bin/sh stand-in for `kestrel
// train --job`, since this must also pass in builds without LibTorch), and
// the worker's own webhook dispatcher delivers their state changes to a
// loopback HTTP server: signed, in order, each exactly once, all of them
// before Worker::Run returns. Fails if the worker stops starting (or
// draining) its dispatcher, or the dispatcher stops delivering. Runs on
// SQLite, and on PostgreSQL when KESTREL_TEST_PG is set.
#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "app/job_kinds.h"
#include "core/hash.h"
#include "core/safetensors.h"
#include "jobs/webhook.h"
#include "jobs/worker.h"
#include "webhook_test_support.h"

namespace kestrel::jobs {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::Clock;
using testing::LoopbackServer;

constexpr const char* kSecret = "e2e-s3cret";

class WebhookWorkerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why = scratch_.Init(GetParam(), "kestrel_whw_");
    if (scratch_.Skipped()) GTEST_SKIP() << why;
    ASSERT_EQ(why, "");
    dir_ = scratch_.Dir();
    auto s = store::MetadataStore::Open(scratch_.Url());
    ASSERT_TRUE(s.IsOk()) << s.GetStatus().ToString();
    store_ = std::move(s).Value();
    ASSERT_TRUE(server_.ok());
    ASSERT_TRUE(AddWebhook(*store_, {server_.Url(), kSecret}, NowMs()).IsOk());
    // Real (tiny) weights for the quality gate.
    SafeTensorFile f;
    f.tensors["w"] = SafeTensor{"F32", {1}, std::string(4, '\0')};
    weights_ = (dir_ / "best.safetensors").string();
    std::ofstream(weights_, std::ios::binary) << SerializeSafeTensors(f);
  }
  void TearDown() override { store_.reset(); }

  int64_t NowMs() { return Env::Default().UnixSeconds() * 1000; }

  int64_t Submit(const std::string& tag) {
    store::JobSpec spec;
    spec.dataset_version = Sha256Hex("birds");
    spec.config_json = R"({"tag":")" + tag + R"("})";
    bool created = false;
    auto j = store_->SubmitJob(spec, NowMs(), &created);
    EXPECT_TRUE(j.IsOk() && created) << j.GetStatus().ToString();
    return j.IsOk() ? j->id : 0;
  }

  // What `kestrel worker` runs, with /bin/sh as the trainer. The worker
  // appends "train --job ID --attempt N" ($1..$5). Job `bad` fails like a
  // dataset with too many broken images (exit 3); job `slow` runs until it
  // is signalled; any other job succeeds with a result naming real weights.
  WorkerOptions Options(int64_t bad, int64_t slow) {
    std::string script =
        "echo stage=data >&3\n"
        "if [ \"$3\" = " +
        std::to_string(bad) +
        " ]; then echo reason=dataset_errors >&3; exit 3; fi\n"
        "if [ \"$3\" = " +
        std::to_string(slow) +
        " ]; then echo stage=train >&3; exec sleep 30; fi\n"
        "echo 'stage=train epoch=1 done map50=0.9' >&3\n"
        "echo 'result {\"best\":\"" +
        weights_ + "\",\"map50\":0.9,\"map50_95\":0.6}' >&3\n";
    WorkerOptions o;
    o.id = "e2e";
    o.host = "test";
    o.home = (dir_ / "home").string();
    o.child_command = {"/bin/sh", "-c", script, "fake-trainer"};
    o.kinds = app::WorkerKinds(app::JobKinds(), Env::Default());  // the job-kind table: command word, gate
    o.poll_ms = 50;
    o.supervisor.poll_ms = 10;
    o.supervisor.grace_ms = 2'000;
    o.exit_when_idle = true;
    return o;  // webhooks on, default WebhookOptions: as `kestrel worker`
  }

  WorkerCounters Run(const WorkerOptions& o, const std::atomic<bool>& stop) {
    const std::string url = scratch_.Url();
    Worker w([url] { return store::MetadataStore::Open(url); }, runner_, Env::Default(), o);
    Status s = w.Run(stop);
    EXPECT_TRUE(s.IsOk()) << s.ToString();
    return w.Counters();
  }

  // Each request: signed with the hook's secret over the raw body, the
  // event id header matching the body, event ids strictly increasing.
  // Returns the bodies.
  std::vector<json> CheckedBodies() {
    std::vector<json> bodies;
    int64_t last_id = 0;
    for (const auto& r : server_.Requests()) {
      EXPECT_EQ(r.headers.at("x-kestrel-signature"), "sha256=" + HmacSha256Hex(kSecret, r.body));
      EXPECT_NE(r.headers.at("x-kestrel-signature"), "sha256=" + HmacSha256Hex("wrong", r.body));
      EXPECT_EQ(r.headers.at("x-kestrel-event-type"), "job.state");
      EXPECT_EQ(r.headers.at("x-kestrel-delivery-attempt"), "1");
      json b = json::parse(r.body);
      const int64_t id = b["event_id"].get<int64_t>();
      EXPECT_EQ(r.headers.at("x-kestrel-event"), std::to_string(id));
      EXPECT_GT(id, last_id) << "delivered out of order, or twice";
      last_id = id;
      EXPECT_EQ(b["type"], "job.state");
      bodies.push_back(std::move(b));
    }
    return bodies;
  }
  static std::map<int64_t, std::vector<std::string>> StatesByJob(const std::vector<json>& bodies) {
    std::map<int64_t, std::vector<std::string>> m;
    for (const auto& b : bodies) m[b["job_id"].get<int64_t>()].push_back(b["state"].get<std::string>());
    return m;
  }
  // A later dispatcher (the next worker) finds nothing left to send.
  void ExpectNothingMoreIsSent(size_t delivered) {
    WebhookOptions opt;
    opt.poll_interval_ms = 0;
    auto s = store::MetadataStore::Open(scratch_.Url());
    ASSERT_TRUE(s.IsOk());
    WebhookDispatcher next(std::move(s).Value(), Env::Default(), opt);
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(next.PollOnce(10).IsOk());
    EXPECT_TRUE(next.GetStats().leader);
    EXPECT_EQ(next.GetStats().delivered, 0);
    EXPECT_EQ(server_.Count(), delivered);
  }

  testing::ScratchStore scratch_;  // outlives store_ (declared first)
  fs::path dir_;                   // weights and the worker's home
  std::string weights_;
  std::unique_ptr<store::MetadataStore> store_;
  LoopbackServer server_;
  PosixProcessRunner runner_;
};

TEST_P(WebhookWorkerTest, JobsRunByAWorkerAreDeliveredSignedInOrderExactlyOnce) {
  const int64_t good = Submit("good");
  const int64_t bad = Submit("bad");
  std::atomic<bool> never{false};
  const auto start = Clock::now();
  WorkerCounters c = Run(Options(bad, -1), never);
  EXPECT_EQ(c.succeeded, 1);
  EXPECT_EQ(c.failed, 1);
  // Everything arrived before Run returned: the worker drains its
  // dispatcher on exit (`kestrel worker --exit-when-idle` exits right after
  // the last job, long before the dispatcher's next 1 s poll).
  auto bodies = CheckedBodies();
  ASSERT_EQ(bodies.size(), 6u) << "six state changes: queued, running, then succeeded / failed_permanent";
  auto states = StatesByJob(bodies);
  EXPECT_EQ(states[good], (std::vector<std::string>{"queued", "running", "succeeded"}));
  EXPECT_EQ(states[bad], (std::vector<std::string>{"queued", "running", "failed_permanent"}));
  for (const auto& b : bodies) {
    EXPECT_EQ(b["attempt"].get<int64_t>(), b["state"] == "queued" ? 0 : 1) << b.dump();
    EXPECT_EQ(b["dataset_version"], Sha256Hex("birds"));
    if (b["state"] == "succeeded") {
      EXPECT_DOUBLE_EQ(b["metrics"]["map50"].get<double>(), 0.9) << b.dump();
      EXPECT_EQ(b["metrics"]["best"], weights_);
      EXPECT_FALSE(b.contains("failure_class"));
    }
    if (b["state"] == "failed_permanent") {
      EXPECT_EQ(b["failure_class"], "permanent") << b.dump();
      EXPECT_EQ(b["reason"], "dataset_errors");
      EXPECT_EQ(b["exit_code"].get<int>(), 3);
      EXPECT_EQ(b["stage"], "data");
      EXPECT_EQ(b["infrastructure"].get<bool>(), false);
      EXPECT_FALSE(b.contains("metrics"));
    }
  }
  // The lease was released and the cursor moved past every event.
  EXPECT_EQ(*store_->GetSetting(kWebhookLeaseSetting), "");
  EXPECT_EQ(*store_->GetSetting(WebhookCursorSetting(server_.Url())),
            std::to_string(*LatestEventId(*store_)));
  ExpectNothingMoreIsSent(6);
  std::printf("[ e2e ] worker ran 2 jobs and delivered 6 webhooks in %lld ms\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count()));
}

TEST_P(WebhookWorkerTest, AStoppedWorkerDeliversTheHandBackBeforeItExits) {
  const int64_t slow = Submit("slow");
  std::atomic<bool> stop{false};
  // SIGTERM to `kestrel worker` sets this flag: once the receiver has seen
  // the job start, stop the worker.
  std::thread stopper([&] {
    auto deadline = Clock::now() + std::chrono::seconds(20);
    while (Clock::now() < deadline) {
      for (const auto& r : server_.Requests()) {
        if (json::parse(r.body)["state"] == "running") {
          stop.store(true);
          return;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    stop.store(true);
  });
  WorkerCounters c = Run(Options(-1, slow), stop);
  stopper.join();
  EXPECT_EQ(c.stopped, 1);
  auto bodies = CheckedBodies();
  ASSERT_EQ(bodies.size(), 3u);
  EXPECT_EQ(StatesByJob(bodies)[slow], (std::vector<std::string>{"queued", "running", "failed_retryable"}));
  const json& last = bodies.back();
  EXPECT_EQ(last["reason"], "worker_stopped") << last.dump();
  EXPECT_EQ(last["failure_class"], "retryable");
  EXPECT_EQ(last["infrastructure"].get<bool>(), true);
  EXPECT_EQ(last["signal"].get<int>(), SIGTERM);
  EXPECT_TRUE(last.contains("not_before_ms"));
  ExpectNothingMoreIsSent(3);
}

TEST_P(WebhookWorkerTest, NoWebhooksWorkerDeliversNothingAndLeavesTheEventsPending) {
  const int64_t good = Submit("good");
  const std::string cursor = *store_->GetSetting(WebhookCursorSetting(server_.Url()));
  WorkerOptions o = Options(-1, -1);
  o.webhooks = false;  // `kestrel worker --no-webhooks`
  std::atomic<bool> never{false};
  WorkerCounters c = Run(o, never);
  EXPECT_EQ(c.succeeded, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(server_.Count(), 0u);
  auto lease = store_->GetSetting(kWebhookLeaseSetting);
  EXPECT_TRUE(!lease.IsOk() || lease->empty()) << "a dispatcher took the lease";
  EXPECT_EQ(*store_->GetSetting(WebhookCursorSetting(server_.Url())), cursor);
  // The events are still there for a worker that does deliver.
  WebhookOptions opt;
  opt.poll_interval_ms = 0;
  auto s = store::MetadataStore::Open(scratch_.Url());
  ASSERT_TRUE(s.IsOk());
  WebhookDispatcher later(std::move(s).Value(), Env::Default(), opt);
  ASSERT_TRUE(later.Drain(10'000).IsOk());
  auto bodies = CheckedBodies();
  ASSERT_EQ(bodies.size(), 3u);
  EXPECT_EQ(StatesByJob(bodies)[good], (std::vector<std::string>{"queued", "running", "succeeded"}));
}

INSTANTIATE_TEST_SUITE_P(Backends, WebhookWorkerTest, ::testing::Values("sqlite", "postgres"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace kestrel::jobs
