// The Worker tests' fixture (worker_test.cc, worker_quarantine_test.cc):
// a SQLite store behind HookedStore, scripted children (FakeProcessRunner)
// and a fake clock shared by the worker's threads.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "app/job_kinds.h"
#include "core/fault_env.h"
#include "core/safetensors.h"
#include "jobs/fake_process_runner.h"
#include "jobs/worker.h"
#include "store/metadata_store.h"

namespace kestrel::jobs {

namespace fs = std::filesystem;
using store::JobState;

// Forwards to a real store; tests hook the calls the worker's failure
// handling depends on.
class HookedStore final : public store::MetadataStore {
 public:
  struct Hooks {
    std::function<Status(int64_t job, int64_t attempt)> before_renew;  // non-OK: returned instead
    std::function<Status()> before_claim;
  };
  HookedStore(std::unique_ptr<store::MetadataStore> inner, std::shared_ptr<Hooks> hooks)
      : in_(std::move(inner)), hooks_(std::move(hooks)) {}

  Result<int> SchemaVersion() override { return in_->SchemaVersion(); }
  Result<store::DatasetVersionRecord> AddDatasetVersion(const store::DatasetVersionRecord& r,
                                                        bool* c) override {
    return in_->AddDatasetVersion(r, c);
  }
  Result<std::vector<store::DatasetSummary>> ListDatasets() override { return in_->ListDatasets(); }
  Result<std::vector<store::DatasetVersionRecord>> ListVersions(const std::string& d) override {
    return in_->ListVersions(d);
  }
  Result<store::DatasetVersionRecord> GetVersion(const std::string& d, const std::string& r) override {
    return in_->GetVersion(d, r);
  }
  Result<std::vector<store::DatasetVersionRecord>> ListVersionsById(
      const std::vector<std::string>& ids) override {
    return in_->ListVersionsById(ids);
  }
  Result<store::JobRecord> SubmitJob(const store::JobSpec& s, int64_t now, bool* c) override {
    return in_->SubmitJob(s, now, c);
  }
  Result<store::ClaimedJob> ClaimJob(const store::ClaimRequest& req) override {
    if (hooks_->before_claim) KESTREL_RETURN_IF_ERROR(hooks_->before_claim());
    return in_->ClaimJob(req);
  }
  Status RenewLease(int64_t job, int64_t attempt, const std::string& w, int64_t now, int64_t lease) override {
    if (hooks_->before_renew) KESTREL_RETURN_IF_ERROR(hooks_->before_renew(job, attempt));
    return in_->RenewLease(job, attempt, w, now, lease);
  }
  Status RecordAttemptPid(int64_t job, int64_t attempt, const std::string& w, int64_t pid) override {
    return in_->RecordAttemptPid(job, attempt, w, pid);
  }
  Result<store::JobRecord> CompleteAttempt(int64_t job, int64_t attempt, const std::string& w,
                                           const store::AttemptOutcome& o, int64_t now) override {
    return in_->CompleteAttempt(job, attempt, w, o, now);
  }
  Result<store::JobRecord> CancelJob(int64_t job, int64_t now) override { return in_->CancelJob(job, now); }
  Result<store::JobRecord> RetryJob(int64_t job, int64_t now) override { return in_->RetryJob(job, now); }
  Result<store::JobRecord> LabelJob(int64_t job, const store::JobLabelChange& c) override {
    return in_->LabelJob(job, c);
  }
  Result<store::JobRecord> GetJob(int64_t job) override { return in_->GetJob(job); }
  Result<std::vector<store::JobRecord>> ListJobs(const store::JobFilter& f) override {
    return in_->ListJobs(f);
  }
  Result<int64_t> CountJobs(const store::JobFilter& f) override { return in_->CountJobs(f); }
  Result<std::vector<store::AttemptRecord>> ListAttempts(int64_t job) override {
    return in_->ListAttempts(job);
  }
  Result<std::vector<store::AttemptRecord>> RecentAttempts(int n) override { return in_->RecentAttempts(n); }
  Result<int64_t> AppendEvent(const store::EventRecord& e) override { return in_->AppendEvent(e); }
  Result<std::vector<store::EventRecord>> ReadEvents(int64_t after, int64_t job, int limit) override {
    return in_->ReadEvents(after, job, limit);
  }
  Status UpsertWorker(const store::WorkerRecord& w) override { return in_->UpsertWorker(w); }
  Result<std::vector<store::WorkerRecord>> ListWorkers() override { return in_->ListWorkers(); }
  Result<store::JobStats> Stats() override { return in_->Stats(); }
  Result<store::HostRecord> RecordEnvironmentFailure(const std::string& h, const std::string& m, int k,
                                                     int64_t now) override {
    return in_->RecordEnvironmentFailure(h, m, k, now);
  }
  Result<store::HostRecord> UnquarantineHost(const std::string& h, int64_t now) override {
    return in_->UnquarantineHost(h, now);
  }
  Result<std::vector<std::string>> SetDrain(const std::string& t, bool d, int64_t now) override {
    return in_->SetDrain(t, d, now);
  }
  Result<std::vector<store::HostRecord>> ListHosts() override { return in_->ListHosts(); }
  Result<store::WorkerControl> GetWorkerControl(const std::string& w, const std::string& h) override {
    return in_->GetWorkerControl(w, h);
  }
  Status PutFingerprint(const std::string& h, const std::string& j, int64_t now) override {
    return in_->PutFingerprint(h, j, now);
  }
  Result<std::string> GetFingerprint(const std::string& h) override { return in_->GetFingerprint(h); }
  Result<std::string> GetSetting(const std::string& n) override { return in_->GetSetting(n); }
  Status PutSetting(const std::string& n, const std::string& v, int64_t now) override {
    return in_->PutSetting(n, v, now);
  }
  Result<bool> CompareAndSetSetting(const std::string& n, const std::optional<std::string>& expected,
                                    const std::string& v, int64_t now) override {
    return in_->CompareAndSetSetting(n, expected, v, now);
  }
  Result<store::ModelRecord> AddModel(const store::ModelRecord& m, bool* created) override {
    return in_->AddModel(m, created);
  }
  Result<std::vector<store::ModelRecord>> ListModels(const store::ModelFilter& f) override {
    return in_->ListModels(f);
  }
  Result<std::string> TagModel(const std::string& id, const std::string& tag, int64_t now) override {
    return in_->TagModel(id, tag, now);
  }
  Result<bool> UntagModel(const std::string& id, const std::string& tag) override {
    return in_->UntagModel(id, tag);
  }
  Status DeleteModel(const std::string& id, bool even_production) override {
    return in_->DeleteModel(id, even_production);
  }
  Result<store::ModelExportRecord> AddModelExport(const store::ModelExportRecord& rec,
                                                  bool* created) override {
    return in_->AddModelExport(rec, created);
  }
  Result<store::TemplateRecord> AddTemplate(const store::TemplateRecord& t, bool* created) override {
    return in_->AddTemplate(t, created);
  }
  Result<std::vector<store::TemplateRecord>> ListTemplates(const store::TemplateFilter& f) override {
    return in_->ListTemplates(f);
  }
  Result<store::ApiTokenRecord> AddApiToken(const store::ApiTokenRecord& t) override {
    return in_->AddApiToken(t);
  }
  Result<std::vector<store::ApiTokenRecord>> ListApiTokens() override { return in_->ListApiTokens(); }
  Result<store::ApiTokenRecord> GetApiToken(const std::string& id) override { return in_->GetApiToken(id); }
  Result<store::ApiTokenRecord> RevokeApiToken(const std::string& id, int64_t now, bool* revoked) override {
    return in_->RevokeApiToken(id, now, revoked);
  }
  Status TouchApiToken(const std::string& id, int64_t now) override { return in_->TouchApiToken(id, now); }
  Result<store::StudyRecord> CreateStudy(const store::StudyRecord& r, bool* created) override {
    return in_->CreateStudy(r, created);
  }
  Result<store::StudyRecord> GetStudy(const std::string& n) override { return in_->GetStudy(n); }
  Result<std::vector<store::StudyRecord>> ListStudies() override { return in_->ListStudies(); }
  Result<bool> UpdateStudy(const store::StudyRecord& r, const std::string& expected) override {
    return in_->UpdateStudy(r, expected);
  }
  Result<store::TrialRecord> AddTrial(const store::TrialRecord& r, bool* created) override {
    return in_->AddTrial(r, created);
  }
  Result<bool> UpdateTrial(const store::TrialRecord& r, const std::string& expected) override {
    return in_->UpdateTrial(r, expected);
  }
  Result<std::vector<store::TrialRecord>> ListTrials(int64_t study) override {
    return in_->ListTrials(study);
  }
  Result<store::JobRecord> SubmitTrialJob(int64_t study, int64_t number, const store::JobSpec& s, int64_t now,
                                          bool* created) override {
    return in_->SubmitTrialJob(study, number, s, now, created);
  }

 private:
  std::unique_ptr<store::MetadataStore> in_;
  std::shared_ptr<Hooks> hooks_;
};

// A fake clock for several threads: each sleep also yields a little real
// time, so one busy thread cannot race the shared clock hours ahead while
// another is descheduled (only the multi-slot tests turn it on).
class SharedFakeClock final : public FakeClockEnv {
 public:
  using FakeClockEnv::FakeClockEnv;
  void SleepMicros(int64_t micros) override {
    FakeClockEnv::SleepMicros(micros);
    if (yield_) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  void set_yield(bool y) { yield_ = y; }

 private:
  std::atomic<bool> yield_{false};
};

class WorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ =
        (fs::temp_directory_path() / ("kestrel_worker_" + std::to_string(::getpid()) + "_" + name)).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    url_ = "sqlite:" + dir_ + "/kestrel.db";
    db_ = Open();
    // A real (tiny) safetensors file for the quality gate.
    SafeTensorFile f;
    f.tensors["w"] = SafeTensor{"F32", {1}, std::string(4, '\0')};
    weights_ = dir_ + "/best.safetensors";
    std::ofstream(weights_, std::ios::binary) << SerializeSafeTensors(f);
    options_.id = "w1";
    options_.host = "test";
    options_.home = dir_ + "/home";
    options_.child_command = {"/usr/bin/kestrel"};
    options_.kinds = app::WorkerKinds(app::JobKinds(), clock_);  // the job-kind table: command word, gate
    options_.poll_ms = 1000;
    options_.lease_ms = 90'000;  // supervisor defaults: heartbeat 30 s, hang 90 s, grace 10 s
  }
  void TearDown() override {
    db_.reset();
    fs::remove_all(dir_);
  }

  std::unique_ptr<store::MetadataStore> Open() {
    auto s = store::MetadataStore::Open(url_);
    EXPECT_TRUE(s.IsOk()) << s.GetStatus().ToString();
    return s.IsOk() ? std::move(*s) : nullptr;
  }
  int64_t Now() { return clock_.NowMicros() / 1000; }

  int64_t Submit(const std::string& tag, const std::string& config_extra = "", std::string kind = "cpu",
                 int64_t mem = 0, store::RetryPolicy retry = {{3}, {{0}}, 10}, double min_map50 = 0) {
    store::JobSpec spec;
    spec.dataset_version = "v";
    spec.config_json = "{\"tag\":\"" + tag + "\"" + config_extra + "}";
    spec.device_kind = kind;
    spec.device_memory_mb = mem;
    spec.retry = retry;
    spec.min_map50 = min_map50;
    bool created = false;
    auto j = db_->SubmitJob(spec, Now(), &created);
    EXPECT_TRUE(j.IsOk() && created) << j.GetStatus().ToString();
    return j.IsOk() ? j->id : 0;
  }

  // A child that reports progress every 10 s and ends at `ms` with exit 0
  // and a result naming the test's weights.
  FakeChildScript Success(int64_t ms = 25'000, double map50 = 0.5) {
    FakeChildScript s;
    for (int64_t t = 0; t < ms; t += 10'000)
      s.progress.emplace_back(t, "stage=train iter=" + std::to_string(t));
    s.progress.emplace_back(ms - 1,
                            "result {\"best\":\"" + weights_ + "\",\"map50\":" + std::to_string(map50) + "}");
    s.exit_at_ms = ms;
    return s;
  }
  FakeChildScript Forever() {
    FakeChildScript s;
    for (int64_t t = 0; t < 10'000'000; t += 10'000) s.progress.emplace_back(t, "stage=train");
    s.sigterm_exit_after_ms = 2'000;  // checkpoints, then dies of SIGTERM
    return s;
  }

  WorkerCounters RunWorker(std::shared_ptr<HookedStore::Hooks> hooks = nullptr,
                           const std::atomic<bool>* stop = nullptr) {
    if (!hooks) hooks = std::make_shared<HookedStore::Hooks>();
    StoreFactory factory = [this, hooks]() -> Result<std::unique_ptr<store::MetadataStore>> {
      KESTREL_ASSIGN_OR_RETURN(auto s, store::MetadataStore::Open(url_));
      return std::unique_ptr<store::MetadataStore>(std::make_unique<HookedStore>(std::move(s), hooks));
    };
    worker_ = std::make_unique<Worker>(factory, runner_, clock_, options_);
    std::atomic<bool> never{false};
    Status s = worker_->Run(stop != nullptr ? *stop : never);
    EXPECT_TRUE(s.IsOk()) << s.ToString();
    return worker_->Counters();
  }
  store::JobRecord Job(int64_t id) { return *db_->GetJob(id); }
  std::vector<store::AttemptRecord> Attempts(int64_t id) { return *db_->ListAttempts(id); }

  std::string dir_, url_, weights_;
  std::unique_ptr<store::MetadataStore> db_;
  SharedFakeClock clock_{Env::Default()};
  FakeProcessRunner runner_{clock_};
  WorkerOptions options_;
  std::unique_ptr<Worker> worker_;
};

}  // namespace kestrel::jobs
