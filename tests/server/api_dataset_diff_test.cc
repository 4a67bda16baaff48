// GET /api/datasets/{name}/diff and the findings route's pairs over real
// HTTP on loopback (docs/server.md "Dataset images"): the diff route's
// document is `kestrel dataset diff --json`'s (the app view the CLI prints,
// "ok" included), with per-class instance counts; bad version parameters
// name the field; a train/val leakage finding carries both images (sha, path,
// split, boxes) so the UI can show them side by side; the images route's
// path filter.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "app/datasets.h"
#include "read_route_test.h"
#include "stored_report.h"

namespace kestrel::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class DatasetDiffTest : public testing::ReadRouteTest {
 protected:
  void SetUp() override {
    OpenHomeAndServe("kestrel_dsdiff_", 6);
    if (HasFatalFailure()) return;
    // v2: one train image removed, one train label changed, and a train
    // image copied into val (added, and a train/val leakage pair).
    const fs::path synth = dir_ / "synth";
    std::vector<std::string> train;
    for (const auto& e : fs::directory_iterator(synth / "images" / "train"))
      train.push_back(e.path().stem().string());
    std::sort(train.begin(), train.end());
    ASSERT_GE(train.size(), 3u);
    const std::string ext = ".jpg";
    ASSERT_TRUE(fs::exists(synth / "images" / "train" / (train[0] + ext)));
    fs::remove(synth / "images" / "train" / (train[0] + ext));
    fs::remove(synth / "labels" / "train" / (train[0] + ".txt"));
    std::ofstream(synth / "labels" / "train" / (train[1] + ".txt"), std::ios::app) << "1 0.5 0.5 0.2 0.2\n";
    fs::copy_file(synth / "images" / "train" / (train[2] + ext), synth / "images" / "val" / ("copy" + ext));
    fs::copy_file(synth / "labels" / "train" / (train[2] + ".txt"), synth / "labels" / "val" / "copy.txt");
    removed_ = "train/" + train[0] + ext;  // split/path, the path relative to the split's images
    auto v2 = app::Datasets(*meta_, *blobs_).Import(synth.string(), "birds", {});
    ASSERT_TRUE(v2.IsOk()) << v2.GetStatus().ToString();
    ASSERT_EQ(v2->record.seq, 2);
  }

  std::string removed_;
};

TEST_F(DatasetDiffTest, DiffRouteIsTheCliDocument) {
  auto d = app::Datasets(*meta_, *blobs_).Diff("birds@v1", "birds@v2");
  ASSERT_TRUE(d.IsOk()) << d.GetStatus().ToString();
  json cli = app::DatasetDiffJson(*d);
  cli["ok"] = true;  // what `kestrel dataset diff birds@v1 birds@v2 --json` prints
  json doc = Doc("/api/datasets/birds/diff?a=v1&b=v2");
  EXPECT_EQ(doc, cli);
  EXPECT_EQ(doc["removed"], json::array({removed_}));
  EXPECT_EQ(doc["added"], json::array({"val/copy.jpg"}));
  EXPECT_EQ(doc["labels_changed"].size(), 1u);
  EXPECT_EQ(doc["a"]["version"], "v1");
  EXPECT_EQ(doc["b"]["version"], "v2");
  // Instances per class: b - a over all splits, equal to the versions' counts.
  int64_t delta = 0;
  for (const auto& c : doc["classes"]) {
    EXPECT_EQ(c["delta"].get<int64_t>(), c["b"].get<int64_t>() - c["a"].get<int64_t>());
    delta += c["delta"].get<int64_t>();
  }
  EXPECT_EQ(delta, doc["b"]["num_boxes"].get<int64_t>() - doc["a"]["num_boxes"].get<int64_t>());
  // The box-level diff (issue 34): added - removed is the net change (the
  // rest are matched pairs); at most the removed image, the one with a new
  // box and the copy changed, and the one with a new box surely did.
  const json& boxes = doc["boxes"];
  EXPECT_EQ(boxes["total"]["added"].get<int64_t>() - boxes["total"]["removed"].get<int64_t>(), delta);
  EXPECT_GE(boxes["total"]["added"].get<int64_t>(), 1);
  EXPECT_GE(boxes["images_changed"].get<int64_t>(), 1);
  EXPECT_LE(boxes["images_changed"].get<int64_t>(), 3);
  // A version id prefix works as vN does.
  const std::string id = doc["a"]["version_id"].get<std::string>().substr(0, 10);
  EXPECT_EQ(Doc("/api/datasets/birds/diff?a=" + id + "&b=v2"), cli);
}

TEST_F(DatasetDiffTest, BadVersionsNameTheField) {
  for (const auto& [target, field] :
       std::vector<std::pair<std::string, std::string>>{{"/api/datasets/birds/diff?b=v2", "a"},
                                                        {"/api/datasets/birds/diff?a=v1", "b"},
                                                        {"/api/datasets/birds/diff?a=v1&b=fish@v1", "b"}}) {
    json doc = Doc(target, 400);
    EXPECT_EQ(doc["error"]["field"], field) << target << ": " << doc.dump();
  }
  json missing = Doc("/api/datasets/birds/diff?a=v1&b=v9", 404);
  EXPECT_EQ(missing["error"]["code"], "not_found");
  Doc("/api/datasets/nosuch/diff?a=v1&b=v2", 404);
}

TEST_F(DatasetDiffTest, LeakageFindingCarriesBothImages) {
  json page = Doc("/api/datasets/birds@v2/findings?check=split.leakage");
  ASSERT_GE(page["findings"].size(), 1u) << page.dump();
  const json& f = page["findings"][0];
  ASSERT_TRUE(f["pair"].is_object()) << f.dump();
  const json& a = f["pair"]["a"];
  const json& b = f["pair"]["b"];
  EXPECT_EQ(a["sha"], b["sha"]);  // the val image is a byte copy
  EXPECT_NE(a["split"], b["split"]);
  EXPECT_EQ(f["pair"]["distance"], 0);
  std::set<std::string> paths{a["path"].get<std::string>(), b["path"].get<std::string>()};
  EXPECT_TRUE(paths.count("copy.jpg")) << f.dump();
  EXPECT_EQ(f["image"], a);
  EXPECT_FALSE(a["boxes"].empty());
  // Other findings have no pair.
  json all = Doc("/api/datasets/birds@v2/findings");
  for (const auto& g : all["findings"]) {
    if (g["check"] != "split.leakage" && g["check"] != "image.near_duplicate") {
      EXPECT_TRUE(g["pair"].is_null()) << g.dump();
    }
  }
  // The images route finds each by its path and split.
  json one = Doc("/api/datasets/birds@v2/images?split=val&path=copy.jpg");
  ASSERT_EQ(one["images"].size(), 1u);
  EXPECT_EQ(one["images"][0]["sha"], a["sha"]);
  EXPECT_EQ(Doc("/api/datasets/birds@v2/images?path=nope.jpg")["total"], 0);
}

// The route reads the pair from the stored finding's typed fields: a copy of
// birds@v2 whose stored messages are other findings' text (naming other
// images and splits) or nonsense answers the same pairs and images.
TEST_F(DatasetDiffTest, FindingsRouteNeverReadsTheMessage) {
  ASSERT_TRUE(kestrel::testing::AddVersionWithEditedFindings(*meta_, *blobs_, "birds@v2", "rotated",
                                                             &kestrel::testing::RotateMessages)
                  .IsOk());
  ASSERT_TRUE(kestrel::testing::AddVersionWithEditedFindings(*meta_, *blobs_, "birds@v2", "nonsense",
                                                             &kestrel::testing::ScrambleMessages)
                  .IsOk());
  auto rows = [&](const std::string& name) {
    json page = Doc("/api/datasets/" + name + "/findings");
    for (auto& f : page["findings"]) f.erase("message");
    page.erase("version");
    return page;
  };
  const json real = rows("birds@v2");
  ASSERT_FALSE(real["findings"].empty());
  bool has_pair = false;
  for (const auto& f : real["findings"]) has_pair |= f["pair"].is_object();
  EXPECT_TRUE(has_pair) << real.dump(1);
  EXPECT_EQ(rows("rotated"), real);
  EXPECT_EQ(rows("nonsense"), real);
}

}  // namespace
}  // namespace kestrel::server
