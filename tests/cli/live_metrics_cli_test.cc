// Live training metrics and `kestrel serve --workers` (issue 13), black box
// with the real binary: a tiny job run by `kestrel worker` appends metric
// events whose per-epoch values are its results.csv rows; `kestrel serve
// --workers 1` runs a submitted job to success, and on SIGTERM stops its
// worker (which hands a running job back) and leaves no process behind.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "../server/http_client.h"
#include "app/metric_events.h"
#include "app/metric_series.h"
#include "cli_fixture.h"
#include "freeze_when.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class LiveMetricsCliTest : public KestrelCliTest {
 protected:
  void SetUp() override {
    KestrelCliTest::SetUp();
    ASSERT_EQ(Kestrel("dataset synth data --images 12 --imgsz 64 --seed 3").code, 0);
    ASSERT_EQ(Kestrel("dataset import data --name tiny").code, 0);
  }
  // A job that trains in about a second per epoch on one core.
  static std::string TinyJob(const std::string& extra) {
    return "submit data=tiny model=t imgsz=64 batch=4 workers=1 threads=1 plots=false optimizer=AdamW "
           "lr0=0.01 "
           "warmup_epochs=0 " +
           extra;
  }
  int64_t SubmitId(const std::string& args) {
    CliRun r = Kestrel("--json " + args);
    EXPECT_EQ(r.code, 0) << r.out;
    return Json(r).value("job_id", int64_t{0});
  }
  json Show(int64_t id) { return Json(Kestrel("--json jobs show " + std::to_string(id))); }
  std::unique_ptr<store::MetadataStore> Meta() {
    auto m = store::MetadataStore::Open(store::MetadataUrl((dir_ / "home").string()));
    EXPECT_TRUE(m.IsOk()) << m.GetStatus().ToString();
    return m.IsOk() ? std::move(m).Value() : nullptr;
  }
};

// results.csv as rows of fields, by epoch.
std::map<int, std::vector<std::string>> ReadResultsCsv(const fs::path& path,
                                                       std::vector<std::string>* header) {
  std::ifstream in(path);
  std::string line;
  std::map<int, std::vector<std::string>> rows;
  bool first = true;
  while (std::getline(in, line)) {
    std::vector<std::string> fields;
    std::stringstream ss(line);
    std::string f;
    while (std::getline(ss, f, ',')) fields.push_back(f);
    if (first) {
      *header = fields;
      first = false;
      continue;
    }
    rows[std::stoi(fields[0])] = fields;
  }
  return rows;
}

// A value as results.csv prints it (the reference's "%.6g").
std::string G6(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

TEST_F(LiveMetricsCliTest, AWorkersTrainingAppendsMetricEventsThatAreItsResultsCsv) {
  const int64_t id = SubmitId(TinyJob("epochs=3"));
  ASSERT_GT(id, 0);
  // Usage sampled every second (docs/jobs.md "System usage"): the trainer's sys/ series.
  ASSERT_EQ(Kestrel("worker --exit-when-idle --poll-s 0.1 --usage-s 1").code, 0);
  ASSERT_EQ(Show(id)["job"]["state"], "succeeded");
  auto meta = Meta();
  ASSERT_NE(meta, nullptr);
  auto events = meta->ReadEvents(0, id, 100000);
  ASSERT_TRUE(events.IsOk()) << events.GetStatus().ToString();
  std::map<int, json> epochs;
  int steps = 0, usage = 0;
  const bool has_nvidia_smi = std::system("command -v nvidia-smi >/dev/null 2>&1") == 0;
  json last_progress;
  for (const auto& ev : *events) {
    if (ev.kind == "state") continue;
    EXPECT_EQ(ev.attempt, 1);
    const json p = json::parse(ev.payload_json);
    if (ev.kind == "progress") {
      last_progress = p;
      continue;
    }
    ASSERT_EQ(ev.kind, "metric") << ev.payload_json;
    if (p["type"] == "epoch") {
      EXPECT_EQ(epochs.count(p["epoch"].get<int>()), 0u) << "epoch reported twice: " << ev.payload_json;
      epochs[p["epoch"].get<int>()] = p;
    } else if (p["type"] == "time") {
      // The worker's sample of the trainer's process tree: a LibTorch
      // trainer holds well over 50 MB; no GPU figure on a machine without one.
      EXPECT_GE(p["values"]["sys/cpu_percent"].get<double>(), 0) << ev.payload_json;
      EXPECT_GT(p["values"]["sys/rss_mb"].get<double>(), 50) << ev.payload_json;
      EXPECT_TRUE(has_nvidia_smi || !p["values"].contains("sys/gpu_util")) << ev.payload_json;
      ++usage;
    } else {
      ASSERT_EQ(p["type"], "step");
      EXPECT_GE(p["x"].get<int64_t>(), 1);
      EXPECT_TRUE(p["values"]["iter/box_loss"].is_number());
      ++steps;
    }
  }
  // Every epoch's values are its results.csv row (same names, same figures).
  std::vector<std::string> header;
  const auto csv =
      ReadResultsCsv(dir_ / "home" / "jobs" / std::to_string(id) / "attempt-1" / "results.csv", &header);
  ASSERT_EQ(csv.size(), 3u);
  ASSERT_EQ(epochs.size(), 3u);
  for (const auto& [e, row] : csv) {
    const json& values = epochs[e]["values"];
    EXPECT_EQ(G6(values["metrics/mAP50(B)"].get<double>()), row[7]) << "epoch " << e;
    EXPECT_EQ(G6(values["metrics/mAP50-95(B)"].get<double>()), row[8]) << "epoch " << e;
    // Every column, `time` (cumulative seconds) included.
    ASSERT_EQ(header.size(), 15u);
    for (size_t c = 1; c < header.size(); ++c)
      EXPECT_EQ(G6(values[header[c]].get<double>()), row[c]) << header[c] << ", epoch " << e;
  }
  // Sampled losses: at least the end of every epoch; the last progress is the last iteration.
  EXPECT_GE(steps, 3);
  ASSERT_TRUE(last_progress.is_object());
  EXPECT_EQ(last_progress["epoch"], 3);
  EXPECT_EQ(last_progress["iteration"], last_progress["iterations"]);
  EXPECT_EQ(last_progress["batch"], last_progress["batches"]);
  // The series the route serves.
  auto metrics = app::ReadJobMetrics(*meta, id);
  ASSERT_TRUE(metrics.IsOk()) << metrics.GetStatus().ToString();
  app::MetricsQuery q;
  q.names = {"metrics/mAP50(B)"};
  const json doc = app::JobMetricsJson(id, *metrics, q);
  ASSERT_EQ(doc["series"][0]["data"].size(), 3u);
  EXPECT_EQ(doc["series"][0]["data"][2][0], 3);
  // The usage samples: series on the time axis, one point per sample.
  ASSERT_GE(usage, 1) << "no usage sample of a trainer that ran for seconds";
  q.names = {"sys/cpu_percent", "sys/rss_mb"};
  const json sys = app::JobMetricsJson(id, *metrics, q);
  for (const auto& s : sys["series"]) {
    EXPECT_EQ(s["x"], "time") << s.dump();
    EXPECT_EQ(s["data"].size(), static_cast<size_t>(usage)) << s.dump();
  }
}

// A trainer SIGKILLed right after its first checkpoint (maybe before that
// epoch's event was written): the retry resumes, and every epoch has exactly
// one epoch event over both attempts, with the values of the final
// results.csv.
TEST_F(LiveMetricsCliTest, AResumedAttemptReportsEveryEpochExactlyOnce) {
  const int64_t id = SubmitId(TinyJob("epochs=3 backoff=0"));
  ASSERT_GT(id, 0);
  CliRun w;
  std::thread worker([&] { w = Kestrel("--json worker --exit-when-idle --poll-s 0.1"); });
  const fs::path job_dir = dir_ / "home" / "jobs" / std::to_string(id);
  const fs::path ckpt = job_dir / "attempt-1" / "weights" / "last.ckpt";
  const pid_t pid = WaitForTrainAttempt(id, 1, (dir_ / "home").string(), std::chrono::minutes(2));
  ASSERT_GT(pid, 0) << "attempt 1 never started";
  const Freeze frozen = FreezeWhen(
      pid, [&] { return fs::exists(ckpt); }, std::chrono::minutes(2));
  ASSERT_EQ(frozen, Freeze::kReady);
  ::kill(pid, SIGKILL);
  worker.join();
  ASSERT_EQ(w.code, 0) << w.out;
  const json show = Show(id);
  ASSERT_EQ(show["job"]["state"], "succeeded") << show.dump(2);
  ASSERT_EQ(show["attempts"].size(), 2u) << show.dump(2);
  auto meta = Meta();
  ASSERT_NE(meta, nullptr);
  auto events = meta->ReadEvents(0, id, 100000);
  ASSERT_TRUE(events.IsOk()) << events.GetStatus().ToString();
  std::map<int, int> times;
  std::map<int, json> values;
  for (const auto& ev : *events) {
    if (ev.kind != "metric") continue;
    const json p = json::parse(ev.payload_json);
    if (p["type"] != "epoch") continue;
    ++times[p["epoch"].get<int>()];
    values[p["epoch"].get<int>()] = p["values"];
    std::cout << "epoch " << p["epoch"] << " reported by attempt " << ev.attempt << std::endl;
  }
  EXPECT_EQ(times, (std::map<int, int>{{1, 1}, {2, 1}, {3, 1}}));
  std::vector<std::string> header;
  const auto csv = ReadResultsCsv(job_dir / "attempt-2" / "results.csv", &header);
  ASSERT_EQ(csv.size(), 3u);
  for (const auto& [e, row] : csv) EXPECT_EQ(G6(values[e]["metrics/mAP50(B)"].get<double>()), row[7]) << e;
  auto metrics = app::ReadJobMetrics(*meta, id);
  ASSERT_TRUE(metrics.IsOk());
  app::MetricsQuery q;
  q.names = {"metrics/mAP50(B)"};
  EXPECT_EQ(app::JobMetricsJson(id, *metrics, q)["series"][0]["data"].size(), 3u);
}

struct Serve {
  pid_t pid = -1;
  int out = -1;
  std::string first_line;
};

Serve StartServe(const fs::path& dir, const std::vector<std::string>& extra) {
  Serve s;
  int fds[2];
  if (::pipe(fds) != 0) return s;
  const std::string home = (dir / "home").string();
  std::vector<std::string> args = {KESTREL_CLI, "--home", home, "serve", "--port", "0"};
  args.insert(args.end(), extra.begin(), extra.end());
  s.pid = ::fork();
  if (s.pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(KESTREL_CLI, argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  s.out = fds[0];
  char c = 0;
  while (::read(s.out, &c, 1) == 1 && c != '\n') s.first_line += c;
  return s;
}

// /proc/<pid>/stat: the parent pid and the state ('Z' zombie); false when gone.
bool ProcStat(pid_t pid, pid_t* ppid, char* state) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(in, text)) return false;
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream rest(text.substr(close + 2));
  rest >> *state >> *ppid;
  return true;
}

bool Alive(pid_t pid) {
  pid_t ppid = 0;
  char state = 0;
  return ProcStat(pid, &ppid, &state) && state != 'Z';
}

std::set<pid_t> ChildrenOf(pid_t parent) {
  std::set<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t ppid = 0;
    char state = 0;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (ProcStat(pid, &ppid, &state) && ppid == parent) out.insert(pid);
  }
  return out;
}

// SIGTERM to serve; it must exit 0 within 60 s. Then reaps what this
// subreaper inherited and expects none of `spawned` (its workers, their
// guards and trainers) still alive.
void StopServe(const Serve& s, const std::set<pid_t>& spawned) {
  ::kill(s.pid, SIGTERM);
  int status = -1;
  for (int i = 0; i < 6000; ++i) {
    if (::waitpid(s.pid, &status, WNOHANG) == s.pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(WIFEXITED(status)) << "serve did not exit within 60 s";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  ::close(s.out);
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  for (pid_t p : spawned) EXPECT_FALSE(Alive(p)) << "pid " << p << " outlived kestrel serve";
}

TEST_F(LiveMetricsCliTest, ServeWithOneWorkerRunsAJobAndLeavesNoProcessAfterSigterm) {
  // Orphans re-parent to this test, which reaps them: "left behind" is then
  // a live process, not a zombie of someone else's.
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  Serve s = StartServe(dir_, {"--workers", "1"});
  ASSERT_GT(s.pid, 0);
  ASSERT_NE(s.first_line.find("listening on http://127.0.0.1:"), std::string::npos) << s.first_line;
  const int64_t quick = SubmitId(TinyJob("epochs=1"));
  std::string state;
  for (int i = 0; i < 1200 && state != "succeeded"; ++i) {
    state = Show(quick)["job"]["state"];
    if (state == "failed_permanent") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(state, "succeeded") << Show(quick).dump(2);
  // A long job, stopped by SIGTERM to serve while it trains.
  const int64_t slow = SubmitId(TinyJob("epochs=300"));
  int64_t trainer = 0;
  for (int i = 0; i < 1200 && trainer == 0; ++i) {
    const json show = Show(slow);
    if (show["job"]["state"] == "running" && !show["attempts"].empty())
      trainer = show["attempts"].back().value("pid", int64_t{0});
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GT(trainer, 0);
  std::set<pid_t> spawned = ChildrenOf(s.pid);  // the worker and its guard
  ASSERT_GE(spawned.size(), 1u);
  spawned.insert(static_cast<pid_t>(trainer));
  for (pid_t p : spawned) EXPECT_TRUE(Alive(p)) << p;

  ASSERT_NO_FATAL_FAILURE(StopServe(s, spawned));
  // The worker stopped the trainer and handed the job back, not left it to a lease expiry.
  const json show = Show(slow);
  EXPECT_EQ(show["attempts"].back()["reason"], "worker_stopped") << show.dump(2);
  EXPECT_TRUE(fs::exists(dir_ / "home" / "logs" / "serve-worker-1.log"));
}

// The worker `kestrel workers` lists with this pid, or null.
json WorkerWithPid(const json& workers, int64_t pid) {
  for (const auto& w : workers["workers"]) {
    if (w["pid"].is_number() && w["pid"].get<int64_t>() == pid) return w;
  }
  return nullptr;
}

TEST_F(LiveMetricsCliTest, ServeRestartsAKilledWorkerAndLeavesNothingAfterSigterm) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  const auto t0 = std::chrono::steady_clock::now();
  Serve s = StartServe(dir_, {"--workers", "1", "--public-read"});
  ASSERT_GT(s.pid, 0);
  const size_t colon = s.first_line.rfind(':');
  ASSERT_NE(colon, std::string::npos) << s.first_line;
  const int port = std::stoi(s.first_line.substr(colon + 1));
  // The worker: a child of serve that registered itself (its guard is a child too).
  auto registered_child = [&](int64_t not_pid) -> int64_t {
    for (int i = 0; i < 200; ++i) {
      const json ws = Json(Kestrel("--json workers"));
      for (pid_t p : ChildrenOf(s.pid)) {
        const json w = WorkerWithPid(ws, p);
        if (p != not_pid && w.is_object() && w["state"] == "idle") return p;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return 0;
  };
  const int64_t first = registered_child(0);
  ASSERT_GT(first, 0) << "no worker child of serve registered";
  std::set<pid_t> spawned = ChildrenOf(s.pid);
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(static_cast<pid_t>(first), SIGKILL), 0);
  // Back within a few seconds (1 s backoff): a new pid that heartbeats.
  const int64_t second = registered_child(first);
  const double back_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  ASSERT_GT(second, 0) << "the killed worker was not restarted";
  EXPECT_LT(back_s, 8.0);
  std::cerr << "worker back " << back_s << " s after SIGKILL\n";
  for (pid_t p : ChildrenOf(s.pid)) spawned.insert(p);
  const server::testing::HttpReply m = server::testing::Get(port, "/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("kestrel_serve_worker_restarts_total{worker=\"1\"} 1\n"), std::string::npos)
      << m.body;
  // The killed worker could not say it stopped: it is not `stopped` (stale after 90 s).
  EXPECT_EQ(WorkerWithPid(Json(Kestrel("--json workers")), first)["state"], "idle");

  ASSERT_NO_FATAL_FAILURE(StopServe(s, spawned));
  // The restarted worker stopped gracefully and said so at once.
  const json after = Json(Kestrel("--json workers"));
  EXPECT_EQ(WorkerWithPid(after, second)["state"], "stopped") << after.dump(2);
  EXPECT_TRUE(WorkerWithPid(after, second)["stopped_ms"].is_number());
  EXPECT_EQ(WorkerWithPid(after, first)["state"], "idle");
  std::cerr << "test body " << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
            << " s\n";
}

}  // namespace
}  // namespace kestrel::testing
