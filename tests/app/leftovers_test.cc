// Leftovers of crashed writers (app/leftovers.h, docs/disk.md "Leftovers of
// crashed writers", issue 26 item 9): temp files and folders named with a
// dead writer's PID (a child that exited) are removed, with their bytes
// counted; those of a live writer (this process) are kept; a live PID that
// started after the leftover was written (reused) does not keep it; nothing
// younger than the minimum age goes; a collector's <sha>.gc is put back or
// removed; `kestrel gc`'s use case reports them.
#include "app/leftovers.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utime.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>

#include "app/gc.h"
#include "store/artifact_store.h"
#include "store/local_artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::app {
namespace {

namespace fs = std::filesystem;

const std::string kSha = std::string(62, 'a') + "bc";

// The PID of a child that has exited and been reaped: no process has it
// (until the kernel hands it out again, which a test cannot prevent but
// which only keeps a leftover).
int64_t DeadPid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

class LeftoversTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::temp_directory_path() / ("kestrel_leftovers_" + std::to_string(::getpid()) + "_" + name);
    fs::remove_all(dir_);
    home_ = dir_ / "home";
    fs::create_directories(home_);
    dead_ = std::to_string(DeadPid());
    own_ = std::to_string(::getpid());
    // The clock the collector is given runs 2 s ahead: a file a test writes
    // after this line may carry a later second than time() gave here (a
    // slow or loaded run), and with no minimum age a file from the future
    // would count as recent and be kept.
    now_ = ::time(nullptr) + 2;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A file of `bytes` bytes at home-relative `rel`.
  fs::path File(const std::string& rel, size_t bytes) {
    const fs::path p = home_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << std::string(bytes, 'x');
    return p;
  }
  static void Age(const fs::path& p, int64_t seconds_ago) {
    struct utimbuf t;
    t.actime = t.modtime = ::time(nullptr) - seconds_ago;
    ASSERT_EQ(::utime(p.c_str(), &t), 0) << p;
  }
  LeftoverReport Reclaim(const LeftoverOptions& o) {
    auto r = ReclaimLeftovers(home_.string(), o, now_);
    EXPECT_TRUE(r.IsOk()) << r.GetStatus().ToString();
    return r.IsOk() ? *r : LeftoverReport{};
  }
  static LeftoverOptions NoMinAge() {
    LeftoverOptions o;
    o.min_age_s = 0;
    return o;
  }

  fs::path dir_, home_;
  std::string dead_, own_;
  int64_t now_ = 0;
};

TEST_F(LeftoversTest, NamesCarryTheWritersPid) {
  EXPECT_EQ(LeftoverPid(kSha + ".tmp-123-0", false), 123);
  EXPECT_EQ(LeftoverPid("last.ckpt.tmp-77-12", false), 77);
  EXPECT_EQ(LeftoverPid("val3.kestrel-tmp-9-1", false), 9);
  EXPECT_EQ(LeftoverPid("upload-42-3.part", true), 42);
  EXPECT_EQ(LeftoverPid("import-42-4", true), 42);
  // The upload names only in the upload folder; other look-alikes never.
  EXPECT_EQ(LeftoverPid("upload-42-3.part", false), 0);
  EXPECT_EQ(LeftoverPid("import-42-4", false), 0);
  EXPECT_EQ(LeftoverPid("notes.tmp-abc-1", false), 0);
  EXPECT_EQ(LeftoverPid("x.tmp-12", false), 0);
  EXPECT_EQ(LeftoverPid(".tmp-1-2", false), 0);
  EXPECT_EQ(LeftoverPid("x.tmp-1-2.txt", false), 0);
  EXPECT_EQ(LeftoverPid(kSha, false), 0);
}

TEST_F(LeftoversTest, ADeadWritersLeftoversGoALiveWritersStay) {
  // Every temp name Kestrel writes, once for a dead writer and once for this process.
  for (const std::string& pid : {dead_, own_}) {
    File("objects/aa/" + kSha + ".tmp-" + pid + "-0", 100);                  // a blob (Env::WriteFileAtomic)
    File("uploads/upload-" + pid + "-0.part", 1000);                         // an upload's body
    File("uploads/import-" + pid + "-1/birds/images/a.jpg", 10);             // that upload unpacked
    File("jobs/3/attempt-1/run/weights/last.ckpt.tmp-" + pid + "-2", 5000);  // a checkpoint
    File("jobs/3/attempt-1/val.kestrel-tmp-" + pid + "-3/result.json", 20);  // a StagedDir
  }
  // Look-alikes that are no leftover.
  File("jobs/3/import-" + dead_ + "-1/keep.txt", 1);
  File("uploads/upload-" + dead_ + "-0.zip", 1);
  File("jobs/3/attempt-1/notes.tmp-x-1", 1);

  LeftoverReport r = Reclaim(NoMinAge());
  EXPECT_EQ(r.removed, 5);
  EXPECT_EQ(r.removed_bytes, 100u + 1000 + 10 + 5000 + 20);
  EXPECT_EQ(r.kept_running, 5);
  EXPECT_EQ(r.kept_recent, 0);
  const std::vector<std::string> want = {
      "jobs/3/attempt-1/run/weights/last.ckpt.tmp-" + dead_ + "-2",
      "jobs/3/attempt-1/val.kestrel-tmp-" + dead_ + "-3",
      "objects/aa/" + kSha + ".tmp-" + dead_ + "-0",
      "uploads/import-" + dead_ + "-1",
      "uploads/upload-" + dead_ + "-0.part",
  };
  EXPECT_EQ(r.removed_paths, want);
  for (const auto& p : want) EXPECT_FALSE(fs::exists(home_ / p)) << p;
  EXPECT_TRUE(fs::exists(home_ / ("objects/aa/" + kSha + ".tmp-" + own_ + "-0")));
  EXPECT_TRUE(fs::exists(home_ / ("uploads/upload-" + own_ + "-0.part")));
  EXPECT_TRUE(fs::exists(home_ / ("uploads/import-" + own_ + "-1/birds/images/a.jpg")));
  EXPECT_TRUE(fs::exists(home_ / ("jobs/3/attempt-1/val.kestrel-tmp-" + own_ + "-3/result.json")));
  EXPECT_TRUE(fs::exists(home_ / ("jobs/3/import-" + dead_ + "-1/keep.txt")));
  EXPECT_TRUE(fs::exists(home_ / ("uploads/upload-" + dead_ + "-0.zip")));
  EXPECT_TRUE(fs::exists(home_ / "jobs/3/attempt-1/notes.tmp-x-1"));
  // Nothing left to do.
  EXPECT_EQ(Reclaim(NoMinAge()).removed, 0);
}

TEST_F(LeftoversTest, ADryRunCountsAndRemovesNothing) {
  const fs::path p = File("uploads/upload-" + dead_ + "-0.part", 300);
  LeftoverOptions o = NoMinAge();
  o.dry_run = true;
  LeftoverReport r = Reclaim(o);
  EXPECT_EQ(r.removed, 1);
  EXPECT_EQ(r.removed_bytes, 300u);
  EXPECT_TRUE(fs::exists(p));
}

TEST_F(LeftoversTest, AReusedPidDoesNotKeepALeftoverAndRecentWritesDo) {
  // This process's PID on a file written before it started: another
  // process's leftover whose PID was handed out again.
  const fs::path reused = File("objects/aa/" + kSha + ".tmp-" + own_ + "-9", 10);
  Age(reused, 7200);
  EXPECT_TRUE(WriterMayBeRunning(::getpid(), now_));
  EXPECT_FALSE(WriterMayBeRunning(::getpid(), now_ - 7200));
  EXPECT_FALSE(WriterMayBeRunning(std::stoll(dead_), now_));
  // A dead writer's leftover written just now, and a folder whose top is
  // old but holds a fresh file: younger than the minimum age.
  const fs::path fresh = File("uploads/upload-" + dead_ + "-0.part", 10);
  const fs::path tree = File("jobs/1/run.kestrel-tmp-" + dead_ + "-0/weights/best.safetensors", 10);
  Age(home_ / ("jobs/1/run.kestrel-tmp-" + dead_ + "-0"), 7200);
  LeftoverOptions o;
  o.min_age_s = 600;
  LeftoverReport r = Reclaim(o);
  EXPECT_EQ(r.removed, 1);
  EXPECT_FALSE(fs::exists(reused));
  EXPECT_EQ(r.kept_recent, 2);
  EXPECT_TRUE(fs::exists(fresh));
  EXPECT_TRUE(fs::exists(tree));
  // Once they are old enough, they go.
  Age(fresh, 700);
  Age(tree, 700);
  Age(tree.parent_path(), 700);
  Age(tree.parent_path().parent_path(), 700);
  r = Reclaim(o);
  EXPECT_EQ(r.removed, 2);
  EXPECT_FALSE(fs::exists(fresh));
  EXPECT_FALSE(fs::exists(tree.parent_path().parent_path()));
}

TEST_F(LeftoversTest, QuickLooksOnlyAtObjectsAndTheUploadFolder) {
  File("objects/aa/" + kSha + ".tmp-" + dead_ + "-0", 10);
  const fs::path job = File("jobs/3/last.ckpt.tmp-" + dead_ + "-0", 10);
  // An upload folder elsewhere (ServerOptions::upload_dir).
  const fs::path other = dir_ / "spool";
  fs::create_directories(other);
  std::ofstream(other / ("upload-" + dead_ + "-0.part")) << "body";
  LeftoverOptions o = NoMinAge();
  o.quick = true;
  o.upload_dir = other.string();
  LeftoverReport r = Reclaim(o);
  EXPECT_EQ(r.removed, 2);
  EXPECT_TRUE(fs::exists(job)) << "jobs/ is gc's";
  EXPECT_FALSE(fs::exists(other / ("upload-" + dead_ + "-0.part")));
  EXPECT_EQ(r.removed_paths.front(), (other / ("upload-" + dead_ + "-0.part")).string())
      << "absolute: outside the home";
}

TEST_F(LeftoversTest, ACollectorsAsideCopyIsPutBackOrRemoved) {
  // Moved aside and never deleted or put back: the blob is put back.
  const fs::path aside = File("objects/aa/" + kSha + ".gc", 40);
  Age(aside, 7200);
  // Moved aside, then written anew by a Put: the copy goes.
  const std::string sha2 = std::string(62, 'a') + "cd";
  const fs::path aside2 = File("objects/aa/" + sha2 + ".gc", 50);
  File("objects/aa/" + sha2, 50);
  Age(aside2, 7200);
  LeftoverOptions o;
  o.min_age_s = 600;
  LeftoverReport r = Reclaim(o);
  EXPECT_EQ(r.restored, 1);
  EXPECT_TRUE(fs::exists(home_ / "objects/aa" / kSha));
  EXPECT_FALSE(fs::exists(aside));
  EXPECT_EQ(r.removed, 1);
  EXPECT_EQ(r.removed_bytes, 50u);
  EXPECT_FALSE(fs::exists(aside2));
  EXPECT_TRUE(fs::exists(home_ / "objects/aa" / sha2));
}

TEST_F(LeftoversTest, GcReportsAndReclaimsLeftoversOlderThanItsGrace) {
  auto meta = store::MetadataStore::Open(store::MetadataUrl(home_.string()));
  ASSERT_TRUE(meta.IsOk()) << meta.GetStatus().ToString();
  store::LocalArtifactStore blobs(home_.string());
  File("uploads/upload-" + dead_ + "-0.part", 2048);
  File("objects/aa/" + kSha + ".tmp-" + own_ + "-0", 10);
  GcOptions o;
  o.grace_s = 0;
  o.dry_run = true;
  auto dry = CollectGarbage(**meta, blobs, o, now_);
  ASSERT_TRUE(dry.IsOk()) << dry.GetStatus().ToString();
  EXPECT_EQ(dry->leftovers.removed, 1);
  EXPECT_TRUE(fs::exists(home_ / ("uploads/upload-" + dead_ + "-0.part")));
  o.dry_run = false;
  auto gc = CollectGarbage(**meta, blobs, o, now_);
  ASSERT_TRUE(gc.IsOk()) << gc.GetStatus().ToString();
  EXPECT_EQ(gc->leftovers.removed, 1);
  EXPECT_EQ(gc->leftovers.removed_bytes, 2048u);
  EXPECT_EQ(gc->leftovers.kept_running, 1);
  EXPECT_FALSE(fs::exists(home_ / ("uploads/upload-" + dead_ + "-0.part")));
  const nlohmann::json j = GcReportJson(*gc);
  EXPECT_EQ(j["leftovers"]["removed"], 1);
  EXPECT_EQ(j["leftovers"]["removed_bytes"], 2048);
  EXPECT_EQ(j["leftovers"]["kept_running"], 1);
  EXPECT_EQ(j["leftovers"]["removed_paths"], nlohmann::json::array({"uploads/upload-" + dead_ + "-0.part"}));
  // The default grace keeps a leftover younger than an hour.
  File("uploads/upload-" + dead_ + "-1.part", 1);
  auto kept = CollectGarbage(**meta, blobs, GcOptions{}, now_);
  ASSERT_TRUE(kept.IsOk());
  EXPECT_EQ(kept->leftovers.kept_recent, 1);
  EXPECT_EQ(kept->leftovers.removed, 0);
}

}  // namespace
}  // namespace kestrel::app
