#include "core/env.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/fault_env.h"

namespace kestrel {
namespace {

class EnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kestrel_env_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(EnvTest, AtomicWriteReplacesAndLeavesNoTemp) {
  Env& env = Env::Default();
  std::string p = (dir_ / "f.txt").string();
  ASSERT_TRUE(env.WriteFileAtomic(p, "one").IsOk());
  ASSERT_TRUE(env.WriteFileAtomic(p, "two").IsOk());
  EXPECT_EQ(*env.ReadFile(p), "two");
  auto names = env.ListDir(dir_.string());
  ASSERT_TRUE(names.IsOk());
  EXPECT_EQ(names->size(), 1u);
}

TEST_F(EnvTest, ReadLimitRejectsBeforeReading) {
  Env& env = Env::Default();
  std::string p = (dir_ / "big.txt").string();
  ASSERT_TRUE(env.WriteFileAtomic(p, std::string(1000, 'x')).IsOk());
  auto r = env.ReadFile(p, 100);
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(r.GetStatus().Where().file, p);
}

TEST_F(EnvTest, MissingFileIsNotFound) {
  auto r = Env::Default().ReadFile((dir_ / "nope").string());
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kNotFound);
}

TEST_F(EnvTest, FaultInjectionFailsAfterN) {
  FaultInjectionEnv env(Env::Default());
  env.FailWritesAfter(1);
  EXPECT_TRUE(env.WriteFileAtomic((dir_ / "a").string(), "a").IsOk());
  EXPECT_FALSE(env.WriteFileAtomic((dir_ / "b").string(), "b").IsOk());
  EXPECT_FALSE(env.Stat((dir_ / "b").string()).exists);
  env.Heal();
  EXPECT_TRUE(env.WriteFileAtomic((dir_ / "b").string(), "b").IsOk());
  EXPECT_EQ(env.FailedWrites(), 1);
}

TEST(FakeClockTest, SleepAdvancesWithoutBlocking) {
  FakeClockEnv env(Env::Default(), 100);
  EXPECT_EQ(env.UnixSeconds(), 100);
  env.SleepMicros(5'000'000);
  EXPECT_EQ(env.UnixSeconds(), 105);
}

TEST(PathTest, SafeRelativePath) {
  EXPECT_EQ(*SafeRelativePath("a/./b/../c.jpg"), "a/c.jpg");
  EXPECT_FALSE(SafeRelativePath("../../etc/passwd").IsOk());
  EXPECT_FALSE(SafeRelativePath("/etc/passwd").IsOk());
  EXPECT_FALSE(SafeRelativePath("a/../../x").IsOk());
  EXPECT_FALSE(SafeRelativePath("").IsOk());
}

TEST(PathTest, StemAndExtension) {
  EXPECT_EQ(Stem("a/b/img.v2.JPG"), "img.v2");
  EXPECT_EQ(Extension("a/b/img.v2.JPG"), "jpg");
  EXPECT_EQ(DirName("a/b/c"), "a/b");
  EXPECT_EQ(JoinPath("a/", "b"), "a/b");
}

}  // namespace
}  // namespace kestrel
