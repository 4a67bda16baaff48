// The keys people copy from the reference framework (issue 28 item 4), the
// torch-free half: classes=, single_cls and fraction on a manifest, the
// reference's special values (patience=0, save_period=-1, workers=0,
// pretrained=true|false, freeze=[0,1,2], resume=true), time=, and the keys
// that have no effect here, accepted with a warning naming them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/options.h"
#include "train/data_subset.h"
#include "train/train_config.h"

namespace kestrel::train {
namespace {

data::ManifestEntry Entry(const std::string& path, data::Split split, std::vector<int> classes) {
  data::ManifestEntry e;
  e.path = path;
  e.split = split;
  e.width = e.height = 64;
  double x = 0.1;
  for (int c : classes) {
    e.boxes.push_back({c, x, 0.5, 0.1, 0.1});
    x += 0.2;
  }
  e.label_hash = data::LabelHash(e.boxes);
  return e;
}

// Five train images, two val images; classes 0 cat, 1 dog, 2 bird.
data::Manifest ThreeClasses() {
  data::Manifest m;
  m.names = {"cat", "dog", "bird"};
  for (int i = 0; i < 5; ++i)
    m.entries.push_back(Entry("t" + std::to_string(i) + ".jpg", data::Split::kTrain, {0, 1, 2}));
  m.entries.push_back(Entry("v0.jpg", data::Split::kVal, {1, 2}));
  m.entries.push_back(Entry("v1.jpg", data::Split::kVal, {1}));
  return m;
}

TrainConfig Parsed(const std::vector<std::string>& args) {
  TrainConfig c;
  c.data = "shapes";
  OptionSet s;
  c.Bind(s);
  const Status st = s.ApplyArgs(args);
  EXPECT_TRUE(st.IsOk()) << st.ToString();
  return c;
}

TEST(CopiedKeysTest, ClassesKeepsOnlyThoseLabelsInEverySplitAndEveryImage) {
  DataSubset d;
  d.classes = "[0, 2]";
  std::string what;
  auto m = d.Apply(ThreeClasses(), &what);
  ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
  ASSERT_EQ(m->entries.size(), 7u);  // images stay, as background where nothing is left
  EXPECT_EQ(m->names.size(), 3u);    // class indices unchanged (the reference's update_labels)
  for (const auto& e : m->entries) {
    for (const auto& b : e.boxes) EXPECT_NE(b.cls, 1) << e.path;
    EXPECT_EQ(e.label_hash, data::LabelHash(e.boxes));
  }
  EXPECT_EQ(m->entries[0].boxes.size(), 2u);
  EXPECT_TRUE(m->entries[6].boxes.empty());  // v1.jpg had only a dog
  EXPECT_NE(what.find("0 cat, 2 bird"), std::string::npos) << what;
  EXPECT_NE(what.find("7 other labels dropped"), std::string::npos) << what;

  d.classes = "3";
  auto bad = d.Apply(ThreeClasses());
  ASSERT_FALSE(bad.IsOk());
  EXPECT_EQ(bad.GetStatus().Where().field, "classes");
  EXPECT_NE(bad.GetStatus().Message().find("no class 3"), std::string::npos) << bad.GetStatus().ToString();
  d.classes = "cat";
  EXPECT_EQ(d.Validate().Where().field, "classes");
}

TEST(CopiedKeysTest, SingleClsIsOneClassNamedItem) {
  DataSubset d;
  d.single_cls = true;
  auto m = d.Apply(ThreeClasses());
  ASSERT_TRUE(m.IsOk());
  EXPECT_EQ(m->names, std::vector<std::string>{"item"});
  size_t boxes = 0;
  for (const auto& e : m->entries) {
    for (const auto& b : e.boxes) EXPECT_EQ(b.cls, 0);
    boxes += e.boxes.size();
  }
  EXPECT_EQ(boxes, 5u * 3 + 2 + 1);  // nothing merged or dropped
}

TEST(CopiedKeysTest, FractionTakesTheFirstTrainImagesRoundedAsPythonAndKeepsVal) {
  DataSubset d;
  d.fraction = 0.5;  // round(5 * 0.5) = round(2.5) = 2 (half to even)
  auto m = d.Apply(ThreeClasses());
  ASSERT_TRUE(m.IsOk());
  std::vector<std::string> train, val;
  for (const auto& e : m->entries) (e.split == data::Split::kTrain ? train : val).push_back(e.path);
  EXPECT_EQ(train, (std::vector<std::string>{"t0.jpg", "t1.jpg"}));
  EXPECT_EQ(val.size(), 2u);
  d.fraction = 0.7;  // round(3.5) = 4
  EXPECT_EQ(d.Apply(ThreeClasses())->entries.size(), 4u + 2);
  d.fraction = 0.05;  // round(0.25) = 0
  auto none = d.Apply(ThreeClasses());
  ASSERT_FALSE(none.IsOk());
  EXPECT_EQ(none.GetStatus().Where().field, "fraction");
  // Bound as (0, 1] on train; val has no fraction (the reference's validator).
  TrainConfig c;
  OptionSet s;
  c.Bind(s);
  EXPECT_EQ(s.Set("fraction", "0").Where().field, "fraction");
  EXPECT_FALSE(s.Set("fraction", "1.5").IsOk());
  OptionSet val_keys;
  DataSubset vd;
  vd.Bind(val_keys, /*train=*/false);
  EXPECT_FALSE(val_keys.Has("fraction"));
  EXPECT_TRUE(val_keys.Has("classes") && val_keys.Has("single_cls"));
}

TEST(CopiedKeysTest, IndexListsInEveryFormTheReferenceWrites) {
  EXPECT_EQ(*ParseIndexList("[0, 2]", "classes", 10), (std::vector<int>{0, 2}));
  EXPECT_EQ(*ParseIndexList("0,2", "classes", 10), (std::vector<int>{0, 2}));
  EXPECT_EQ(*ParseIndexList("3", "classes", 10), (std::vector<int>{3}));
  EXPECT_TRUE(ParseIndexList("", "classes", 10)->empty());
  for (const char* bad : {"-1", "a", "[0,,2]", "11", "1.5"}) {
    auto r = ParseIndexList(bad, "classes", 10);
    ASSERT_FALSE(r.IsOk()) << bad;
    EXPECT_EQ(r.GetStatus().Where().field, "classes") << bad;
  }
}

TEST(CopiedKeysTest, FreezeTakesACountOrAListOfLayers) {
  EXPECT_EQ(*Parsed({"freeze=3"}).FrozenLayers(), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(*Parsed({"freeze=[0,1,2]"}).FrozenLayers(), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(*Parsed({"freeze=[5, 9]"}).FrozenLayers(), (std::vector<int>{5, 9}));
  EXPECT_TRUE(Parsed({"freeze=0"}).FrozenLayers()->empty());
  EXPECT_EQ(Parsed({"freeze=23"}).FrozenLayers()->size(), 23u);
  for (const char* bad : {"freeze=24", "freeze=[23]", "freeze=backbone"}) {
    const TrainConfig c = Parsed({bad});
    EXPECT_EQ(c.Validate().Where().field, "freeze") << bad;
  }
  // args.yaml writes lists as YAML lists.
  TrainConfig c;
  OptionSet s;
  c.Bind(s);
  ASSERT_TRUE(s.ApplyYamlText("freeze: [0, 1, 2]\nclasses: [0, 2]\n", "args.yaml").IsOk());
  EXPECT_EQ(*c.FrozenLayers(), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(*c.subset.ClassList(), (std::vector<int>{0, 2}));
  // A one-item list is that layer, not a count, from YAML and from JSON (the server's keys).
  ASSERT_TRUE(s.ApplyYamlText("freeze: [3]\n", "args.yaml").IsOk());
  EXPECT_EQ(*c.FrozenLayers(), (std::vector<int>{3}));
  ASSERT_TRUE(s.ApplyJson(nlohmann::json::parse(R"({"freeze": [4], "classes": [1]})"), "keys").IsOk());
  EXPECT_EQ(*c.FrozenLayers(), (std::vector<int>{4}));
  EXPECT_EQ(*c.subset.ClassList(), (std::vector<int>{1}));
}

TEST(CopiedKeysTest, TheReferencesSpecialValuesAreAccepted) {
  // rect=true trains on rectangular batches (the trainer turns shuffle off); it used to be refused.
  const TrainConfig c = Parsed({"patience=0", "save_period=-1", "workers=0", "time=0.5", "rect=true"});
  EXPECT_TRUE(c.Validate().IsOk()) << c.Validate().ToString();
  EXPECT_TRUE(c.loader.rect);
  EXPECT_EQ(c.patience, 0);
  EXPECT_EQ(c.save_period, -1);
  EXPECT_EQ(c.loader.workers, 0);
  EXPECT_DOUBLE_EQ(c.time, 0.5);
  TrainConfig t;
  OptionSet s;
  t.Bind(s);
  EXPECT_EQ(s.Set("time", "-1").Where().field, "time");
  EXPECT_FALSE(s.Set("save_period", "-2").IsOk());
}

TEST(CopiedKeysTest, PretrainedTrueAndFalseAreFlagsNotFiles) {
  TrainConfig c = Parsed({"model=yolov8n.pt", "pretrained=False"});
  EXPECT_TRUE(c.Validate().IsOk()) << c.Validate().ToString();  // not "a second weights file"
  EXPECT_EQ(c.PretrainedWeights("yolov8n.pt"), "");             // architecture only
  c.pretrained = "true";
  EXPECT_EQ(c.PretrainedWeights("yolov8n.pt"), "yolov8n.pt");
  c.pretrained = "";
  EXPECT_EQ(c.PretrainedWeights("yolov8n.pt"), "yolov8n.pt");
  EXPECT_EQ(c.PretrainedWeights(""), "");
  c.pretrained = "w.safetensors";
  EXPECT_EQ(c.PretrainedWeights(""), "w.safetensors");
}

TEST(CopiedKeysTest, KeysWithoutMeaningHereWarnByNameOnlyAwayFromTheReferenceDefault) {
  const TrainConfig c =
      Parsed({"dropout=0.1", "overlap_mask=True", "mask_ratio=4.0", "verbose=False", "label_smoothing=0.1"});
  const std::vector<std::string> w = c.Warnings();
  ASSERT_EQ(w.size(), 3u) << ::testing::PrintToString(w);
  EXPECT_EQ(w[0].rfind("dropout=0.1 has no effect", 0), 0u) << w[0];
  EXPECT_EQ(w[1].rfind("verbose=False has no effect", 0), 0u) << w[1];
  EXPECT_NE(w[2].find("label_smoothing"), std::string::npos) << w[2];
  EXPECT_TRUE(Parsed({"dropout=0", "save=true", "copy_paste_mode=flip"}).Warnings().empty());
}

class ResumeTrueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() / ("kestrel_resume_true_" + std::to_string(::getpid()));
    std::filesystem::remove_all(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string Checkpoint(const std::string& run, int age_s) {
    const auto dir = root_ / run / "weights";
    std::filesystem::create_directories(dir);
    const auto path = dir / "last.ckpt";
    std::ofstream(path) << "x";
    std::filesystem::last_write_time(
        path, std::filesystem::file_time_type::clock::now() - std::chrono::seconds(age_s));
    return path.string();
  }
  std::filesystem::path root_;
};

TEST_F(ResumeTrueTest, TheNewestLastCheckpointUnderTheProjectInEitherLayout) {
  Checkpoint("detect/train", 300);
  const std::string newest = Checkpoint("detect/train2", 10);
  Checkpoint("train/exp", 100);  // the older runs/train/exp layout
  std::ofstream(root_ / "detect/train2/last.ckpt") << "not under weights/";
  auto r = ResolveResume("True", root_.string());
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_EQ(*r, newest);
  EXPECT_EQ(*ResolveResume("false", root_.string()), "");
  EXPECT_EQ(*ResolveResume("a/last.ckpt", root_.string()), "a/last.ckpt");
  auto none = ResolveResume("true", (root_ / "empty").string());
  ASSERT_FALSE(none.IsOk());
  EXPECT_EQ(none.GetStatus().Where().field, "resume");
  EXPECT_NE(none.GetStatus().Message().find("empty"), std::string::npos) << none.GetStatus().Message();
  // Unresolved, it is refused by name, never read as a file called "true".
  EXPECT_EQ(Parsed({"resume=true"}).Validate().Where().field, "resume");
}

}  // namespace
}  // namespace kestrel::train
