// The trainer usage sampler (jobs/usage_sampler.h, docs/jobs.md "System
// usage"): the /proc and nvidia-smi parsers on fixture text (a comm with
// spaces and parentheses, "[N/A]" figures, malformed lines named by field),
// the tree arithmetic on a fake /proc, the parsers on this test process's
// own files, real children (a spinning tree's CPU, reaped grandchildren
// included; RSS growing with an allocation), and a real Worker sampling a
// /bin/sh trainer into metric events and its usage setting.
#include "jobs/usage_sampler.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/job_kinds.h"
#include "app/metric_series.h"
#include "core/hash.h"
#include "core/safetensors.h"
#include "jobs/worker.h"

namespace kestrel::jobs {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A stat line: pid, comm, state, ppid, pgrp, then the fields up to rss
// (24) with utime..cstime and rss set.
std::string StatLine(int64_t pid, const std::string& comm, int64_t ppid, int64_t pgrp, uint64_t utime,
                     uint64_t stime, uint64_t cutime = 0, uint64_t cstime = 0, int64_t rss_pages = 100) {
  std::ostringstream s;
  // 6 session 7 tty_nr 8 tpgid 9 flags 10-13 faults 14 utime 15 stime 16 cutime 17 cstime
  // 18 priority 19 nice 20 num_threads 21 itrealvalue 22 starttime 23 vsize 24 rss 25 rsslim ...
  s << pid << " (" << comm << ") S " << ppid << " " << pgrp << " " << pgrp << " 0 -1 4194560 10 0 0 0 "
    << utime << " " << stime << " " << cutime << " " << cstime << " 20 0 1 0 5000 1000000 " << rss_pages
    << " 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
  return s.str();
}

TEST(ProcStatParse, ACommWithSpacesAndParenthesesIsReadUpToTheLastParenthesis) {
  auto st = ParseProcStat(StatLine(4242, "my (weird) trainer) S 1 9", 7, 4242, 250, 50, 30, 20, 777));
  ASSERT_TRUE(st.IsOk()) << st.GetStatus().ToString();
  EXPECT_EQ(st->pid, 4242);
  EXPECT_EQ(st->comm, "my (weird) trainer) S 1 9");
  EXPECT_EQ(st->state, 'S');
  EXPECT_EQ(st->ppid, 7);
  EXPECT_EQ(st->pgrp, 4242);
  EXPECT_EQ(st->utime, 250u);
  EXPECT_EQ(st->stime, 50u);
  EXPECT_EQ(st->cutime, 30u);
  EXPECT_EQ(st->cstime, 20u);
  EXPECT_EQ(st->rss_pages, 777);
  // An empty comm and one that is only a ')'.
  auto empty = ParseProcStat(StatLine(5, "", 1, 5, 1, 2));
  ASSERT_TRUE(empty.IsOk()) << empty.GetStatus().ToString();
  EXPECT_EQ(empty->comm, "");
  auto paren = ParseProcStat(StatLine(6, ")", 1, 6, 3, 4));
  ASSERT_TRUE(paren.IsOk()) << paren.GetStatus().ToString();
  EXPECT_EQ(paren->comm, ")");
  EXPECT_EQ(paren->utime, 3u);
}

TEST(ProcStatParse, MalformedTextIsRefusedNamingTheFieldAndFile) {
  auto no_comm = ParseProcStat("12 sleeper S 1 12", "/proc/12/stat");
  ASSERT_FALSE(no_comm.IsOk());
  EXPECT_EQ(no_comm.GetStatus().Where().field, "comm");
  EXPECT_EQ(no_comm.GetStatus().Where().file, "/proc/12/stat");
  auto short_line = ParseProcStat("12 (a b) S 1 12 12 0 -1 0 0 0 0 0 5 6");
  ASSERT_FALSE(short_line.IsOk());
  EXPECT_EQ(short_line.GetStatus().Where().field, "rss");
  std::string line = StatLine(12, "x", 1, 12, 1, 2);
  line.replace(line.find(" 1 2 0 0 20"), 4, " 1 z");  // utime "1", stime "z"
  auto bad_stime = ParseProcStat(line);
  ASSERT_FALSE(bad_stime.IsOk());
  EXPECT_EQ(bad_stime.GetStatus().Where().field, "stime");
  EXPECT_NE(bad_stime.GetStatus().Message().find("'z'"), std::string::npos)
      << bad_stime.GetStatus().Message();
  EXPECT_FALSE(ParseProcStat("x (a) S 1 1").IsOk());
}

TEST(ProcStatusParse, VmRssInKilobytesOrNoneOrAnErrorNamingTheLine) {
  auto kb = ParseVmRssKb(
      "Name:\ttrainer\nState:\tR (running)\nVmPeak:\t  99999 kB\nVmRSS:\t  123456 kB\nThreads:\t4\n");
  ASSERT_TRUE(kb.IsOk());
  ASSERT_TRUE(kb->has_value());
  EXPECT_EQ(**kb, 123456);
  auto none = ParseVmRssKb("Name:\tkthreadd\nState:\tS (sleeping)\n");
  ASSERT_TRUE(none.IsOk());
  EXPECT_FALSE(none->has_value());
  auto bad = ParseVmRssKb("Name:\tx\nVmRSS:\t  lots kB\n", "/proc/9/status");
  ASSERT_FALSE(bad.IsOk());
  EXPECT_EQ(bad.GetStatus().Where().field, "VmRSS");
  EXPECT_EQ(bad.GetStatus().Where().line, 2);
  EXPECT_EQ(bad.GetStatus().Where().file, "/proc/9/status");
}

TEST(NvidiaSmiParse, GpusAndComputeAppsWithUnreportedFigures) {
  auto gpus = ParseGpuQueryCsv("0, GPU-aaa, 37, 1234\n1, GPU-bbb, [N/A], [Not Supported]\n");
  ASSERT_TRUE(gpus.IsOk()) << gpus.GetStatus().ToString();
  ASSERT_EQ(gpus->size(), 2u);
  EXPECT_EQ((*gpus)[0].index, 0);
  EXPECT_EQ((*gpus)[0].uuid, "GPU-aaa");
  EXPECT_EQ((*gpus)[0].util_percent, 37);
  EXPECT_EQ((*gpus)[0].mem_used_mb, 1234);
  EXPECT_EQ((*gpus)[1].index, 1);
  EXPECT_FALSE((*gpus)[1].util_percent.has_value());
  EXPECT_FALSE((*gpus)[1].mem_used_mb.has_value());
  auto apps = ParseComputeAppsCsv("4242, GPU-aaa, 812\n999, GPU-bbb, [N/A]\n");
  ASSERT_TRUE(apps.IsOk()) << apps.GetStatus().ToString();
  ASSERT_EQ(apps->size(), 2u);
  EXPECT_EQ((*apps)[0].pid, 4242);
  EXPECT_EQ((*apps)[0].gpu_uuid, "GPU-aaa");
  EXPECT_EQ((*apps)[0].used_mb, 812);
  EXPECT_FALSE((*apps)[1].used_mb.has_value());
  // Nothing on the GPUs: an empty answer, or an older driver's sentence.
  EXPECT_TRUE(ParseComputeAppsCsv("").Value().empty());
  EXPECT_TRUE(ParseComputeAppsCsv("No running processes found\n").Value().empty());
  // Malformed: named by field and line.
  auto bad_count = ParseGpuQueryCsv("0, GPU-aaa, 37\n");
  ASSERT_FALSE(bad_count.IsOk());
  EXPECT_EQ(bad_count.GetStatus().Where().field, "query-gpu");
  auto bad_util = ParseGpuQueryCsv("0, GPU-aaa, 37, 10\n1, GPU-bbb, busy, 10\n");
  ASSERT_FALSE(bad_util.IsOk());
  EXPECT_EQ(bad_util.GetStatus().Where().field, "utilization.gpu");
  EXPECT_EQ(bad_util.GetStatus().Where().line, 2);
  auto bad_pid = ParseComputeAppsCsv("-3, GPU-aaa, 10\n");
  ASSERT_FALSE(bad_pid.IsOk());
  EXPECT_EQ(bad_pid.GetStatus().Where().field, "pid");
}

TEST(UsageSeconds, ZeroIsOffAndLessThanASecondIsRefused) {
  EXPECT_EQ(ParseUsageSeconds("5", "command line").Value(), 5000);
  EXPECT_EQ(ParseUsageSeconds("0", "command line").Value(), 0);
  EXPECT_EQ(ParseUsageSeconds("1.5", "command line").Value(), 1500);
  for (const char* bad : {"0.5", "-1", "abc", "nan", "90000"}) {
    auto r = ParseUsageSeconds(bad, "KESTREL_USAGE_S");
    ASSERT_FALSE(r.IsOk()) << bad;
    EXPECT_EQ(r.GetStatus().Where().field, "usage-s") << bad;
    EXPECT_EQ(r.GetStatus().Where().file, "KESTREL_USAGE_S") << bad;
  }
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ProcStatParse, ThisTestProcessOwnFiles) {
  auto st = ParseProcStat(ReadText("/proc/self/stat"), "/proc/self/stat");
  ASSERT_TRUE(st.IsOk()) << st.GetStatus().ToString();
  EXPECT_EQ(st->pid, ::getpid());
  EXPECT_EQ(st->ppid, ::getppid());
  EXPECT_EQ(st->pgrp, ::getpgrp());
  std::string comm = ReadText("/proc/self/comm");
  while (!comm.empty() && comm.back() == '\n') comm.pop_back();
  EXPECT_EQ(st->comm, comm);
  EXPECT_EQ(st->state, 'R');
  auto kb = ParseVmRssKb(ReadText("/proc/self/status"));
  ASSERT_TRUE(kb.IsOk()) << kb.GetStatus().ToString();
  ASSERT_TRUE(kb->has_value());
  EXPECT_GT(**kb, 1000);  // a gtest binary holds more than a megabyte
  // The sampler reads this process as a tree of at least one.
  UsageSampler sampler(UsageSampler::Options{"/proc", [] { return std::optional<GpuSnapshot>(); }, 0});
  ASSERT_TRUE(sampler.Start(::getpid(), 0).IsOk());
  auto r = sampler.Sample(::getpid(), 1'000'000, std::nullopt);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_GE(r->processes, 1);
  EXPECT_NEAR(r->rss_mb, static_cast<double>(**kb) / 1024.0, 64.0);
  EXPECT_FALSE(r->gpu_util_percent.has_value());
  EXPECT_FALSE(r->gpu_mem_mb.has_value());
}

// A fake /proc: pid -> (stat line, VmRSS kB or -1 for no line).
class FakeProc {
 public:
  FakeProc() {
    dir_ = fs::temp_directory_path() / ("kestrel_fakeproc_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::create_directories(dir_ / "self");  // not a pid: skipped
  }
  ~FakeProc() { fs::remove_all(dir_); }
  void Put(int64_t pid, const std::string& stat, int64_t rss_kb) {
    const fs::path d = dir_ / std::to_string(pid);
    fs::create_directories(d);
    std::ofstream(d / "stat") << stat;
    std::ofstream status(d / "status");
    status << "Name:\tx\n";
    if (rss_kb >= 0) status << "VmRSS:\t" << rss_kb << " kB\n";
  }
  void Remove(int64_t pid) { fs::remove_all(dir_ / std::to_string(pid)); }
  std::string Path() const { return dir_.string(); }

 private:
  fs::path dir_;
};

TEST(UsageSamplerTree, ChildrenGrandchildrenAndTheGroupCountOthersDoNot) {
  FakeProc proc;
  std::optional<GpuSnapshot> gpu;
  UsageSampler sampler(UsageSampler::Options{proc.Path(), [&] { return gpu; }, 100});
  // 100 the trainer (group leader), 101 its child, 102 a grandchild, 103
  // re-parented to init but still in the group, 200 and 201 someone else's.
  proc.Put(100, StatLine(100, "kestrel train", 50, 100, 1000, 100, 40, 10), 200'000);
  proc.Put(101, StatLine(101, "pt_data_worker (0)", 100, 100, 300, 0), 50'000);
  proc.Put(102, StatLine(102, "nvidia-smi", 101, 100, 10, 0), 1'024);
  proc.Put(103, StatLine(103, "daemon) S 1 100", 1, 100, 5, 0), 2'048);
  proc.Put(200, StatLine(200, "other", 1, 200, 99999, 0), 900'000);
  proc.Put(201, StatLine(201, "other child", 200, 200, 5555, 0), -1);
  ASSERT_TRUE(sampler.Start(100, 0).IsOk());
  EXPECT_EQ(sampler.Sample(100, 1, std::nullopt).IsOk(), true);  // baseline again at t=1 us
  // 2 s later: +200 ticks for 100 (user and system), +100 for 101, 102
  // exited and was reaped by 101 (its 10 + 20 more ticks now in 101's cutime).
  proc.Put(100, StatLine(100, "kestrel train", 50, 100, 1150, 150, 40, 10), 210'000);
  proc.Put(101, StatLine(101, "pt_data_worker (0)", 100, 100, 400, 0, 30, 0), 60'000);
  proc.Remove(102);
  proc.Put(200, StatLine(200, "other", 1, 200, 199999, 0), 900'000);
  auto r = sampler.Sample(100, 2'000'001, std::nullopt);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_EQ(r->processes, 3);  // 100, 101, 103
  // (1150+150+40+10 + 400+30 + 5) - (1000+100+40+10 + 300 + 10 + 5) = 320 ticks = 3.2 s over 2 s.
  EXPECT_NEAR(r->cpu_seconds, 3.2, 1e-9);
  EXPECT_NEAR(r->wall_seconds, 2.0, 1e-9);
  EXPECT_NEAR(r->cpu_percent, 160.0, 1e-9);
  EXPECT_DOUBLE_EQ(r->rss_mb, (210'000 + 60'000 + 2'048) / 1024.0);
  EXPECT_FALSE(r->gpu_util_percent.has_value());
  // A member reaped outside the tree takes its ticks along: no negative usage.
  proc.Remove(101);
  r = sampler.Sample(100, 3'000'001, std::nullopt);
  ASSERT_TRUE(r.IsOk());
  EXPECT_EQ(r->cpu_percent, 0);
  EXPECT_EQ(r->processes, 2);
  // The root exited and not yet reaped (a zombie: no memory, no VmRSS):
  // kNotFound, never a reading of 0 MB (LiveMetricsCliTest saw one).
  std::string zombie = StatLine(100, "kestrel train", 50, 100, 1150, 150, 40, 10, 0);
  zombie.replace(zombie.find(") S "), 4, ") Z ");
  proc.Put(100, zombie, -1);
  EXPECT_EQ(sampler.Sample(100, 3'500'001, std::nullopt).GetStatus().Code(), StatusCode::kNotFound);
  EXPECT_FALSE(sampler.Start(100, 3'600'001).IsOk());  // nor a baseline of one
  proc.Put(100, StatLine(100, "kestrel train", 50, 100, 1150, 150, 40, 10), 210'000);
  ASSERT_TRUE(sampler.Start(100, 3'700'001).IsOk());
  // The root gone: kNotFound, and a later Sample needs a Start again.
  proc.Remove(100);
  EXPECT_EQ(sampler.Sample(100, 4'000'001, std::nullopt).GetStatus().Code(), StatusCode::kNotFound);
  EXPECT_EQ(sampler.Sample(100, 5'000'001, std::nullopt).GetStatus().Code(), StatusCode::kFailedPrecondition);
}

TEST(UsageSamplerTree, GpuFiguresOnlyWhenTheTreeOrItsDeviceIsOnAGpu) {
  FakeProc proc;
  proc.Put(100, StatLine(100, "trainer", 1, 100, 0, 0), 1024);
  proc.Put(101, StatLine(101, "worker", 100, 100, 0, 0), 1024);
  UsageSampler sampler(UsageSampler::Options{proc.Path(), [] { return std::optional<GpuSnapshot>(); }, 100});
  ASSERT_TRUE(sampler.Start(100, 0).IsOk());
  GpuSnapshot snap;
  snap.devices = {{0, "GPU-aaa", 40.0, 9000.0}, {1, "GPU-bbb", 90.0, 30000.0}, {2, "GPU-ccc", 15.0, 100.0}};
  snap.processes = {{101, "GPU-aaa", 500.0}, {100, "GPU-ccc", 250.0}, {555, "GPU-bbb", 20000.0}};
  // The tree's processes: their memory, the busiest of their GPUs.
  auto r = sampler.Sample(100, 1'000'000, snap, 1);
  ASSERT_TRUE(r.IsOk());
  EXPECT_EQ(r->gpu_mem_mb, 750.0);
  EXPECT_EQ(r->gpu_util_percent, 40.0);
  // Not listed (another PID namespace): the attempt's device as a whole.
  snap.processes = {{555, "GPU-bbb", 20000.0}};
  r = sampler.Sample(100, 2'000'000, snap, 1);
  ASSERT_TRUE(r.IsOk());
  EXPECT_EQ(r->gpu_mem_mb, 30000.0);
  EXPECT_EQ(r->gpu_util_percent, 90.0);
  // A CPU attempt not on any GPU, or no nvidia-smi: no GPU figure at all (never a zero).
  r = sampler.Sample(100, 3'000'000, snap, -1);
  ASSERT_TRUE(r.IsOk());
  EXPECT_FALSE(r->gpu_mem_mb.has_value());
  EXPECT_FALSE(r->gpu_util_percent.has_value());
  r = sampler.Sample(100, 4'000'000, std::nullopt, 1);
  ASSERT_TRUE(r.IsOk());
  EXPECT_FALSE(r->gpu_mem_mb.has_value());
  EXPECT_FALSE(r->gpu_util_percent.has_value());
}

// Spins until this process has used `seconds` of CPU.
void SpinCpu(double seconds) {
  timespec ts{};
  volatile uint64_t sink = 0;
  while (true) {
    for (int i = 0; i < 100000; ++i) sink = sink + static_cast<uint64_t>(i);
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    if (static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9 >= seconds) return;
  }
}

int64_t SteadyUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

TEST(UsageSamplerReal, ASpinningTreeAndAGrowingAllocation) {
  int to_child[2], from_child[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(from_child), 0);
  const pid_t root = ::fork();
  ASSERT_GE(root, 0);
  if (root == 0) {
    // The trainer: spins 0.4 s beside a child that spins 0.4 s and is
    // reaped (its time then sits in our cutime), says so, allocates and
    // touches 96 MiB when asked, says so, exits when asked.
    ::setpgid(0, 0);
    const pid_t grandchild = ::fork();
    if (grandchild == 0) {
      SpinCpu(0.4);
      ::_exit(0);
    }
    SpinCpu(0.4);
    int st = 0;
    ::waitpid(grandchild, &st, 0);
    char c = 's';
    if (::write(from_child[1], &c, 1) != 1) ::_exit(1);
    if (::read(to_child[0], &c, 1) != 1) ::_exit(1);
    const size_t n = size_t{96} << 20;
    auto* block = static_cast<volatile char*>(std::malloc(n));
    for (size_t i = 0; i < n; i += 4096) block[i] = 1;
    c = 'a';
    if (::write(from_child[1], &c, 1) != 1) ::_exit(1);
    if (::read(to_child[0], &c, 1) != 1) ::_exit(1);
    ::_exit(block[4096] == 1 ? 0 : 2);
  }
  UsageSampler sampler(UsageSampler::Options{"/proc", [] { return std::optional<GpuSnapshot>(); }, 0});
  ASSERT_TRUE(sampler.Start(root, SteadyUs()).IsOk());
  char c = 0;
  ASSERT_EQ(::read(from_child[0], &c, 1), 1);
  ASSERT_EQ(c, 's');
  auto spun = sampler.Sample(root, SteadyUs(), std::nullopt);
  ASSERT_TRUE(spun.IsOk()) << spun.GetStatus().ToString();
  // Both spinners' 0.8 s of CPU (the reaped one through cutime), whatever
  // the machine's load; over the wall time they took.
  EXPECT_GE(spun->cpu_seconds, 0.75);
  // The percent is that CPU time over the wall time, whatever the load
  // made the wall time (no bound on it: beside two busy processes on two
  // cores the spinners got 0.79 s of CPU in 1.64 s, 48 %).
  EXPECT_NEAR(spun->cpu_percent, 100 * spun->cpu_seconds / spun->wall_seconds, 1e-9);
  EXPECT_GT(spun->wall_seconds, 0.0);
  c = 'g';
  ASSERT_EQ(::write(to_child[1], &c, 1), 1);
  ASSERT_EQ(::read(from_child[0], &c, 1), 1);
  ASSERT_EQ(c, 'a');
  auto grown = sampler.Sample(root, SteadyUs(), std::nullopt);
  ASSERT_TRUE(grown.IsOk()) << grown.GetStatus().ToString();
  EXPECT_GE(grown->rss_mb, spun->rss_mb + 90) << spun->rss_mb << " MB -> " << grown->rss_mb << " MB";
  EXPECT_EQ(grown->processes, 1);
  ASSERT_EQ(::write(to_child[1], &c, 1), 1);
  int st = 0;
  ASSERT_EQ(::waitpid(root, &st, 0), root);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) ::close(fd);
}

// A real Worker with usage sampling on: a /bin/sh trainer that spins about
// 2.5 s gets "time" metric events under sys/ (no GPU figures without a
// GPU), the route's series read them, and the worker's usage setting ends
// with no jobs once the trainer is done.
TEST(WorkerUsage, ARunningTrainerIsSampledIntoMetricEventsAndTheWorkersSetting) {
  const fs::path dir = fs::temp_directory_path() / ("kestrel_usage_worker_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string url = "sqlite:" + (dir / "kestrel.db").string();
  auto opened = store::MetadataStore::Open(url);
  ASSERT_TRUE(opened.IsOk()) << opened.GetStatus().ToString();
  auto meta = std::move(opened).Value();
  SafeTensorFile f;
  f.tensors["w"] = SafeTensor{"F32", {1}, std::string(4, '\0')};
  const std::string weights = (dir / "best.safetensors").string();
  std::ofstream(weights, std::ios::binary) << SerializeSafeTensors(f);
  store::JobSpec spec;
  spec.dataset_version = Sha256Hex("birds");
  spec.config_json = R"({"tag":"usage"})";
  bool created = false;
  auto job = meta->SubmitJob(spec, Env::Default().UnixMillis(), &created);
  ASSERT_TRUE(job.IsOk() && created) << job.GetStatus().ToString();

  WorkerOptions o;
  o.id = "usage-worker";
  o.host = "test";
  o.home = (dir / "home").string();
  o.child_command = {"/bin/sh", "-c",
                     "echo stage=train >&3\n"
                     "end=$(( $(date +%s) + 3 ))\n"
                     "while [ $(date +%s) -lt $end ]; do :; done\n"
                     "echo 'result {\"best\":\"" +
                         weights + "\",\"map50\":0.9,\"map50_95\":0.6}' >&3\n",
                     "fake-trainer"};
  o.kinds = app::WorkerKinds(app::JobKinds(), Env::Default());
  o.poll_ms = 50;
  o.supervisor.poll_ms = 10;
  o.exit_when_idle = true;
  o.webhooks = false;
  o.usage_sample_ms = 1000;
  // No GPU here, whatever the host has: the CPU half is what this checks.
  o.usage_sampler = [] {
    return std::make_unique<UsageSampler>(
        UsageSampler::Options{"/proc", [] { return std::optional<GpuSnapshot>(); }, 0});
  };
  PosixProcessRunner runner;
  Worker w([url] { return store::MetadataStore::Open(url); }, runner, Env::Default(), o);
  std::atomic<bool> stop{false};
  ASSERT_TRUE(w.Run(stop).IsOk());
  EXPECT_EQ(w.Counters().succeeded, 1);

  auto events = meta->ReadEvents(0, job->id, 1000);
  ASSERT_TRUE(events.IsOk());
  int samples = 0;
  int64_t last_x = -1;
  double max_cpu = 0;
  for (const auto& ev : *events) {
    if (ev.kind != "metric") continue;
    const json p = json::parse(ev.payload_json);
    ASSERT_EQ(p["type"], "time") << ev.payload_json;
    EXPECT_EQ(ev.attempt, 1);
    EXPECT_GT(p["x"].get<int64_t>(), last_x);
    last_x = p["x"].get<int64_t>();
    EXPECT_GE(p["values"]["sys/cpu_percent"].get<double>(), 0);
    max_cpu = std::max(max_cpu, p["values"]["sys/cpu_percent"].get<double>());
    EXPECT_GT(p["values"]["sys/rss_mb"].get<double>(), 0);
    EXPECT_FALSE(p["values"].contains("sys/gpu_util")) << ev.payload_json;
    EXPECT_FALSE(p["values"].contains("sys/gpu_mem_mb")) << ev.payload_json;
    ++samples;
  }
  EXPECT_GE(samples, 1);
  EXPECT_GE(last_x, 1);
  EXPECT_GT(max_cpu, 10) << "the trainer spins: its tree's CPU shows";
  // The route's series: x counts time.
  auto metrics = app::ReadJobMetrics(*meta, job->id);
  ASSERT_TRUE(metrics.IsOk());
  const auto& series = metrics->SeriesByName();
  ASSERT_EQ(series.count("sys/cpu_percent"), 1u);
  EXPECT_EQ(series.at("sys/cpu_percent").axis, "time");
  EXPECT_EQ(series.at("sys/rss_mb").points.size(), static_cast<size_t>(samples));
  EXPECT_EQ(series.count("sys/gpu_util"), 0u);
  // The worker's row: its last write says nothing runs.
  auto setting = meta->GetSetting(std::string(kUsageSettingPrefix) + "usage-worker");
  ASSERT_TRUE(setting.IsOk()) << setting.GetStatus().ToString();
  const json u = json::parse(*setting);
  EXPECT_EQ(u["jobs"], json::array());
  EXPECT_EQ(u["cpu_percent"], 0);
  EXPECT_EQ(u["interval_ms"], 1000);
  meta.reset();
  fs::remove_all(dir);
}

// Nothing to run: the usage thread reads nothing and writes nothing (no
// GPU query, no setting), and the worker still exits when idle.
TEST(WorkerUsage, AnIdleWorkerSamplesAndWritesNothing) {
  const fs::path dir = fs::temp_directory_path() / ("kestrel_usage_idle_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string url = "sqlite:" + (dir / "kestrel.db").string();
  WorkerOptions o;
  o.id = "idle-worker";
  o.host = "test";
  o.child_command = {"/bin/true"};
  o.kinds = app::WorkerKinds(app::JobKinds(), Env::Default());
  o.poll_ms = 50;
  o.exit_when_idle = true;
  o.webhooks = false;
  o.usage_sample_ms = 1000;
  std::atomic<int> queries{0};
  o.usage_sampler = [&queries] {
    return std::make_unique<UsageSampler>(UsageSampler::Options{"/proc",
                                                                [&queries] {
                                                                  ++queries;
                                                                  return std::optional<GpuSnapshot>();
                                                                },
                                                                0});
  };
  PosixProcessRunner runner;
  {
    Worker w([url] { return store::MetadataStore::Open(url); }, runner, Env::Default(), o);
    std::atomic<bool> stop{false};
    ASSERT_TRUE(w.Run(stop).IsOk());
  }
  EXPECT_EQ(queries.load(), 0);
  auto meta = store::MetadataStore::Open(url);
  ASSERT_TRUE(meta.IsOk());
  EXPECT_EQ((*meta)->GetSetting(std::string(kUsageSettingPrefix) + "idle-worker").GetStatus().Code(),
            StatusCode::kNotFound);
  meta = Status::Internal("closed");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kestrel::jobs
