// Trainer options that change what a run starts from or writes, end to end
// on tiny synthetic datasets (model "t", imgsz 64, threads=1, a few
// iterations each): freeze, pretrained, save_period_min.
//
// Weights are compared through the training checkpoint (train/checkpoint.h):
// its model/<name> tensors are the trained (not EMA) parameters. With
// batch 2 and nbs 4 the first optimizer step comes after iteration 1, so a
// checkpoint taken after iteration 0 holds the starting parameters.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "core/env.h"
#include "core/safetensors.h"
#include "data/registry.h"
#include "data/synth.h"
#include "model/weights.h"
#include "model/yolo.h"
#include "store/metadata_store.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace kestrel::train {
namespace {

namespace fs = std::filesystem;

class TrainerOptionsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::string(fs::temp_directory_path() /
                            ("kestrel_trainer_options_test_" + std::to_string(getpid())));
    fs::remove_all(*root_);
    auto meta = store::MetadataStore::Open(store::MetadataUrl(Home()));
    ASSERT_TRUE(meta.IsOk()) << meta.GetStatus().ToString();
    store::ArtifactStore blobs(Home());
    data::Registry reg(**meta, blobs);
    // "tiny2": 8 train + 3 val images, 2 classes; "tiny3": the same with 3 classes.
    for (int classes : {2, 3}) {
      const std::string name = "tiny" + std::to_string(classes);
      data::SynthOptions so;
      so.images = 11;
      so.classes = classes;
      so.imgsz = 64;
      so.seed = 7;
      so.val_fraction = 0.25;
      so.background_fraction = 0;
      so.write_threads = 2;
      ASSERT_TRUE(data::WriteSynthDataset(so, *root_ + "/" + name).IsOk());
      data::ImportOptions io;
      io.imgsz = 64;
      auto imp = reg.Import(*root_ + "/" + name, name, io);
      ASSERT_TRUE(imp.IsOk()) << imp.GetStatus().ToString();
    }
  }
  static void TearDownTestSuite() {
    fs::remove_all(*root_);
    delete root_;
  }
  static std::string Home() { return *root_ + "/home"; }

  // One epoch of 4 batches of 2; an optimizer step after iterations 1 and 3.
  static TrainOptions Tiny(const std::string& run, const std::string& data = "tiny2") {
    TrainOptions o;
    o.data = data;
    o.model = "t";
    o.epochs = 1;
    o.threads = 1;
    o.home = Home();
    o.run_dir = *root_ + "/runs/" + run;
    o.loader.imgsz = 64;
    o.loader.batch = 2;
    o.loader.workers = 1;
    o.optimizer.optimizer = "AdamW";
    o.optimizer.lr0 = 0.01;
    o.optimizer.warmup_epochs = 0;
    o.optimizer.nbs = 4;
    o.val = false;
    o.plots = false;
    return o;
  }

  // Trains `o` for one iteration and returns the parameters it started from
  // (checkpoint after iteration 0, before the first optimizer step).
  static std::map<std::string, SafeTensor> StartingParameters(const TrainOptions& o) {
    TrainHooks hooks;
    hooks.checkpoint_every_iterations = 1;
    hooks.halt_after_iterations = 1;
    auto r = Train(o, hooks);
    EXPECT_TRUE(r.IsOk()) << r.GetStatus().ToString();
    if (!r.IsOk()) return {};
    EXPECT_EQ(r->reason, ExitReason::kHalted) << r->message;
    return CheckpointParameters(o.run_dir + "/weights/last.ckpt", 1);
  }

  // model/<name> parameters (not BatchNorm running statistics, which a
  // train-mode forward updates even in frozen layers, as in the reference)
  // of a checkpoint, keyed by <name>; checks its next_iteration.
  static std::map<std::string, SafeTensor> CheckpointParameters(const std::string& path,
                                                                int64_t next_iteration) {
    auto c = ReadCheckpoint(Env::Default(), path);
    EXPECT_TRUE(c.IsOk()) << c.GetStatus().ToString();
    if (!c.IsOk()) return {};
    EXPECT_EQ(c->state.schedule.next_iteration, next_iteration) << path;
    std::map<std::string, SafeTensor> out;
    for (const auto& [name, t] : c->file.tensors) {
      if (name.rfind("model/", 0) != 0 || name.find("running_") != std::string::npos ||
          name.find("num_batches_tracked") != std::string::npos) {
        continue;
      }
      out[name.substr(6)] = t;
    }
    return out;
  }

  // "model.12.cv1.conv.weight" -> 12.
  static int LayerOf(const std::string& name) { return std::stoi(name.substr(6, name.find('.', 6) - 6)); }

  static std::string* root_;
};
std::string* TrainerOptionsTest::root_ = nullptr;

TEST_F(TrainerOptionsTest, FreezeKeepsFirstLayersBitwiseAndTrainsTheRest) {
  constexpr int kFreeze = 3;
  const auto start = StartingParameters(Tiny("freeze_start"));
  ASSERT_FALSE(start.empty());

  TrainOptions o = Tiny("freeze");
  o.freeze = kFreeze;
  auto r = Train(o);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  ASSERT_EQ(r->reason, ExitReason::kCompleted) << r->message;
  const auto end = CheckpointParameters(o.run_dir + "/weights/last.ckpt", 4);
  ASSERT_EQ(end.size(), start.size());

  std::set<int> frozen_layers, changed_layers, layers;
  for (const auto& [name, t] : start) {
    ASSERT_TRUE(end.count(name)) << name;
    const int layer = LayerOf(name);
    layers.insert(layer);
    const bool same = end.at(name).data == t.data;
    if (layer < kFreeze) {
      EXPECT_TRUE(same) << "frozen parameter changed: " << name;
      frozen_layers.insert(layer);
    } else if (!same) {
      changed_layers.insert(layer);
    }
  }
  EXPECT_EQ(frozen_layers, (std::set<int>{0, 1, 2}));
  for (int layer : layers) {
    if (layer >= kFreeze) {
      EXPECT_TRUE(changed_layers.count(layer)) << "layer " << layer << " did not train";
    }
  }

  // Control: without freeze the same run changes model.0 (the check above can fail).
  TrainOptions u = Tiny("unfrozen");
  ASSERT_TRUE(Train(u).IsOk());
  const auto unfrozen = CheckpointParameters(u.run_dir + "/weights/last.ckpt", 4);
  ASSERT_TRUE(unfrozen.count("model.0.conv.weight"));
  EXPECT_TRUE(unfrozen.at("model.0.conv.weight").data != start.at("model.0.conv.weight").data);
}

TEST_F(TrainerOptionsTest, PretrainedLoadsAllButTheClassBranch) {
  // A previous tiny run with 2 classes provides the weights (its EMA model).
  TrainOptions prev = Tiny("pre_nc2");
  auto p = Train(prev);
  ASSERT_TRUE(p.IsOk()) << p.GetStatus().ToString();
  const std::string weights = prev.run_dir + "/weights/last.safetensors";
  auto file = ReadSafeTensorsFile(weights);
  ASSERT_TRUE(file.IsOk()) << file.GetStatus().ToString();

  // Fine-tune on the 3-class dataset: the run starts from the file's weights.
  TrainOptions o = Tiny("ft_nc3", "tiny3");
  o.pretrained = weights;
  const auto start = StartingParameters(o);
  ASSERT_FALSE(start.empty());
  int equal = 0;
  std::set<std::string> class_convs;
  const std::regex kClassConv(R"(model\.22\.cv3\.\d+\.2\.(weight|bias))");
  for (const auto& [name, t] : start) {
    ASSERT_TRUE(file->tensors.count(name)) << name;
    const SafeTensor& f = file->tensors.at(name);
    // The final class convs model.22.cv3.<level>.2 have nc output channels.
    if (std::regex_match(name, kClassConv)) {
      EXPECT_NE(f.shape, t.shape) << name;
      EXPECT_EQ(t.shape[0], 3) << name;
      class_convs.insert(name);
      continue;
    }
    EXPECT_EQ(f.shape, t.shape) << name;
    EXPECT_TRUE(f.data == t.data) << "not loaded from " << weights << ": " << name;
    ++equal;
  }
  EXPECT_EQ(class_convs.size(), 6u);  // weight + bias at 3 levels
  EXPECT_GT(equal, 100);

  // Control: the seeded initialization of the same model differs from the file.
  torch::manual_seed(0);
  auto fresh = model::CreateModel("t", 3);
  ASSERT_TRUE(fresh.IsOk());
  auto fresh_file = model::WeightsToSafeTensors(**fresh);
  ASSERT_TRUE(fresh_file.IsOk());
  const std::string& init = fresh_file->tensors.at("model.0.conv.weight").data;
  EXPECT_TRUE(init != file->tensors.at("model.0.conv.weight").data);
  EXPECT_TRUE(init == StartingParameters(Tiny("fresh_nc3", "tiny3")).at("model.0.conv.weight").data)
      << "the control does not reproduce the trainer's initialization";
}

TEST_F(TrainerOptionsTest, PretrainedBadPathIsAClearError) {
  TrainOptions o = Tiny("ft_missing");
  o.pretrained = *root_ + "/no/such/weights.safetensors";
  auto r = Train(o);
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kNotFound) << r.GetStatus().ToString();
  EXPECT_NE(r.GetStatus().ToString().find(o.pretrained), std::string::npos) << r.GetStatus().ToString();

  // Not a safetensors file: refused, naming the file.
  const std::string junk = *root_ + "/junk.safetensors";
  ASSERT_TRUE(Env::Default().WriteFileAtomic(junk, "this is not a safetensors file").IsOk());
  o.pretrained = junk;
  r = Train(o);
  ASSERT_FALSE(r.IsOk());
  EXPECT_NE(r.GetStatus().ToString().find(junk), std::string::npos) << r.GetStatus().ToString();
}

TEST_F(TrainerOptionsTest, SavePeriodWritesMidEpochCheckpoints) {
  // 8 batches of 1 per epoch; "SIGKILL" (halt, no checkpoint) after 5.
  TrainOptions o = Tiny("period");
  o.loader.batch = 1;
  o.save_period_min = 0.0001;  // 6 ms: every iteration takes longer
  TrainHooks hooks;
  hooks.halt_after_iterations = 5;
  auto r = Train(o, hooks);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  ASSERT_EQ(r->reason, ExitReason::kHalted) << r->message;
  const std::string path = o.run_dir + "/weights/last.ckpt";
  ASSERT_TRUE(fs::exists(path)) << "no mid-epoch checkpoint with save_period_min=" << o.save_period_min;
  auto c = ReadCheckpoint(Env::Default(), path);
  ASSERT_TRUE(c.IsOk()) << c.GetStatus().ToString();
  EXPECT_EQ(c->state.batches_per_epoch, 8);
  EXPECT_GE(c->state.schedule.next_iteration, 1);
  EXPECT_LE(c->state.schedule.next_iteration, 5);
  EXPECT_EQ(c->state.history_json, "[]") << "no epoch has ended yet";
  std::printf("[ trainer ] save_period_min=%g: last checkpoint at iteration %lld of 8\n", o.save_period_min,
              static_cast<long long>(c->state.schedule.next_iteration));

  // The same halted run without save_period_min leaves no checkpoint at all.
  TrainOptions off = Tiny("no_period");
  off.loader.batch = 1;
  auto r2 = Train(off, hooks);
  ASSERT_TRUE(r2.IsOk()) << r2.GetStatus().ToString();
  EXPECT_FALSE(fs::exists(off.run_dir + "/weights/last.ckpt"));
}

}  // namespace
}  // namespace kestrel::train
