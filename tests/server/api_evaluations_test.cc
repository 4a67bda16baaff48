// The evaluations and comparisons routes over real HTTP on loopback
// (docs/server.md "Evaluations and comparisons"): an in-process ApiServer on
// port 0 over a temporary SQLite home. A val job here is made the way the
// worker's `val --job` child leaves one, without LibTorch: the job is
// submitted and claimed in the store, app::EvaluatePredictions (the same
// WriteValRun as `val model=`) writes result.json, predictions.json and the
// record blob into jobs/<id>/attempt-1, and the attempt completes with the
// child's result document. The predictions are planted per image (exact
// boxes, a wrong class, a missed label, a background box, low-score noise),
// so which images are right and which matrix cells fill is known.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "app/evaluate.h"
#include "core/hash.h"
#include "core/json.h"
#include "core/safetensors.h"
#include "data/synth.h"
#include "eval/compare_plots.h"
#include "read_route_test.h"

namespace kestrel::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HttpReply;

// How one model's planted predictions treat image i of the val split.
int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

enum class Plant { kExact, kWrongClass, kMissAll, kExtraBackground };

class ApiEvaluationsTest : public testing::ReadRouteTest {
 protected:
  void SetUp() override {
    OpenHomeAndServe("kestrel_server_evals_", 16);
    if (HasFatalFailure()) return;
    auto w = app::CreateToken(*meta_, "writer", false, 1000);
    ASSERT_TRUE(w.IsOk()) << w.GetStatus().ToString();
    writer_ = w->token;
    auto v = meta_->GetVersion("birds", "v1");
    ASSERT_TRUE(v.IsOk());
    v1_ = v->version_id;
    auto split = app::LoadSplit(*meta_, *blobs_, "birds@v1", "val");
    ASSERT_TRUE(split.IsOk()) << split.GetStatus().ToString();
    split_ = split->split;
    ASSERT_GE(split_.images.size(), 4u);
  }

  // YOLO txt predictions under dir_/<name>: per image what `plant(i)` says.
  std::string PlantPredictions(const std::string& name, const eval::EvalSplit& split,
                               const std::function<Plant(size_t)>& plant) {
    const fs::path folder = dir_ / name;
    fs::create_directories(folder);
    for (size_t i = 0; i < split.images.size(); ++i) {
      const eval::SplitImage& im = split.images[i];
      std::ofstream out(folder / (im.stem + ".txt"));
      const double w = im.width, h = im.height;
      auto line = [&](int cls, const eval::Box& b, double score) {
        out << cls << " " << (b.x1 + b.x2) / 2 / w << " " << (b.y1 + b.y2) / 2 / h << " " << (b.x2 - b.x1) / w
            << " " << (b.y2 - b.y1) / h << " " << score << "\n";
      };
      const Plant p = plant(i);
      for (const auto& g : im.labels) {
        if (p == Plant::kMissAll) continue;
        line(p == Plant::kWrongClass ? 1 - g.class_id : g.class_id, g.box, 0.9);
        line(g.class_id, g.box, 0.05);  // noise below every confusion/right threshold
      }
      if (p == Plant::kExtraBackground) line(0, eval::Box{0, 0, 3, 3}, 0.6);
    }
    return folder.string();
  }

  // A weights file (a one-tensor safetensors file: what submit checks) named
  // `stem`, under the home: a file a job submitted over HTTP may name
  // (docs/server.md "Job keys that name files").
  std::string Weights(const std::string& stem) {
    SafeTensorFile f;
    const float v = float(stem.size());
    f.tensors[stem] = SafeTensor{"F32", {1}, std::string(reinterpret_cast<const char*>(&v), sizeof v)};
    fs::create_directories(fs::path(home_) / "weights");
    const std::string path = (fs::path(home_) / "weights" / (stem + ".safetensors")).string();
    std::ofstream(path, std::ios::binary) << SerializeSafeTensors(f);
    return path;
  }

  // A succeeded val job of `preds` on `data` (birds@vN) scoring `model`, as
  // the web UI submits one (POST /api/jobs) and the worker leaves it; its id.
  int64_t ValJob(const std::string& preds, const std::string& data, const std::string& model,
                 bool save_json) {
    const json body = {
        {"keys",
         {{"kind", "val"}, {"model", model}, {"data", data}, {"save_json", save_json ? "true" : "false"}}}};
    const std::string text = body.dump();
    HttpReply posted = testing::SendRaw(
        server_->Port(),
        "POST /api/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer " +
            writer_ + "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(text.size()) +
            "\r\n\r\n" + text);
    EXPECT_EQ(posted.status, 201) << posted.body;
    const json sub = json::parse(posted.body, nullptr, false);
    if (!sub.is_object() || !sub.contains("job_id")) return 0;
    store::ClaimRequest req;
    req.worker = "w1";
    req.host = "hostA";
    req.devices = {store::DeviceOffer{"cpu", 0, 0}};
    req.now_ms = WallMs();
    auto claimed = meta_->ClaimJob(req);
    EXPECT_TRUE(claimed.IsOk()) << claimed.GetStatus().ToString();
    const int64_t id = claimed->job.id;
    EXPECT_EQ(id, sub["job_id"].get<int64_t>());
    const json cfg = json::parse(claimed->job.spec.config_json);
    EXPECT_EQ(cfg["kind"], "val");
    app::ValKeys keys;
    keys.predictions = preds;
    keys.data = data;
    keys.save_json = save_json;
    keys.plots = false;
    const fs::path attempt_dir = fs::path(home_) / "jobs" / std::to_string(id) / "attempt-1";
    fs::create_directories(attempt_dir.parent_path());
    auto run = app::EvaluatePredictions(Env::Default(), *meta_, *blobs_, keys, attempt_dir.string());
    EXPECT_TRUE(run.IsOk()) << run.GetStatus().ToString();
    const eval::EvalResult& r = run->result;
    store::AttemptOutcome out;
    out.success = true;
    out.result_json = DumpJson(json{{"kind", "val"},
                                    {"model", cfg["model"]},
                                    {"data", cfg["data"]},
                                    {"split", "val"},
                                    {"images", r.images},
                                    {"instances", r.instances},
                                    {"map50", r.map50},
                                    {"map50_95", r.map5095},
                                    {"precision", r.precision},
                                    {"recall", r.recall},
                                    {"fitness", r.fitness},
                                    {"run_dir", attempt_dir.string()},
                                    {"record_sha", run->record_sha},
                                    {"record_path", run->record_path},
                                    {"attempt", 1}});
    EXPECT_TRUE(meta_->CompleteAttempt(id, 1, "w1", out, WallMs()).IsOk());
    return id;
  }

  std::string writer_, v1_;
  eval::EvalSplit split_;
};

TEST_F(ApiEvaluationsTest, ListShowImagesConfusionAndCompare) {
  // A: exact on even images, misses everything on odd ones. B: exact on
  // images 1 mod 3, a wrong class on 0 mod 3, a background box on 2 mod 3.
  const std::string pa =
      PlantPredictions("a", split_, [](size_t i) { return i % 2 == 0 ? Plant::kExact : Plant::kMissAll; });
  const std::string pb = PlantPredictions("b", split_, [](size_t i) {
    return i % 3 == 0 ? Plant::kWrongClass : i % 3 == 1 ? Plant::kExact : Plant::kExtraBackground;
  });
  // A scores a registered model (submitted as ma@production), B and the
  // third plain weights files.
  std::ifstream wa(Weights("ma"), std::ios::binary);
  auto wsha = blobs_->Put(std::string(std::istreambuf_iterator<char>(wa), {}));
  ASSERT_TRUE(wsha.IsOk());
  store::ModelRecord mrec;
  mrec.id = Sha256Hex("model ma");
  mrec.name = "ma";
  mrec.weights_sha = *wsha;
  mrec.format = "safetensors";
  bool created = false;
  auto added = meta_->AddModel(mrec, &created);
  ASSERT_TRUE(added.IsOk()) << added.GetStatus().ToString();
  ASSERT_TRUE(meta_->TagModel(added->id, "production", 1000).IsOk());
  const int64_t a = ValJob(pa, "birds@v1", "ma@production", true);
  const int64_t b = ValJob(pb, "birds@v1", Weights("b"), true);
  const int64_t plain = ValJob(pa, "birds@v1", Weights("c"), false);
  ASSERT_FALSE(HasFailure());

  // Reads need a token.
  EXPECT_EQ(testing::Get(server_->Port(), "/api/evaluations").status, 401);
  EXPECT_EQ(testing::Get(server_->Port(), "/api/comparisons?a=1&b=2").status, 401);

  // The list: newest first, pages, filters.
  json list = Doc("/api/evaluations", 200);
  ASSERT_EQ(list["evaluations"].size(), 3u) << list.dump(1);
  EXPECT_EQ(list["evaluations"][0]["id"], plain);
  EXPECT_EQ(list["evaluations"][2]["id"], a);
  const json& ea = list["evaluations"][2];
  EXPECT_EQ(ea["dataset"], "birds");
  EXPECT_EQ(ea["version"], "v1");
  EXPECT_EQ(ea["version_id"], v1_);
  EXPECT_EQ(ea["split"], "val");
  EXPECT_EQ(ea["model"], "ma@v1");
  EXPECT_EQ(ea["model_submitted"], "ma@production");
  EXPECT_EQ(ea["model_id"], added->id);
  EXPECT_EQ(list["evaluations"][1]["model_id"], nullptr);
  EXPECT_EQ(list["evaluations"][1]["model"], Weights("b"));
  EXPECT_EQ(ea["images"], split_.images.size());
  EXPECT_EQ(ea["has_predictions"], true);
  EXPECT_EQ(list["evaluations"][0]["has_predictions"], false);
  EXPECT_GT(ea["created_ms"].get<int64_t>(), 0);
  json page = Doc("/api/evaluations?limit=2", 200);
  EXPECT_EQ(page["evaluations"].size(), 2u);
  EXPECT_EQ(page["next_offset"], 2);
  EXPECT_EQ(Doc("/api/evaluations?limit=2&offset=2", 200)["next_offset"], nullptr);
  EXPECT_EQ(Doc("/api/evaluations?model=" + Weights("b"), 200)["evaluations"].size(), 1u);
  for (const char* ref : {"ma", "ma@v1", "ma@production"}) {
    const json by_model = Doc(std::string("/api/evaluations?model=") + ref, 200);
    ASSERT_EQ(by_model["evaluations"].size(), 1u) << ref;
    EXPECT_EQ(by_model["evaluations"][0]["id"], a);
  }
  EXPECT_EQ(Doc("/api/evaluations?dataset=birds@v1&split=val", 200)["evaluations"].size(), 3u);
  EXPECT_EQ(Doc("/api/evaluations?split=test", 200)["evaluations"].size(), 0u);
  EXPECT_EQ(Doc("/api/evaluations?split=nope", 400)["error"]["field"], "split");
  EXPECT_EQ(Doc("/api/evaluations?limit=0", 400)["error"]["field"], "limit");
  EXPECT_EQ(Doc("/api/evaluations?dataset=birds@v9", 400)["error"]["field"], "dataset");

  // Show: the record with its 101-point mean curves.
  json show = Doc("/api/evaluations/" + std::to_string(a), 200);
  EXPECT_EQ(show["evaluation"]["id"], a);
  EXPECT_EQ(show["record"]["kind"], "kestrel.eval_result");
  EXPECT_EQ(show["record"]["format_version"], 1);
  ASSERT_TRUE(show["curves"].is_object()) << show.dump(1).substr(0, 2000);
  EXPECT_EQ(show["curves"], show["record"]["metrics"]["curves"]);
  for (const char* k : {"confidence", "precision", "recall", "f1"})
    EXPECT_EQ(show["curves"][k].size(), 101u) << k;
  EXPECT_EQ(show["curves"]["pr"]["recall"].size(), 101u);
  EXPECT_DOUBLE_EQ(show["curves"]["pr"]["recall"][100].get<double>(), 1.0);
  EXPECT_EQ(Doc("/api/evaluations/999", 404)["error"]["field"], "id");
  EXPECT_EQ(Doc("/api/evaluations/abc", 400)["error"]["field"], "id");

  // Images: right is `kestrel compare`'s rule; A is right exactly on even images.
  std::map<std::string, bool> a_right;
  json imgs = Doc("/api/evaluations/" + std::to_string(a) + "/images?limit=500", 200);
  ASSERT_EQ(imgs["images"].size(), split_.images.size());
  for (size_t i = 0; i < split_.images.size(); ++i) {
    const json& im = imgs["images"][i];
    EXPECT_EQ(im["sha"], split_.images[i].image_sha);
    EXPECT_EQ(im["labels"].size(), split_.images[i].labels.size());
    const bool expect = i % 2 == 0 || split_.images[i].labels.empty();
    EXPECT_EQ(im["right"], expect) << im["path"];
    a_right[im["path"]] = expect;
    if (i % 2 == 0) {
      EXPECT_EQ(im["detections"].size(), 2 * split_.images[i].labels.size()) << "noise at 0.05 is shown";
    }
  }
  const json wrong = Doc("/api/evaluations/" + std::to_string(a) + "/images?filter=wrong&limit=2", 200);
  EXPECT_EQ(wrong["total"], imgs["wrong"]);
  EXPECT_LE(wrong["images"].size(), 2u);
  for (const auto& im : wrong["images"]) EXPECT_EQ(im["right"], false);
  EXPECT_EQ(Doc("/api/evaluations/" + std::to_string(a) + "/images?filter=odd", 400)["error"]["field"],
            "filter");
  // sha=: one image's rows (those of every split entry with that SHA), the
  // same rows as the whole list's; right/wrong still count the whole split.
  for (size_t i : {size_t(0), size_t(1)}) {
    const std::string sha = split_.images[i].image_sha;
    json want = json::array();
    for (const auto& im : imgs["images"])
      if (im["sha"] == sha) want.push_back(im);
    const json one = Doc("/api/evaluations/" + std::to_string(a) + "/images?sha=" + sha, 200);
    EXPECT_EQ(one["sha"], sha);
    EXPECT_EQ(one["images"], want);
    EXPECT_EQ(one["total"], want.size());
    EXPECT_EQ(one["right"], imgs["right"]);
    EXPECT_EQ(one["wrong"], imgs["wrong"]);
    EXPECT_TRUE(one["next_offset"].is_null());
    // With a filter it does not pass: no rows, not an error.
    const std::string other = want[0]["right"].get<bool>() ? "wrong" : "right";
    const json none =
        Doc("/api/evaluations/" + std::to_string(a) + "/images?filter=" + other + "&sha=" + sha, 200);
    EXPECT_EQ(none["total"], 0);
    EXPECT_TRUE(none["images"].empty());
  }
  EXPECT_TRUE(imgs["sha"].is_null());
  for (const std::string& bad : std::vector<std::string>{
           "abc", std::string(64, 'A'), std::string(63, '0') + "g", "..%2F..%2Fetc%2Fpasswd"}) {
    const json e = Doc("/api/evaluations/" + std::to_string(a) + "/images?sha=" + bad, 400);
    EXPECT_EQ(e["error"]["field"], "sha") << bad;
  }
  const json unknown =
      Doc("/api/evaluations/" + std::to_string(a) + "/images?sha=" + std::string(64, '0'), 404);
  EXPECT_EQ(unknown["error"]["field"], "sha");
  EXPECT_NE(unknown["error"]["message"].get<std::string>().find(std::string(64, '0')), std::string::npos);
  const json no_preds = Doc("/api/evaluations/" + std::to_string(plain) + "/images", 409);
  EXPECT_EQ(no_preds["error"]["field"], "id");
  EXPECT_NE(no_preds["error"]["message"].get<std::string>().find("save_json=true"), std::string::npos);

  // Every confusion cell's boxes add up to the record's matrix cell.
  for (int64_t id : {a, b}) {
    const json rec = Doc("/api/evaluations/" + std::to_string(id), 200)["record"];
    const json& m = rec["metrics"]["confusion"]["matrix"];
    const int nc = rec["metrics"]["confusion"]["nc"];
    int64_t total = 0;
    for (int p = 0; p <= nc; ++p) {
      for (int g = 0; g <= nc; ++g) {
        const json cell =
            Doc("/api/evaluations/" + std::to_string(id) + "/confusion?gt=" + std::to_string(g) +
                    "&pred=" + std::to_string(p) + "&limit=1000",
                200);
        EXPECT_EQ(cell["count"], m[p][g]) << id << " cell pred " << p << " gt " << g;
        EXPECT_EQ(cell["matrix_value"], m[p][g]);
        EXPECT_EQ(cell["boxes"].size(), m[p][g].get<size_t>());
        EXPECT_EQ(cell["consistent"], true);
        for (const auto& box : cell["boxes"]) {
          EXPECT_EQ(box["gt_box"].is_null(), g == nc);
          EXPECT_EQ(box["pred_box"].is_null(), p == nc);
        }
        total += cell["count"].get<int64_t>();
      }
    }
    EXPECT_GT(total, 0);
  }
  // B's wrong classes land off the diagonal, its background boxes in the last column.
  const json off = Doc("/api/evaluations/" + std::to_string(b) + "/confusion?gt=0&pred=1", 200);
  const json bg = Doc("/api/evaluations/" + std::to_string(b) + "/confusion?gt=2&pred=0", 200);
  EXPECT_GT(off["count"].get<int>() + bg["count"].get<int>(), 0);
  EXPECT_EQ(Doc("/api/evaluations/" + std::to_string(a) + "/confusion?gt=3&pred=0", 400)["error"]["field"],
            "gt");
  EXPECT_EQ(Doc("/api/evaluations/" + std::to_string(a) + "/confusion?pred=0", 400)["error"]["field"], "gt");
  EXPECT_EQ(
      Doc("/api/evaluations/" + std::to_string(plain) + "/confusion?gt=0&pred=0", 409)["error"]["field"],
      "id");

  // The comparison: compare.json's delta and right rule on the stored predictions.
  const json cmp = Doc("/api/comparisons?a=" + std::to_string(a) + "&b=" + std::to_string(b), 200);
  EXPECT_EQ(cmp["right_rule"], std::string(eval::kRightRule));
  EXPECT_EQ(cmp["version"], "v1");
  EXPECT_EQ(cmp["a"]["id"], a);
  const json& overall = cmp["delta"]["overall"];
  for (const char* k : {"precision", "recall", "map50", "map5095", "fitness"}) {
    EXPECT_NEAR(overall[k]["delta"].get<double>(),
                overall[k]["b"].get<double>() - overall[k]["a"].get<double>(), 1e-12)
        << k;
  }
  EXPECT_DOUBLE_EQ(overall["map50"]["a"].get<double>(), show["record"]["metrics"]["map50"].get<double>());
  EXPECT_EQ(cmp["delta"]["classes"].size(), show["record"]["metrics"]["classes"].size());
  // B is right on 1 mod 3 and on label-free images without a background box.
  std::set<std::string> a_only, b_only;
  for (size_t i = 0; i < split_.images.size(); ++i) {
    const bool empty = split_.images[i].labels.empty();
    const bool rb = (i % 3 == 1) || (empty && i % 3 == 0);
    const bool ra = a_right[split_.images[i].path];
    if (ra && !rb) a_only.insert(split_.images[i].path);
    if (rb && !ra) b_only.insert(split_.images[i].path);
  }
  std::set<std::string> got_a, got_b;
  for (const auto& x : cmp["images"]["a_right_b_wrong"]) got_a.insert(x["path"].get<std::string>());
  for (const auto& x : cmp["images"]["b_right_a_wrong"]) got_b.insert(x["path"].get<std::string>());
  EXPECT_EQ(got_a, a_only);
  EXPECT_EQ(got_b, b_only);
  EXPECT_FALSE(a_only.empty());
  EXPECT_FALSE(b_only.empty());
  EXPECT_EQ(cmp["confusion"]["names"].size(), 3u);
  EXPECT_EQ(cmp["confusion"]["names"][2], "background");
  EXPECT_TRUE(cmp["curves"]["a"].is_object());
  // Without stored predictions the lists are null, and say why.
  const json half = Doc("/api/comparisons?a=" + std::to_string(a) + "&b=" + std::to_string(plain), 200);
  EXPECT_TRUE(half["images"].is_null());
  EXPECT_NE(half["images_note"].get<std::string>().find(std::to_string(plain)), std::string::npos);
  EXPECT_EQ(Doc("/api/comparisons?a=" + std::to_string(a), 400)["error"]["field"], "b");
  EXPECT_EQ(Doc("/api/comparisons?a=" + std::to_string(a) + "&b=999", 404)["error"]["field"], "id");
}

TEST_F(ApiEvaluationsTest, ComparisonsNeedTheSameDatasetVersionAndSplit) {
  // A second version of birds: other images.
  data::SynthOptions so;
  so.images = 8;
  so.imgsz = 32;
  so.classes = 2;
  so.seed = 7;
  so.write_threads = 1;
  ASSERT_TRUE(data::WriteSynthDataset(so, (dir_ / "synth2").string()).IsOk());
  ASSERT_TRUE(app::Datasets(*meta_, *blobs_).Import((dir_ / "synth2").string(), "birds", {}).IsOk());
  auto split2 = app::LoadSplit(*meta_, *blobs_, "birds@v2", "val");
  ASSERT_TRUE(split2.IsOk());
  const int64_t a = ValJob(PlantPredictions("a", split_, [](size_t) { return Plant::kExact; }), "birds@v1",
                           Weights("a"), true);
  const int64_t b = ValJob(PlantPredictions("b", split2->split, [](size_t) { return Plant::kExact; }),
                           "birds@v2", Weights("b"), true);
  ASSERT_FALSE(HasFailure());
  const json err = Doc("/api/comparisons?a=" + std::to_string(a) + "&b=" + std::to_string(b), 400);
  EXPECT_EQ(err["error"]["field"], "b");
  const std::string msg = err["error"]["message"];
  EXPECT_NE(msg.find("birds@v1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("birds@v2"), std::string::npos) << msg;
  EXPECT_EQ(Doc("/api/evaluations?dataset=birds@v2", 200)["evaluations"].size(), 1u);
  EXPECT_EQ(Doc("/api/evaluations?dataset=birds", 200)["evaluations"].size(), 2u);
  // An id that is no job, a training job and a queued val job are no evaluations.
  EXPECT_EQ(Doc("/api/evaluations/" + std::to_string(b + 100), 404)["error"]["field"], "id");
  store::JobSpec train;
  train.dataset_version = v1_;
  train.config_json = R"({"data": "birds", "epochs": 1})";
  bool created = false;
  auto t = meta_->SubmitJob(train, WallMs(), &created);
  ASSERT_TRUE(t.IsOk());
  const json not_val = Doc("/api/evaluations/" + std::to_string(t->id), 404);
  EXPECT_NE(not_val["error"]["message"].get<std::string>().find("not a val job"), std::string::npos);
  store::JobSpec queued = train;
  queued.config_json = R"({"kind": "val", "data": "birds", "model": "m"})";
  auto q = meta_->SubmitJob(queued, WallMs(), &created);
  ASSERT_TRUE(q.IsOk());
  EXPECT_EQ(Doc("/api/evaluations/" + std::to_string(q->id), 404)["error"]["field"], "id");
  EXPECT_EQ(Doc("/api/evaluations", 200)["evaluations"].size(), 2u);
}

}  // namespace
}  // namespace kestrel::server
