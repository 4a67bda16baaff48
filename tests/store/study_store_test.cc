// Hyperparameter studies in the store (migration 14) on both backends: a
// study is created once per name and attached to by the same space, refused
// under another space naming both hashes; trial state changes are
// compare-and-set; a trial's job is submitted and recorded in one
// transaction, so submitting it again returns the same job.
#include "job_store_fixture.h"

namespace kestrel::store {
namespace {

class StudyStoreTest : public JobStoreTest {
 protected:
  StudyRecord Study(const std::string& name, const std::string& hash) {
    StudyRecord s;
    s.name = name;
    s.space_hash = hash;
    s.space_json = R"({"fixed":{},"params":[]})";
    s.settings_json = R"({"trials":4})";
    s.created_ms = s.updated_ms = Now();
    return s;
  }
};

TEST_P(StudyStoreTest, SameNameAndSpaceAttachesAnotherSpaceIsRefusedNamingBothHashes) {
  bool created = false;
  auto a = store_->CreateStudy(Study("lr", std::string(64, 'a')), &created);
  ASSERT_TRUE(a.IsOk()) << a.GetStatus().ToString();
  EXPECT_TRUE(created);
  EXPECT_EQ(a->id, 1);
  auto again = store_->CreateStudy(Study("lr", std::string(64, 'a')), &created);
  ASSERT_TRUE(again.IsOk()) << again.GetStatus().ToString();
  EXPECT_FALSE(created);
  EXPECT_EQ(again->id, a->id);
  auto other = store_->CreateStudy(Study("lr", std::string(64, 'b')), &created);
  ASSERT_FALSE(other.IsOk());
  EXPECT_EQ(other.GetStatus().Code(), StatusCode::kAlreadyExists);
  EXPECT_NE(other.GetStatus().Message().find(std::string(64, 'a')), std::string::npos);
  EXPECT_NE(other.GetStatus().Message().find(std::string(64, 'b')), std::string::npos);
  EXPECT_EQ(other.GetStatus().Where().field, "name");
  auto second = store_->CreateStudy(Study("mosaic", std::string(64, 'b')), &created);
  ASSERT_TRUE(second.IsOk());
  EXPECT_EQ(second->id, 2);
  auto bad = store_->CreateStudy(Study("a/b", std::string(64, 'b')), &created);
  EXPECT_EQ(bad.GetStatus().Code(), StatusCode::kInvalidArgument);

  auto list = store_->ListStudies();
  ASSERT_TRUE(list.IsOk());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name, "mosaic") << "newest first";
  auto got = store_->GetStudy("lr");
  ASSERT_TRUE(got.IsOk());
  EXPECT_EQ(got->settings_json, R"({"trials":4})");
  EXPECT_EQ(got->state, "running");
  EXPECT_EQ(store_->GetStudy("nope").GetStatus().Code(), StatusCode::kNotFound);

  StudyRecord upd = *got;
  upd.state = "stopping";
  upd.job_id = 9;
  auto wrote = store_->UpdateStudy(upd, "running");
  ASSERT_TRUE(wrote.IsOk());
  EXPECT_TRUE(*wrote);
  upd.state = "stopped";
  wrote = store_->UpdateStudy(upd, "running");
  ASSERT_TRUE(wrote.IsOk());
  EXPECT_FALSE(*wrote) << "the stored state is stopping: no write";
  EXPECT_EQ(store_->GetStudy("lr")->state, "stopping");
  EXPECT_EQ(store_->GetStudy("lr")->job_id, 9);
}

TEST_P(StudyStoreTest, TrialsRoundTripAndMoveOnlyFromTheExpectedState) {
  auto s = store_->CreateStudy(Study("lr", std::string(64, 'a')), nullptr);
  ASSERT_TRUE(s.IsOk());
  TrialRecord t;
  t.study_id = s->id;
  t.number = 0;
  t.params_json = "[-4.605170185988091,0.5]";
  t.created_ms = t.updated_ms = Now();
  bool created = false;
  auto added = store_->AddTrial(t, &created);
  ASSERT_TRUE(added.IsOk()) << added.GetStatus().ToString();
  EXPECT_TRUE(created);
  t.params_json = "[0]";
  auto dup = store_->AddTrial(t, &created);
  ASSERT_TRUE(dup.IsOk());
  EXPECT_FALSE(created);
  EXPECT_EQ(dup->params_json, "[-4.605170185988091,0.5]") << "the stored trial, unchanged";
  TrialRecord orphan = t;
  orphan.study_id = 99;
  EXPECT_EQ(store_->AddTrial(orphan, nullptr).GetStatus().Code(), StatusCode::kNotFound);

  TrialRecord run = *dup;
  run.state = "running";
  run.intermediate_json = "[0.1,0.2]";
  run.epochs_run = 2;
  auto w = store_->UpdateTrial(run, "queued");
  ASSERT_TRUE(w.IsOk());
  EXPECT_TRUE(*w);
  TrialRecord done = run;
  done.state = "succeeded";
  done.value = "0.25";
  w = store_->UpdateTrial(done, "queued");
  ASSERT_TRUE(w.IsOk());
  EXPECT_FALSE(*w) << "a second writer of the same event finds the state moved";
  w = store_->UpdateTrial(done, "running");
  ASSERT_TRUE(w.IsOk());
  EXPECT_TRUE(*w);
  auto list = store_->ListTrials(s->id);
  ASSERT_TRUE(list.IsOk());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].state, "succeeded");
  EXPECT_EQ((*list)[0].value, "0.25");
  EXPECT_EQ((*list)[0].intermediate_json, "[0.1,0.2]");
  EXPECT_EQ((*list)[0].params_json, "[-4.605170185988091,0.5]");
  EXPECT_EQ((*list)[0].epochs_run, 2);
}

TEST_P(StudyStoreTest, ATrialsJobIsSubmittedOnceAndRecordedWithIt) {
  auto s = store_->CreateStudy(Study("lr", std::string(64, 'a')), nullptr);
  ASSERT_TRUE(s.IsOk());
  TrialRecord t;
  t.study_id = s->id;
  t.number = 3;
  ASSERT_TRUE(store_->AddTrial(t, nullptr).IsOk());
  bool created = false;
  auto job = store_->SubmitTrialJob(s->id, 3, Spec(R"({"lr0":"0.01"})"), Now(), &created);
  ASSERT_TRUE(job.IsOk()) << job.GetStatus().ToString();
  EXPECT_TRUE(created);
  EXPECT_EQ((*store_->ListTrials(s->id))[0].job_id, job->id);
  // The job finishes; a restarted coordinator submitting trial 3 again gets
  // that job back, not a second run (the dedup key alone would not hold:
  // the job is no longer live).
  ASSERT_TRUE(store_->CancelJob(job->id, Now()).IsOk());
  auto again = store_->SubmitTrialJob(s->id, 3, Spec(R"({"lr0":"0.01"})"), Now(), &created);
  ASSERT_TRUE(again.IsOk());
  EXPECT_FALSE(created);
  EXPECT_EQ(again->id, job->id);
  EXPECT_EQ(store_->CountJobs({}).Value(), 1);
  EXPECT_EQ(store_->SubmitTrialJob(s->id, 4, Spec("{}"), Now(), nullptr).GetStatus().Code(),
            StatusCode::kNotFound);
}

// Two trials that sample the same config while both are live get a job
// each (the job's dedup key is the trial's), and a plain submit of that
// config is not deduplicated onto a trial's job (the pruner would cancel it).
TEST_P(StudyStoreTest, TrialsOfTheSameConfigGetAJobEach) {
  auto s = store_->CreateStudy(Study("lr", std::string(64, 'a')), nullptr);
  ASSERT_TRUE(s.IsOk());
  for (int64_t n : {0, 1}) {
    TrialRecord t;
    t.study_id = s->id;
    t.number = n;
    ASSERT_TRUE(store_->AddTrial(t, nullptr).IsOk());
  }
  bool created = false;
  auto a = store_->SubmitTrialJob(s->id, 0, Spec(R"({"lr0":"0.01"})"), Now(), &created);
  ASSERT_TRUE(a.IsOk()) << a.GetStatus().ToString();
  auto b = store_->SubmitTrialJob(s->id, 1, Spec(R"({"lr0":"0.01"})"), Now(), &created);
  ASSERT_TRUE(b.IsOk()) << b.GetStatus().ToString();
  EXPECT_TRUE(created);
  EXPECT_NE(a->id, b->id);
  EXPECT_NE(a->dedup_key, b->dedup_key);
  auto plain = store_->SubmitJob(Spec(R"({"lr0":"0.01"})"), Now(), &created);
  ASSERT_TRUE(plain.IsOk());
  EXPECT_TRUE(created) << "not attached to a trial's job";
  EXPECT_NE(plain->id, a->id);
  // A promotion (RetryJob) of trial 0's stopped job is not refused as a twin
  // of trial 1's live one.
  ASSERT_TRUE(store_->CancelJob(a->id, Now()).IsOk());
  EXPECT_TRUE(store_->RetryJob(a->id, Now()).IsOk());
  EXPECT_EQ(store_->CountJobs({}).Value(), 3);
}

INSTANTIATE_TEST_SUITE_P(Backends, StudyStoreTest, ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kestrel::store
