// app/evaluate.h and app/compare.h against the CLI: `kestrel val model= --json` and
// `kestrel compare --json` print exactly app::ValRunJson / app::CompareResultJson
// of the same input (the CLI is parse -> call -> print).
#include "app/evaluate.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "../cli/cli_fixture.h"
#include "app/compare.h"
#include "core/env.h"
#include "store/artifact_store.h"
#include "store/local_artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::app {
namespace {

namespace fs = std::filesystem;

const std::string kRefWeights =
    std::string(KESTREL_SHARED_DIR) + "/reference/yolov8n_nc3_weights.safetensors";

class AppEvaluateTest : public testing::KestrelCliTest {
 protected:
  // The stores the CLI wrote to (KESTREL_HOME of the fixture).
  void OpenStores() {
    const std::string home = (dir_ / "home").string();
    auto meta = store::MetadataStore::Open(store::MetadataUrl(home));
    ASSERT_TRUE(meta.IsOk()) << meta.GetStatus().ToString();
    meta_ = std::move(meta).Value();
    blobs_ = std::make_unique<store::LocalArtifactStore>(home);
  }
  std::unique_ptr<store::MetadataStore> meta_;
  std::unique_ptr<store::ArtifactStore> blobs_;
};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::vector<std::string> Keys(const nlohmann::json& j) {
  std::vector<std::string> out;
  for (const auto& [k, v] : j.items()) out.push_back(k);
  return out;
}

TEST_F(AppEvaluateTest, ValModelJsonIsTheAppLayersView) {
  if (!fs::exists(kRefWeights)) GTEST_SKIP() << "no ../shared reference weights";
  ASSERT_EQ(Kestrel("dataset synth data --images 6 --imgsz 64 --classes 3 --seed 2").code, 0);
  ASSERT_EQ(Kestrel("dataset import data --name shapes").code, 0);
  const std::string project = (dir_ / "runs/val").string();
  testing::CliRun cli =
      Kestrel("--json val model=" + kRefWeights + " data=shapes imgsz=64 batch=2 conf=0.0001" +
              " save_json=true coco_metrics=true project=" + project + " name=cli");
  ASSERT_EQ(cli.code, 0) << cli.out;
  const nlohmann::json cj = Json(cli);

  OpenStores();
  ValKeys keys;
  keys.model = kRefWeights;
  keys.data = "shapes";
  keys.imgsz = 64;
  keys.batch = 2;
  keys.conf = 0.0001;  // this model's scores on the synthetic shapes are tiny
  keys.save_json = true;
  keys.coco_metrics = true;
  keys.project = project;
  keys.name = "app";
  Result<ValRun> r = EvaluateModel(Env::Default(), *meta_, *blobs_, keys);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  const nlohmann::json aj = ValRunJson(*r);

  // Same document: same keys everywhere; the record identical but for its
  // creation time and the measured speed; the run folders as named.
  EXPECT_EQ(Keys(cj), Keys(aj));
  EXPECT_EQ(Keys(cj["result"]), Keys(aj["result"]));
  EXPECT_EQ(Keys(cj["result"]["speed"]), Keys(aj["result"]["speed"]));
  nlohmann::json cr = cj["result"], ar = aj["result"];
  ASSERT_GT(ar["predictions_json"]["detections"].get<int>(), 0) << "nothing to compare";
  for (auto* j : {&cr, &ar}) {
    j->erase("created_at");
    j->erase("speed");
  }
  EXPECT_EQ(cr, ar);
  EXPECT_EQ(cj["ok"], true);
  EXPECT_EQ(cj["dir"], project + "/cli");
  EXPECT_EQ(aj["dir"], project + "/app");
  EXPECT_EQ(cj["predictions_json"], project + "/cli/predictions.json");
  EXPECT_EQ(aj["predictions_json"], project + "/app/predictions.json");
  EXPECT_EQ(Env::Default().ReadFile(project + "/cli/predictions.json").Value(),
            Env::Default().ReadFile(project + "/app/predictions.json").Value());
  EXPECT_EQ(blobs_->PathFor(r->record_sha), r->record_path);

  // The human output is the app layer's text up to the speed line.
  testing::CliRun text = Kestrel("val model=" + kRefWeights + " data=shapes imgsz=64 batch=2 conf=0.0001" +
                                 " save_json=true coco_metrics=true project=" + project + " name=cli_text");
  ASSERT_EQ(text.code, 0) << text.out;
  const std::vector<std::string> cl = Lines(text.out), al = Lines(r->text);
  ASSERT_EQ(cl.size(), al.size()) << text.out;
  size_t same = 0;
  for (; same < al.size() && al[same].rfind("speed: ", 0) != 0; ++same) EXPECT_EQ(cl[same], al[same]);
  EXPECT_GT(same, 3u);
  EXPECT_EQ(cl[same + 1], "results saved to " + project + "/cli_text");
}

TEST_F(AppEvaluateTest, CompareJsonIsTheAppLayersView) {
  if (!fs::exists(kRefWeights)) GTEST_SKIP() << "no ../shared reference weights";
  ASSERT_EQ(Kestrel("dataset synth data --images 6 --imgsz 64 --classes 3 --seed 4").code, 0);
  ASSERT_EQ(Kestrel("dataset import data --name shapes").code, 0);
  const std::string project = (dir_ / "runs/compare").string();
  const std::string args =
      "compare " + kRefWeights + " " + kRefWeights + " data=shapes imgsz=64 batch=4 project=" + project;
  testing::CliRun cli = Kestrel("--json " + args + " name=cli");
  ASSERT_EQ(cli.code, 0) << cli.out;
  const nlohmann::json cj = Json(cli);

  OpenStores();
  CompareRequest req;
  req.model_a = kRefWeights;
  req.model_b = kRefWeights;
  req.data = "shapes";
  req.imgsz = 64;
  req.batch = 4;
  req.project = project;
  req.name = "app";
  std::vector<std::string> resolved;
  Result<CompareResult> r = CompareModels(Env::Default(), *meta_, *blobs_, req, [&](std::string* w) {
    resolved.push_back(*w);
    return Status();
  });
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_EQ(resolved, (std::vector<std::string>{kRefWeights, kRefWeights}));
  const nlohmann::json aj = CompareResultJson(*r);

  // Nothing in the report depends on time or the run folder: the whole
  // document is identical, stored blobs included, but for "dir".
  EXPECT_EQ(aj["report"]["kind"], "kestrel.compare");
  EXPECT_GT(aj["report"]["images"].get<int>(), 0);
  nlohmann::json c = cj, a = aj;
  EXPECT_EQ(c["dir"], project + "/cli");
  EXPECT_EQ(a["dir"], project + "/app");
  c.erase("dir");
  a.erase("dir");
  EXPECT_EQ(c, a);
  EXPECT_EQ(Env::Default().ReadFile(project + "/cli/compare.json").Value(),
            Env::Default().ReadFile(project + "/app/compare.json").Value());

  // The human output is CompareResultText but for the run folder's line.
  testing::CliRun text = Kestrel(args + " name=cli_text");
  ASSERT_EQ(text.code, 0) << text.out;
  const std::vector<std::string> cl = Lines(text.out), al = Lines(CompareResultText(*r));
  ASSERT_EQ(cl.size(), al.size()) << text.out;
  for (size_t i = 0; i < al.size(); ++i) {
    if (al[i].rfind("results saved to ", 0) == 0) {
      EXPECT_EQ(cl[i], "results saved to " + project + "/cli_text");
    } else {
      EXPECT_EQ(cl[i], al[i]);
    }
  }

  // Errors are values, and a failed comparison writes no run folder.
  req.data = "nosuch";
  req.name = "bad";
  EXPECT_FALSE(CompareModels(Env::Default(), *meta_, *blobs_, req).IsOk());
  req.data = "shapes";
  r = CompareModels(Env::Default(), *meta_, *blobs_, req, [](std::string* w) {
    return Status::NotFound("no model named " + *w, {"", 0, "model"});
  });
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Where().field, "model");
  EXPECT_FALSE(fs::exists(fs::path(project) / "bad"));
}

}  // namespace
}  // namespace kestrel::app
