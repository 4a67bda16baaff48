// Black-box tests of what `kestrel val` writes besides the metrics (the
// val_batch0 grids, save_json=true predictions.json, coco_metrics=true) and
// of `kestrel compare` storing its report in the artifact store.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_fixture.h"

namespace {

namespace fs = std::filesystem;
using kestrel::testing::CliRun;

const std::string kShared = KESTREL_SHARED_DIR;

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Width and height from a JPEG's SOF marker; {-1, -1} when it is no JPEG.
std::pair<int, int> JpegSize(const std::string& b) {
  auto u8 = [&](size_t i) { return static_cast<unsigned>(static_cast<unsigned char>(b[i])); };
  if (b.size() < 4 || u8(0) != 0xFF || u8(1) != 0xD8) return {-1, -1};
  size_t pos = 2;
  while (pos + 9 < b.size()) {
    if (u8(pos) != 0xFF) return {-1, -1};
    const unsigned marker = u8(pos + 1);
    const size_t len = (u8(pos + 2) << 8) | u8(pos + 3);
    if (marker >= 0xC0 && marker <= 0xC2) {
      return {int((u8(pos + 7) << 8) | u8(pos + 8)), int((u8(pos + 5) << 8) | u8(pos + 6))};
    }
    pos += 2 + len;
  }
  return {-1, -1};
}

class ValExtrasCliTest : public kestrel::testing::KestrelCliTest {
 protected:
  // A synthetic dataset imported as `name`; with `numeric_stems` the images
  // are renamed 1000.jpg, 1001.jpg, ... so COCO image ids are the stems.
  void MakeDataset(const std::string& name, int images, int seed, bool numeric_stems) {
    const std::string folder = "src_" + name;
    ASSERT_EQ(Kestrel("dataset synth " + folder + " --images " + std::to_string(images) +
                      " --imgsz 64 --classes 3 --seed " + std::to_string(seed))
                  .code,
              0);
    if (numeric_stems) {
      int n = 1000;
      for (const char* split : {"train", "val"}) {
        const fs::path img_dir = dir_ / folder / "images" / split;
        std::vector<fs::path> files;
        for (const auto& e : fs::directory_iterator(img_dir)) files.push_back(e.path());
        std::sort(files.begin(), files.end());
        for (const auto& f : files) {
          const std::string stem = f.stem().string();
          const std::string to = std::to_string(n++);
          fs::rename(f, img_dir / (to + f.extension().string()));
          const fs::path lbl = dir_ / folder / "labels" / split / (stem + ".txt");
          if (fs::exists(lbl)) fs::rename(lbl, lbl.parent_path() / (to + ".txt"));
        }
      }
    }
    CliRun imp = Kestrel("dataset import " + folder + " --name " + name);
    ASSERT_EQ(imp.code, 0) << imp.out;
  }

  // YOLO txt predictions for the val labels: each label shifted a little with
  // a confidence, plus one false positive per image.
  void MakePredictions(const std::string& name, const std::string& out) {
    int k = 0;
    for (const auto& e : fs::directory_iterator(dir_ / ("src_" + name) / "labels" / "val")) {
      std::ifstream in(e.path());
      std::ostringstream preds;
      int cls;
      double cx, cy, w, h;
      while (in >> cls >> cx >> cy >> w >> h) {
        ++k;
        preds << (k % 5 == 0 ? (cls + 1) % 3 : cls) << " " << cx + 0.01 * (k % 3) << " "
              << cy - 0.007 * (k % 4) << " " << w * 1.05 << " " << h << " " << 0.3 + 0.07 * (k % 9) << "\n";
      }
      preds << (k % 3) << " 0.3 0.3 0.1 0.1 " << 0.05 + 0.01 * (k % 7) << "\n";
      Write(out + "/" + e.path().stem().string() + ".txt", preds.str());
    }
  }
};

TEST_F(ValExtrasCliTest, SaveJsonRoundTripReproducesMapAndCocoMetricsAppear) {
  // "shapes": stems like synth_00003 -> image_ids export; "nums": numeric stems -> image_ids stem.
  for (const auto& [name, ids] : {std::pair{"shapes", "export"}, std::pair{"nums", "stem"}}) {
    SCOPED_TRACE(name);
    MakeDataset(name, 24, 7, std::string(name) == "nums");
    MakePredictions(name, std::string("p_") + name);
    CliRun v = Kestrel(std::string("--json val predictions=p_") + name + " data=" + name +
                       " save_json=true coco_metrics=true name=" + name);
    ASSERT_EQ(v.code, 0) << v.out;
    const auto j = Json(v);
    const fs::path run = dir_ / "runs/detect" / name;
    ASSERT_EQ(j["predictions_json"], (fs::path("runs/detect") / name / "predictions.json").string());
    ASSERT_TRUE(fs::exists(run / "predictions.json"));
    EXPECT_EQ(j["result"]["predictions_json"]["image_ids"], ids);
    // COCO-style numbers in the --json output and in the stored record.
    const auto& coco = j["result"]["coco"];
    for (const char* k : {"AP", "AP50", "AP75", "AP_small", "AP_medium", "AP_large", "AR_1", "AR_10",
                          "AR_100", "AR_small", "AR_medium", "AR_large"}) {
      ASSERT_TRUE(coco.contains(k)) << k;
    }
    EXPECT_GT(coco["AP50"].get<double>(), 0.2);
    EXPECT_LE(coco["AP50"].get<double>(), 1.0);
    EXPECT_GE(coco["AP50"].get<double>(), coco["AP"].get<double>());
    EXPECT_GE(coco["AR_100"].get<double>(), coco["AR_1"].get<double>());
    EXPECT_EQ(coco["per_class_ap"].size(), 3u);
    const auto stored = nlohmann::json::parse(ReadAll(j["record_path"].get<std::string>()));
    EXPECT_EQ(stored["coco"], coco);
    EXPECT_EQ(nlohmann::json::parse(ReadAll(run / "result.json"))["coco"], coco);
    // COCO results format: image_id, category_id (class + 1), bbox [x, y, w, h] pixels, score.
    const auto pj = nlohmann::json::parse(ReadAll(run / "predictions.json"));
    ASSERT_TRUE(pj.is_array());
    ASSERT_FALSE(pj.empty());
    EXPECT_EQ(pj.size(), j["result"]["predictions_json"]["detections"].get<size_t>());
    for (const auto& d : pj) {
      EXPECT_GE(d["category_id"].get<int>(), 1);
      EXPECT_LE(d["category_id"].get<int>(), 3);
      ASSERT_EQ(d["bbox"].size(), 4u);
      EXPECT_GT(d["bbox"][2].get<double>(), 1.0);  // pixels, not normalized
      if (std::string(ids) == "stem") {
        EXPECT_GE(d["image_id"].get<int>(), 1000);
      }
    }

    // Round trip: the exported file scores exactly the same.
    CliRun back = Kestrel("--json val predictions=runs/detect/" + std::string(name) +
                          "/predictions.json coco_metrics=true data=" + name + " name=" + name + "_back");
    ASSERT_EQ(back.code, 0) << back.out;
    const auto bj = Json(back);
    EXPECT_EQ(bj["result"]["provenance"]["extra"]["format"], "coco_json");
    EXPECT_EQ(bj["result"]["provenance"]["extra"]["image_ids"], ids);
    const auto& m1 = j["result"]["metrics"];
    const auto& m2 = bj["result"]["metrics"];
    EXPECT_GT(m1["map50"].get<double>(), 0.2);
    for (const char* k : {"map50", "map5095", "precision", "recall", "fitness"}) {
      EXPECT_EQ(m1[k].get<double>(), m2[k].get<double>()) << k;
    }
    EXPECT_EQ(m1["classes"], m2["classes"]);
    EXPECT_EQ(bj["result"]["coco"], coco);

    // Human output: the COCO table and where the predictions went.
    CliRun t = Kestrel(std::string("val predictions=p_") + name + " data=" + name +
                       " save_json=true coco_metrics=true plots=false name=" + name + "_text");
    ASSERT_EQ(t.code, 0) << t.out;
    EXPECT_NE(t.out.find("Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ]"),
              std::string::npos)
        << t.out;
    EXPECT_NE(t.out.find("Average Recall     (AR) @[ IoU=0.50:0.95 | area= small | maxDets=100 ]"),
              std::string::npos);
    EXPECT_NE(t.out.find("predictions saved to runs/detect/" + std::string(name) + "_text/predictions.json"),
              std::string::npos)
        << t.out;
    EXPECT_FALSE(fs::exists(dir_ / "runs/detect" / (std::string(name) + "_text") / "val_batch0_pred.jpg"));
  }
}

TEST_F(ValExtrasCliTest, ValBatchGridsOfAtMostSixteenImages) {
  MakeDataset("shapes", 40, 9, false);
  MakePredictions("shapes", "p");
  auto show = Json(Kestrel("--json dataset show shapes"));
  const int n_val = show["summary"]["splits"]["val"]["images"].get<int>();
  const int n_train = show["summary"]["splits"]["train"]["images"].get<int>();
  ASSERT_GT(n_train, 16);
  ASSERT_LE(n_val, 16);

  CliRun v = Kestrel("--json val predictions=p data=shapes");
  ASSERT_EQ(v.code, 0) << v.out;
  const fs::path run = dir_ / "runs/detect/val";
  const int cols = std::min(4, n_val), rows = (n_val + 3) / 4;
  for (const char* f : {"val_batch0_labels.jpg", "val_batch0_pred.jpg"}) {
    const auto [w, h] = JpegSize(ReadAll(run / f));
    EXPECT_EQ(w, cols * 320) << f;
    EXPECT_EQ(h, rows * 320) << f;
  }
  EXPECT_NE(ReadAll(run / "val_batch0_labels.jpg"), ReadAll(run / "val_batch0_pred.jpg"));
  EXPECT_TRUE(fs::exists(run / "PR_curve.png"));

  // The train split has more than 16 images: a full 4 x 4 grid. No
  // predictions at all (empty folder) still gives both grids.
  fs::create_directories(dir_ / "none");
  CliRun t = Kestrel("--json val predictions=none data=shapes split=train name=train");
  ASSERT_EQ(t.code, 0) << t.out;
  for (const char* f : {"val_batch0_labels.jpg", "val_batch0_pred.jpg"}) {
    const auto [w, h] = JpegSize(ReadAll(dir_ / "runs/detect/train" / f));
    EXPECT_EQ(w, 4 * 320) << f;
    EXPECT_EQ(h, 4 * 320) << f;
  }
}

TEST_F(ValExtrasCliTest, BadInputWritesNothing) {
  MakeDataset("shapes", 12, 3, false);
  MakePredictions("shapes", "p");
  // image_ids=stem cannot name images called synth_00001: command-line error, nothing written.
  CliRun stem = Kestrel("--json val predictions=p data=shapes save_json=true image_ids=stem");
  EXPECT_EQ(stem.code, 2) << stem.out;
  EXPECT_EQ(Json(stem)["error"]["field"], "image_ids");
  EXPECT_EQ(Kestrel("val predictions=p data=shapes save_json=maybe").code, 2);
  EXPECT_EQ(Kestrel("val predictions=p data=shapes coco_metrics=2").code, 2);
  EXPECT_FALSE(fs::exists(dir_ / "runs"));

  // A damaged image blob: the grid cannot be drawn, so val fails before
  // writing anything (and says which output needed it).
  int damaged = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir_ / "home/objects")) {
    if (!e.is_regular_file()) continue;
    std::string b = ReadAll(e.path());
    if (b.size() > 100 && static_cast<unsigned char>(b[0]) == 0xFF &&
        static_cast<unsigned char>(b[1]) == 0xD8) {
      fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
      b[b.size() / 2] = static_cast<char>(b[b.size() / 2] ^ 0x5A);
      std::ofstream(e.path(), std::ios::binary | std::ios::trunc) << b;
      ++damaged;
    }
  }
  ASSERT_GT(damaged, 0);
  CliRun bad = Kestrel("--json val predictions=p data=shapes");
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(Json(bad)["error"]["message"].get<std::string>().find("val_batch0"), std::string::npos)
      << bad.out;
  EXPECT_FALSE(fs::exists(dir_ / "runs"));
  // Without plots the images are not read: the metrics still work.
  EXPECT_EQ(Kestrel("val predictions=p data=shapes plots=false").code, 0);
}

// issue 28 item 4: the reference's task word, a bare bool flag, classes= and
// single_cls as the reference validator scores them.
TEST_F(ValExtrasCliTest, CopiedKeysTaskWordBareFlagClassesAndSingleCls) {
  MakeDataset("shapes", 24, 7, false);
  MakePredictions("shapes", "p");
  CliRun all = Kestrel("--json detect val predictions=p data=shapes name=all plots");
  ASSERT_EQ(all.code, 0) << all.out;
  const auto ja = Json(all);
  EXPECT_TRUE(fs::exists(dir_ / "runs/detect/all/val_batch0_pred.jpg"));  // `plots` bare = plots=true
  ASSERT_EQ(ja["result"]["metrics"]["classes"].size(), 3u);

  CliRun two = Kestrel("--json val predictions=p data=shapes name=two classes=[0,2] plots=false");
  ASSERT_EQ(two.code, 0) << two.out;
  const auto jt = Json(two);
  const auto& cls = jt["result"]["metrics"]["classes"];
  ASSERT_EQ(cls.size(), 2u) << cls.dump();
  // Each kept class scores as it did with every class (its labels and
  // predictions are the same); the dropped class is out of the mean.
  double sum = 0;
  for (const auto& c : cls) {
    EXPECT_NE(c["class_id"].get<int>(), 1);
    for (const auto& a : ja["result"]["metrics"]["classes"]) {
      if (a["class_id"] == c["class_id"]) {
        EXPECT_EQ(a["map5095"], c["map5095"]) << c.dump();
      }
    }
    sum += c["map5095"].get<double>();
  }
  EXPECT_DOUBLE_EQ(jt["result"]["metrics"]["map5095"].get<double>(), sum / 2);

  CliRun one = Kestrel("--json val predictions=p data=shapes name=one single_cls=true plots=false");
  ASSERT_EQ(one.code, 0) << one.out;
  const auto jo = Json(one);
  ASSERT_EQ(jo["result"]["metrics"]["classes"].size(), 1u);
  EXPECT_EQ(jo["result"]["metrics"]["classes"][0]["name"], "item");
  EXPECT_EQ(jo["result"]["metrics"]["instances"], ja["result"]["metrics"]["instances"]);

  CliRun bad = Kestrel("--json val predictions=p data=shapes classes=7");
  EXPECT_NE(bad.code, 0);
  EXPECT_EQ(Json(bad)["error"]["field"], "classes") << bad.out;
  CliRun task = Kestrel("--json segment val predictions=p data=shapes");
  EXPECT_EQ(task.code, 2);
  EXPECT_NE(Json(task)["error"]["message"].get<std::string>().find("task 'segment'"), std::string::npos)
      << task.out;
}

#ifdef KESTREL_CLI_WITH_TORCH
const std::string kRefWeights = kShared + "/reference/yolov8n_nc3_weights.safetensors";

// A bare `resume` (the reference's resume=True) is the newest
// weights/last.ckpt under project, by modification time; here both are
// stand-ins, so the checkpoint check names the one chosen.
TEST_F(ValExtrasCliTest, BareResumeIsTheNewestLastCheckpointUnderTheProject) {
  for (const auto& [run, age] : {std::pair{"train", 600}, std::pair{"train2", 5}, std::pair{"train3", 300}}) {
    Write(std::string("runs/detect/") + run + "/weights/last.ckpt", "not a checkpoint");
    fs::last_write_time(dir_ / "runs/detect" / run / "weights/last.ckpt",
                        fs::file_time_type::clock::now() - std::chrono::seconds(age));
  }
  CliRun r = Kestrel("--json detect train resume");
  EXPECT_EQ(r.code, 2) << r.out;
  const auto j = Json(r);
  EXPECT_EQ(j["error"]["field"], "resume") << r.out;
  EXPECT_NE(j["error"]["message"].get<std::string>().find("runs/detect/train2/weights/last.ckpt"),
            std::string::npos)
      << r.out;
  CliRun none = Kestrel("--json train resume project=elsewhere");
  EXPECT_EQ(none.code, 2) << none.out;
  EXPECT_NE(
      Json(none)["error"]["message"].get<std::string>().find("no weights/last.ckpt under project=elsewhere"),
      std::string::npos)
      << none.out;
}

TEST_F(ValExtrasCliTest, ValModelSaveJsonRoundTripAndGrids) {
  if (!fs::exists(kRefWeights)) GTEST_SKIP() << "no ../shared reference weights";
  MakeDataset("shapes", 10, 2, false);
  CliRun v = Kestrel("--json val model=" + kRefWeights +
                     " data=shapes imgsz=64 batch=2 save_json=true coco_metrics=true");
  ASSERT_EQ(v.code, 0) << v.out;
  const auto j = Json(v);
  const fs::path run = dir_ / "runs/detect/val";
  for (const char* f : {"predictions.json", "val_batch0_labels.jpg", "val_batch0_pred.jpg", "result.json"}) {
    EXPECT_TRUE(fs::exists(run / f)) << f;
  }
  EXPECT_GT(JpegSize(ReadAll(run / "val_batch0_pred.jpg")).first, 0);
  EXPECT_TRUE(j["result"]["coco"].contains("AR_100"));
  EXPECT_GT(j["result"]["predictions_json"]["detections"].get<int>(),
            0);  // conf 0.001: the model says something
  CliRun back =
      Kestrel("--json val predictions=runs/detect/val/predictions.json data=shapes coco_metrics=true");
  ASSERT_EQ(back.code, 0) << back.out;
  const auto bj = Json(back);
  for (const char* k : {"map50", "map5095", "precision", "recall"}) {
    EXPECT_EQ(j["result"]["metrics"][k].get<double>(), bj["result"]["metrics"][k].get<double>()) << k;
  }
  EXPECT_EQ(j["result"]["coco"], bj["result"]["coco"]);
}

// predict's copied keys (issue 28 item 4): classes= keeps those classes'
// detections, save_conf=false drops the txt's confidence column, and the
// drawing keys and agnostic_nms are accepted (a bare one too).
TEST_F(ValExtrasCliTest, PredictClassesSaveConfAndDrawingKeys) {
  if (!fs::exists(kRefWeights)) GTEST_SKIP() << "no ../shared reference weights";
  MakeDataset("shapes", 10, 2, false);
  auto lines = [&](const std::string& run) {
    std::vector<std::vector<std::string>> out;
    const fs::path labels = dir_ / "runs/detect" / run / "labels";
    if (!fs::exists(labels)) return out;  // no image with a detection
    for (const auto& e : fs::recursive_directory_iterator(labels)) {
      if (!e.is_regular_file()) continue;
      std::istringstream in(ReadAll(e.path()));
      std::string line;
      while (std::getline(in, line)) {
        std::istringstream f(line);
        std::vector<std::string> fields;
        for (std::string x; f >> x;) fields.push_back(x);
        out.push_back(fields);
      }
    }
    return out;
  };
  const std::string base = "predict model=" + kRefWeights + " source=src_shapes/images imgsz=64 conf=0.001";
  ASSERT_EQ(Kestrel(base + " name=all").code, 0);
  const auto all = lines("all");
  ASSERT_FALSE(all.empty()) << "conf 0.001: the model says something";
  std::set<std::string> all_classes;
  for (const auto& l : all) {
    ASSERT_EQ(l.size(), 6u);  // Kestrel's default save_conf=true
    all_classes.insert(l[0]);
  }
  // classes= of every predicted class keeps every line (without the
  // confidence: save_conf=false); the other classes keep none.
  std::string kept, others;
  for (const auto& c : all_classes) kept += (kept.empty() ? "" : ",") + c;
  for (const char* c : {"0", "1", "2"}) {
    if (!all_classes.count(c)) others += (others.empty() ? "" : ",") + std::string(c);
  }
  CliRun r = Kestrel(base + " name=kept classes=[" + kept +
                     "] save_conf=false agnostic_nms=false line_width=3 show_labels=false show_conf");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto same = lines("kept");
  EXPECT_EQ(same.size(), all.size());
  for (const auto& l : same) {
    EXPECT_EQ(l.size(), 5u);
    EXPECT_TRUE(all_classes.count(l[0])) << l[0];
  }
  if (!others.empty()) {
    ASSERT_EQ(Kestrel(base + " name=others classes=" + others).code, 0);
    EXPECT_TRUE(lines("others").empty()) << "classes=" << others;
  }
  ASSERT_EQ(Kestrel(base + " name=agnostic agnostic_nms").code, 0);
  EXPECT_LE(lines("agnostic").size(), all.size());
  EXPECT_NE(Kestrel(base + " classes=x").code, 0);
  // half=true: no FP16 path for weights on this build, said by name (val too).
  for (const std::string& cmd :
       {"--json " + base + " half=true", "--json val model=" + kRefWeights + " data=shapes imgsz=64 half"}) {
    CliRun h = Kestrel(cmd);
    EXPECT_NE(h.code, 0) << cmd;
    EXPECT_EQ(Json(h)["error"]["field"], "half") << h.out;
  }
}

TEST_F(ValExtrasCliTest, CompareReportIsStoredInTheArtifactStore) {
  if (!fs::exists(kRefWeights)) GTEST_SKIP() << "no ../shared reference weights";
  MakeDataset("shapes", 8, 4, false);
  CliRun c = Kestrel("--json compare " + kRefWeights + " " + kRefWeights + " data=shapes imgsz=64 batch=4");
  ASSERT_EQ(c.code, 0) << c.out;
  const auto cj = Json(c);
  const fs::path run = dir_ / cj["dir"].get<std::string>();
  const std::string report_path = cj["report_path"].get<std::string>();
  const std::string html_path = cj["html_path"].get<std::string>();
  ASSERT_TRUE(fs::exists(report_path));
  ASSERT_TRUE(fs::exists(html_path));
  // Content-addressed: the blob name is its sha, the bytes are the files'.
  EXPECT_EQ(fs::path(report_path).filename().string(), cj["report_sha"].get<std::string>());
  EXPECT_EQ(fs::path(html_path).filename().string(), cj["html_sha"].get<std::string>());
  EXPECT_EQ(ReadAll(report_path), ReadAll(run / "compare.json"));
  EXPECT_EQ(ReadAll(html_path), ReadAll(run / "compare.html"));
  const auto stored = nlohmann::json::parse(ReadAll(report_path));
  EXPECT_EQ(stored["kind"], "kestrel.compare");
  EXPECT_EQ(stored["html_sha"], cj["html_sha"]);  // the JSON record leads to the HTML blob
  EXPECT_EQ(stored, cj["report"]);
  // Human output prints both blob ids.
  CliRun t = Kestrel("compare " + kRefWeights + " " + kRefWeights + " data=shapes imgsz=64 batch=4");
  ASSERT_EQ(t.code, 0);
  EXPECT_NE(t.out.find("compare report " + cj["report_sha"].get<std::string>()), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("compare html "), std::string::npos) << t.out;
}
#endif

}  // namespace
