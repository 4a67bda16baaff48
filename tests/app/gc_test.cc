// Disk use cases (app/gc.h): gc keeps every referenced blob, the val/compare
// record blobs and the blobs younger than the grace period, and deletes the
// rest; a deduplicated Put racing with the removal wins; du attributes bytes
// to dataset versions, models and jobs; retention keeps best/last and the
// newest keep_ckpts epoch checkpoints. SQLite, no LibTorch: seconds.
#include "app/gc.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include <filesystem>
#include <fstream>

#include "app/models.h"
#include "core/hash.h"
#include "core/safetensors.h"
#include "store/local_artifact_store.h"

namespace kestrel::app {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int64_t kDay = 86400;

class GcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::temp_directory_path() / ("kestrel_gc_" + std::to_string(::getpid()) + "_" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "home");
    auto m = store::MetadataStore::Open("sqlite:" + (dir_ / "home" / "kestrel.db").string());
    ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
    meta_ = std::move(*m);
    blobs_ = std::make_unique<store::LocalArtifactStore>((dir_ / "home").string());
  }
  void TearDown() override {
    meta_.reset();
    fs::remove_all(dir_);
  }
  // A blob whose mtime is `age_s` in the past.
  std::string Old(const std::string& bytes, int64_t age_s = 2 * kDay) {
    auto sha = blobs_->Put(bytes);
    EXPECT_TRUE(sha.IsOk());
    Age(*sha, age_s);
    return *sha;
  }
  void Age(const std::string& sha, int64_t age_s) {
    struct utimbuf t;
    t.actime = t.modtime = ::time(nullptr) - age_s;
    ASSERT_EQ(::utime(blobs_->PathFor(sha).c_str(), &t), 0);
  }
  int64_t Mtime(const std::string& sha) {
    struct stat st {};
    return ::stat(blobs_->PathFor(sha).c_str(), &st) == 0 ? st.st_mtime : -1;
  }
  // A dataset version whose manifest names two image blobs.
  store::DatasetVersionRecord Version(const std::string& img1, const std::string& img2) {
    json manifest = {
        {"entries",
         {{{"path", "a.jpg"}, {"image_sha", img1}, {"label_hash", Sha256Hex("a label file, no blob")}},
          {{"path", "b.jpg"}, {"image_sha", img2}}}}};
    store::DatasetVersionRecord rec;
    rec.dataset = "birds";
    rec.manifest_sha = Old(manifest.dump());
    rec.version_id = Sha256Hex(manifest.dump() + "id");
    rec.report_sha = Old("{\"report\":1}");
    rec.summary_json = "{}";
    bool created = false;
    auto v = meta_->AddDatasetVersion(rec, &created);
    EXPECT_TRUE(v.IsOk()) << v.GetStatus().ToString();
    return *v;
  }
  std::string WeightsFile(int seed) {
    SafeTensorFile f;
    float v = static_cast<float>(seed);
    f.tensors["w"] = SafeTensor{"F32", {1}, std::string(reinterpret_cast<const char*>(&v), sizeof v)};
    const std::string path = (dir_ / ("w" + std::to_string(seed) + ".safetensors")).string();
    std::ofstream(path, std::ios::binary) << SerializeSafeTensors(f);
    return path;
  }
  int64_t Now() { return Env::Default().UnixSeconds(); }

  fs::path dir_;
  std::unique_ptr<store::MetadataStore> meta_;
  std::unique_ptr<store::ArtifactStore> blobs_;
};

TEST_F(GcTest, DeletesOnlyOldUnreferencedBlobsAndReportsBytes) {
  const std::string img1 = Old("image-1"), img2 = Old("image-2");
  store::DatasetVersionRecord v = Version(img1, img2);
  // A registered model with a plot: weights and plot blob referenced.
  ModelRegistry reg(*meta_, *blobs_, Env::Default());
  fs::create_directories(dir_ / "run");
  std::ofstream(dir_ / "run" / "results.png") << "png-bytes";
  RegisterRequest req;
  req.weights_path = WeightsFile(1);
  req.name = "m";
  req.dataset = "birds";
  req.dataset_version = v.version_id;
  req.run_dir = (dir_ / "run").string();
  auto m = reg.Register(req, 1, nullptr);
  ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
  Age(m->weights_sha, 2 * kDay);
  // A val record (root) naming another blob, garbage, and fresh garbage.
  const std::string named = Old("html page");
  const std::string record = Old(json({{"kind", "kestrel.compare"}, {"html_sha", named}}).dump());
  const std::string garbage1 = Old(std::string(1000, 'g')), garbage2 = Old(std::string(234, 'h'));
  const std::string fresh = *blobs_->Put("just written by an import in flight");

  GcOptions o;
  o.dry_run = true;
  o.grace_s = 3600;
  auto dry = CollectGarbage(*meta_, *blobs_, o, Now());
  ASSERT_TRUE(dry.IsOk()) << dry.GetStatus().ToString();
  EXPECT_EQ(dry->deleted, 2);
  EXPECT_EQ(dry->freed_bytes, 1234u);
  EXPECT_EQ(dry->records, 2) << "the compare record and the page it names";
  EXPECT_EQ(dry->recent, 1);
  EXPECT_TRUE(blobs_->Has(garbage1)) << "a dry run deletes nothing";

  o.dry_run = false;
  auto r = CollectGarbage(*meta_, *blobs_, o, Now());
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_EQ(r->deleted, 2);
  EXPECT_EQ(r->freed_bytes, 1234u);
  EXPECT_EQ(r->deleted_shas,
            (std::vector<std::string>{std::min(garbage1, garbage2), std::max(garbage1, garbage2)}));
  EXPECT_FALSE(blobs_->Has(garbage1));
  EXPECT_FALSE(blobs_->Has(garbage2));
  for (const auto& sha : {img1, img2, v.manifest_sha, v.report_sha, m->weights_sha, record, named, fresh}) {
    EXPECT_TRUE(blobs_->Get(sha).IsOk()) << sha;
  }
  const json eval = json::parse(m->eval_json);
  ASSERT_EQ(eval["plots"].size(), 1u) << m->eval_json;
  EXPECT_TRUE(blobs_->Get(eval["plots"][0]["sha256"]).IsOk()) << "the model's plot blob";
  const json view = GcReportJson(*r);
  EXPECT_EQ(view["freed_bytes"], 1234);
  EXPECT_EQ(view["deleted"], 2);

  // Deleting the model makes its weights garbage (they are old); the dataset's stay.
  ASSERT_TRUE(meta_->DeleteModel(m->id, true).IsOk());
  auto again = CollectGarbage(*meta_, *blobs_, o, Now());
  ASSERT_TRUE(again.IsOk());
  EXPECT_FALSE(blobs_->Has(m->weights_sha));
  EXPECT_TRUE(blobs_->Has(img1));
}

TEST_F(GcTest, ADeduplicatedPutRefreshesTheMtimeAndWinsOverTheRemoval) {
  const std::string sha = Old("an image an import is about to reference");
  const int64_t before = Mtime(sha);
  // The import finds the blob already there: Put deduplicates and touches it.
  ASSERT_TRUE(blobs_->Put("an image an import is about to reference").IsOk());
  EXPECT_GT(Mtime(sha), before + kDay);
  const int64_t cutoff = Now() - 3600;
  auto removed = blobs_->RemoveIfUntouchedSince(sha, cutoff);
  ASSERT_TRUE(removed.IsOk());
  EXPECT_FALSE(*removed);
  EXPECT_TRUE(blobs_->Get(sha).IsOk());
  // Old again: removed; the aside copy does not linger and List ignores it.
  Age(sha, 2 * kDay);
  removed = blobs_->RemoveIfUntouchedSince(sha, cutoff);
  ASSERT_TRUE(removed.IsOk());
  EXPECT_TRUE(*removed);
  EXPECT_FALSE(fs::exists(blobs_->PathFor(sha) + ".gc"));
  auto listed = blobs_->List();
  ASSERT_TRUE(listed.IsOk());
  EXPECT_TRUE(listed->empty());
  // A Put after the removal writes the blob anew.
  ASSERT_TRUE(blobs_->Put("an image an import is about to reference").IsOk());
  EXPECT_TRUE(blobs_->Get(sha).IsOk());
}

TEST_F(GcTest, AnUnreadableManifestStopsGcBeforeItDeletesAnything) {
  const std::string img1 = Old("i1"), img2 = Old("i2");
  store::DatasetVersionRecord v = Version(img1, img2);
  const std::string garbage = Old("garbage");
  fs::remove(blobs_->PathFor(v.manifest_sha));
  auto r = CollectGarbage(*meta_, *blobs_, GcOptions{false, 0}, Now());
  ASSERT_FALSE(r.IsOk());
  EXPECT_NE(r.GetStatus().Message().find("birds@v1"), std::string::npos) << r.GetStatus().ToString();
  EXPECT_TRUE(blobs_->Has(garbage));
  EXPECT_TRUE(blobs_->Has(img1));
  EXPECT_FALSE(ValidateGcOptions(GcOptions{false, -1}).IsOk());
}

TEST_F(GcTest, DuAttributesBytesToVersionsModelsJobsAndUnreferenced) {
  const std::string img1 = Old(std::string(100, 'a')), img2 = Old(std::string(50, 'b'));
  store::DatasetVersionRecord v = Version(img1, img2);
  ModelRegistry reg(*meta_, *blobs_, Env::Default());
  RegisterRequest req;
  req.weights_path = WeightsFile(2);
  req.name = "m";
  auto m = reg.Register(req, 1, nullptr);
  ASSERT_TRUE(m.IsOk());
  Old(std::string(77, 'z'));
  fs::create_directories(dir_ / "home" / "jobs" / "7" / "attempt-1" / "weights");
  std::ofstream(dir_ / "home" / "jobs" / "7" / "attempt-1" / "weights" / "last.ckpt")
      << std::string(300, 'c');
  std::ofstream(dir_ / "home" / "jobs" / "7" / "attempt-1.log") << std::string(20, 'l');
  auto du = DiskUsage(*meta_, *blobs_, Env::Default());
  ASSERT_TRUE(du.IsOk()) << du.GetStatus().ToString();
  ASSERT_EQ(du->versions.size(), 1u);
  EXPECT_EQ(du->versions[0].blobs, 4);  // manifest, report, two images
  EXPECT_EQ(du->versions[0].missing, 0);
  EXPECT_EQ(du->versions[0].bytes,
            150 + blobs_->Get(v.manifest_sha)->size() + blobs_->Get(v.report_sha)->size());
  ASSERT_EQ(du->models.size(), 1u);
  EXPECT_EQ(du->models[0].ref, "m@v1");
  EXPECT_EQ(du->models[0].bytes, static_cast<uint64_t>(m->weights_bytes));
  EXPECT_EQ(du->unreferenced, 1);
  EXPECT_EQ(du->unreferenced_bytes, 77u);
  ASSERT_EQ(du->jobs.size(), 1u);
  EXPECT_EQ(du->jobs[0].job_id, 7);
  EXPECT_EQ(du->jobs[0].bytes, 320u);
  EXPECT_EQ(du->jobs[0].checkpoints, 1);
  EXPECT_EQ(du->jobs[0].checkpoint_bytes, 300u);
  const json j = DuReportJson(*du);
  EXPECT_EQ(j["unreferenced"]["bytes"], 77);
  EXPECT_EQ(j["datasets"][0]["version"], "v1");
  EXPECT_TRUE(j["jobs"][0]["state"].is_null()) << "no job record for folder 7";
}

TEST_F(GcTest, RetentionKeepsBestLastAndTheNewestEpochCheckpoints) {
  const fs::path w = dir_ / "home" / "jobs" / "3" / "attempt-2" / "weights";
  fs::create_directories(w);
  for (const char* f : {"best.ckpt", "best.safetensors", "last.ckpt", "last.safetensors", "epoch2.ckpt",
                        "epoch4.ckpt", "epoch6.ckpt", "epoch8.ckpt", "epoch10.ckpt", "notes.txt"}) {
    std::ofstream(w / f) << "0123456789";
  }
  const fs::path old = dir_ / "home" / "jobs" / "3" / "attempt-1" / "weights";
  fs::create_directories(old);
  for (const char* f : {"last.ckpt", "epoch2.ckpt", "last.safetensors"}) std::ofstream(old / f) << "01234";
  store::JobRecord job;
  job.id = 3;
  job.attempt = 2;
  job.state = store::JobState::kSucceeded;
  job.result_json = json({{"run_dir", (w.parent_path()).string()}}).dump();
  auto r = ApplyJobRetention(Env::Default(), (dir_ / "home").string(), job, 2);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  // Numeric order: epoch10 is the newest, not the smallest string.
  for (const char* kept : {"best.ckpt", "best.safetensors", "last.ckpt", "last.safetensors", "epoch8.ckpt",
                           "epoch10.ckpt", "notes.txt"}) {
    EXPECT_TRUE(fs::exists(w / kept)) << kept;
  }
  for (const char* gone : {"epoch2.ckpt", "epoch4.ckpt", "epoch6.ckpt"})
    EXPECT_FALSE(fs::exists(w / gone)) << gone;
  EXPECT_FALSE(fs::exists(old / "last.ckpt")) << "an earlier attempt's checkpoints resume nothing any more";
  EXPECT_FALSE(fs::exists(old / "epoch2.ckpt"));
  EXPECT_TRUE(fs::exists(old / "last.safetensors"));
  EXPECT_EQ(r->deleted.size(), 5u);
  EXPECT_EQ(r->freed_bytes, 3u * 10 + 2u * 5);
  // keep 0: every epoch checkpoint goes, best/last stay; a running job is refused.
  ASSERT_TRUE(ApplyRetention(Env::Default(), w.string(), 0).IsOk());
  EXPECT_FALSE(fs::exists(w / "epoch10.ckpt"));
  EXPECT_TRUE(fs::exists(w / "last.ckpt"));
  job.state = store::JobState::kRunning;
  EXPECT_FALSE(ApplyJobRetention(Env::Default(), (dir_ / "home").string(), job, 2).IsOk());
}

// The local store's blobs, plus job files shared in memory as an S3 store
// shares them (keys jobs/<job>/attempt-<n>/<name>): the collector's job-file
// rules without a server (tests/s3/s3_swift_test.cc runs them on Swift).
class SharedJobFiles final : public store::ArtifactStore {
 public:
  explicit SharedJobFiles(store::ArtifactStore& blobs) : b_(blobs) {}
  Result<std::string> PutWithHash(std::string_view bytes, const std::string& sha, Durability d) override {
    return b_.PutWithHash(bytes, sha, d);
  }
  Status SyncDeferred() override { return b_.SyncDeferred(); }
  Result<std::string> Get(const std::string& sha) override { return b_.Get(sha); }
  bool Has(const std::string& sha) override { return b_.Has(sha); }
  Result<uint64_t> Size(const std::string& sha) override { return b_.Size(sha); }
  Result<std::string> LocalPath(const std::string& sha) override { return b_.LocalPath(sha); }
  Result<std::vector<BlobInfo>> List() override { return b_.List(); }
  Result<bool> RemoveIfUntouchedSince(const std::string& sha, int64_t t) override {
    return b_.RemoveIfUntouchedSince(sha, t);
  }
  Result<int> SweepIncompleteWrites(int64_t t) override { return b_.SweepIncompleteWrites(t); }
  std::string PathFor(const std::string& sha) const override { return b_.PathFor(sha); }
  std::string Describe() const override { return "shared " + b_.Describe(); }
  const std::string& Root() const override { return b_.Root(); }
  bool SharesJobFiles() const override { return true; }
  Result<std::vector<JobFileInfo>> ListJobFiles() override {
    std::vector<JobFileInfo> out;
    for (const auto& [key, f] : files_) out.push_back(f);
    return out;
  }
  Result<bool> RemoveJobFile(const std::string& key) override { return files_.erase(key) == 1; }
  std::string Add(int64_t job, int64_t attempt, const std::string& name, int64_t mtime_s) {
    JobFileInfo f;
    f.key = "jobs/" + std::to_string(job) + "/attempt-" + std::to_string(attempt) + "/" + name;
    f.job_id = job;
    f.attempt = attempt;
    f.bytes = 10;
    f.mtime_s = mtime_s;
    files_[f.key] = f;
    return f.key;
  }
  std::map<std::string, JobFileInfo> files_;

 private:
  store::ArtifactStore& b_;
};

TEST_F(GcTest, JobFilesOfGoneAndSucceededJobsAndUnrecordedUploadsAreGarbage) {
  SharedJobFiles shared(*blobs_);
  const int64_t old = Now() - 2 * kDay, now_ms = Now() * 1000;
  int n = 0;
  auto submit = [&] {
    store::JobSpec spec;
    spec.dataset_version = Sha256Hex("jobfiles");
    spec.config_json = "{\"n\":" + std::to_string(++n) + "}";
    spec.retry.max_infra_retries = 5;
    bool created = false;
    auto j = meta_->SubmitJob(spec, now_ms, &created);
    EXPECT_TRUE(j.IsOk()) << j.GetStatus().ToString();
    return j->id;
  };
  auto claim = [&](const std::string& worker, int64_t at_ms, int64_t lease_ms = 60000) {
    store::ClaimRequest req;
    req.worker = worker;
    req.host = worker;
    req.devices = {{"cpu", 0, 0}};
    req.now_ms = at_ms;
    req.lease_ms = lease_ms;
    auto c = meta_->ClaimJob(req);
    EXPECT_TRUE(c.IsOk()) << c.GetStatus().ToString();
    return c.IsOk() ? c->job.attempt : 0;
  };
  auto record = [&](int64_t job, int64_t attempt, const std::string& key, int64_t at_ms) {
    return meta_->RecordCheckpoint(job, attempt,
                                   R"({"epoch":1,"files":{"last.ckpt":{"key":")" + key + R"("}}})", at_ms);
  };
  // Job 1: taken over. Attempt 1 (worker a) recorded k1 and uploaded k1b
  // unrecorded; its lease expired, attempt 2 (worker b) runs and has an
  // unrecorded upload k2: k1 (resume point) and k2 (running) stay, k1b goes.
  const int64_t j1 = submit();
  claim("a", now_ms, 1000);
  const std::string k1 = shared.Add(j1, 1, "k1.ckpt", old), k1b = shared.Add(j1, 1, "k1b.ckpt", old);
  ASSERT_TRUE(record(j1, 1, k1, now_ms).IsOk());
  EXPECT_EQ(claim("b", now_ms + 5000), 2);
  const std::string k2 = shared.Add(j1, 2, "k2.ckpt", old);
  EXPECT_EQ(record(j1, 1, k1b, now_ms + 6000).Code(), StatusCode::kAborted) << "fenced";
  // Job 2: cancelled after recording: a retry resumes from it (kept).
  const int64_t j2 = submit();
  claim("c", now_ms + 7000);
  const std::string c1 = shared.Add(j2, 1, "c.ckpt", old);
  ASSERT_TRUE(record(j2, 1, c1, now_ms + 7000).IsOk());
  ASSERT_TRUE(meta_->CancelJob(j2, now_ms + 8000).IsOk());
  // Job 3: succeeded: garbage. Job 99: no record: garbage; one young: kept.
  const int64_t j3 = submit();
  claim("d", now_ms + 9000);
  const std::string s1 = shared.Add(j3, 1, "s.ckpt", old);
  store::AttemptOutcome ok;
  ok.success = true;
  ASSERT_TRUE(meta_->CompleteAttempt(j3, 1, "d", ok, now_ms + 9500).IsOk());
  const std::string g1 = shared.Add(99, 1, "g.ckpt", old);
  const std::string young = shared.Add(99, 2, "young.ckpt", Now());

  auto classified = ClassifyJobFiles(*meta_, shared);
  ASSERT_TRUE(classified.IsOk()) << classified.GetStatus().ToString();
  std::map<std::string, std::string> verdict;
  for (const auto& c : *classified) verdict[c.file.key] = JobFileVerdictName(c.verdict);
  EXPECT_EQ(verdict[k1], "keep");
  EXPECT_EQ(verdict[k1b], "unrecorded");
  EXPECT_EQ(verdict[k2], "keep");
  EXPECT_EQ(verdict[c1], "keep");
  EXPECT_EQ(verdict[s1], "job_succeeded");
  EXPECT_EQ(verdict[g1], "job_gone");
  EXPECT_EQ(verdict[young], "job_gone");

  auto du = DiskUsage(*meta_, shared, Env::Default());
  ASSERT_TRUE(du.IsOk()) << du.GetStatus().ToString();
  EXPECT_EQ(du->job_files, 7);
  EXPECT_EQ(du->job_files_garbage, 4);
  EXPECT_EQ(DuReportJson(*du)["job_files"]["garbage_bytes"], 40);

  auto dry = CollectGarbage(*meta_, shared, GcOptions{true, 3600}, Now());
  ASSERT_TRUE(dry.IsOk()) << dry.GetStatus().ToString();
  EXPECT_EQ(dry->job_files_deleted, 3);
  EXPECT_EQ(dry->job_files_recent, 1);
  EXPECT_EQ(shared.files_.size(), 7u) << "a dry run deletes nothing";
  auto gc = CollectGarbage(*meta_, shared, GcOptions{false, 3600}, Now());
  ASSERT_TRUE(gc.IsOk()) << gc.GetStatus().ToString();
  EXPECT_EQ(gc->job_files_deleted, 3);
  EXPECT_EQ(gc->job_files_freed_bytes, 30u);
  EXPECT_EQ(gc->job_files_kept, 3);
  EXPECT_EQ(gc->deleted_job_files, (std::vector<std::string>{k1b, s1, g1}));
  const json j = GcReportJson(*gc);
  EXPECT_EQ(j["job_files"]["deleted_by_reason"]["unrecorded"], 1);
  EXPECT_EQ(j["job_files"]["deleted_by_reason"]["job_succeeded"], 1);
  EXPECT_EQ(j["job_files"]["deleted_by_reason"]["job_gone"], 1);
  std::vector<std::string> left;
  for (const auto& [k, f] : shared.files_) left.push_back(k);
  EXPECT_EQ(left, (std::vector<std::string>{k1, k2, c1, young}));
  // The local store shares no job files: nothing listed, nothing to delete.
  auto local = ClassifyJobFiles(*meta_, *blobs_);
  ASSERT_TRUE(local.IsOk());
  EXPECT_TRUE(local->empty());
}

}  // namespace
}  // namespace kestrel::app
