#include "core/thread_policy.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>

namespace kestrel {
namespace {

// ---- OpenMP env ---------------------------------------------------------

std::vector<EnvSetting> DefaultsFor(const std::map<std::string, std::string>& env) {
  return OpenMpEnvDefaults([&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(ThreadPolicyTest, OpenMpDefaultsSetAPassiveWaitWhenTheUserChoseNothing) {
  const auto set = DefaultsFor({{"PATH", "/bin"}});
  ASSERT_EQ(set.size(), 1u);
  EXPECT_EQ(set[0].name, "OMP_WAIT_POLICY");
  EXPECT_EQ(set[0].value, "PASSIVE");
  EXPECT_EQ(set[0].value, std::string(kOmpWaitPolicy));
}

TEST(ThreadPolicyTest, OpenMpDefaultsKeepTheUsersChoice) {
  // Either variable, even empty, is the user's wait policy: nothing is added.
  EXPECT_TRUE(DefaultsFor({{"OMP_WAIT_POLICY", "ACTIVE"}}).empty());
  EXPECT_TRUE(DefaultsFor({{"GOMP_SPINCOUNT", "300000"}}).empty());
  EXPECT_TRUE(DefaultsFor({{"GOMP_SPINCOUNT", ""}}).empty());
  EXPECT_TRUE(DefaultsFor({{"OMP_WAIT_POLICY", "PASSIVE"}, {"GOMP_SPINCOUNT", "5"}}).empty());
}

// Applied in a child, so this process's environment is left as it was.
TEST(ThreadPolicyTest, ApplyOpenMpEnvDefaultsSetsOnlyWhatIsMissing) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::unsetenv("OMP_WAIT_POLICY");
    ::unsetenv("GOMP_SPINCOUNT");
    const auto first = ApplyOpenMpEnvDefaults();
    const char* v = std::getenv("OMP_WAIT_POLICY");
    if (first.size() != 1 || v == nullptr || std::string(v) != kOmpWaitPolicy) ::_exit(1);
    ::unsetenv("OMP_WAIT_POLICY");
    ::setenv("GOMP_SPINCOUNT", "77", 1);
    if (!ApplyOpenMpEnvDefaults().empty() || std::string(std::getenv("GOMP_SPINCOUNT")) != "77" ||
        std::getenv("OMP_WAIT_POLICY") != nullptr)
      ::_exit(2);
    ::unsetenv("GOMP_SPINCOUNT");
    ::setenv("OMP_WAIT_POLICY", "active", 1);
    if (!ApplyOpenMpEnvDefaults().empty() || std::string(std::getenv("OMP_WAIT_POLICY")) != "active")
      ::_exit(3);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// ---- Loader split -------------------------------------------------------

TEST(ThreadPolicyTest, SplitGivesTheLoaderAQuarterAndTorchTheRest) {
  auto s = SplitThreadBudget(2, 0, -1);
  EXPECT_EQ(s.loader, 1);
  EXPECT_EQ(s.torch, 2);  // 1-3 CPUs: the intra-op threads keep every CPU
  EXPECT_NE(s.why.find("1 loader thread"), std::string::npos) << s.why;
  s = SplitThreadBudget(1, 0, -1);
  EXPECT_EQ(s.loader, 1);
  EXPECT_EQ(s.torch, 1);
  s = SplitThreadBudget(4, 0, -1);
  EXPECT_EQ(s.loader, 1);
  EXPECT_EQ(s.torch, 3);
  s = SplitThreadBudget(8, 0, -1);
  EXPECT_EQ(s.loader, 2);
  EXPECT_EQ(s.torch, 6);
  s = SplitThreadBudget(16, 0, -1);
  EXPECT_EQ(s.loader, 4);
  EXPECT_EQ(s.torch, 12);
  EXPECT_EQ(s.loader + s.torch, 16);
}

TEST(ThreadPolicyTest, SplitKeepsWhatTheUserGave) {
  auto s = SplitThreadBudget(8, 0, 3);  // workers=3
  EXPECT_EQ(s.loader, 3);
  EXPECT_EQ(s.torch, 5);
  EXPECT_NE(s.why.find("workers=3"), std::string::npos) << s.why;
  s = SplitThreadBudget(8, 4, -1);  // threads=4
  EXPECT_EQ(s.loader, 2);
  EXPECT_EQ(s.torch, 4);
  EXPECT_NE(s.why.find("threads=4"), std::string::npos) << s.why;
  s = SplitThreadBudget(8, 0, 0);  // workers=0: the loader runs one thread
  EXPECT_EQ(s.loader, 1);
  EXPECT_EQ(s.torch, 7);
}

// ---- /proc parsing ------------------------------------------------------

constexpr const char* kStat =
    "cpu  300 0 100 1000 0 0 0 0 0 0\n"
    "cpu0 100 0 50 500 0 0 0 0 0 0\n"
    "cpu1 200 10 50 500 20 5 5 10 0 0\n"
    "intr 12345\n"
    "ctxt 999\n";

TEST(ThreadPolicyTest, ParseProcStatSumsTheSetsCpus) {
  auto t = ParseProcStat(kStat, {1});
  ASSERT_TRUE(t);
  EXPECT_EQ(t->cpus, 1);
  EXPECT_EQ(t->busy, 200u + 10 + 50 + 5 + 5 + 10);
  EXPECT_EQ(t->total, t->busy + 500 + 20);
  auto both = ParseProcStat(kStat, {0, 1, 7});  // 7 is not there
  ASSERT_TRUE(both);
  EXPECT_EQ(both->cpus, 2);
  EXPECT_EQ(both->busy, 150u + 280);
  EXPECT_FALSE(ParseProcStat(kStat, {5}));
  EXPECT_FALSE(ParseProcStat("cpu0 1 2 x 4 5 6 7 8\n", {0}));
  EXPECT_FALSE(ParseProcStat("cpu0 1 2 3\n", {0}));
  EXPECT_FALSE(ParseProcStat("", {0}));
}

TEST(ThreadPolicyTest, ParseProcPidStatReadsPastTheCommand) {
  // The command may hold spaces and ')'.
  EXPECT_EQ(ParseProcPidStatTicks("42 (kestrel) R 1 42 42 0 -1 4194560 100 0 0 0 250 31 0 0 20 0 3 0"),
            std::optional<uint64_t>(281));
  EXPECT_EQ(ParseProcPidStatTicks("42 (a b) c)) S 1 42 42 0 -1 0 0 0 0 0 7 3 0 0"),
            std::optional<uint64_t>(10));
  EXPECT_FALSE(ParseProcPidStatTicks("42 (short) R 1 2"));
  EXPECT_FALSE(ParseProcPidStatTicks("no parenthesis"));
  EXPECT_FALSE(ParseProcPidStatTicks("1 (x) R 1 1 1 0 -1 0 0 0 0 0 -5 3"));
}

TEST(ThreadPolicyTest, ReadLoadSampleReadsThisMachine) {
  auto s = ReadLoadSample(1.0, {0});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->cpus.cpus, 1);
  EXPECT_GT(s->cpus.total, 0u);
}

// ---- Adaptive threads ---------------------------------------------------

// A scripted machine of `n` CPUs, 100 ticks per CPU-second: each step adds
// `dt` seconds in which other processes used `others` CPUs and this one
// `self` CPUs.
struct Script {
  int n = 2;
  LoadSample s;
  explicit Script(int cpus) : n(cpus) { s.cpus.cpus = cpus; }
  LoadSample Step(double dt, double others, double self) {
    s.now_s += dt;
    s.cpus.total += static_cast<uint64_t>(100 * dt * n);
    s.cpus.busy += static_cast<uint64_t>(100 * dt * (others + self));
    s.self_ticks += static_cast<uint64_t>(100 * dt * self);
    return s;
  }
};

TEST(ThreadPolicyTest, AdaptiveDropsAThreadBesideABusyProcessAndComesBack) {
  AdaptiveThreads a({.usable = 2, .max_threads = 2, .fixed = false, .interval_s = 3});
  Script m(2);
  EXPECT_TRUE(a.Due(0));
  EXPECT_FALSE(a.Observe(m.Step(0, 0, 0)));  // the baseline
  EXPECT_FALSE(a.Due(m.s.now_s + 1));
  EXPECT_TRUE(a.Due(m.s.now_s + 3));
  // Idle machine: we use both CPUs, nothing changes.
  EXPECT_FALSE(a.Observe(m.Step(3, 0.05, 1.9)));
  EXPECT_EQ(a.Threads(), 2);
  // A busy process shares the CPUs with our two threads (CFS: 2/3 each).
  auto d = a.Observe(m.Step(3, 0.67, 1.33));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->threads, 1);
  EXPECT_NE(d->why.find("other processes used 0.67 of 2 CPUs over 3.0 s"), std::string::npos) << d->why;
  // It keeps its core while we run one thread: no change.
  EXPECT_FALSE(a.Observe(m.Step(3, 1.0, 1.0)));
  EXPECT_EQ(a.Threads(), 1);
  // It leaves: back to two.
  d = a.Observe(m.Step(3, 0.1, 1.0));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->threads, 2);
}

TEST(ThreadPolicyTest, AdaptiveHysteresisIgnoresHalfACpu) {
  AdaptiveThreads a({.usable = 2, .max_threads = 2, .fixed = false, .interval_s = 3});
  Script m(2);
  a.Observe(m.Step(0, 0, 0));
  // A browser at 0.4 CPU: free 1.6 >= 1.5, two threads stay.
  EXPECT_FALSE(a.Observe(m.Step(3, 0.4, 1.6)));
  // Down at 0.6 CPU taken (free 1.4 < 1.5) ...
  ASSERT_TRUE(a.Observe(m.Step(3, 0.6, 1.4)));
  EXPECT_EQ(a.Threads(), 1);
  // ... but not back up at 0.4 (free 1.6 < 1 + 0.75): no flapping.
  EXPECT_FALSE(a.Observe(m.Step(3, 0.4, 1.0)));
  EXPECT_FALSE(a.Observe(m.Step(3, 0.3, 1.0)));
  ASSERT_TRUE(a.Observe(m.Step(3, 0.2, 1.0)));
  EXPECT_EQ(a.Threads(), 2);
}

TEST(ThreadPolicyTest, AdaptiveOnManyCpusStepsByWhatIsTaken) {
  // 8 CPUs, loader reserve 2 (max 6 intra-op threads).
  AdaptiveThreads a({.usable = 8, .max_threads = 6, .fixed = false, .interval_s = 3});
  Script m(8);
  a.Observe(m.Step(0, 0, 0));
  EXPECT_FALSE(a.Observe(m.Step(3, 0.5, 7)));
  auto d = a.Observe(m.Step(3, 3.0, 5));  // free 5, for torch 3
  ASSERT_TRUE(d);
  EXPECT_EQ(d->threads, 3);
  d = a.Observe(m.Step(3, 0, 4));  // all free again: up to the max, not past it
  ASSERT_TRUE(d);
  EXPECT_EQ(d->threads, 6);
  // Everything taken: never below one thread.
  d = a.Observe(m.Step(3, 8, 0.2));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->threads, 1);
}

TEST(ThreadPolicyTest, AdaptiveUnderACgroupQuotaIgnoresOtherCpus) {
  // Affinity 8 CPUs but a quota of 2: others on the 6 we may not use anyway
  // do not take our two.
  AdaptiveThreads a({.usable = 2, .max_threads = 2, .fixed = false, .interval_s = 3});
  Script m(8);
  a.Observe(m.Step(0, 0, 0));
  EXPECT_FALSE(a.Observe(m.Step(3, 5.5, 2)));
  EXPECT_EQ(a.Threads(), 2);
  ASSERT_TRUE(a.Observe(m.Step(3, 7, 1)));  // only 1 CPU of 8 left
  EXPECT_EQ(a.Threads(), 1);
}

TEST(ThreadPolicyTest, FixedNeverChangesAndBadSamplesRestartTheBaseline) {
  AdaptiveThreads fixed({.usable = 2, .max_threads = 2, .fixed = true, .interval_s = 3});
  Script m(2);
  EXPECT_FALSE(fixed.Due(0));
  fixed.Observe(m.Step(0, 0, 0));
  EXPECT_FALSE(fixed.Observe(m.Step(3, 2, 0)));
  EXPECT_EQ(fixed.Threads(), 2);
  EXPECT_EQ(fixed.Describe(), "fixed: threads=2");

  AdaptiveThreads a({.usable = 2, .max_threads = 2, .fixed = false, .interval_s = 3});
  EXPECT_NE(a.Describe().find("adaptive: 2 threads while the 2 CPUs are free"), std::string::npos)
      << a.Describe();
  Script n(2);
  a.Observe(n.Step(0, 0, 0));
  LoadSample back = n.Step(3, 2, 0);
  back.cpus.total = 0;  // a counter went back: no decision, a new baseline
  EXPECT_FALSE(a.Observe(back));
  LoadSample other = n.Step(3, 2, 0);
  other.cpus.cpus = 1;  // another CPU set
  EXPECT_FALSE(a.Observe(other));
  EXPECT_EQ(a.Threads(), 2);
}

}  // namespace
}  // namespace kestrel
