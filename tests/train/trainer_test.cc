// End-to-end tests of the training loop on a tiny synthetic dataset (model
// scale "t", imgsz 64, 8 train images, threads=1 for determinism).
#include "train/trainer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "store/local_artifact_store.h"
#include "store/metadata_store.h"
#include "tiny_train.h"

namespace kestrel::train {
namespace {

namespace fs = std::filesystem;

class TrainerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::string(fs::temp_directory_path() / ("kestrel_trainer_test_" + std::to_string(getpid())));
    fs::remove_all(*root_);
    testing::ImportTinyDataset(Home(), *root_ + "/synth", "tiny");
  }
  static void TearDownTestSuite() {
    fs::remove_all(*root_);
    delete root_;
  }
  static std::string Home() { return *root_ + "/home"; }

  // Three epochs of 4 batches of 2 (tiny_train.h), in runs/`run`.
  static TrainOptions Tiny(const std::string& run) {
    TrainOptions o = testing::TinyRunOptions(Home(), "tiny", 3);
    o.run_dir = *root_ + "/runs/" + run;
    return o;
  }

  static std::map<std::string, SafeTensor> Weights(const std::string& path) {
    auto f = ReadSafeTensorsFile(path);
    EXPECT_TRUE(f.IsOk()) << f.GetStatus().ToString();
    return f.IsOk() ? f->tensors : std::map<std::string, SafeTensor>{};
  }

  static std::string* root_;
};
std::string* TrainerTest::root_ = nullptr;

TEST_F(TrainerTest, TinyRunWritesArtifactsAndLearns) {
  TrainOptions o = Tiny("e2e");
  o.epochs = 8;
  o.plots = true;
  o.loader.batch = 4;
  std::ostringstream log;
  TrainHooks hooks;
  hooks.out = &log;
  auto r = Train(o, hooks);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_EQ(r->reason, ExitReason::kCompleted) << r->message;
  EXPECT_EQ(r->ExitCode(), 0);
  ASSERT_EQ(r->history.size(), 8u);
  for (const auto& e : r->history) {
    EXPECT_TRUE(std::isfinite(e.box) && std::isfinite(e.cls) && std::isfinite(e.dfl));
  }
  const auto total = [](const EpochRecord& e) { return e.box + e.cls + e.dfl; };
  EXPECT_LT(total(r->history.back()), total(r->history.front()));
  for (const char* f : {"results.csv", "args.yaml", "train_batch0.jpg", "PR_curve.png", "weights/last.ckpt",
                        "weights/best.ckpt", "weights/last.safetensors", "weights/best.safetensors"}) {
    EXPECT_TRUE(fs::exists(o.run_dir + "/" + f)) << f;
  }
  // Validation losses are recorded per epoch (positive, finite) and in results.csv.
  for (const auto& e : r->history) {
    EXPECT_GT(e.val_box + e.val_cls + e.val_dfl, 0.0);
    EXPECT_TRUE(std::isfinite(e.val_box) && std::isfinite(e.val_cls) && std::isfinite(e.val_dfl));
  }
  {
    // The reference's columns (train/progress.h); `time` is the run's
    // cumulative seconds, so it grows row by row.
    std::ifstream csv(o.run_dir + "/results.csv");
    std::string header;
    std::getline(csv, header);
    EXPECT_EQ(header.rfind("epoch,time,train/box_loss,", 0), 0u) << header;
    EXPECT_NE(header.find("val/box_loss,val/cls_loss,val/dfl_loss,lr/pg0,lr/pg1,lr/pg2"), std::string::npos)
        << header;
    double last_time = 0;
    int rows = 0;
    for (std::string line; std::getline(csv, line); ++rows) {
      const double t = std::stod(line.substr(line.find(',') + 1));
      EXPECT_GT(t, last_time) << line;
      last_time = t;
    }
    EXPECT_EQ(rows, static_cast<int>(r->history.size()));
  }
  EXPECT_NE(log.str().find("torch threads: 1"), std::string::npos);
  // threads=1 given: the count stays (docs/speed.md), and the start says so.
  EXPECT_NE(log.str().find("threads policy: fixed: threads=1\n"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("mAP50-95"), std::string::npos);
  // val_samples (default 4; the split has 3): one samples file per epoch,
  // the first val images in manifest order, labels and detections as xyxy
  // pixels of the original image.
  {
    auto meta = store::MetadataStore::Open(store::MetadataUrl(Home()));
    ASSERT_TRUE(meta.IsOk());
    store::LocalArtifactStore blobs(Home());
    auto view = data::LoadVersion(**meta, blobs, "tiny");
    ASSERT_TRUE(view.IsOk()) << view.GetStatus().ToString();
    std::vector<const data::ManifestEntry*> val;
    for (const auto& e : view->manifest.entries) {
      if (e.split == data::Split::kVal) val.push_back(&e);
    }
    ASSERT_EQ(val.size(), 3u);
    size_t detections = 0;
    for (int epoch = 1; epoch <= 8; ++epoch) {
      const std::string path = o.run_dir + "/samples/epoch-" + std::to_string(epoch) + ".json";
      std::ifstream in(path);
      ASSERT_TRUE(in) << path;
      const auto doc = nlohmann::json::parse(in);
      EXPECT_EQ(doc["format"], "kestrel-epoch-samples");
      EXPECT_EQ(doc["epoch"], epoch);
      EXPECT_EQ(doc["dataset"], "tiny");
      EXPECT_EQ(doc["version"], view->record.seq);
      ASSERT_EQ(doc["images"].size(), 3u);
      for (size_t i = 0; i < 3; ++i) {
        const auto& img = doc["images"][i];
        const data::ManifestEntry& e = *val[i];
        EXPECT_EQ(img["sha"], e.image_sha);
        EXPECT_EQ(img["path"], e.path);
        EXPECT_EQ(img["width"], e.width);
        ASSERT_EQ(img["labels"].size(), e.boxes.size());
        for (size_t k = 0; k < e.boxes.size(); ++k) {
          const auto& b = img["labels"][k]["box"];
          EXPECT_NEAR(b[0].get<double>(), (e.boxes[k].cx - e.boxes[k].w / 2) * e.width, 1e-6);
          EXPECT_NEAR(b[3].get<double>(), (e.boxes[k].cy + e.boxes[k].h / 2) * e.height, 1e-6);
          EXPECT_EQ(img["labels"][k]["class_id"], e.boxes[k].cls);
        }
        for (const auto& d : img["detections"]) {
          ++detections;
          EXPECT_GE(d["score"].get<double>(), 0.25);
          const auto& b = d["box"];
          EXPECT_GE(b[0].get<double>(), 0);
          EXPECT_GE(b[1].get<double>(), 0);
          EXPECT_LE(b[2].get<double>(), e.width);
          EXPECT_LE(b[3].get<double>(), e.height);
          EXPECT_LE(b[0].get<double>(), b[2].get<double>());
        }
      }
    }
    EXPECT_FALSE(fs::exists(o.run_dir + "/samples/epoch-9.json"));
    std::printf("[ trainer ] %zu sample detections (conf >= 0.25) over 8 epochs\n", detections);
  }
  std::printf("[ trainer ] %.1f images/s, first epoch loss %.3f, last %.3f, best mAP50 %.3f\n",
              r->images_per_second, total(r->history.front()), total(r->history.back()), r->best_map50);
}

TEST_F(TrainerTest, KilledAndResumedRunIsBitwiseIdentical) {
  auto full = Train(Tiny("full"));
  ASSERT_TRUE(full.IsOk()) << full.GetStatus().ToString();
  ASSERT_EQ(full->reason, ExitReason::kCompleted);

  TrainOptions o = Tiny("killed");
  TrainHooks hooks;
  hooks.checkpoint_every_iterations = 3;
  hooks.halt_after_iterations = 7;  // "SIGKILL" one iteration after the checkpoint at 6: that work is lost
  auto halted = Train(o, hooks);
  ASSERT_TRUE(halted.IsOk()) << halted.GetStatus().ToString();
  ASSERT_EQ(halted->reason, ExitReason::kHalted);

  TrainOptions ro;
  ro.resume = o.run_dir + "/weights/last.ckpt";
  ro.home = Home();
  auto resumed = Train(ro);
  ASSERT_TRUE(resumed.IsOk()) << resumed.GetStatus().ToString();
  ASSERT_EQ(resumed->reason, ExitReason::kCompleted) << resumed->message;
  EXPECT_EQ(resumed->run_dir, o.run_dir);

  auto a = Weights(Tiny("full").run_dir + "/weights/last.safetensors");
  auto b = Weights(o.run_dir + "/weights/last.safetensors");
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    EXPECT_TRUE(t.data == b.at(name).data) << "weights differ: " << name;
  }
  ASSERT_EQ(full->history.size(), resumed->history.size());
  for (size_t i = 0; i < full->history.size(); ++i) {
    const auto& x = full->history[i];
    const auto& y = resumed->history[i];
    EXPECT_EQ(x.box, y.box);
    EXPECT_EQ(x.cls, y.cls);
    EXPECT_EQ(x.dfl, y.dfl);
    EXPECT_EQ(x.map50, y.map50);
    EXPECT_EQ(x.map5095, y.map5095);
    EXPECT_EQ(x.precision, y.precision);
    EXPECT_EQ(x.recall, y.recall);
    EXPECT_EQ(x.lr, y.lr);
  }
  // The per-epoch samples: the resumed run redid epoch 2 (the halt lost its
  // end) and wrote epochs 2 and 3 once each; all three equal the full run's.
  for (int epoch = 1; epoch <= 3; ++epoch) {
    const std::string name = "/samples/epoch-" + std::to_string(epoch) + ".json";
    std::ifstream fa(Tiny("full").run_dir + name), fb(o.run_dir + name);
    ASSERT_TRUE(fa && fb) << name;
    std::stringstream sa, sb;
    sa << fa.rdbuf();
    sb << fb.rdbuf();
    EXPECT_EQ(sa.str(), sb.str()) << name;
  }
  size_t files = 0;
  for (const auto& f : fs::directory_iterator(o.run_dir + "/samples")) files += f.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 3u);  // no temp file left, no extra epoch
}

TEST_F(TrainerTest, HugeLearningRateIsRefusedUpFront) {
  TrainOptions o = Tiny("lr");
  o.optimizer.lr0 = 1e6;
  auto r = Train(o);
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kInvalidArgument);
}

TEST_F(TrainerTest, DivergingRunRollsBackTwiceThenFailsQuickly) {
  TrainOptions o = Tiny("diverge");
  o.epochs = 50;
  TrainHooks hooks;
  hooks.nan_from_iteration = 5;  // epoch 1, batches 1..3 non-finite: rollback to the epoch-0 checkpoint
  const auto t0 = std::chrono::steady_clock::now();
  auto r = Train(o, hooks);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_EQ(r->reason, ExitReason::kDiverged) << r->message;
  EXPECT_EQ(r->ExitCode(), kTrainExitDiverged);
  EXPECT_EQ(r->Failure(), FailureReason::kDiverged);
  EXPECT_EQ(r->rollbacks, 2);
  EXPECT_EQ(r->nonfinite_iterations, 9);  // 3 in a row, three times
  EXPECT_EQ(r->history.size(), 1u);       // only epoch 0 finished
  std::printf("[ trainer ] diverged after %lld iterations in %.1f s: %s\n",
              static_cast<long long>(r->iterations), secs, r->message.c_str());
}

TEST_F(TrainerTest, StopFlagWritesCheckpointAndResumes) {
  TrainOptions o = Tiny("stopped");
  std::atomic<bool> stop{true};  // as if SIGTERM arrived during the first step
  TrainHooks hooks;
  hooks.stop = &stop;
  auto r = Train(o, hooks);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_EQ(r->reason, ExitReason::kStopped);
  EXPECT_EQ(r->ExitCode(), kTrainExitStopped);
  EXPECT_EQ(r->Failure(), FailureReason::kStopped);
  EXPECT_EQ(r->iterations, 1);
  ASSERT_TRUE(fs::exists(o.run_dir + "/weights/last.ckpt"));
  TrainOptions ro;
  ro.resume = o.run_dir + "/weights/last.ckpt";
  ro.home = Home();
  auto resumed = Train(ro);
  ASSERT_TRUE(resumed.IsOk()) << resumed.GetStatus().ToString();
  EXPECT_EQ(resumed->reason, ExitReason::kCompleted);
  EXPECT_EQ(resumed->iterations, 3 * 4 - 1);
}

TEST_F(TrainerTest, CorruptedCheckpointIsRefused) {
  TrainOptions o = Tiny("corrupt");
  o.epochs = 1;
  ASSERT_TRUE(Train(o).IsOk());
  const std::string good = o.run_dir + "/weights/last.ckpt";
  std::ifstream in(good, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 1000u);
  for (size_t pos : {bytes.size() / 2, bytes.size() - 3, size_t{40}}) {
    std::string bad = bytes;
    bad[pos] = static_cast<char>(bad[pos] ^ 0x5a);
    const std::string path = o.run_dir + "/weights/bad.ckpt";
    std::ofstream(path, std::ios::binary) << bad;
    TrainOptions ro;
    ro.resume = path;
    ro.home = Home();
    auto r = Train(ro);
    ASSERT_FALSE(r.IsOk()) << "corruption at byte " << pos << " was not detected";
    EXPECT_EQ(r.GetStatus().Code(), StatusCode::kCorruption) << r.GetStatus().ToString();
    EXPECT_NE(r.GetStatus().Message().find("bad.ckpt"), std::string::npos);
  }
}

// The phases between iterations report progress (the job runner turns it into
// heartbeat lines): each run of a phase starts at done = 0, never goes back
// and ends at done == total.
TEST_F(TrainerTest, SetupValidationAndPlotsReportProgressUpToTheirTotal) {
  struct Event {
    Phase phase;
    int epoch;
    int64_t done, total;
    std::string step;
  };
  std::vector<Event> events;
  TrainHooks hooks;
  hooks.on_phase_progress = [&](const PhaseProgress& p) {
    events.push_back({p.phase, p.epoch, p.done, p.total, std::string(p.step)});
  };
  // Runs of one phase (same phase and epoch) in order, each checked.
  auto runs = [&] {
    std::vector<std::vector<Event>> out;
    for (const Event& e : events) {
      if (out.empty() || out.back().back().phase != e.phase || out.back().back().epoch != e.epoch)
        out.emplace_back();
      out.back().push_back(e);
    }
    for (const auto& run : out) {
      const char* name = PhaseName(run.front().phase);
      EXPECT_EQ(run.front().done, 0) << name;
      EXPECT_EQ(run.back().done, run.back().total) << name;
      for (size_t i = 0; i < run.size(); ++i) {
        EXPECT_GE(run[i].total, 1) << name;
        EXPECT_EQ(run[i].total, run.front().total) << name;
        if (i > 0) {
          EXPECT_GE(run[i].done, run[i - 1].done) << name << " went back at event " << i;
        }
      }
    }
    return out;
  };

  TrainOptions o = Tiny("phases");
  o.epochs = 2;
  o.plots = true;
  auto r = Train(o, hooks);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  ASSERT_EQ(r->reason, ExitReason::kCompleted) << r->message;
  auto fresh = runs();
  // setup, val epoch 1, val epoch 2, [the final validation of best.safetensors
  // when the best epoch is not the last: its own kVal run, epoch = the best
  // one], plots.
  const bool final_val = r->best_epoch != 2;
  EXPECT_EQ(r->final_val_epoch, r->best_epoch);
  ASSERT_EQ(fresh.size(), final_val ? 5u : 4u);
  if (final_val) {
    EXPECT_EQ(fresh[3].front().phase, Phase::kVal);
    EXPECT_EQ(fresh[3].front().epoch, r->best_epoch);
    EXPECT_EQ(fresh[3].back().total, 3);
  }
  std::vector<std::string> steps;
  for (const Event& e : fresh[0]) steps.push_back(e.step);
  EXPECT_EQ(fresh[0].front().phase, Phase::kSetup);
  EXPECT_EQ(steps, (std::vector<std::string>{"dataset", "model", "loaders", ""}));
  for (int epoch = 1; epoch <= 2; ++epoch) {
    const auto& val = fresh[epoch];
    EXPECT_EQ(val.front().phase, Phase::kVal);
    EXPECT_EQ(val.front().epoch, epoch);
    EXPECT_EQ(val.back().total, 3);  // the val images
    EXPECT_EQ(val.size(),
              2u);  // start, then one batch of 3 (val batch = 2 x train batch 2, as the reference)
  }
  EXPECT_EQ(fresh.back().front().phase, Phase::kPlots);

  // Resuming adds reading and applying the checkpoint to the setup steps.
  events.clear();
  TrainOptions ro;
  ro.resume = o.run_dir + "/weights/last.ckpt";
  ro.home = Home();
  auto resumed = Train(ro, hooks);
  ASSERT_TRUE(resumed.IsOk()) << resumed.GetStatus().ToString();
  auto again = runs();
  ASSERT_EQ(again.size(), 1u);  // nothing left to train or validate
  steps.clear();
  for (const Event& e : again[0]) steps.push_back(e.step);
  EXPECT_EQ(steps, (std::vector<std::string>{"checkpoint", "dataset", "model", "loaders", "restore", ""}));
}

long RssPages() {
  std::ifstream f("/proc/self/statm");
  long size = 0, rss = 0;
  f >> size >> rss;
  return rss;
}

TEST_F(TrainerTest, MemoryIsFlatAcrossThreeRuns) {
  std::vector<long> rss;
  for (int i = 0; i < 3; ++i) {
    TrainOptions o = Tiny("mem" + std::to_string(i));
    o.epochs = 2;
    auto r = Train(o);
    ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
    rss.push_back(RssPages() * sysconf(_SC_PAGESIZE) / (1 << 20));
  }
  std::printf("[ trainer ] RSS after runs: %ld, %ld, %ld MiB\n", rss[0], rss[1], rss[2]);
  EXPECT_LT(rss[2] - rss[0], 48) << "RSS grew from " << rss[0] << " to " << rss[2] << " MiB";
}

}  // namespace
}  // namespace kestrel::train
