// The low-disk watermark (docs/disk.md): with a faked free-space probe, a
// worker below the watermark claims nothing, says so once in the store (what
// `kestrel stats` reads), and claims again when space returns.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "app/job_kinds.h"
#include "core/fault_env.h"
#include "core/safetensors.h"
#include "jobs/disk_space.h"
#include "jobs/fake_process_runner.h"
#include "jobs/worker.h"

namespace kestrel::jobs {
namespace {

namespace fs = std::filesystem;

class DiskWatermarkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("kestrel_disk_" + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    url_ = "sqlite:" + dir_ + "/kestrel.db";
    auto s = store::MetadataStore::Open(url_);
    ASSERT_TRUE(s.IsOk()) << s.GetStatus().ToString();
    db_ = std::move(*s);
    SafeTensorFile f;
    f.tensors["w"] = SafeTensor{"F32", {1}, std::string(4, '\0')};
    weights_ = dir_ + "/best.safetensors";
    std::ofstream(weights_, std::ios::binary) << SerializeSafeTensors(f);
  }
  void TearDown() override {
    db_.reset();
    fs::remove_all(dir_);
  }
  nlohmann::json Setting() {
    auto s = db_->GetSetting(std::string(kLowDiskSettingPrefix) + "w1");
    return s.IsOk() ? nlohmann::json::parse(*s) : nlohmann::json();
  }

  std::string dir_, url_, weights_;
  std::unique_ptr<store::MetadataStore> db_;
};

TEST_F(DiskWatermarkTest, LowDiskHoldsClaimsBackUntilSpaceReturns) {
  FakeClockEnv clock(Env::Default());
  FakeProcessRunner runner(clock);
  store::JobSpec spec;
  spec.dataset_version = "v";
  spec.config_json = "{\"tag\":\"a\"}";
  bool created = false;
  auto job = db_->SubmitJob(spec, clock.NowMicros() / 1000, &created);
  ASSERT_TRUE(job.IsOk()) << job.GetStatus().ToString();
  FakeChildScript child;
  child.progress.emplace_back(1'000, "result {\"best\":\"" + weights_ + "\",\"map50\":0.5}");
  child.exit_at_ms = 2'000;
  runner.Push(child);

  WorkerOptions o;
  o.id = "w1";
  o.host = "test";
  o.home = dir_ + "/home";
  o.child_command = {"/usr/bin/kestrel"};
  o.kinds = app::WorkerKinds(app::JobKinds(), clock);  // the job-kind table: command word, gate
  o.max_jobs = 1;
  o.webhooks = false;
  o.min_free_bytes = 5'000'000'000;
  std::atomic<int64_t> free_bytes{1'000'000'000};
  int probes = 0;
  size_t children_while_low = 99;
  nlohmann::json published_while_low, stats_while_low;
  auto opened = store::MetadataStore::Open(url_);
  ASSERT_TRUE(opened.IsOk());
  std::unique_ptr<store::MetadataStore> probe_db = std::move(opened).Value();
  o.disk_space = [&]() -> Result<DiskSpace> {
    // Called under the worker's claim lock, before each claim: the fifth
    // probe sees four refusals behind it, then space returns.
    if (++probes == 5) {
      children_while_low = runner.Children().size();
      auto s = probe_db->GetSetting(std::string(kLowDiskSettingPrefix) + "w1");
      if (s.IsOk()) published_while_low = nlohmann::json::parse(*s);
      auto st = DiskStatusJson(*probe_db, dir_, o.min_free_bytes);
      if (st.IsOk()) stats_while_low = *st;
      free_bytes = 9'000'000'000;
    }
    return DiskSpace{free_bytes.load(), 10'000'000'000};
  };
  Worker worker([this]() { return store::MetadataStore::Open(url_); }, runner, clock, o);
  std::atomic<bool> stop{false};
  ASSERT_TRUE(worker.Run(stop).IsOk());

  EXPECT_EQ(children_while_low, 0u) << "a worker below the watermark claimed a job";
  EXPECT_EQ(published_while_low.value("low", false), true) << published_while_low.dump();
  EXPECT_EQ(published_while_low.value("free_bytes", int64_t{0}), 1'000'000'000);
  ASSERT_TRUE(stats_while_low.contains("paused_workers")) << stats_while_low.dump();
  ASSERT_EQ(stats_while_low["paused_workers"].size(), 1u) << stats_while_low.dump();
  EXPECT_EQ(stats_while_low["paused_workers"][0]["worker"], "w1");
  // Space returned: claimed, ran, and the published state says so.
  EXPECT_EQ(worker.Counters().claimed, 1);
  EXPECT_EQ(worker.Counters().succeeded, 1);
  EXPECT_FALSE(worker.LowDisk());
  EXPECT_EQ(Setting().value("low", true), false) << Setting().dump();
  auto st = DiskStatusJson(*db_, dir_, o.min_free_bytes);
  ASSERT_TRUE(st.IsOk());
  EXPECT_TRUE((*st)["paused_workers"].empty()) << st->dump();
  EXPECT_TRUE((*st)["free_bytes"].is_number()) << "statvfs of a real folder";
}

TEST_F(DiskWatermarkTest, WatermarkValuesParseAndStatvfsMeasuresARealFolder) {
  EXPECT_EQ(*ParseMinFreeGb("0", "--min-free-gb"), 0);
  EXPECT_EQ(*ParseMinFreeGb("1.5", "--min-free-gb"), 1'500'000'000);
  for (const char* bad : {"-1", "nan", "x", "1e300", ""}) {
    auto r = ParseMinFreeGb(bad, "KESTREL_MIN_FREE_GB");
    ASSERT_FALSE(r.IsOk()) << bad;
    EXPECT_NE(r.GetStatus().ToString().find("KESTREL_MIN_FREE_GB"), std::string::npos)
        << r.GetStatus().ToString();
  }
  auto real = StatDiskSpace(dir_);
  ASSERT_TRUE(real.IsOk()) << real.GetStatus().ToString();
  EXPECT_GT(real->total_bytes, 0);
  EXPECT_FALSE(StatDiskSpace(dir_ + "/no/such/folder").IsOk());
}

}  // namespace
}  // namespace kestrel::jobs
