// The fixture of the job-store suites: one store per test on the backend named
// by the test parameter ("sqlite" always; "postgres" when KESTREL_TEST_PG
// holds a libpq URL, each test in its own schema), with a fake clock.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "core/fault_env.h"
#include "core/hash.h"
#include "store/metadata_store.h"
#include "store/postgres_store.h"

namespace kestrel::store {

class JobStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : name) {
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    }
    if (GetParam() == "sqlite") {
      dir_ =
          (std::filesystem::temp_directory_path() / ("kestrel_js_" + std::to_string(::getpid()) + "_" + name))
              .string();
      std::filesystem::remove_all(dir_);
      url_ = "sqlite:" + dir_ + "/kestrel.db";
    } else {
      const char* pg = std::getenv("KESTREL_TEST_PG");
      if (pg == nullptr || *pg == '\0') {
        GTEST_SKIP() << "PostgreSQL tests need KESTREL_TEST_PG=postgresql://... "
                        "(start one with scripts/pg-test-server.sh start)";
      }
      admin_url_ = pg;
      std::random_device rd;
      schema_ = "t" + std::to_string(::getpid()) + "_" + std::to_string(rd() % 1000000);
      Status s = ExecPostgres(admin_url_, "CREATE SCHEMA " + schema_);
      ASSERT_TRUE(s.IsOk()) << s.ToString();
      url_ = admin_url_ + (admin_url_.find('?') == std::string::npos ? "?" : "&") +
             "options=-csearch_path%3D" + schema_;
    }
    store_ = Open();
  }
  void TearDown() override {
    store_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
    if (!schema_.empty()) {
      EXPECT_TRUE(ExecPostgres(admin_url_, "DROP SCHEMA " + schema_ + " CASCADE").IsOk());
    }
  }

  std::unique_ptr<MetadataStore> Open() {
    auto s = MetadataStore::Open(url_);
    EXPECT_TRUE(s.IsOk()) << s.GetStatus().ToString();
    return s.IsOk() ? std::move(s).Value() : nullptr;
  }
  int64_t Now() { return clock_.NowMicros() / 1000; }

  static JobSpec Spec(const std::string& config, JobPriority p = JobPriority::kNormal) {
    JobSpec s;
    s.dataset_version = Sha256Hex("birds");
    s.config_json = config;
    s.priority = p;
    return s;
  }
  JobRecord Submit(const JobSpec& spec) {
    bool created = false;
    auto j = store_->SubmitJob(spec, Now(), &created);
    EXPECT_TRUE(j.IsOk()) << j.GetStatus().ToString();
    return j.IsOk() ? *j : JobRecord{};
  }
  Result<ClaimedJob> Claim(const std::string& worker, int64_t lease_ms = 90'000, bool allow_retries = true) {
    ClaimRequest r;
    r.worker = worker;
    r.host = "host-" + worker;
    r.devices = {{"cpu", 0, 0}};
    r.now_ms = Now();
    r.lease_ms = lease_ms;
    r.allow_retries = allow_retries;
    return store_->ClaimJob(r);
  }
  static AttemptOutcome Fail(FailureClass c, FailureReason reason, bool infra = false) {
    AttemptOutcome o;
    o.failure_class = c;
    o.reason = reason;
    o.stage = FailureStage::kTrain;
    o.infrastructure = infra;
    o.exit_code = 1;
    return o;
  }
  static AttemptOutcome Ok(const std::string& result = R"({"map50":0.9})") {
    AttemptOutcome o;
    o.success = true;
    o.result_json = result;
    return o;
  }

  FakeClockEnv clock_{Env::Default()};
  std::string dir_, url_, admin_url_, schema_;
  std::unique_ptr<MetadataStore> store_;
};

}  // namespace kestrel::store
