// results.csv and args.yaml in the reference trainer's layout (issue 28
// item 5), so scripts written for the reference's run folders read Kestrel's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/env.h"
#include "train/progress.h"

namespace kestrel::train {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// The header line of the reference's results.csv (YOLOv8 8.3), verbatim.
constexpr char kReferenceHeader[] =
    "epoch,time,train/box_loss,train/cls_loss,train/dfl_loss,metrics/precision(B),metrics/recall(B),"
    "metrics/mAP50(B),metrics/mAP50-95(B),val/box_loss,val/cls_loss,val/dfl_loss,lr/pg0,lr/pg1,lr/pg2";

TEST(ResultsCsvTest, HeaderIsTheReferencesColumnOrder) {
  const auto lines = Lines(ResultsCsvText({}));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], kReferenceHeader);
}

// Development-time check against a file the reference trainer wrote
// (../shared/reference, README there); skips when it is absent.
TEST(ResultsCsvTest, HeaderEqualsTheReferenceTrainersFile) {
  const std::string path = std::string(KESTREL_SHARED_DIR) + "/reference/training_coco128/results_sgd.csv";
  auto text = Env::Default().ReadFile(path);
  if (!text.IsOk()) GTEST_SKIP() << path << " not present";
  EXPECT_EQ(Lines(*text).at(0), Lines(ResultsCsvText({})).at(0));
}

TEST(ResultsCsvTest, RowsCarryCumulativeTimeAndSixSignificantDigits) {
  EpochRecord a;
  a.epoch = 1;
  a.seconds = 26.7358;
  a.box = 3.881184;
  a.cls = 5.755831;
  a.dfl = 4.267129;
  a.precision = 0.5;
  a.recall = 0.25;
  a.map50 = 0.123456789;
  a.map5095 = 0.0654321;
  a.val_box = 3.56203;
  a.val_cls = 5.78708;
  a.val_dfl = 4.13997;
  a.lr = {0.0946, 0.0006, 0.0006};
  EpochRecord b = a;
  b.epoch = 2;
  b.seconds = 23.5832;  // this epoch alone; the file says 50.319 since the start
  b.lr = {0.0882571428, 0.00125714285, 0.00125714285};
  const auto lines = Lines(ResultsCsvText({a, b}));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1],
            "1,26.7358,3.88118,5.75583,4.26713,0.5,0.25,0.123457,0.0654321,3.56203,5.78708,4.13997,0.0946,"
            "0.0006,0.0006");
  EXPECT_EQ(lines[2],
            "2,50.319,3.88118,5.75583,4.26713,0.5,0.25,0.123457,0.0654321,3.56203,5.78708,4.13997,0.0882571,"
            "0.00125714,0.00125714");
}

TEST(ArgsYamlTest, TaskAndModeFirstSaveDirLast) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("kestrel_args_yaml_" + std::to_string(::getpid()))).string();
  ASSERT_TRUE(Env::Default().CreateDirs(dir).IsOk());
  const nlohmann::json config = {{"batch", 16}, {"data", "tiny"}, {"epochs", 3}};
  ASSERT_TRUE(WriteArgsYaml(Env::Default(), JoinPath(dir, "args.yaml"), config).IsOk());
  auto text = Env::Default().ReadFile(JoinPath(dir, "args.yaml"));
  ASSERT_TRUE(text.IsOk()) << text.GetStatus().ToString();
  EXPECT_EQ(Lines(*text),
            (std::vector<std::string>{"task: \"detect\"", "mode: \"train\"", "batch: 16", "data: \"tiny\"",
                                      "epochs: 3", "save_dir: \"" + dir + "\""}));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kestrel::train
