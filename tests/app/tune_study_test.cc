// The `tune` coordinator (app/tune_study.h) over a fake queue: the real
// SQLite store with a scripted in-process worker that claims trial jobs,
// reports one epoch metric event per step (fitness rising with the trial's
// mosaic) and completes them — no processes. Checks the trial states of
// docs/tune.md: pruned never a failure nor retried (only continued by a
// promotion), a diverged trial excluded and the study going on, an infra
// failure spending no trial, and a coordinator rebuilt at every step (a
// kill and restart) giving the same study as one that ran throughout.
#include "app/tune_study.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "app/jobs.h"
#include "app/metric_events.h"
#include "core/env.h"
#include "core/json.h"
#include "store/metadata_store.h"

namespace kestrel::app {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kSpace = "lr0: {low: 0.001, high: 0.1, log: true}\nmosaic: {low: 0, high: 1}\n";

class TuneStudyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::temp_directory_path() / ("kestrel_tune_study_" + std::to_string(::getpid()) + "_" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    meta_ = OpenStore("a");
  }
  void TearDown() override {
    meta_.reset();
    fs::remove_all(dir_);
  }
  std::unique_ptr<store::MetadataStore> OpenStore(const std::string& which) {
    auto m = store::MetadataStore::Open("sqlite:" + (dir_ / (which + ".db")).string());
    EXPECT_TRUE(m.IsOk()) << m.GetStatus().ToString();
    store::DatasetVersionRecord v;
    v.dataset = "birds";
    v.version_id = std::string(64, 'a');
    v.manifest_sha = std::string(64, 'b');
    v.report_sha = std::string(64, 'c');
    v.created_at = 1;
    v.num_classes = 1;
    v.summary_json = "{}";
    EXPECT_TRUE((*m)->AddDatasetVersion(v, nullptr).IsOk());
    return std::move(m).Value();
  }
  Result<StudyCreateResult> Create(store::MetadataStore& meta, std::vector<std::string> extra) {
    StudyRequest req;
    req.tokens = {"data=birds", "model=n", "name=s1", "imgsz=64"};
    req.tokens.insert(req.tokens.end(), extra.begin(), extra.end());
    req.space_yaml = space_;
    return CreateStudy(meta, req, 1000);
  }

  // The scripted worker: what each running trial job has reported.
  struct Running {
    int64_t attempt = 0;
  };
  // How a trial's job ends, by trial number (default: succeeds).
  enum class Fate { kSucceed, kDiverge, kInfraLost };
  std::map<int64_t, Fate> fates_;
  std::map<int64_t, int> epochs_done_;  // by job: epochs reported over all attempts

  // One round: claim every claimable trial job, report one epoch of each
  // running one, complete those at their last epoch.
  void Advance(store::MetadataStore& meta, int epochs) {
    for (;;) {
      store::ClaimRequest req;
      req.worker = "w";
      req.host = "h";
      req.devices = {store::DeviceOffer{}};
      req.now_ms = now_;
      req.lease_ms = int64_t{1} << 40;  // this worker never loses a lease
      auto c = meta.ClaimJob(req);
      if (!c.IsOk()) break;
      // The coordinator job itself is not run here (the test steps it).
      running_[c->job.id] = {c->job.attempt};
    }
    auto trials = meta.ListTrials(1);
    ASSERT_TRUE(trials.IsOk());
    std::map<int64_t, int64_t> number_of;
    for (const auto& t : *trials) number_of[t.job_id] = t.number;
    for (auto it = running_.begin(); it != running_.end();) {
      const int64_t job = it->first;
      auto rec = meta.GetJob(job);
      ASSERT_TRUE(rec.IsOk());
      if (rec->state != store::JobState::kRunning || number_of.count(job) == 0) {
        it = running_.erase(it);  // cancelled (pruned), or the coordinator's job
        continue;
      }
      const int64_t number = number_of[job];
      const Fate fate = fates_.count(number) != 0 ? fates_[number] : Fate::kSucceed;
      store::AttemptOutcome o;
      if (fate == Fate::kInfraLost) {
        o.failure_class = store::FailureClass::kPermanent;
        o.infrastructure = true;
        o.reason = FailureReason::kLeaseExpired;
        ASSERT_TRUE(meta.CompleteAttempt(job, it->second.attempt, "w", o, now_).IsOk());
        it = running_.erase(it);
        continue;
      }
      const int e = ++epochs_done_[job];
      const double mosaic = Mosaic(meta, number);
      const double m = fate == Fate::kDiverge && e >= 2 ? NAN : mosaic * e / epochs;
      EpochMetrics em;
      em.epoch = e;
      em.map50 = m;
      em.map5095 = m;
      store::EventRecord ev;
      ev.job_id = job;
      ev.attempt = it->second.attempt;
      ev.kind = kMetricEventKind;
      ev.payload_json = DumpJson(EpochMetricsPayload(em));
      ev.created_ms = now_;
      ASSERT_TRUE(meta.AppendEvent(ev).IsOk());
      if (fate == Fate::kDiverge && e >= 2) {
        o.failure_class = store::FailureClass::kPermanent;
        o.reason = FailureReason::kDiverged;
        ASSERT_TRUE(meta.CompleteAttempt(job, it->second.attempt, "w", o, now_).IsOk());
        it = running_.erase(it);
        continue;
      }
      if (e >= epochs) {
        o.success = true;
        o.result_json = json{{"kind", "train"}, {"map50", m}, {"map50_95", m}}.dump();
        ASSERT_TRUE(meta.CompleteAttempt(job, it->second.attempt, "w", o, now_).IsOk());
        it = running_.erase(it);
        continue;
      }
      ++it;
    }
    now_ += 1000;
  }
  double Mosaic(store::MetadataStore& meta, int64_t number) {
    auto trials = meta.ListTrials(1);
    auto p = json::parse((*trials)[static_cast<size_t>(number)].params_json);
    return p.back().get<double>();  // the last param (a choice index in [0, 1] too)
  }
  // Steps the coordinator (a fresh one per step when `restart`) and the
  // worker until the study is over; returns the steps taken.
  int RunStudy(store::MetadataStore& meta, int epochs, bool restart) {
    StudyCoordinator kept(meta, Env::Default(), "s1");
    for (int step = 0; step < 400; ++step) {
      StudyCoordinator fresh(meta, Env::Default(), "s1");
      auto done = (restart ? fresh : kept).Step();
      EXPECT_TRUE(done.IsOk()) << done.GetStatus().ToString();
      if (!done.IsOk() || *done) return step;
      Advance(meta, epochs);
    }
    ADD_FAILURE() << "the study did not end";
    return -1;
  }
  json Show(store::MetadataStore& meta) {
    auto s = StudyShowJson(meta, "s1");
    EXPECT_TRUE(s.IsOk()) << s.GetStatus().ToString();
    return s.IsOk() ? *s : json();
  }

  std::string space_ = kSpace;
  fs::path dir_;
  std::unique_ptr<store::MetadataStore> meta_;
  std::map<int64_t, Running> running_;
  // The worker's clock: ahead of the coordinator's (the real one), so what
  // the coordinator queues is due for this worker.
  int64_t now_ = Env::Default().UnixMillis();
};

TEST_F(TuneStudyTest, AshaStudyEndsWithPrunedTrialsNeverFailedNorRetriedAndEachTrialOneJob) {
  auto c = Create(*meta_, {"trials=8", "parallel=2", "epochs=9", "pruner=asha", "sampler=random", "seed=3"});
  ASSERT_TRUE(c.IsOk()) << c.GetStatus().ToString();
  EXPECT_TRUE(c->created);
  RunStudy(*meta_, 9, false);
  json show = Show(*meta_);
  EXPECT_EQ(show["study"]["state"], "finished");
  EXPECT_EQ(show["study"]["spent"], 8);
  EXPECT_EQ(show["study"]["counts"]["failed"], 0) << show.dump(1);
  EXPECT_EQ(show["study"]["counts"]["infra_failed"], 0);
  EXPECT_GT(show["study"]["counts"]["pruned"].get<int>(), 0) << "ASHA stopped some trials at a rung";
  std::set<int64_t> jobs;
  int64_t epochs = 0;
  for (const auto& t : show["trials"]) {
    EXPECT_TRUE(jobs.insert(t["job_id"].get<int64_t>()).second) << "one job per trial";
    epochs += t["epochs_run"].get<int64_t>();
    if (t["state"] == "pruned") {
      EXPECT_EQ(t["intermediate"].size(), t["pruned_at"].get<size_t>()) << "curve ends at its rung";
      EXPECT_TRUE(t["value"].is_null());
      auto job = meta_->GetJob(t["job_id"].get<int64_t>());
      EXPECT_EQ(job->state, store::JobState::kCancelled) << "stopped through the normal stop path";
      EXPECT_EQ(job->retries_used, 0) << "a pruned trial is not retried";
    } else {
      EXPECT_EQ(t["state"], "succeeded");
      EXPECT_EQ(t["intermediate"].size(), 9u);
    }
  }
  EXPECT_LT(epochs, 8 * 9) << "pruning saved epochs";
  // The train jobs are the trials' and nothing else (plus the coordinator's).
  EXPECT_EQ(meta_->CountJobs({}).Value(), 8 + 1);
  // Running the same command again attaches to the finished study.
  auto again =
      Create(*meta_, {"trials=8", "parallel=2", "epochs=9", "pruner=asha", "sampler=random", "seed=3"});
  ASSERT_TRUE(again.IsOk());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->study.id, c->study.id);
}

TEST_F(TuneStudyTest, DivergedTrialIsExcludedAndInfraFailureSpendsNoTrial) {
  auto c = Create(*meta_, {"trials=5", "parallel=1", "epochs=3", "pruner=none", "sampler=random"});
  ASSERT_TRUE(c.IsOk()) << c.GetStatus().ToString();
  fates_[1] = Fate::kDiverge;
  fates_[2] = Fate::kInfraLost;
  RunStudy(*meta_, 3, false);
  json show = Show(*meta_);
  EXPECT_EQ(show["study"]["state"], "finished");
  ASSERT_EQ(show["trials"].size(), 6u) << "5 spent + 1 infra-failed that spent none";
  EXPECT_EQ(show["trials"][1]["state"], "failed");
  EXPECT_TRUE(show["trials"][1]["value"].is_null()) << "a failed trial never has a value (not 0)";
  EXPECT_EQ(show["trials"][2]["state"], "infra_failed");
  EXPECT_EQ(show["study"]["spent"], 5);
  EXPECT_EQ(show["study"]["counts"]["succeeded"], 4);
}

// `tune show --plots`: the plot data is the show document's trials as
// trained (lr0 out of its log coordinate), a value only for succeeded
// trials (the diverged one has none, not 0), the show's importances, and
// WriteStudyPlots draws the four PNGs from it.
TEST_F(TuneStudyTest, PlotDataHoldsTrainedValuesAndOnlySucceededObjectives) {
  auto c = Create(*meta_, {"trials=6", "parallel=1", "epochs=2", "pruner=none", "sampler=random", "seed=4"});
  ASSERT_TRUE(c.IsOk()) << c.GetStatus().ToString();
  fates_[1] = Fate::kDiverge;
  RunStudy(*meta_, 2, false);
  json show = Show(*meta_);
  ASSERT_EQ(show["study"]["state"], "finished");
  auto d = StudyPlotDataFor(*meta_, "s1");
  ASSERT_TRUE(d.IsOk()) << d.GetStatus().ToString();
  EXPECT_EQ(d->study, "s1");
  EXPECT_TRUE(d->maximize);
  ASSERT_EQ(d->params.size(), 2u);
  EXPECT_EQ(d->params[0].name, "lr0");
  EXPECT_TRUE(d->params[0].log);
  EXPECT_EQ(d->params[1].name, "mosaic");
  EXPECT_FALSE(d->params[1].log);
  EXPECT_TRUE(d->params[1].choices.empty());
  ASSERT_EQ(d->trials.size(), show["trials"].size());
  int valued = 0;
  for (size_t i = 0; i < d->trials.size(); ++i) {
    const auto& t = d->trials[i];
    const json& st = show["trials"][i];
    EXPECT_EQ(t.number, st["number"].get<int64_t>());
    ASSERT_EQ(t.params.size(), 2u);
    EXPECT_DOUBLE_EQ(t.params[0], st["params"]["lr0"].get<double>()) << "lr0 as trained, not its log";
    EXPECT_GE(t.params[0], 0.001);
    EXPECT_LE(t.params[0], 0.1);
    EXPECT_DOUBLE_EQ(t.params[1], st["params"]["mosaic"].get<double>());
    if (st["state"] == "succeeded") {
      ASSERT_TRUE(t.value.has_value());
      EXPECT_DOUBLE_EQ(*t.value, st["value"].get<double>());
      ++valued;
    } else {
      EXPECT_FALSE(t.value.has_value()) << "trial " << t.number << " is " << st["state"];
    }
  }
  EXPECT_EQ(show["trials"][1]["state"], "failed");
  EXPECT_EQ(valued, 5);
  ASSERT_EQ(d->importances.size(), 2u) << "5 succeeded trials have importances";
  for (const auto& imp : show["importances"]) {
    const size_t k = imp["key"] == "lr0" ? 0 : 1;
    EXPECT_DOUBLE_EQ(d->importances[k], imp["importance"].get<double>()) << "the show's importances";
  }
  const fs::path plots = dir_ / "plots";
  Status w = eval::WriteStudyPlots(Env::Default(), plots.string(), *d);
  ASSERT_TRUE(w.IsOk()) << w.ToString();
  for (const char* f : {"history.png", "parallel_coordinates.png", "slice.png", "importances.png"}) {
    auto bytes = Env::Default().ReadFile((plots / f).string(), 16 << 20);
    ASSERT_TRUE(bytes.IsOk()) << f;
    EXPECT_EQ(bytes->substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << f;
  }
  EXPECT_EQ(StudyPlotDataFor(*meta_, "nope").GetStatus().Code(), StatusCode::kNotFound);
}

TEST_F(TuneStudyTest, CoordinatorRestartedEveryStepGivesTheSameStudyByteForByte) {
  // parallel=2: the scripted worker completes trials in a fixed order, and
  // the same completion order gives the same suggestions.
  for (const auto& [pruner, parallel] :
       std::vector<std::pair<std::string, std::string>>{{"none", "1"}, {"asha", "1"}, {"asha", "2"}}) {
    SCOPED_TRACE(pruner + " parallel=" + parallel);
    auto a = OpenStore("ra_" + pruner + parallel);
    auto b = OpenStore("rb_" + pruner + parallel);
    std::vector<std::string> keys = {"trials=12", "parallel=" + parallel, "epochs=9",
                                     "seed=7",    "sampler=tpe",          "pruner=" + pruner};
    ASSERT_TRUE(Create(*a, keys).IsOk());
    ASSERT_TRUE(Create(*b, keys).IsOk());
    epochs_done_.clear();
    running_.clear();
    RunStudy(*a, 9, false);
    epochs_done_.clear();
    running_.clear();
    RunStudy(*b, 9, true);
    EXPECT_EQ(DumpJson(Show(*a)), DumpJson(Show(*b)));
    EXPECT_EQ(Show(*a)["study"]["state"], "finished");
  }
}

// A coordinator killed between recording a trial and submitting its job
// (the trial has no job), and one killed between continuing a pruned
// trial's job and recording it (the trial is pruned, its job live again):
// the next coordinator finishes each exactly once.
TEST_F(TuneStudyTest, ACoordinatorKilledBetweenTwoWritesIsFinishedByTheNext) {
  auto c = Create(*meta_, {"trials=3", "parallel=1", "epochs=3", "pruner=none", "sampler=random"});
  ASSERT_TRUE(c.IsOk()) << c.GetStatus().ToString();
  store::TrialRecord t;
  t.study_id = c->study.id;
  t.number = 0;
  t.params_json = "[-4.0,0.5]";
  ASSERT_TRUE(meta_->AddTrial(t, nullptr).IsOk());  // ... and killed before SubmitTrialJob
  StudyCoordinator next(*meta_, Env::Default(), "s1");
  ASSERT_TRUE(next.Step().IsOk());
  auto trials = meta_->ListTrials(c->study.id);
  ASSERT_EQ(trials->size(), 1u) << "no second trial while trial 0 waits (parallel=1)";
  EXPECT_GT((*trials)[0].job_id, 0) << "the recorded trial got its job";
  const int64_t job = (*trials)[0].job_id;
  ASSERT_TRUE(next.Step().IsOk());
  EXPECT_EQ((*meta_->ListTrials(c->study.id))[0].job_id, job) << "and only one";
  EXPECT_EQ(meta_->CountJobs({}).Value(), 2) << "the coordinator's and the trial's";

  // A pruned trial whose job a promotion already requeued.
  ASSERT_TRUE(meta_->CancelJob(job, now_).IsOk());
  store::TrialRecord pruned = (*meta_->ListTrials(c->study.id))[0];
  pruned.state = "pruned";
  pruned.pruned_at = 1;
  pruned.intermediate_json = "[0.1]";
  ASSERT_TRUE(*meta_->UpdateTrial(pruned, "queued"));
  ASSERT_TRUE(meta_->RetryJob(job, now_).IsOk());  // ... and killed before recording it
  ASSERT_TRUE(next.Step().IsOk());
  auto after = (*meta_->ListTrials(c->study.id))[0];
  EXPECT_EQ(after.state, "running");
  EXPECT_EQ(after.promotions, 1);
  EXPECT_EQ(after.pruned_at, 0);
  ASSERT_TRUE(next.Step().IsOk());
  EXPECT_EQ((*meta_->ListTrials(c->study.id))[0].promotions, 1) << "counted once";
}

// Two trials that sample the same config while the first is live (a
// two-choice space and 3 trials in flight force it): each gets its own train
// job, so its state, curve, epochs and pruning are its own; before, the job
// system deduplicated the second onto the first's job and the two trials
// showed one job as "running" and "pruned", a prune cancelled the other
// trial's run, and promoting one of two same-config trials failed the
// coordinator ("an identical job is already live").
TEST_F(TuneStudyTest, TrialsOfTheSameConfigEachDriveTheirOwnJob) {
  space_ = "optimizer: [SGD, AdamW]\n";  // fitness 0 with SGD, rising to 1 with AdamW
  const std::vector<std::string> keys = {"trials=8",    "parallel=3",     "epochs=9",
                                         "pruner=asha", "sampler=random", "seed=5"};
  auto c = Create(*meta_, keys);
  ASSERT_TRUE(c.IsOk()) << c.GetStatus().ToString();
  StudyCoordinator coordinator(*meta_, Env::Default(), "s1");
  ASSERT_TRUE(coordinator.Step().IsOk());
  auto first = meta_->ListTrials(c->study.id);
  ASSERT_EQ(first->size(), 3u);
  std::map<std::string, std::set<int64_t>> jobs_of_config;
  for (const auto& t : *first) jobs_of_config[t.params_json].insert(t.job_id);
  ASSERT_LT(jobs_of_config.size(), 3u) << "two of the 3 live trials sampled the same config";
  for (const auto& entry : jobs_of_config) {
    const std::string& config = entry.first;
    const auto live = std::count_if(first->begin(), first->end(), [&config](const store::TrialRecord& t) {
      return t.params_json == config;
    });
    EXPECT_EQ(static_cast<int64_t>(entry.second.size()), static_cast<int64_t>(live))
        << config << ": one job per trial";
  }

  RunStudy(*meta_, 9, false);
  json show = Show(*meta_);
  EXPECT_EQ(show["study"]["state"], "finished");
  EXPECT_EQ(show["study"]["spent"], 8);
  EXPECT_EQ(show["study"]["counts"]["infra_failed"], 0) << "no trial lost its job to a twin";
  EXPECT_EQ(show["study"]["counts"]["failed"], 0);
  EXPECT_GT(show["study"]["counts"]["pruned"].get<int>(), 0) << show.dump(1);
  std::set<int64_t> jobs;
  std::map<std::string, int> trials_of_config;
  for (const auto& t : show["trials"]) {
    const int64_t job_id = t["job_id"].get<int64_t>();
    EXPECT_TRUE(jobs.insert(job_id).second) << "trial " << t["number"] << " shares job " << job_id;
    ++trials_of_config[t["params"]["optimizer"].get<std::string>()];
    auto job = meta_->GetJob(job_id);
    ASSERT_TRUE(job.IsOk());
    EXPECT_EQ(t["epochs_run"].get<int>(), epochs_done_[job_id]) << "its own job's epochs";
    if (t["state"] == "pruned") {
      EXPECT_EQ(job->state, store::JobState::kCancelled) << "trial " << t["number"];
      EXPECT_EQ(t["intermediate"].size(), t["pruned_at"].get<size_t>());
      EXPECT_TRUE(t["value"].is_null());
    } else {
      ASSERT_EQ(t["state"], "succeeded") << "trial " << t["number"];
      EXPECT_EQ(job->state, store::JobState::kSucceeded);
      EXPECT_EQ(t["intermediate"].size(), 9u);
      EXPECT_DOUBLE_EQ(t["value"].get<double>(), t["params"]["optimizer"] == "AdamW" ? 1.0 : 0.0);
    }
  }
  EXPECT_EQ(meta_->CountJobs({}).Value(), 8 + 1) << "a train job per trial and the coordinator's";
  for (const auto& [config, n] : trials_of_config) EXPECT_GT(n, 1) << config << " was sampled once only";
  EXPECT_EQ(show["best"]["params"]["optimizer"], "AdamW");
  // The trials table shows every trial with its own state.
  const std::string text = StudyShowText(show);
  for (const auto& t : show["trials"]) {
    EXPECT_NE(text.find(t["state"].get<std::string>()), std::string::npos) << text;
  }

  // Reconciled deterministically: a coordinator rebuilt at every step
  // gives the same study.
  auto b = OpenStore("restarted");
  ASSERT_TRUE(Create(*b, keys).IsOk());
  epochs_done_.clear();
  running_.clear();
  RunStudy(*b, 9, true);
  EXPECT_EQ(DumpJson(Show(*b)), DumpJson(show));
}

// A study stored before each trial had its own job: two live trials on one
// job. The earlier one drives it; the later one becomes infra_failed (it
// spends no trial, so the study samples another in its place).
TEST_F(TuneStudyTest, ALegacyTrialSharingAnEarlierTrialsJobSpendsNone) {
  auto c = Create(*meta_, {"trials=2", "parallel=2", "epochs=2", "pruner=none", "sampler=random"});
  ASSERT_TRUE(c.IsOk()) << c.GetStatus().ToString();
  StudyCoordinator coordinator(*meta_, Env::Default(), "s1");
  ASSERT_TRUE(coordinator.Step().IsOk());
  auto trials = *meta_->ListTrials(c->study.id);
  ASSERT_EQ(trials.size(), 2u);
  store::TrialRecord twin = trials[1];
  ASSERT_TRUE(meta_->CancelJob(twin.job_id, now_).IsOk());
  twin.job_id = trials[0].job_id;  // as the old dedup recorded it
  twin.params_json = trials[0].params_json;
  ASSERT_TRUE(*meta_->UpdateTrial(twin, "queued"));
  RunStudy(*meta_, 2, false);
  json show = Show(*meta_);
  EXPECT_EQ(show["study"]["state"], "finished");
  ASSERT_EQ(show["trials"].size(), 3u);
  EXPECT_EQ(show["trials"][0]["state"], "succeeded");
  EXPECT_EQ(show["trials"][1]["state"], "infra_failed");
  EXPECT_EQ(show["trials"][1]["job_id"], show["trials"][0]["job_id"]);
  EXPECT_EQ(show["trials"][2]["state"], "succeeded");
  EXPECT_EQ(show["study"]["spent"], 2);
}

TEST_F(TuneStudyTest, BadKeysAreRefusedNamingTheKey) {
  auto expect = [&](std::vector<std::string> keys, const std::string& field) {
    auto c = Create(*meta_, keys);
    ASSERT_FALSE(c.IsOk()) << field;
    EXPECT_EQ(c.GetStatus().Where().field, field) << c.GetStatus().ToString();
  };
  expect({"trials=0"}, "trials");
  expect({"sampler=grid"}, "sampler");
  expect({"metric=map50"}, "metric");
  expect({"lr0=0.1"}, "lr0");  // in the space already
  expect({"epoch=3"}, "epoch");
  StudyRequest req;
  req.tokens = {"data=birds", "model=n", "name=s1"};
  req.space_yaml = "translate: {low: 0, high: 0.9}\n";
  auto c = CreateStudy(*meta_, req, 1000);
  ASSERT_FALSE(c.IsOk());
  EXPECT_NE(c.GetStatus().ToString().find("translate"), std::string::npos) << c.GetStatus().ToString();
  // Same name, another space: refused naming both hashes.
  ASSERT_TRUE(Create(*meta_, {"trials=2"}).IsOk());
  req.space_yaml = "mosaic: {low: 0, high: 1}\n";
  c = CreateStudy(*meta_, req, 1000);
  ASSERT_FALSE(c.IsOk());
  EXPECT_EQ(c.GetStatus().Code(), StatusCode::kAlreadyExists) << c.GetStatus().ToString();
}

}  // namespace
}  // namespace kestrel::app
