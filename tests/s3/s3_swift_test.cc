// The S3 client and S3ArtifactStore against a real S3 API: OpenStack Swift
// with its s3api middleware and a tempauth user (tests/s3/swift_fixture.sh),
// so every request's SigV4 signature is checked by the server. One test runs
// every scenario so the ~10-20 s Swift start is paid once. SKIPS with a
// message when Swift is not installed (the command is in the message).
//
// KESTREL_S3_CRASHES=N (default 10): injected crashes for the orphan check
// (docs/disk.md records N=100). KESTREL_S3_FIGURES=1: also the 100 MB
// upload/download MB/s against the local store (printed, no asserts).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "app/doctor.h"
#include "app/gc.h"
#include "core/env.h"
#include "core/hash.h"
#include "s3/client.h"
#include "store/local_artifact_store.h"
#include "store/metadata_store.h"
#include "store/s3_artifact_store.h"

namespace kestrel::store {
namespace {

const std::string kFixture = std::string(KESTREL_SOURCE_DIR) + "/tests/s3/swift_fixture.sh";
constexpr const char* kBucket = "kestrel-e2e";

// The local clock an hour ahead: the first request is RequestTimeTooSkewed.
class SkewedEnv : public EnvWrapper {
 public:
  explicit SkewedEnv(int64_t skew_s) : EnvWrapper(Env::Default()), skew_s_(skew_s) {}
  int64_t UnixSeconds() override { return EnvWrapper::UnixSeconds() + skew_s_; }

 private:
  int64_t skew_s_;
};

std::string Bytes(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (auto& c : s) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    c = static_cast<char>(x);
  }
  return s;
}

class SwiftS3Test : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        (std::filesystem::temp_directory_path() / ("kestrel_swift_" + std::to_string(::getpid()))).string();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    const int rc = std::system((kFixture + " start " + dir_ + " > " + dir_ + "/fixture.out 2>&1").c_str());
    std::ifstream out(dir_ + "/fixture.out");
    std::stringstream said;
    said << out.rdbuf();
    if (WEXITSTATUS(rc) == 77) GTEST_SKIP() << said.str();
    ASSERT_EQ(WEXITSTATUS(rc), 0) << said.str();
    started_ = true;
    std::ifstream env(dir_ + "/env");
    std::string line;
    while (std::getline(env, line)) {
      const auto eq = line.find('=');
      if (eq != std::string::npos) vars_[line.substr(0, eq)] = line.substr(eq + 1);
    }
  }
  void TearDown() override {
    if (started_)
      (void)std::system((kFixture + " stop " + dir_).c_str());  // best effort: the servers die with the dir
    std::filesystem::remove_all(dir_);
  }
  s3::ClientOptions Options() {
    auto r = s3::OptionsFromEnvironment([this](const char* n) -> const char* {
      auto it = vars_.find(n);
      return it == vars_.end() ? nullptr : it->second.c_str();
    });
    EXPECT_TRUE(r.IsOk()) << r.GetStatus().ToString();
    s3::ClientOptions o = r->options;
    o.backoff_ms = 100;
    return o;
  }
  void RestartProxyInBackground() {
    restarter_ = std::thread(
        [this] { (void)std::system((kFixture + " proxy " + dir_ + " >/dev/null 2>&1").c_str()); });
  }
  void KillProxy() {
    std::ifstream pid(dir_ + "/proxy.pid");
    int p = 0;
    pid >> p;
    if (p > 0) ::kill(p, SIGKILL);
  }

  std::string dir_;
  bool started_ = false;
  std::map<std::string, std::string> vars_;
  std::thread restarter_;
};

TEST_F(SwiftS3Test, EveryScenarioAgainstSwiftS3Api) {
  s3::Client client(Options());
  const Status bucket = client.CreateBucket(kBucket);
  ASSERT_TRUE(bucket.IsOk()) << bucket.ToString();
  S3StoreOptions so;
  so.home = dir_ + "/home";
  so.multipart_threshold = 8 << 10;
  so.part_size = 4 << 10;
  S3ArtifactStore store(client, {kBucket, "team/a"}, so);

  {
    SCOPED_TRACE("small and multipart round trips, listed, sized, deduplicated");
    const std::string small = "hello s3";
    const std::string big = Bytes(4096 * 3 + 100, 1);  // 4 parts
    auto a = store.Put(small);
    ASSERT_TRUE(a.IsOk()) << a.GetStatus().ToString();
    auto b = store.Put(big);
    ASSERT_TRUE(b.IsOk()) << b.GetStatus().ToString();
    EXPECT_EQ(store.LastPutStats().parts_uploaded, 4);
    EXPECT_EQ(*store.Get(*a), small);
    EXPECT_EQ(*store.Get(*b), big);
    EXPECT_EQ(*store.Size(*b), big.size());
    EXPECT_TRUE(store.Has(*a));
    ASSERT_TRUE(store.Put(big).IsOk());  // deduplicated: a self-copy, no new upload
    EXPECT_EQ(store.LastPutStats().parts_uploaded, 0);
    auto listed = store.List();
    ASSERT_TRUE(listed.IsOk());
    ASSERT_EQ(listed->size(), 2u);
    auto path = store.LocalPath(*b);
    ASSERT_TRUE(path.IsOk());
    EXPECT_EQ(*Env::Default().ReadFile(*path), big);
    EXPECT_EQ(store.PathFor(*a), "s3://kestrel-e2e/team/a/objects/" + a->substr(0, 2) + "/" + *a);
    auto missing = store.Get(Sha256Hex("absent"));
    EXPECT_EQ(missing.GetStatus().Code(), StatusCode::kNotFound);
  }
  {
    SCOPED_TRACE("a damaged object is kCorruption, never returned");
    const std::string sha = Sha256Hex("the real bytes");
    ASSERT_TRUE(client.PutObject(kBucket, store.KeyFor(sha), "other bytes").IsOk());
    EXPECT_EQ(store.Get(sha).GetStatus().Code(), StatusCode::kCorruption);
    ASSERT_TRUE(client.DeleteObject(kBucket, store.KeyFor(sha)).IsOk());
  }
  {
    SCOPED_TRACE("an interrupted upload is invisible, then resumed from its parts");
    const std::string blob = Bytes(4096 * 5, 2);
    S3StoreOptions crash = so;
    crash.before_part = [](int n) { return n == 4 ? Status::Aborted("injected crash") : Status(); };
    S3ArtifactStore crashing(client, {kBucket, "team/a"}, crash);
    EXPECT_FALSE(crashing.Put(blob).IsOk());
    EXPECT_FALSE(store.Has(Sha256Hex(blob)));  // not visible until complete
    auto resumed = store.Put(blob);
    ASSERT_TRUE(resumed.IsOk()) << resumed.GetStatus().ToString();
    EXPECT_EQ(store.LastPutStats().parts_reused, 3);
    EXPECT_EQ(store.LastPutStats().parts_uploaded, 2);
    EXPECT_EQ(*store.Get(*resumed), blob);
    EXPECT_TRUE(client.ListMultipartUploads(kBucket, "team/a/")->empty());
  }
  {
    SCOPED_TRACE("N injected crashes leave N uploads; the sweep aborts them all");
    const char* env_n = std::getenv("KESTREL_S3_CRASHES");
    const int n = env_n != nullptr ? std::atoi(env_n) : 10;
    // Each writer is a child process SIGKILLed by itself after its first
    // part went up: no destructor, no abort, exactly what a killed host leaves.
    S3StoreOptions crash = so;
    crash.before_part = [](int part) {
      if (part == 2) ::raise(SIGKILL);
      return Status();
    };
    for (int i = 0; i < n; ++i) {
      const pid_t pid = ::fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        s3::Client child_client(Options());
        S3ArtifactStore crashing(child_client, {kBucket, "team/a"}, crash);
        (void)crashing.Put(Bytes(4096 * 3, 100 + i));  // never returns: killed at part 2
        std::_Exit(3);
      }
      int status = 0;
      ASSERT_EQ(::waitpid(pid, &status, 0), pid);
      ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
          << "writer " << i << " status " << status;
    }
    EXPECT_EQ(client.ListMultipartUploads(kBucket, "team/a/")->size(), static_cast<size_t>(n));
    // Younger than the cutoff: kept (a writer may still be at it).
    EXPECT_EQ(*store.SweepIncompleteWrites(Env::Default().UnixSeconds() - 3600), 0);
    auto swept = store.SweepIncompleteWrites(Env::Default().UnixSeconds() + 2);
    ASSERT_TRUE(swept.IsOk()) << swept.GetStatus().ToString();
    EXPECT_EQ(*swept, n);
    const size_t left = client.ListMultipartUploads(kBucket, "team/a/")->size();
    EXPECT_EQ(left, 0u);
    std::printf("[figure] orphaned multipart uploads after %d injected crashes and one sweep: %zu\n", n,
                left);
  }
  {
    SCOPED_TRACE("the collector's removal honours LastModified");
    auto sha = store.Put("garbage");
    ASSERT_TRUE(sha.IsOk());
    EXPECT_FALSE(*store.RemoveIfUntouchedSince(*sha, Env::Default().UnixSeconds() - 3600));
    EXPECT_TRUE(*store.RemoveIfUntouchedSince(*sha, Env::Default().UnixSeconds() + 3600));
    EXPECT_FALSE(store.Has(*sha));
    EXPECT_FALSE(*store.RemoveIfUntouchedSince(*sha, Env::Default().UnixSeconds() + 3600));
  }
  {
    SCOPED_TRACE("kestrel gc and du on the S3 store: unreferenced blobs deleted, an orphaned upload aborted");
    S3StoreOptions gso = so;
    S3ArtifactStore gstore(client, {kBucket, "gc"}, gso);
    ASSERT_TRUE(gstore.Put("unreferenced one").IsOk());
    ASSERT_TRUE(gstore.Put(Bytes(4096 * 3, 7)).IsOk());
    S3StoreOptions crash = gso;
    crash.before_part = [](int n) { return n == 2 ? Status::Aborted("injected crash") : Status(); };
    EXPECT_FALSE(S3ArtifactStore(client, {kBucket, "gc"}, crash).Put(Bytes(4096 * 3, 8)).IsOk());
    std::filesystem::create_directories(gso.home);
    auto meta = MetadataStore::Open("sqlite:" + gso.home + "/kestrel.db");
    ASSERT_TRUE(meta.IsOk()) << meta.GetStatus().ToString();
    auto du = app::DiskUsage(**meta, gstore, Env::Default());
    ASSERT_TRUE(du.IsOk()) << du.GetStatus().ToString();
    EXPECT_EQ(du->blobs, 2);
    EXPECT_EQ(du->unreferenced, 2);
    app::GcOptions go;
    go.grace_s = 0;
    auto gc = app::CollectGarbage(**meta, gstore, go, Env::Default().UnixSeconds() + 5);
    ASSERT_TRUE(gc.IsOk()) << gc.GetStatus().ToString();
    EXPECT_EQ(gc->deleted, 2);
    EXPECT_EQ(gc->incomplete_writes, 1);
    EXPECT_NE(gc->store.find("s3://kestrel-e2e/gc"), std::string::npos);
    EXPECT_TRUE(gstore.List()->empty());
    EXPECT_TRUE(client.ListMultipartUploads(kBucket, "gc/")->empty());
  }
  {
    SCOPED_TRACE("kestrel gc and du on jobs/: files of gone and succeeded jobs and unrecorded uploads go");
    S3ArtifactStore js(client, {kBucket, "gcjobs"}, so);
    const std::string home = dir_ + "/gcjobs-home";
    std::filesystem::create_directories(home);
    auto meta = MetadataStore::Open("sqlite:" + home + "/kestrel.db");
    ASSERT_TRUE(meta.IsOk()) << meta.GetStatus().ToString();
    MetadataStore& m = **meta;
    int64_t now = Env::Default().UnixSeconds() * 1000;
    // A job claimed at attempt 1 by worker "w", running.
    auto started = [&](const std::string& cfg) {
      JobSpec spec;
      spec.dataset_version = Sha256Hex("gcjobs");
      spec.config_json = cfg;
      bool created = false;
      auto j = m.SubmitJob(spec, now, &created);
      EXPECT_TRUE(j.IsOk()) << j.GetStatus().ToString();
      ClaimRequest req;
      req.worker = "w";
      req.host = "h";
      req.devices = {{"cpu", 0, 0}};
      req.now_ms = now;
      auto c = m.ClaimJob(req);
      EXPECT_TRUE(c.IsOk()) << c.GetStatus().ToString();
      return j->id;
    };
    auto put = [&](int64_t job, int64_t attempt, const std::string& bytes) {
      auto k = js.PutJobFile(job, attempt, "last.ckpt", bytes, Sha256Hex(bytes));
      EXPECT_TRUE(k.IsOk()) << k.GetStatus().ToString();
      return *k;
    };
    auto record = [&](int64_t job, const std::string& key) {
      const std::string rec =
          R"({"epoch":2,"files":{"last.ckpt":{"key":")" + key + R"(","sha256":"x","bytes":1}}})";
      ASSERT_TRUE(m.RecordCheckpoint(job, 1, rec, now).IsOk());
    };
    auto finish = [&](int64_t job, bool ok) {
      AttemptOutcome o;
      o.success = ok;
      if (!ok) o.failure_class = FailureClass::kPermanent;
      auto done = m.CompleteAttempt(job, 1, "w", o, now);
      ASSERT_TRUE(done.IsOk()) << done.GetStatus().ToString();
    };
    const int64_t done_job = started(R"({"n":1})");  // succeeded: its files are garbage
    record(done_job, put(done_job, 1, "done job ckpt"));
    finish(done_job, true);
    const int64_t failed_job = started(R"({"n":2})");  // failed: its record is a resume point
    const std::string resume_key = put(failed_job, 1, "failed job ckpt");
    record(failed_job, resume_key);
    const std::string late_key = put(failed_job, 1, "failed job late upload");  // never recorded
    finish(failed_job, false);
    const int64_t running_job = started(R"({"n":3})");  // running: not recorded yet, kept
    const std::string running_key = put(running_job, 1, "running job ckpt");
    const std::string gone_key = put(987654, 1, "a job nobody knows");
    ASSERT_TRUE(client.PutObject(kBucket, "gcjobs/jobs/README", "not a job file").IsOk());  // kept

    auto du = app::DiskUsage(m, js, Env::Default());
    ASSERT_TRUE(du.IsOk()) << du.GetStatus().ToString();
    EXPECT_EQ(du->job_files, 6);
    EXPECT_EQ(du->job_files_garbage, 3);
    app::GcOptions go;
    go.grace_s = 0;
    go.dry_run = true;
    const int64_t later = Env::Default().UnixSeconds() + 5;
    auto dry = app::CollectGarbage(m, js, go, later);
    ASSERT_TRUE(dry.IsOk()) << dry.GetStatus().ToString();
    EXPECT_EQ(dry->job_files, 6);
    EXPECT_EQ(dry->job_files_deleted, 3);
    EXPECT_EQ(js.ListJobFiles()->size(), 6u) << "a dry run deletes nothing";
    go.dry_run = false;
    go.grace_s = 3600;  // all younger than an hour: kept
    auto young = app::CollectGarbage(m, js, go, later);
    ASSERT_TRUE(young.IsOk()) << young.GetStatus().ToString();
    EXPECT_EQ(young->job_files_recent, 3);
    EXPECT_EQ(young->job_files_deleted, 0);
    go.grace_s = 0;
    auto gc = app::CollectGarbage(m, js, go, later);
    ASSERT_TRUE(gc.IsOk()) << gc.GetStatus().ToString();
    EXPECT_EQ(gc->job_files_deleted, 3);
    EXPECT_EQ(gc->job_files_kept, 3);
    EXPECT_EQ(gc->job_files_deleted_by_reason["job_gone"], 1);
    EXPECT_EQ(gc->job_files_deleted_by_reason["job_succeeded"], 1);
    EXPECT_EQ(gc->job_files_deleted_by_reason["unrecorded"], 1);
    std::vector<std::string> left;
    auto listed = js.ListJobFiles();
    ASSERT_TRUE(listed.IsOk()) << listed.GetStatus().ToString();
    for (const auto& f : *listed) left.push_back(f.key);
    EXPECT_EQ(left, (std::vector<std::string>{resume_key, running_key, "gcjobs/jobs/README"}));  // sorted
    EXPECT_TRUE(std::find(gc->deleted_job_files.begin(), gc->deleted_job_files.end(), late_key) !=
                gc->deleted_job_files.end());
    EXPECT_TRUE(std::find(gc->deleted_job_files.begin(), gc->deleted_job_files.end(), gone_key) !=
                gc->deleted_job_files.end());
    EXPECT_EQ(js.RemoveJobFile("gcjobs/objects/aa/x").GetStatus().Code(), StatusCode::kInvalidArgument);
  }
  {
    SCOPED_TRACE("a part the server rejects (below its minimum part size) fails with a clear error");
    S3StoreOptions tiny = so;
    tiny.part_size = 512;  // the fixture's min_segment_size is 1024
    S3ArtifactStore rejecting(client, {kBucket, "team/a"}, tiny);
    auto r = rejecting.Put(Bytes(9000, 3));
    ASSERT_FALSE(r.IsOk());
    EXPECT_NE(r.GetStatus().Message().find("EntityTooSmall"), std::string::npos) << r.GetStatus().ToString();
    EXPECT_NE(r.GetStatus().Message().find(client.Endpoint()), std::string::npos);
  }
  {
    SCOPED_TRACE("wrong credentials: the endpoint and key id named, never the secret");
    s3::ClientOptions bad = Options();
    bad.credentials.secret_access_key = "not-the-secret-xyz";
    s3::Client wrong(bad);
    auto r = wrong.GetObject(kBucket, "anything");
    ASSERT_FALSE(r.IsOk());
    const std::string m = r.GetStatus().Message();
    EXPECT_EQ(r.GetStatus().Code(), StatusCode::kFailedPrecondition) << m;
    EXPECT_NE(m.find("SignatureDoesNotMatch"), std::string::npos) << m;
    EXPECT_NE(m.find(client.Endpoint()), std::string::npos) << m;
    EXPECT_NE(m.find("kestrel:tester"), std::string::npos) << m;
    EXPECT_EQ(m.find("not-the-secret-xyz"), std::string::npos) << m;
    bad.credentials.access_key_id = "nobody:none";
    auto r2 = s3::Client(bad).GetObject(kBucket, "anything");
    EXPECT_NE(r2.GetStatus().Message().find("nobody:none"), std::string::npos) << r2.GetStatus().ToString();
  }
  {
    SCOPED_TRACE(
        "kestrel doctor's artifact check on S3: a probe written, read back, deleted; bad keys fail it");
    const std::string home = dir_ + "/doctor-home";
    std::filesystem::create_directories(home);
    app::DoctorOptions o;
    o.host = "h";
    o.home = home;
    o.min_free_bytes = 0;
    app::DoctorProbes p;
    p.open_meta = [home] { return store::MetadataStore::Open("sqlite:" + home + "/kestrel.db"); };
    p.open_artifacts = [&client, &so]() -> Result<std::unique_ptr<ArtifactStore>> {
      return std::unique_ptr<ArtifactStore>(
          std::make_unique<S3ArtifactStore>(client, s3::S3Url{kBucket, "doctor"}, so));
    };
    p.disk_space = [](const std::string& path) { return jobs::StatDiskSpace(path); };
    app::DoctorReport r = app::RunDoctor(o, p, Env::Default());
    const app::DoctorCheck* c = nullptr;
    for (const auto& x : r.checks)
      if (x.name == "artifact store") c = &x;
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->state, app::CheckState::kOk) << c->message;
    auto left = S3ArtifactStore(client, {kBucket, "doctor"}, so).List();
    ASSERT_TRUE(left.IsOk());
    EXPECT_TRUE(left->empty()) << "the probe object was deleted";
    s3::ClientOptions bad = Options();
    bad.credentials.secret_access_key = "not-the-secret-xyz";
    s3::Client wrong(bad);
    p.open_artifacts = [&wrong, &so]() -> Result<std::unique_ptr<ArtifactStore>> {
      return std::unique_ptr<ArtifactStore>(
          std::make_unique<S3ArtifactStore>(wrong, s3::S3Url{kBucket, "doctor"}, so));
    };
    r = app::RunDoctor(o, p, Env::Default());
    for (const auto& x : r.checks)
      if (x.name == "artifact store") c = &x;
    EXPECT_EQ(c->state, app::CheckState::kFail);
    // The probe's first request is a HEAD (no error body): the status and the key id are named.
    EXPECT_NE(c->message.find("403"), std::string::npos) << c->message;
    EXPECT_NE(c->message.find("kestrel:tester"), std::string::npos) << c->message;
    EXPECT_EQ(c->message.find("not-the-secret-xyz"), std::string::npos) << c->message;
    EXPECT_NE(c->fix.find("AWS_ACCESS_KEY_ID"), std::string::npos) << c->fix;
  }
  {
    SCOPED_TRACE("clock an hour ahead: RequestTimeTooSkewed, resynced from Date, retried once");
    SkewedEnv skewed(3600);
    s3::Client ahead(Options(), skewed);
    auto r = ahead.PutObject(kBucket, "skew/probe", "tick");
    ASSERT_TRUE(r.IsOk()) << r.ToString();
    EXPECT_LT(std::llabs(ahead.ClockOffsetSeconds() + 3600), 60);
  }
  {
    SCOPED_TRACE("proxy killed mid-upload: the part retries until it is back, the blob completes");
    s3::ClientOptions patient = Options();
    patient.max_attempts = 12;
    patient.backoff_ms = 250;
    s3::Client client2(patient);
    S3StoreOptions kill = so;
    kill.before_part = [this](int n) {
      if (n == 2) {
        KillProxy();
        RestartProxyInBackground();
      }
      return Status();
    };
    S3ArtifactStore killed(client2, {kBucket, "team/a"}, kill);
    const std::string blob = Bytes(4096 * 4, 4);
    auto r = killed.Put(blob);
    restarter_.join();
    ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
    EXPECT_EQ(*store.Get(*r), blob);

    SCOPED_TRACE("proxy killed before a download: the read retries and verifies");
    KillProxy();
    RestartProxyInBackground();
    S3ArtifactStore reader(client2, {kBucket, "team/a"}, so);
    auto got = reader.Get(*r);
    restarter_.join();
    ASSERT_TRUE(got.IsOk()) << got.GetStatus().ToString();
    EXPECT_EQ(*got, blob);
  }
  if (std::getenv("KESTREL_S3_FIGURES") != nullptr) {
    const std::string blob = Bytes(100u << 20, 5);
    S3StoreOptions big = so;
    big.multipart_threshold = 16u << 20;
    big.part_size = 8u << 20;
    S3ArtifactStore s3store(client, {kBucket, "figures"}, big);
    LocalArtifactStore local(dir_ + "/local");
    auto mbps = [&](ArtifactStore& st, bool put) {
      const auto t0 = std::chrono::steady_clock::now();
      if (put) {
        EXPECT_TRUE(st.Put(blob).IsOk());
      } else {
        EXPECT_TRUE(st.Get(Sha256Hex(blob)).IsOk());
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return 100.0 / s;
    };
    const double s3_up = mbps(s3store, true), s3_down = mbps(s3store, false);
    const double l_up = mbps(local, true), l_down = mbps(local, false);
    std::printf(
        "[figure] 100 MB blob: S3 (Swift s3api, loopback) upload %.1f MB/s download %.1f MB/s; "
        "local store upload %.1f MB/s download %.1f MB/s\n",
        s3_up, s3_down, l_up, l_down);
  }
}

}  // namespace
}  // namespace kestrel::store
