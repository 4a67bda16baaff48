// A job resumed on another host from its checkpoint on S3 (issue 31, docs/
// disk.md "Job checkpoints on S3"): two Kestrel homes stand for two hosts
// that share one database (a SQLite file) and one S3 bucket (OpenStack
// Swift + s3api, tests/s3/swift_fixture.sh). Host A's worker trains a tiny
// job and is SIGKILLed right after its second epoch's checkpoint was
// recorded; host B's worker, which has none of A's files, claims the job
// when A's lease expires, downloads the recorded checkpoint and resumes at
// the next epoch (not from scratch); A's late record is refused (fenced).
// E2E: spawns Swift and two `kestrel worker`s; skips without Swift.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "s3/client.h"
#include "store/metadata_store.h"

namespace kestrel::store {
namespace {

using Clock = std::chrono::steady_clock;
const std::string kFixture = std::string(KESTREL_SOURCE_DIR) + "/tests/s3/swift_fixture.sh";
constexpr const char* kBucket = "kestrel-resume";

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class S3JobResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        (std::filesystem::temp_directory_path() / ("kestrel_resume_" + std::to_string(::getpid()))).string();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ + "/a");
    std::filesystem::create_directories(dir_ + "/b");
    const int rc = std::system((kFixture + " start " + dir_ + " > " + dir_ + "/fixture.out 2>&1").c_str());
    if (WEXITSTATUS(rc) == 77) GTEST_SKIP() << ReadAll(dir_ + "/fixture.out");
    ASSERT_EQ(WEXITSTATUS(rc), 0) << ReadAll(dir_ + "/fixture.out");
    started_ = true;
    std::ifstream env(dir_ + "/env");
    std::string line;
    while (std::getline(env, line)) {
      const auto eq = line.find('=');
      if (eq != std::string::npos && line.rfind("AWS_", 0) == 0)
        vars_[line.substr(0, eq)] = line.substr(eq + 1);
    }
    vars_["KESTREL_DB"] = "sqlite:" + dir_ + "/shared.db";
    vars_["KESTREL_ARTIFACTS"] = std::string("s3://") + kBucket + "/team";
  }
  void TearDown() override {
    for (pid_t p : workers_) {
      if (p > 0) {
        ::kill(p, SIGKILL);
        ::waitpid(p, nullptr, 0);
      }
    }
    if (started_) (void)std::system((kFixture + " stop " + dir_).c_str());  // best effort
    std::filesystem::remove_all(dir_);
  }
  // `kestrel ARGS` as host `h` ("a" or "b"): its own home and folder.
  std::string Kestrel(const std::string& h, const std::string& args) {
    std::string cmd = "cd " + dir_ + "/" + h + " && env KESTREL_HOME=" + dir_ + "/" + h + "/home";
    for (const auto& [k, v] : vars_) cmd += " '" + k + "=" + v + "'";
    cmd += std::string(" ") + KESTREL_CLI + " " + args + " 2>>" + dir_ + "/" + h + "/cli.err";
    std::string out;
    FILE* f = ::popen(cmd.c_str(), "r");
    if (f == nullptr) return out;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    ::pclose(f);
    return out;
  }
  pid_t StartWorker(const std::string& h, bool exit_when_idle) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::setenv("KESTREL_HOME", (dir_ + "/" + h + "/home").c_str(), 1);
      for (const auto& [k, v] : vars_) ::setenv(k.c_str(), v.c_str(), 1);
      if (::chdir((dir_ + "/" + h).c_str()) != 0) ::_exit(126);
      FILE* log = std::fopen((dir_ + "/" + h + "/worker.log").c_str(), "w");
      if (log != nullptr) {
        ::dup2(fileno(log), 1);
        ::dup2(fileno(log), 2);
      }
      const std::string id = "w" + h;
      if (exit_when_idle) {
        ::execl(KESTREL_CLI, KESTREL_CLI, "worker", "--poll-s", "0.1", "--heartbeat-s", "1", "--lease-s", "3",
                "--id", id.c_str(), "--no-webhooks", "--exit-when-idle", static_cast<char*>(nullptr));
      } else {
        ::execl(KESTREL_CLI, KESTREL_CLI, "worker", "--poll-s", "0.1", "--heartbeat-s", "1", "--lease-s", "3",
                "--id", id.c_str(), "--no-webhooks", static_cast<char*>(nullptr));
      }
      ::_exit(127);
    }
    workers_.push_back(pid);
    return pid;
  }

  std::string dir_;
  bool started_ = false;
  std::map<std::string, std::string> vars_;
  std::vector<pid_t> workers_;
};

TEST_F(S3JobResumeTest, HostBResumesHostAsJobFromItsS3CheckpointAndAsLateRecordIsRefused) {
  {
    auto o = s3::OptionsFromEnvironment([this](const char* n) -> const char* {
      auto it = vars_.find(n);
      return it == vars_.end() ? nullptr : it->second.c_str();
    });
    ASSERT_TRUE(o.IsOk()) << o.GetStatus().ToString();
    s3::Client client(o->options);
    const Status bucket = client.CreateBucket(kBucket);
    ASSERT_TRUE(bucket.IsOk()) << bucket.ToString();
  }
  Kestrel("a", "dataset synth data --images 12 --imgsz 64 --seed 3");
  Kestrel("a", "dataset import data --name tiny");
  const std::string sub = Kestrel(
      "a",
      "--json submit data=tiny model=t imgsz=64 batch=4 workers=1 threads=1 plots=false optimizer=AdamW "
      "lr0=0.01 warmup_epochs=0 epochs=5");
  auto subj = nlohmann::json::parse(sub, nullptr, false);
  ASSERT_TRUE(subj.is_object() && subj.contains("job_id")) << sub << ReadAll(dir_ + "/a/cli.err");
  const int64_t job = subj["job_id"].get<int64_t>();
  auto meta = MetadataStore::Open(vars_["KESTREL_DB"]);
  ASSERT_TRUE(meta.IsOk()) << meta.GetStatus().ToString();

  // Host A trains until its second epoch's checkpoint is recorded.
  const pid_t a = StartWorker("a", false);
  int recorded_epoch = 0;
  const auto t0 = Clock::now();
  while (recorded_epoch < 2 && Clock::now() - t0 < std::chrono::seconds(120)) {
    auto list = (*meta)->ListCheckpoints(job);
    if (list.IsOk() && !list->empty())
      recorded_epoch = nlohmann::json::parse((*list)[0].json).value("epoch", 0);
    if (recorded_epoch < 2) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GE(recorded_epoch, 2) << ReadAll(dir_ + "/a/worker.log")
                               << ReadAll(dir_ + "/a/home/jobs/" + std::to_string(job) + "/attempt-1.log");
  // Power loss: the worker dies at once; its guard takes the trainer along.
  ASSERT_EQ(::kill(a, SIGKILL), 0);
  ::waitpid(a, nullptr, 0);
  workers_[0] = -1;
  const auto killed = Clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the guard's SIGKILL lands
  auto at_kill = (*meta)->ListCheckpoints(job);
  ASSERT_TRUE(at_kill.IsOk() && at_kill->size() == 1u);
  const auto record = nlohmann::json::parse((*at_kill)[0].json);
  const int resume_epoch = record.value("epoch", 0);
  ASSERT_GE(resume_epoch, 2);
  const std::string ckpt_sha = record["files"]["last.ckpt"]["sha256"];

  // Host B: none of A's files. It claims once A's lease has expired.
  const pid_t b = StartWorker("b", false);
  const std::string log_b_path = dir_ + "/b/home/jobs/" + std::to_string(job) + "/attempt-2.log";
  const auto t1 = Clock::now();
  double resumed_s = -1;
  JobState state = JobState::kRunning;
  while (Clock::now() - t1 < std::chrono::seconds(180)) {
    if (resumed_s < 0 && ReadAll(log_b_path).find("resumed from") != std::string::npos)
      resumed_s = std::chrono::duration<double>(Clock::now() - killed).count();
    auto j = (*meta)->GetJob(job);
    if (j.IsOk() && !IsLive(j->state)) {
      state = j->state;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(b, SIGTERM);
  int st = 0;
  ::waitpid(b, &st, 0);
  workers_[1] = -1;
  const std::string log_b = ReadAll(log_b_path);
  ASSERT_EQ(state, JobState::kSucceeded) << ReadAll(dir_ + "/b/worker.log") << log_b;

  auto done = (*meta)->GetJob(job);
  ASSERT_TRUE(done.IsOk());
  EXPECT_EQ(done->state, JobState::kSucceeded) << log_b;
  EXPECT_EQ(done->attempt, 2);
  auto attempts = (*meta)->ListAttempts(job);
  ASSERT_TRUE(attempts.IsOk() && attempts->size() == 2u);
  EXPECT_EQ((*attempts)[0].reason, "lease_expired");
  EXPECT_EQ((*attempts)[1].worker, "wb");
  // B fetched exactly the recorded checkpoint and resumed from it.
  EXPECT_NE(log_b.find("fetched attempt 1's checkpoint"), std::string::npos) << log_b;
  EXPECT_NE(log_b.find("resumed from"), std::string::npos) << log_b;
  // (The fetched attempt-1/weights/last.ckpt is gone again: retention
  // deletes earlier attempts' checkpoints once the job succeeded.)
  // B trained from the epoch after the recorded one: its first epoch event.
  auto events = (*meta)->ReadEvents(0, job, 10000);
  ASSERT_TRUE(events.IsOk());
  int first_b = 0, last_b = 0;
  for (const auto& e : *events) {
    if (e.kind != "metric" || e.attempt != 2) continue;
    auto p = nlohmann::json::parse(e.payload_json, nullptr, false);
    if (!p.is_object() || p.value("type", "") != "epoch") continue;
    const int ep = p.value("epoch", 0);
    if (first_b == 0 || ep < first_b) first_b = ep;
    last_b = std::max(last_b, ep);
  }
  EXPECT_EQ(first_b, resume_epoch + 1)
      << "host B must resume after epoch " << resume_epoch << ", not from scratch";
  EXPECT_EQ(last_b, 5);
  const double to_claim = std::chrono::duration<double>(
                              std::chrono::milliseconds((*attempts)[1].started_ms - (*attempts)[0].ended_ms))
                              .count();
  std::printf(
      "resume: A killed after epoch %d (checkpoint %s...), B claimed %.2f s after A's last renewal, "
      "B resumed training %.2f s after the kill (lease 3 s)\n",
      resume_epoch, ckpt_sha.substr(0, 12).c_str(), to_claim, resumed_s);
  // A's late checkpoint (a host that comes back) is refused: fenced.
  Status late = (*meta)->RecordCheckpoint(job, 1, R"({"epoch":99})", 1);
  EXPECT_EQ(late.Code(), StatusCode::kAborted) << late.ToString();
}

}  // namespace
}  // namespace kestrel::store
