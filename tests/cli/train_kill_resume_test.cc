// `kestrel train` killed with SIGKILL mid-run and resumed with
// `resume=.../weights/last.ckpt` ends exactly where an uninterrupted run of
// the same configuration ends: last.safetensors / best.safetensors bitwise
// equal and results.csv equal except the wall-time column (`time`). Black box: the
// CLI runs as a child process (tiny synthetic data, model t, imgsz 64,
// threads=1, fixed seed, a checkpoint after every iteration through
// save_period_min).
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_fixture.h"
#include "core/safetensors.h"
#include "freeze_when.h"

namespace kestrel::testing {
namespace {

namespace fs = std::filesystem;

// 8 train images in batches of 2: 4 iterations per epoch, an optimizer step
// every 2nd (nbs 4), so a checkpoint after an even iteration holds pending
// gradients. save_period_min 0.0001 (6 ms) checkpoints after every iteration.
constexpr char kTrainArgs[] =
    "train data=tiny model=t imgsz=64 batch=2 workers=1 epochs=3 threads=1 seed=3 optimizer=AdamW lr0=0.01 "
    "warmup_epochs=0 nbs=4 plots=false save_period_min=0.0001";
constexpr int64_t kBatchesPerEpoch = 4;

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// results.csv rows without the second ("time", wall seconds) column.
std::vector<std::string> ResultsWithoutTime(const fs::path& p) {
  std::vector<std::string> rows;
  std::istringstream in(ReadAll(p));
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find(','), b = a == std::string::npos ? a : line.find(',', a + 1);
    rows.push_back(b == std::string::npos ? line : line.substr(0, a) + line.substr(b));
  }
  return rows;
}

// next_iteration of a checkpoint (metadata "state"), -1 when unreadable.
int64_t CheckpointIteration(const fs::path& p) {
  auto f = ReadSafeTensorsFile(p.string());
  if (!f.IsOk() || !f->metadata.count("state")) return -1;
  auto j = nlohmann::json::parse(f->metadata.at("state"), nullptr, false);
  if (j.is_discarded()) return -1;
  return j["schedule"]["next_iteration"].get<int64_t>();
}

class TrainKillResumeTest : public KestrelCliTest {
 protected:
  // Starts `kestrel <args>` in the test folder; the pid is kestrel's own
  // (`exec`), so SIGKILL hits the trainer, not a shell.
  pid_t Spawn(const std::string& args) {
    const std::string cmd = "cd '" + dir_.string() + "' && KESTREL_HOME='" + (dir_ / "home").string() +
                            "' exec " + KESTREL_CLI + " " + args + " >'" + (dir_ / "killed.log").string() +
                            "' 2>&1";
    const pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    return pid;
  }
};

TEST_F(TrainKillResumeTest, SigkilledRunResumesToBitwiseIdenticalWeights) {
  ASSERT_EQ(Kestrel("dataset synth data --images 11 --classes 2 --imgsz 64 --seed 7").code, 0);
  ASSERT_EQ(Kestrel("dataset import data --name tiny").code, 0);

  CliRun full = Kestrel(std::string(kTrainArgs) + " name=full");
  ASSERT_EQ(full.code, 0) << full.out;

  // Kill once epoch 1 is recorded and a mid-epoch checkpoint of a later epoch exists.
  const pid_t pid = Spawn(std::string(kTrainArgs) + " name=killed");
  ASSERT_GT(pid, 0);
  const fs::path run = dir_ / "runs/detect/killed";
  const fs::path ckpt = run / "weights/last.ckpt";
  // The check runs while the run is frozen (FreezeWhen), so what it saw is
  // where the SIGKILL lands, however loaded the machine is.
  int64_t killed_at = -1;
  ino_t seen = 0;
  const Freeze frozen = FreezeWhen(
      pid,
      [&] {
        struct stat st {};
        if (!fs::exists(run / "results.csv") || ::stat(ckpt.c_str(), &st) != 0 || st.st_ino == seen)
          return false;
        seen = st.st_ino;  // each checkpoint is a new file renamed over the old one
        const int64_t it = CheckpointIteration(ckpt);
        if (it <= kBatchesPerEpoch || it % kBatchesPerEpoch == 0) return false;
        killed_at = it;
        return true;
      },
      std::chrono::minutes(3));
  ::kill(pid, SIGKILL);  // also when it timed out; a no-op on a run that ended
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_EQ(frozen, Freeze::kReady) << "the run " << (frozen == Freeze::kEnded ? "finished" : "timed out")
                                    << " before it could be killed:\n"
                                    << ReadAll(dir_ / "killed.log");
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "the run ended on its own (status " << status << ") before SIGKILL:\n"
      << ReadAll(dir_ / "killed.log");
  const int64_t resume_at = CheckpointIteration(ckpt);
  ASSERT_GE(resume_at, killed_at);
  EXPECT_FALSE(fs::exists(run / "weights/last.safetensors") &&
               ReadAll(run / "weights/last.safetensors") ==
                   ReadAll(dir_ / "runs/detect/full/weights/last.safetensors"))
      << "killed too late: the run already had its final weights";
  std::printf("[ cli ] SIGKILL after checkpoint at iteration %lld; resuming from iteration %lld of %lld\n",
              static_cast<long long>(killed_at), static_cast<long long>(resume_at),
              static_cast<long long>(3 * kBatchesPerEpoch));

  CliRun resumed = Kestrel("train resume=runs/detect/killed/weights/last.ckpt");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  // It continued from the checkpoint (a restart from scratch would also end identically).
  EXPECT_NE(resumed.out.find("at iteration " + std::to_string(resume_at) + "\n"), std::string::npos)
      << resumed.out;
  EXPECT_NE(resumed.out.find("completed: completed 3 epochs"), std::string::npos) << resumed.out;

  const fs::path a = dir_ / "runs/detect/full/weights", b = run / "weights";
  for (const char* file : {"last.safetensors", "best.safetensors"}) {
    if (ReadAll(a / file) == ReadAll(b / file)) continue;
    // Say which tensors differ.
    auto x = ReadSafeTensorsFile((a / file).string());
    auto y = ReadSafeTensorsFile((b / file).string());
    ASSERT_TRUE(x.IsOk() && y.IsOk());
    std::string diff;
    int n = 0;
    for (const auto& [name, t] : x->tensors) {
      if (!y->tensors.count(name) || y->tensors.at(name).data != t.data) {
        ++n;
        if (n <= 10) diff += " " + name;
      }
    }
    ADD_FAILURE() << file << " differs: " << n << " of " << x->tensors.size() << " tensors (" << diff
                  << "), metadata equal: " << (x->metadata == y->metadata);
  }
  const auto rows_full = ResultsWithoutTime(dir_ / "runs/detect/full/results.csv");
  const auto rows_killed = ResultsWithoutTime(run / "results.csv");
  ASSERT_EQ(rows_full.size(), 4u);  // header + 3 epochs
  EXPECT_EQ(rows_full, rows_killed);
}

}  // namespace
}  // namespace kestrel::testing
