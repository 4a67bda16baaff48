// `kestrel doctor`'s checks (app/doctor.h) with injected failures: a healthy
// home passes every check and leaves no probe object behind; an unwritable
// artifact store, a store that is down (PostgreSQL on a closed port), a low
// disk threshold, a skewed database clock, a kestrel-torch that does not
// load and a device whose pass fails each fail their own check with a fix,
// and DoctorStatus names them (a worker ignores "disk"). On PostgreSQL the
// clock is compared with the database's.
#include "app/doctor.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

#include "core/fault_env.h"
#include "store/postgres_store.h"

namespace kestrel::app {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class DoctorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::temp_directory_path() / ("kestrel_app_doctor_" + std::to_string(::getpid()) + "_" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    options_.host = "h1";
    options_.home = dir_.string();
    options_.min_free_bytes = 1;
    const std::string home = dir_.string();
    probes_.torch_program = "kestrel-torch";
    probes_.torch = {
        {"ok", true},
        {"fingerprint", {{"libtorch", "2.5.1"}, {"cuda_available", false}}},
        {"selftest", json::array({{{"device", "cpu"}, {"ok", true}, {"ms", 3.5}, {"error", ""}}})}};
    probes_.meta_location = "sqlite:" + home + "/kestrel.db";
    probes_.open_meta = [home] { return store::MetadataStore::Open("sqlite:" + home + "/kestrel.db"); };
    probes_.open_artifacts = [this, home] { return store::OpenArtifactStore(home, fault_env_); };
    probes_.disk_space = [](const std::string& path) { return jobs::StatDiskSpace(path); };
  }
  void TearDown() override { fs::remove_all(dir_); }

  const DoctorCheck& Find(const DoctorReport& r, const std::string& name) {
    for (const auto& c : r.checks)
      if (c.name == name) return c;
    ADD_FAILURE() << "no check " << name << " in " << DoctorText(r);
    static const DoctorCheck kNone;
    return kNone;
  }
  // The blob files under the home (the probe must not stay behind).
  int Blobs() {
    int n = 0;
    if (!fs::exists(dir_ / "blobs")) return 0;
    for (const auto& e : fs::recursive_directory_iterator(dir_ / "blobs"))
      if (e.is_regular_file()) ++n;
    return n;
  }

  fs::path dir_;
  FaultInjectionEnv fault_env_{Env::Default()};
  DoctorOptions options_;
  DoctorProbes probes_;
};

TEST_F(DoctorTest, AHealthyHomePassesEveryCheckAndLeavesNoProbeBehind) {
  const DoctorReport r = RunDoctor(options_, probes_, Env::Default());
  EXPECT_TRUE(r.Ok()) << DoctorText(r);
  EXPECT_TRUE(DoctorStatus(r).IsOk());
  for (const char* name :
       {"libraries", "device cpu", "metadata store", "artifact store", "disk", "fingerprint"})
    EXPECT_EQ(Find(r, name).state, CheckState::kOk) << name << ": " << Find(r, name).message;
  // SQLite: no server clock, skipped with a note, not failed.
  EXPECT_EQ(Find(r, "clock").state, CheckState::kSkip);
  EXPECT_NE(Find(r, "clock").message.find("SQLite"), std::string::npos);
  EXPECT_EQ(Blobs(), 0) << "the probe object was deleted";
  EXPECT_EQ(r.fingerprint_hash.size(), 16u);
  EXPECT_EQ(r.fingerprint["libtorch"], "2.5.1");
  const json doc = DoctorJson(r);
  EXPECT_EQ(doc["ok"], true);
  EXPECT_EQ(doc["failed"], 0);
  EXPECT_EQ(doc["hash"], r.fingerprint_hash);
  EXPECT_EQ(doc["checks"].size(), r.checks.size());
  EXPECT_EQ(doc["checks"][0]["name"], "libraries");
  EXPECT_EQ(doc["checks"][0]["state"], "ok");
  // The store probe is a record of the host's last check.
  auto meta = probes_.open_meta();
  ASSERT_TRUE(meta.IsOk());
  auto last = (*meta)->GetSetting("doctor.h1");
  ASSERT_TRUE(last.IsOk()) << last.GetStatus().ToString();
  EXPECT_NE(last->find("\"probe\""), std::string::npos) << *last;
}

TEST_F(DoctorTest, AnUnwritableArtifactStoreFailsItsCheckWithAFix) {
  fault_env_.FailPathsContaining("objects");
  const DoctorReport r = RunDoctor(options_, probes_, Env::Default());
  EXPECT_FALSE(r.Ok());
  const DoctorCheck& c = Find(r, "artifact store");
  EXPECT_EQ(c.state, CheckState::kFail);
  EXPECT_NE(c.message.find("writing a probe object failed"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find("injected"), std::string::npos) << c.message;
  EXPECT_NE(c.fix.find("writable"), std::string::npos) << c.fix;
  EXPECT_FALSE(c.unavailable) << "this host's disk refused the write: it counts for a worker too";
  EXPECT_FALSE(DoctorStatus(r, {"disk"}, false).IsOk());
  EXPECT_EQ(Find(r, "metadata store").state, CheckState::kOk) << "the other checks still ran";
  const Status s = DoctorStatus(r);
  EXPECT_EQ(s.Reason(), FailureReason::kEnvironment);
  EXPECT_NE(s.Message().find("artifact store: "), std::string::npos) << s.Message();
  const std::string text = DoctorText(r);
  EXPECT_NE(text.find("FAIL  artifact store"), std::string::npos) << text;
  EXPECT_NE(text.find("fix: "), std::string::npos) << text;
  EXPECT_NE(text.find("1 of 7 checks failed"), std::string::npos) << text;
}

TEST_F(DoctorTest, AStoreThatIsDownFailsAndTheClockCheckIsSkipped) {
  // Nothing listens on port 1: libpq's connection is refused at once.
  const std::string url = "postgresql://kestrel@127.0.0.1:1/kestrel?connect_timeout=2";
  probes_.meta_location = url;
  probes_.open_meta = [url] { return store::MetadataStore::Open(url); };
  bool clock_read = false;
  probes_.database_clock_ms = [&clock_read]() -> Result<int64_t> {
    clock_read = true;
    return Status::Unavailable("down");
  };
  const DoctorReport r = RunDoctor(options_, probes_, Env::Default());
  EXPECT_FALSE(r.Ok());
  const DoctorCheck& c = Find(r, "metadata store");
  EXPECT_EQ(c.state, CheckState::kFail);
  EXPECT_NE(c.message.find("cannot open " + url), std::string::npos) << c.message;
  EXPECT_NE(c.fix.find("KESTREL_DB"), std::string::npos) << c.fix;
  EXPECT_EQ(Find(r, "clock").state, CheckState::kSkip);
  EXPECT_FALSE(clock_read);
  // Refused: the database did not answer, which is not this host's
  // environment; a worker rides it out instead of counting it.
  EXPECT_TRUE(c.unavailable);
  EXPECT_FALSE(DoctorStatus(r).IsOk());
  EXPECT_TRUE(DoctorStatus(r, {}, false).IsOk());
  EXPECT_EQ(DoctorJson(r)["checks"][2]["unavailable"], true);
}

// The artifact store of `inner`, whose deletes fail as an S3 endpoint that
// went away between the probe's write and its delete.
class DeleteUnavailable final : public store::ArtifactStore {
 public:
  explicit DeleteUnavailable(std::unique_ptr<store::ArtifactStore> inner) : inner_(std::move(inner)) {}
  Result<std::string> PutWithHash(std::string_view bytes, const std::string& sha,
                                  Durability durability) override {
    return inner_->PutWithHash(bytes, sha, durability);
  }
  Status SyncDeferred() override { return inner_->SyncDeferred(); }
  Result<std::string> Get(const std::string& sha) override { return inner_->Get(sha); }
  bool Has(const std::string& sha) override { return inner_->Has(sha); }
  Result<uint64_t> Size(const std::string& sha) override { return inner_->Size(sha); }
  Result<std::string> LocalPath(const std::string& sha) override { return inner_->LocalPath(sha); }
  Result<std::vector<BlobInfo>> List() override { return inner_->List(); }
  Result<bool> RemoveIfUntouchedSince(const std::string& sha, int64_t /*keep_since_s*/) override {
    return Status::Unavailable("S3 DeleteObject: Couldn't connect to server (after 4 tries)", {sha});
  }
  Result<int> SweepIncompleteWrites(int64_t started_before_s) override {
    return inner_->SweepIncompleteWrites(started_before_s);
  }
  std::string Describe() const override { return inner_->Describe(); }
  std::string PathFor(const std::string& sha) const override { return inner_->PathFor(sha); }
  const std::string& Root() const override { return inner_->Root(); }

 private:
  std::unique_ptr<store::ArtifactStore> inner_;
};

// Found by the 1,000-job multi-host soak: a worker restarted while the S3
// server restarted failed its start check on the probe's delete and counted
// an environment failure of its (healthy) host. A delete the store did not
// answer is an outage like a failed write or read: marked unavailable, so a
// worker rides it out (DoctorStatus(..., false)) and `kestrel doctor` still
// reports it.
TEST_F(DoctorTest, AProbeDeleteTheStoreDidNotAnswerIsAnOutageNotTheHosts) {
  const std::string home = dir_.string();
  probes_.open_artifacts = [this, home]() -> Result<std::unique_ptr<store::ArtifactStore>> {
    auto inner = store::OpenArtifactStore(home, fault_env_);
    if (!inner.IsOk()) return inner.GetStatus();
    return std::unique_ptr<store::ArtifactStore>(new DeleteUnavailable(std::move(*inner)));
  };
  const DoctorReport r = RunDoctor(options_, probes_, Env::Default());
  const DoctorCheck& c = Find(r, "artifact store");
  EXPECT_EQ(c.state, CheckState::kFail);
  EXPECT_NE(c.message.find("deleting the probe object"), std::string::npos) << c.message;
  EXPECT_TRUE(c.unavailable) << c.message;
  EXPECT_FALSE(DoctorStatus(r).IsOk());
  EXPECT_TRUE(DoctorStatus(r, {"disk"}, false).IsOk()) << DoctorText(r);
}

TEST_F(DoctorTest, FreeSpaceBelowTheThresholdFailsTheDiskCheckWhichAWorkerIgnores) {
  options_.min_free_bytes = int64_t{1} << 62;  // more than any disk has
  const DoctorReport r = RunDoctor(options_, probes_, Env::Default());
  const DoctorCheck& c = Find(r, "disk");
  EXPECT_EQ(c.state, CheckState::kFail);
  EXPECT_NE(c.message.find("below the threshold"), std::string::npos) << c.message;
  EXPECT_NE(c.fix.find("kestrel gc"), std::string::npos) << c.fix;
  EXPECT_FALSE(DoctorStatus(r).IsOk());
  EXPECT_TRUE(DoctorStatus(r, {"disk"}).IsOk()) << "a worker's watermark pauses claims instead";
  probes_.disk_space = [](const std::string&) -> Result<jobs::DiskSpace> { return jobs::DiskSpace{5, 100}; };
  options_.min_free_bytes = 6;
  EXPECT_EQ(Find(RunDoctor(options_, probes_, Env::Default()), "disk").state, CheckState::kFail);
  options_.min_free_bytes = 5;
  EXPECT_EQ(Find(RunDoctor(options_, probes_, Env::Default()), "disk").state, CheckState::kOk);
}

TEST_F(DoctorTest, ADatabaseClockAheadByMoreThanTheLimitFailsTheClockCheck) {
  FakeClockEnv clock(Env::Default());
  const int64_t local = clock.UnixMillis();
  probes_.database_clock_ms = [local]() -> Result<int64_t> { return local + 5'000; };
  options_.max_clock_skew_ms = 2'000;
  DoctorReport r = RunDoctor(options_, probes_, clock);
  EXPECT_EQ(Find(r, "clock").state, CheckState::kFail) << Find(r, "clock").message;
  EXPECT_NE(Find(r, "clock").message.find("5000 ms behind"), std::string::npos) << Find(r, "clock").message;
  EXPECT_NE(Find(r, "clock").fix.find("chrony"), std::string::npos);
  probes_.database_clock_ms = [local]() -> Result<int64_t> { return local - 1'500; };
  r = RunDoctor(options_, probes_, clock);
  EXPECT_EQ(Find(r, "clock").state, CheckState::kOk) << Find(r, "clock").message;
  EXPECT_NE(Find(r, "clock").message.find("1500 ms ahead"), std::string::npos) << Find(r, "clock").message;
}

// On PostgreSQL (KESTREL_TEST_PG, as CI's test.sh starts one) the clock is
// compared with the database's clock_timestamp(): same machine, so within
// the default 2 s; a host clock 1 h off fails it.
TEST_F(DoctorTest, OnPostgresTheClockIsComparedWithTheDatabases) {
  const char* pg = std::getenv("KESTREL_TEST_PG");
  if (pg == nullptr || *pg == '\0') GTEST_SKIP() << "KESTREL_TEST_PG not set";
  const std::string schema = "doctor" + std::to_string(::getpid());
  ASSERT_TRUE(store::ExecPostgres(pg, "CREATE SCHEMA " + schema).IsOk());
  struct Drop {
    std::string pg, schema;
    ~Drop() { EXPECT_TRUE(store::ExecPostgres(pg, "DROP SCHEMA " + schema + " CASCADE").IsOk()); }
  } drop{pg, schema};
  const std::string url = std::string(pg) + (std::string(pg).find('?') == std::string::npos ? "?" : "&") +
                          "options=-csearch_path%3D" + schema;
  probes_.open_meta = [url] { return store::MetadataStore::Open(url); };
  probes_.database_clock_ms = [url] { return store::PostgresClockMs(url); };
  DoctorReport r = RunDoctor(options_, probes_, Env::Default());
  EXPECT_EQ(Find(r, "metadata store").state, CheckState::kOk) << Find(r, "metadata store").message;
  EXPECT_EQ(Find(r, "clock").state, CheckState::kOk) << Find(r, "clock").message;
  FakeClockEnv off(Env::Default(), Env::Default().UnixSeconds() - 3600);
  r = RunDoctor(options_, probes_, off);
  EXPECT_EQ(Find(r, "clock").state, CheckState::kFail) << Find(r, "clock").message;
  EXPECT_NE(Find(r, "clock").message.find("behind"), std::string::npos) << Find(r, "clock").message;
}

TEST_F(DoctorTest, LibrariesThatDoNotLoadAndAFailedDevicePassFailTheirChecks) {
  probes_.torch = nullptr;
  probes_.torch_error =
      "kestrel-torch fingerprint failed (exit 127): error while loading shared libraries: libtorch_cpu.so";
  DoctorReport r = RunDoctor(options_, probes_, Env::Default());
  EXPECT_EQ(Find(r, "libraries").state, CheckState::kFail);
  EXPECT_NE(Find(r, "libraries").message.find("libtorch_cpu.so"), std::string::npos);
  EXPECT_NE(Find(r, "libraries").fix.find("ldd"), std::string::npos);
  EXPECT_EQ(r.fingerprint["torch_error"], probes_.torch_error)
      << "the fingerprint says why LibTorch is missing";

  probes_.torch_error = "kestrel-torch fingerprint failed (killed by SIGILL)";
  r = RunDoctor(options_, probes_, Env::Default());
  EXPECT_NE(Find(r, "libraries").fix.find("instruction set"), std::string::npos);

  probes_.torch_error.clear();
  probes_.torch = {{"fingerprint", {{"libtorch", "2.5.1"}, {"torch_cuda_build", "12.4"}}},
                   {"selftest", json::array({{{"device", "cpu"}, {"ok", true}, {"ms", 2.0}, {"error", ""}},
                                             {{"device", "cuda:0"},
                                              {"ok", false},
                                              {"ms", 40.0},
                                              {"error", "CUDA error: invalid device function"}}})}};
  r = RunDoctor(options_, probes_, Env::Default());
  EXPECT_EQ(Find(r, "libraries").state, CheckState::kOk);
  EXPECT_EQ(Find(r, "device cpu").state, CheckState::kOk);
  const DoctorCheck& gpu = Find(r, "device cuda:0");
  EXPECT_EQ(gpu.state, CheckState::kFail);
  EXPECT_EQ(gpu.message, "CUDA error: invalid device function");
  EXPECT_NE(gpu.fix.find("nvidia-smi"), std::string::npos);
  EXPECT_NE(gpu.fix.find("12.4"), std::string::npos);

  // A kestrel-torch that ran no pass at all (an older build) is a failure too.
  probes_.torch.erase("selftest");
  r = RunDoctor(options_, probes_, Env::Default());
  EXPECT_EQ(Find(r, "devices").state, CheckState::kFail);
}

}  // namespace
}  // namespace kestrel::app
