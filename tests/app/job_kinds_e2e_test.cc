// A job kind defined only in the tests (probe_kind.h) runs end to end
// through the job-kind table alone: submit (app::SubmitTokens: the row's
// keys and checks), the worker (jobs::Worker with app::WorkerKinds: the
// row's name as the child's command word, the row's gate), the child
// (probe_child: the one attempt command, app::RunAttempt, the row's
// runner), and the registration step (app::RegisterSucceededJob: the row's
// on_succeeded). Real processes on a SQLite home; about a second.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>

#include "app/job_kinds.h"
#include "app/jobs.h"
#include "jobs/process_runner.h"
#include "jobs/worker.h"
#include "probe_kind.h"
#include "store/artifact_store.h"

namespace kestrel::app {
namespace {

namespace fs = std::filesystem;

class ProbeKindEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    home_ = (fs::temp_directory_path() / ("kestrel-probe-e2e-" + std::to_string(::getpid()))).string();
    fs::remove_all(home_);
    fs::create_directories(home_);
    // This program submits and supervises: the row without a runner.
    if (JobKinds().Find(probe::kName) == nullptr) {
      ASSERT_TRUE(JobKinds().Add(probe::ProbeKind(/*with_runner=*/false)).IsOk());
    }
    auto m = store::MetadataStore::Open(store::MetadataUrl(home_));
    ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
    meta_ = std::move(m).Value();
  }
  void TearDown() override {
    meta_.reset();
    fs::remove_all(home_);
  }
  Result<SubmitResult> Submit(const std::vector<std::string>& tokens) {
    SubmitSteps steps;
    steps.open_store = [this]() -> Result<store::MetadataStore*> { return meta_.get(); };
    return SubmitTokens(tokens, steps, 1'000);
  }

  std::string home_;
  std::unique_ptr<store::MetadataStore> meta_;
};

TEST_F(ProbeKindEndToEnd, SubmitWorkerChildGateRegistryThroughTheTableOnly) {
  // Submit: the row's keys, its own refusals and the job system's.
  auto refused = Submit({"kind=probe", "note=refuse"});
  ASSERT_FALSE(refused.IsOk());
  EXPECT_EQ(refused.GetStatus().Where().field, "note");
  auto owned = Submit({"kind=probe", "output=/tmp/x"});
  ASSERT_FALSE(owned.IsOk());
  EXPECT_EQ(owned.GetStatus().Where().field, "output");
  auto range = Submit({"kind=probe", "answer=101"});
  ASSERT_FALSE(range.IsOk());
  EXPECT_EQ(range.GetStatus().Where().field, "answer");
  auto ok = Submit({"kind=probe", "answer=70", "min_map50=0.5"});
  auto low = Submit({"kind=probe", "answer=30", "min_map50=0.5"});
  auto bad = Submit({"kind=probe", "answer=10", "note=bad"});
  ASSERT_TRUE(ok.IsOk() && low.IsOk() && bad.IsOk()) << ok.GetStatus().ToString();
  EXPECT_EQ(JobKindText(ok->job), "probe");

  jobs::PosixProcessRunner runner;
  jobs::WorkerOptions o;
  o.id = "probe-worker";
  o.host = "test";
  o.home = home_;
  o.child_command = {KESTREL_PROBE_CHILD, "--home", home_, "--log-level", "warn"};
  o.kinds = WorkerKinds(JobKinds(), Env::Default());
  o.exit_when_idle = true;
  o.webhooks = false;
  o.poll_ms = 20;
  o.supervisor.poll_ms = 5;
  std::atomic<int> registered{0};
  o.on_job_succeeded = [this, &registered](store::MetadataStore& m, const store::JobRecord& job,
                                           int64_t now) {
    auto r = RegisterSucceededJob(JobKinds(), m, home_, job, now);
    EXPECT_TRUE(r.IsOk()) << r.GetStatus().ToString();
    if (r.IsOk()) ++registered;
  };
  const std::string url = store::MetadataUrl(home_);
  jobs::Worker worker([url] { return store::MetadataStore::Open(url); }, runner, Env::Default(), o);
  std::atomic<bool> stop{false};
  ASSERT_TRUE(worker.Run(stop).IsOk());
  EXPECT_EQ(worker.Counters().succeeded, 1);

  // Child and gate: the typed result the child wrote, judged by the row's gate.
  auto j = meta_->GetJob(ok->job.id);
  ASSERT_TRUE(j.IsOk());
  EXPECT_EQ(j->state, store::JobState::kSucceeded) << j->last_reason;
  auto result = AttemptResult::Parse(j->result_json);
  ASSERT_TRUE(result.IsOk()) << j->result_json;
  EXPECT_EQ(result->kind, "probe");
  EXPECT_EQ(result->attempt, 1);
  EXPECT_EQ(result->map50, 0.7);
  EXPECT_EQ(result->details.value("note", "?"), "");
  EXPECT_TRUE(fs::exists(result->path)) << result->path;
  // Registry: the row's registration step ran for the succeeded job only.
  EXPECT_EQ(registered.load(), 1);
  auto setting = meta_->GetSetting("probe.registered." + std::to_string(ok->job.id));
  ASSERT_TRUE(setting.IsOk());
  EXPECT_EQ(*setting, result->path);
  EXPECT_FALSE(meta_->GetSetting("probe.registered." + std::to_string(low->job.id)).IsOk());

  // The gate refused the low answer; the runner's error kept its reason.
  auto l = meta_->GetJob(low->job.id);
  EXPECT_EQ(l->state, store::JobState::kFailedPermanent);
  auto la = meta_->ListAttempts(low->job.id);
  ASSERT_TRUE(la.IsOk() && la->size() == 1u);
  EXPECT_EQ((*la)[0].reason, "quality_gate");
  EXPECT_NE((*la)[0].message.find("quality gate: answer 0.300000 is below"), std::string::npos)
      << (*la)[0].message;
  auto b = meta_->GetJob(bad->job.id);
  EXPECT_EQ(b->state, store::JobState::kFailedPermanent);
  auto ba = meta_->ListAttempts(bad->job.id);
  ASSERT_TRUE(ba.IsOk() && ba->size() == 1u);
  EXPECT_EQ((*ba)[0].reason, "bad_config");
}

}  // namespace
}  // namespace kestrel::app
