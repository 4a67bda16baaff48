// `kestrel tune` end to end (issue 32, docs/tune.md "Studies over the
// queue"), black box with the real binary: a 4-trial study of tiny train
// jobs run by a real `kestrel worker` (one slot for the coordinator, one for
// the trials), with the coordinator's process SIGKILLed after the first
// trial finished. The job system runs the coordinator again, which goes on
// from the store: every trial ran exactly one job, none was lost, and the
// study equals the same study run without the kill.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "cli_fixture.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class TuneCliTest : public KestrelCliTest {
 protected:
  void SetUp() override {
    KestrelCliTest::SetUp();
    ASSERT_EQ(Kestrel("dataset synth data --images 12 --imgsz 64 --seed 3").code, 0);
    Write("space.yaml", "lr0: {low: 0.001, high: 0.02, log: true}\nfliplr: {low: 0, high: 1}\n");
  }
  // One study in home `home`; kills the coordinator once when `kill`.
  json RunStudy(const std::string& home, bool kill) {
    const std::string h = "--home " + (dir_ / home).string() + " ";
    EXPECT_EQ(Kestrel(h + "dataset import data --name tiny").code, 0);
    CliRun c = Kestrel(h +
                       "--json tune data=tiny model=t imgsz=64 batch=4 workers=1 threads=1 plots=false "
                       "optimizer=AdamW warmup_epochs=0 space=space.yaml trials=4 parallel=1 epochs=2 "
                       "pruner=none sampler=random seed=5 name=e2e");
    EXPECT_EQ(c.code, 0) << c.out;
    const int64_t coordinator = Json(c).value("job_id", int64_t{0});
    EXPECT_GT(coordinator, 0);
    CliRun w;
    std::thread worker(
        [&] { w = Kestrel(h + "worker --slots 2 --exit-when-idle --poll-s 0.1 --heartbeat-s 0.5"); });
    if (kill) {
      auto meta = store::MetadataStore::Open(store::MetadataUrl((dir_ / home).string()));
      EXPECT_TRUE(meta.IsOk());
      bool killed = false;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(3);
      while (!killed && std::chrono::steady_clock::now() < deadline) {
        auto study = (*meta)->GetStudy("e2e");
        auto trials = study.IsOk() ? (*meta)->ListTrials(study->id)
                                   : Result<std::vector<store::TrialRecord>>(Status::NotFound("no study"));
        auto attempts = (*meta)->ListAttempts(coordinator);
        // Midway: trial 0 done, trial 1 submitted, the coordinator running.
        if (trials.IsOk() && trials->size() >= 2 && (*trials)[0].state == "succeeded" && attempts.IsOk() &&
            !attempts->empty() && attempts->back().ended_ms == 0 && attempts->back().pid > 0) {
          ::kill(static_cast<pid_t>(attempts->back().pid), SIGKILL);
          killed = true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      EXPECT_TRUE(killed) << "the coordinator never reached the middle of the study";
    }
    worker.join();
    EXPECT_EQ(w.code, 0) << w.out;
    const json job = Json(Kestrel(h + "--json jobs show " + std::to_string(coordinator)));
    EXPECT_EQ(job["job"]["state"], "succeeded") << job.dump(1);
    if (kill) {
      EXPECT_GE(job["attempts"].size(), 2u) << "the killed coordinator ran again";
    }
    return Json(Kestrel(h + "--json tune show e2e"));
  }
};

TEST_F(TuneCliTest, FourTrialStudySurvivesACoordinatorSigkillWithNoTrialRerunOrLost) {
  const json killed = RunStudy("home_killed", true);
  ASSERT_EQ(killed["study"]["state"], "finished") << killed.dump(1);
  ASSERT_EQ(killed["trials"].size(), 4u) << killed.dump(1);
  std::set<int64_t> jobs;
  for (const auto& t : killed["trials"]) {
    EXPECT_EQ(t["state"], "succeeded") << t.dump();
    EXPECT_EQ(t["epochs_run"], 2) << t.dump();
    EXPECT_TRUE(jobs.insert(t["job_id"].get<int64_t>()).second) << "one job per trial";
  }
  // Only the coordinator and the 4 trial jobs exist: no trial ran twice.
  const json list = Json(Kestrel("--home " + (dir_ / "home_killed").string() + " --json jobs list"));
  EXPECT_EQ(list["total"], 5) << list.dump(1);
  for (const auto& j : list["jobs"]) {
    if (j["kind"] == "train") {
      EXPECT_EQ(j["attempt"], 1) << "a trial's job ran once: " << j.dump();
    }
  }
  // `tune show --plots DIR`: the four PNGs, listed in --json, each a PNG
  // whose header gives the documented size (docs/tune.md "Plots").
  const fs::path plots = dir_ / "plots";
  const json shown = Json(Kestrel("--home " + (dir_ / "home_killed").string() +
                                  " --json tune show e2e --plots " + plots.string()));
  ASSERT_EQ(shown["plots"].size(), 4u) << shown.dump(1);
  const std::map<std::string, std::pair<uint32_t, uint32_t>> sizes = {
      {"history.png", {900, 540}},
      {"parallel_coordinates.png", {1100, 560}},
      {"slice.png", {2 * 420, 340}},  // 2 params: one row of 2 panels
      {"importances.png", {800, 90 + 36 * 2}}};
  for (const auto& p : shown["plots"]) {
    const fs::path path = p.get<std::string>();
    ASSERT_EQ(sizes.count(path.filename().string()), 1u) << path;
    ASSERT_EQ(path.parent_path(), plots);
    std::ifstream in(path, std::ios::binary);
    std::string head(24, '\0');
    ASSERT_TRUE(in.read(head.data(), 24)) << path;
    EXPECT_EQ(head.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << path;
    EXPECT_EQ(head.substr(12, 4), "IHDR") << path;
    auto be32 = [&](size_t at) {
      uint32_t v = 0;
      for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(head[at + i]);
      return v;
    };
    EXPECT_EQ(std::make_pair(be32(16), be32(20)), sizes.at(path.filename().string())) << path;
  }
  // The same study without the kill: the same trials, params, states and
  // job ids (training with threads=1 is deterministic here, so the values too).
  const json plain = RunStudy("home_plain", false);
  EXPECT_EQ(killed["trials"], plain["trials"]);
  EXPECT_EQ(killed["best"], plain["best"]);
}

}  // namespace
}  // namespace kestrel::testing
