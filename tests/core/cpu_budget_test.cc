#include "core/cpu_budget.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

namespace kestrel {
namespace {

TEST(CpuBudgetTest, CgroupV2CpuMax) {
  EXPECT_EQ(ParseCgroupV2CpuMax("max 100000\n"), std::nullopt);
  EXPECT_DOUBLE_EQ(*ParseCgroupV2CpuMax("150000 100000\n"), 1.5);
  EXPECT_DOUBLE_EQ(*ParseCgroupV2CpuMax("200000 100000"), 2.0);
  EXPECT_EQ(ParseCgroupV2CpuMax(""), std::nullopt);
  EXPECT_EQ(ParseCgroupV2CpuMax("abc 100000"), std::nullopt);
  EXPECT_EQ(ParseCgroupV2CpuMax("100000 0"), std::nullopt);
}

TEST(CpuBudgetTest, CgroupV1Quota) {
  EXPECT_EQ(CgroupV1QuotaCpus(-1, 100000), std::nullopt);
  EXPECT_DOUBLE_EQ(*CgroupV1QuotaCpus(50000, 100000), 0.5);
  EXPECT_EQ(CgroupV1QuotaCpus(50000, 0), std::nullopt);
}

TEST(CpuBudgetTest, ProcCgroupV1AndV2) {
  const CgroupPaths p =
      ParseProcCgroup("9:name=systemd:/\n4:memory:/a\n2:cpu,cpuacct:/docker/abc\n0::/user.slice/x.scope\n");
  EXPECT_EQ(p.v2, "/user.slice/x.scope");
  EXPECT_EQ(p.v1_cpu, "/docker/abc");
  const CgroupPaths only2 = ParseProcCgroup("0::/\n");
  EXPECT_EQ(only2.v2, "/");
  EXPECT_EQ(only2.v1_cpu, "");
}

TEST(CpuBudgetTest, SplitCpusIsContiguousAndBalanced) {
  using V = std::vector<std::vector<int>>;
  EXPECT_EQ(SplitCpus({0, 1, 2, 3}, 2), (V{{0, 1}, {2, 3}}));
  EXPECT_EQ(SplitCpus({0, 1, 2, 3, 4}, 2), (V{{0, 1, 2}, {3, 4}}));
  EXPECT_EQ(SplitCpus({0, 1}, 1), (V{{0, 1}}));
  // Fewer CPUs than slots: the slots share, one CPU each, round-robin.
  EXPECT_EQ(SplitCpus({4, 5}, 3), (V{{4}, {5}, {4}}));
}

TEST(CpuBudgetTest, CpuListRoundTrip) {
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 6}), "0-3,6");
  EXPECT_EQ(FormatCpuList({5}), "5");
  auto v = ParseCpuList("0-3,6");
  ASSERT_TRUE(v.IsOk()) << v.GetStatus().ToString();
  EXPECT_EQ(*v, (std::vector<int>{0, 1, 2, 3, 6}));
  auto bad = ParseCpuList("3-1");
  ASSERT_FALSE(bad.IsOk());
  EXPECT_NE(bad.GetStatus().Message().find("'3-1'"), std::string::npos);
  EXPECT_FALSE(ParseCpuList("").IsOk());
  EXPECT_FALSE(ParseCpuList("x").IsOk());
}

TEST(CpuBudgetTest, ProcessBudgetIsWithinTheAffinityMask) {
  const CpuBudget b = ProcessCpuBudget();
  ASSERT_FALSE(b.affinity.empty());
  EXPECT_GE(b.usable, 1);
  EXPECT_LE(b.usable, static_cast<int>(b.affinity.size()));
  EXPECT_NE(b.why.find("affinity"), std::string::npos) << b.why;
}

// A process pinned to one CPU sees a budget of one core, whatever the
// machine has (run in a child so this test process stays unpinned).
TEST(CpuBudgetTest, PinnedProcessSeesOneCore) {
  const CpuBudget before = ProcessCpuBudget();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (!SetProcessAffinity({before.affinity.front()}).IsOk()) _exit(10);
    const CpuBudget after = ProcessCpuBudget();
    _exit(after.usable == 1 && after.affinity.size() == 1 ? 0 : 11);
  }
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  EXPECT_FALSE(SetProcessAffinity({}).IsOk());
}

}  // namespace
}  // namespace kestrel
