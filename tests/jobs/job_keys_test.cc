#include "jobs/job_keys.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace kestrel::jobs {
namespace {

Status Apply(JobKeys* k, const std::string& key, const std::string& value) {
  OptionSet s;
  k->Bind(s);
  KESTREL_RETURN_IF_ERROR(s.Set(key, value, {"command line", 0, ""}));
  return k->Validate();
}

TEST(JobKeysTest, BadValuesNameTheKey) {
  const std::pair<const char*, const char*> bad[] = {
      {"priority", "urgent"}, {"max_retries", "-1"},   {"max_retries", "1e9"},
      {"max_retries", "nan"}, {"max_retries", "1001"}, {"backoff", "abc"},
      {"backoff", ""},        {"backoff", "1,,2"},     {"backoff", "1,-2"},
      {"backoff", "1,inf"},   {"time_limit", "-5"},    {"time_limit", "inf"},
      {"time_limit", "1e10"}, {"min_map50", "2"},      {"min_map50", "nan"},
      {"min_map50", "-0.01"}, {"gpu_mem", "512"},  // on a CPU job
      {"gpu_mem", "-1"},      {"device", "-1"},        {"device", "99999999999999999999"},
      {"device", "gpu"},
  };
  for (const auto& [key, value] : bad) {
    JobKeys k;
    Status s = Apply(&k, key, value);
    EXPECT_FALSE(s.IsOk()) << key << "=" << value;
    EXPECT_EQ(s.Where().field, key) << key << "=" << value << ": " << s.ToString();
  }
}

TEST(JobKeysTest, GpuJobsNeedGpuMem) {
  JobKeys k;
  k.device = "0";
  EXPECT_EQ(k.Validate().Where().field, "gpu_mem");
  k.gpu_mem = 512;
  EXPECT_TRUE(k.Validate().IsOk());
  EXPECT_EQ(k.TrainerDevice(), "0");
  store::JobSpec spec;
  k.ApplyTo(&spec);
  EXPECT_EQ(spec.device_kind, "gpu");
  EXPECT_EQ(spec.device_memory_mb, 512);
}

TEST(JobKeysTest, ValuesReachTheJobSpec) {
  JobKeys k;
  OptionSet s;
  k.Bind(s);
  ASSERT_TRUE(
      s.ApplyArgs({"priority=high", "max_retries=2", "backoff=0.5,1", "time_limit=600", "min_map50=0.1"})
          .IsOk());
  ASSERT_TRUE(k.Validate().IsOk());
  store::JobSpec spec;
  k.ApplyTo(&spec);
  EXPECT_EQ(spec.priority, store::JobPriority::kHigh);
  EXPECT_EQ(spec.retry.max_retries, 2);
  EXPECT_EQ(spec.retry.backoff_ms, (std::vector<int64_t>{500, 1000}));
  EXPECT_EQ(spec.wall_clock_limit_ms, 600'000);
  EXPECT_EQ(spec.device_kind, "cpu");
  EXPECT_EQ(s.ToJson()["backoff"], nlohmann::json::array({0.5, 1}));
  JobKeys back;
  OptionSet b;
  back.Bind(b);
  ASSERT_TRUE(b.ApplyJson(s.ToJson(), "stored").IsOk());
  EXPECT_EQ(back.backoff, k.backoff);
}

TEST(JobKeysTest, DefaultsMatchTheStoreRetryPolicy) {
  JobKeys k;
  store::JobSpec spec;
  k.ApplyTo(&spec);
  const store::RetryPolicy defaults;
  EXPECT_EQ(spec.retry.max_retries, defaults.max_retries);
  EXPECT_EQ(spec.retry.backoff_ms, defaults.backoff_ms);
}

}  // namespace
}  // namespace kestrel::jobs
