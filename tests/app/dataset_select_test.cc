// app/dataset_select.h: each strategy's ranking on hand-made predictions
// (uncertainty picks the image whose best box is weakest, entropy the one
// whose boxes are nearest 0.5, diversity spread-out hashes, random a seeded
// and portable draw), then SelectFromPool over a folder of images with a
// scripted detector (no network): the picks, the tasks written for them
// only, selection.csv / selection.json, and the errors naming their key
// with nothing left behind. Milliseconds.
#include "app/dataset_select.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <set>

#include "core/env.h"

namespace kestrel::app {
namespace {

namespace fs = std::filesystem;

eval::Detection Box(float score, int cls = 0, float runner_up = 0) {
  eval::Detection d;
  d.box = {2, 2, 20, 20};
  d.score = score;
  d.class_id = cls;
  d.runner_up = runner_up;
  return d;
}

SelectCandidate WithScores(std::initializer_list<float> scores) {
  SelectCandidate c;
  for (float s : scores) c.detections.push_back(Box(s));
  return c;
}

std::vector<size_t> Indexes(const std::vector<SelectedImage>& picks) {
  std::vector<size_t> out;
  for (const SelectedImage& p : picks) out.push_back(p.index);
  return out;
}

TEST(SelectRanking, UncertaintyPicksTheWeakestBestBoxFirst) {
  // Best boxes 0.9, 0.3, 0.6 and none: none first (score 1), then 0.3, 0.6.
  const std::vector<SelectCandidate> c = {WithScores({0.9f, 0.2f}), WithScores({0.3f, 0.1f}),
                                          WithScores({0.6f}), WithScores({})};
  auto picks = RankForSelection(c, SelectStrategy::kUncertainty, 3, 0);
  ASSERT_TRUE(picks.IsOk()) << picks.GetStatus().ToString();
  EXPECT_EQ(Indexes(*picks), (std::vector<size_t>{3, 1, 2}));
  EXPECT_DOUBLE_EQ((*picks)[0].score, 1.0);
  EXPECT_NEAR((*picks)[1].score, 0.7, 1e-6);
  EXPECT_NEAR((*picks)[2].score, 0.4, 1e-6);
  EXPECT_EQ((*picks)[1].reason, "highest box score 0.300");
  EXPECT_EQ((*picks)[0].reason, "no box at or above conf");
}

TEST(SelectRanking, EntropyPicksBoxesNearestOneHalf) {
  // Mean binary entropy: {0.5} = 1 bit, {0.95, 0.05} ~0.286, {0.7} ~0.881.
  const std::vector<SelectCandidate> c = {WithScores({0.95f, 0.05f}), WithScores({0.7f}), WithScores({0.5f})};
  auto picks = RankForSelection(c, SelectStrategy::kEntropy, 3, 0);
  ASSERT_TRUE(picks.IsOk());
  EXPECT_EQ(Indexes(*picks), (std::vector<size_t>{2, 1, 0}));
  EXPECT_NEAR((*picks)[0].score, 1.0, 1e-6);
  EXPECT_NEAR((*picks)[1].score, 0.8813, 1e-3);
  EXPECT_NEAR((*picks)[2].score, 0.2864, 1e-3);
  EXPECT_DOUBLE_EQ(MeanBoxEntropy({}), 1.0);
  EXPECT_DOUBLE_EQ(MaxBoxScore({}), 0.0);
}

TEST(SelectRanking, EntropySumPicksTheImageWithTheMostUncertainty) {
  // Summed entropy: five unsure boxes {0.3 x5} ~4.406 bits outrank one box
  // at 0.5 (1 bit, the highest mean) and {0.95, 0.05} ~0.573; no box is 0.
  const std::vector<SelectCandidate> c = {WithScores({0.95f, 0.05f}), WithScores({0.5f}), WithScores({}),
                                          WithScores({0.3f, 0.3f, 0.3f, 0.3f, 0.3f})};
  auto picks = RankForSelection(c, SelectStrategy::kEntropySum, 4, 0);
  ASSERT_TRUE(picks.IsOk());
  EXPECT_EQ(Indexes(*picks), (std::vector<size_t>{3, 1, 0, 2}));
  EXPECT_NEAR((*picks)[0].score, 4.4065, 1e-3);
  EXPECT_NEAR((*picks)[1].score, 1.0, 1e-6);
  EXPECT_NEAR((*picks)[2].score, 0.5728, 1e-3);
  EXPECT_DOUBLE_EQ((*picks)[3].score, 0.0);
  EXPECT_EQ((*picks)[0].reason, "summed score entropy 4.406 bits over 5 boxes");
  EXPECT_EQ((*picks)[3].reason, "no box at or above conf");
  // The mean ranks the same images the other way round at the top.
  auto mean = RankForSelection(c, SelectStrategy::kEntropy, 1, 0);
  ASSERT_TRUE(mean.IsOk());
  EXPECT_EQ(Indexes(*mean), (std::vector<size_t>{1}));
  EXPECT_DOUBLE_EQ(TotalBoxEntropy({}), 0.0);
}

TEST(SelectRanking, MarginPicksTheLeastDecidedBox) {
  // Smallest score - runner_up: {0.9 vs 0.1} 0.8; {0.6 vs 0.5, 0.95 vs 0}
  // 0.1; {0.3 vs 0.05} 0.25; no box: margin 1, picked last.
  std::vector<SelectCandidate> c(4);
  c[0].detections = {Box(0.9f, 0, 0.1f)};
  c[1].detections = {Box(0.95f, 1, 0.0f), Box(0.6f, 0, 0.5f)};
  c[2].detections = {Box(0.3f, 1, 0.05f)};
  auto picks = RankForSelection(c, SelectStrategy::kMargin, 4, 0);
  ASSERT_TRUE(picks.IsOk());
  EXPECT_EQ(Indexes(*picks), (std::vector<size_t>{1, 2, 0, 3}));
  EXPECT_NEAR((*picks)[0].score, 0.9, 1e-6);
  EXPECT_NEAR((*picks)[1].score, 0.75, 1e-6);
  EXPECT_DOUBLE_EQ((*picks)[3].score, 0.0);
  EXPECT_EQ((*picks)[0].reason, "class margin 0.100 (0.600 for class 0, 0.500 for the next)");
  EXPECT_EQ((*picks)[3].reason, "no box at or above conf");
  size_t at = 9;
  EXPECT_DOUBLE_EQ(SmallestClassMargin({}, &at), 1.0);
  EXPECT_EQ(at, 9u);
  EXPECT_NEAR(SmallestClassMargin(c[1].detections, &at), 0.1, 1e-6);
  EXPECT_EQ(at, 1u);
  // Uncertainty ranks the same images by their best box instead: image 1
  // (best 0.95) comes after image 0 (best 0.9).
  auto unc = RankForSelection(c, SelectStrategy::kUncertainty, 4, 0);
  ASSERT_TRUE(unc.IsOk());
  EXPECT_EQ(Indexes(*unc), (std::vector<size_t>{3, 2, 0, 1}));
}

TEST(SelectRanking, DiversityOnEmbeddingsAndFromTheLabelledSet) {
  // 1-D embeddings 0, 0.1, 0.2, 1, 3. Alone: the medoid (0.2), then the
  // farthest (3), then 1 (0.8 from 0.2). With an image at 0.15 labelled:
  // 3 first (2.85 from it), then 1 (0.85), then 0 (0.15).
  std::vector<SelectCandidate> c(5);
  const float at[5] = {0.f, 0.1f, 0.2f, 1.f, 3.f};
  for (size_t i = 0; i < 5; ++i) c[i].embedding = {at[i]};
  auto alone = RankForSelection(c, SelectStrategy::kDiversity, 3, 0);
  ASSERT_TRUE(alone.IsOk());
  EXPECT_EQ(Indexes(*alone), (std::vector<size_t>{2, 4, 3}));
  EXPECT_NEAR((*alone)[0].score, 3.9 / 4, 1e-6);  // its mean distance
  EXPECT_EQ((*alone)[0].reason, "the pool's medoid: mean embedding distance 0.975");
  std::vector<SelectCandidate> labelled(1);
  labelled[0].embedding = {0.15f};
  auto from = RankForSelection(c, SelectStrategy::kDiversity, 3, 0, labelled);
  ASSERT_TRUE(from.IsOk());
  EXPECT_EQ(Indexes(*from), (std::vector<size_t>{4, 3, 0}));
  EXPECT_NEAR((*from)[0].score, 2.85, 1e-6);
  EXPECT_NEAR((*from)[2].score, 0.15, 1e-6);
  EXPECT_EQ((*from)[1].reason, "embedding distance 0.850 from the nearest image labelled or picked before");
  // Hashes with a labelled set: a copy of the labelled picture is last.
  std::vector<SelectCandidate> h(3);
  const uint64_t base = 0x00FF00FF00FF00FFULL;
  h[0].phash = base;
  h[1].phash = base ^ 0xFFULL;  // 8 bits away
  h[2].phash = base ^ 0x3ULL;   // 2 bits away
  std::vector<SelectCandidate> lh(1);
  lh[0].phash = base;
  auto hashed = RankForSelection(h, SelectStrategy::kDiversity, 3, 0, lh);
  ASSERT_TRUE(hashed.IsOk());
  EXPECT_EQ(Indexes(*hashed), (std::vector<size_t>{1, 2, 0}));
  EXPECT_EQ((*hashed)[0].reason, "8 hash bits from the nearest image labelled or picked before");
  // Candidates without embeddings (or of mixed lengths) fall back to hashes.
  c[1].embedding.clear();
  auto mixed = RankForSelection(c, SelectStrategy::kDiversity, 1, 0);
  ASSERT_TRUE(mixed.IsOk());
  EXPECT_NE((*mixed)[0].reason.find("hash bits"), std::string::npos);
}

TEST(SelectRanking, DiversityPicksSpreadOutHashes) {
  // Five near-copies of one picture (each 1 bit from the first), one
  // picture 32 bits away and one 64 bits away: the cluster's centre (the
  // medoid) first, then the farthest (all bits), then the 32-bit one —
  // never a second copy.
  std::vector<SelectCandidate> c(7);
  const uint64_t base = 0x0F0F0F0F0F0F0F0FULL;
  c[0].phash = base;
  c[1].phash = base ^ 1;
  c[2].phash = base ^ 2;
  c[3].phash = base ^ 4;
  c[4].phash = base ^ 8;
  c[5].phash = base ^ 0xFFFFFFFF00000000ULL;  // 32 bits away
  c[6].phash = ~base;                         // 64 bits away
  auto picks = RankForSelection(c, SelectStrategy::kDiversity, 3, 0);
  ASSERT_TRUE(picks.IsOk());
  EXPECT_EQ(Indexes(*picks), (std::vector<size_t>{0, 6, 5}));
  EXPECT_DOUBLE_EQ((*picks)[1].score, 64);
  EXPECT_DOUBLE_EQ((*picks)[2].score, 32);
  EXPECT_EQ((*picks)[2].reason, "32 hash bits from the nearest image picked before");
  // Uncertainty on the same candidates (no boxes: all tie at 1) keeps pool
  // order: the spread comes from the hashes, not from the order.
  auto ties = RankForSelection(c, SelectStrategy::kUncertainty, 3, 0);
  ASSERT_TRUE(ties.IsOk());
  EXPECT_EQ(Indexes(*ties), (std::vector<size_t>{0, 1, 2}));
}

TEST(SelectRanking, RandomIsSeededAndDistinct) {
  const std::vector<SelectCandidate> c(100);
  auto a = RankForSelection(c, SelectStrategy::kRandom, 10, 7);
  auto b = RankForSelection(c, SelectStrategy::kRandom, 10, 7);
  auto other = RankForSelection(c, SelectStrategy::kRandom, 10, 8);
  ASSERT_TRUE(a.IsOk() && b.IsOk() && other.IsOk());
  EXPECT_EQ(Indexes(*a), Indexes(*b));
  EXPECT_NE(Indexes(*a), Indexes(*other));
  const std::vector<size_t> ia = Indexes(*a);
  EXPECT_EQ(std::set<size_t>(ia.begin(), ia.end()).size(), 10u);
  for (size_t k = 1; k < a->size(); ++k) EXPECT_GE((*a)[k - 1].score, (*a)[k].score);
  for (const SelectedImage& p : *a) {
    EXPECT_GE(p.score, 0.0);
    EXPECT_LT(p.score, 1.0);
  }
  // A prefix of a larger draw: the budget does not change who comes first.
  auto more = RankForSelection(c, SelectStrategy::kRandom, 20, 7);
  ASSERT_TRUE(more.IsOk());
  const std::vector<size_t> im = Indexes(*more);
  EXPECT_EQ(std::vector<size_t>(im.begin(), im.begin() + 10), ia);
}

TEST(SelectRanking, BudgetRulesAndStrategyNames) {
  const std::vector<SelectCandidate> c = {WithScores({0.5f}), WithScores({0.4f})};
  auto zero = RankForSelection(c, SelectStrategy::kUncertainty, 0, 0);
  ASSERT_FALSE(zero.IsOk());
  EXPECT_EQ(zero.GetStatus().Where().field, "budget");
  auto all = RankForSelection(c, SelectStrategy::kDiversity, 5, 0);
  ASSERT_TRUE(all.IsOk());
  EXPECT_EQ(all->size(), 2u);
  for (const char* name : {"uncertainty", "entropy", "entropy_sum", "margin", "diversity", "random"}) {
    auto s = ParseSelectStrategy(name);
    ASSERT_TRUE(s.IsOk());
    EXPECT_STREQ(SelectStrategyName(*s), name);
  }
  auto bad = ParseSelectStrategy("coreset");
  ASSERT_FALSE(bad.IsOk());
  EXPECT_EQ(bad.GetStatus().Where().field, "strategy");
}

// Knows each pool image by its width: width -> its boxes, those at or
// above the loader's conf (as a real detector's NMS keeps them).
class WidthDetector final : public Detector {
 public:
  WidthDetector(std::map<int, std::vector<eval::Detection>> by_width, const eval::InferenceOptions& options)
      : by_width_(std::move(by_width)), options_(options) {}
  int NumClasses() const override { return 2; }
  const std::vector<std::string>& Names() const override { return names_; }
  std::string Arch() const override { return "scripted"; }
  const eval::InferenceOptions& Options() const override { return options_; }
  Result<std::vector<eval::ImagePrediction>> Predict(const std::vector<eval::ImageView>& images) override {
    std::vector<eval::ImagePrediction> out(images.size());
    for (size_t i = 0; i < images.size(); ++i) {
      out[i].width = images[i].width;
      out[i].height = images[i].height;
      for (const eval::Detection& d : by_width_[images[i].width])
        if (d.score >= options_.nms.conf) out[i].detections.push_back(d);
      // Embeddings when asked, as LibTorch weights give them: a point on
      // the unit circle per width (the labelled image, width 50, sits on c's).
      if (options_.embeddings) {
        const double angle = images[i].width == 50 ? 2.0 : 0.5 * (images[i].width - 40);
        out[i].embedding = {float(std::cos(angle)), float(std::sin(angle))};
      }
    }
    return out;
  }
  Result<std::vector<eval::ImagePrediction>> PredictVal(
      const std::vector<eval::ImageSize>&, const eval::ValShapeOptions&,
      const std::function<Result<eval::ImageView>(size_t)>&) override {
    return Status::Internal("PredictVal is not used by select");
  }
  eval::StageTimes Timing() const override { return {}; }

 private:
  std::map<int, std::vector<eval::Detection>> by_width_;
  eval::InferenceOptions options_;
  std::vector<std::string> names_ = {"cat", "dog"};
};

class SelectFromPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kestrel_select_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "pool/sub");
    // Widths 40, 41, 42, 43: a.jpg, b.jpg, c.jpg, sub/d.jpg.
    const char* names[4] = {"a.jpg", "b.jpg", "c.jpg", "sub/d.jpg"};
    cv::RNG rng(3);
    for (int i = 0; i < 4; ++i) {
      cv::Mat img(30, 40 + i, CV_8UC3);
      rng.fill(img, cv::RNG::UNIFORM, 0, 255);
      ASSERT_TRUE(cv::imwrite((dir_ / "pool" / names[i]).string(), img));
    }
    // Best scores: a 0.95, b 0.40 (and a 0.10 box), c 0.80, d none.
    boxes_[40] = {Box(0.95f, 1)};
    boxes_[41] = {Box(0.40f, 0), Box(0.10f, 1)};
    boxes_[42] = {Box(0.80f, 0)};
    boxes_[43] = {};
  }
  void TearDown() override { fs::remove_all(dir_); }

  SelectKeys Keys() {
    SelectKeys k;
    k.pool = (dir_ / "pool").string();
    k.model = "scripted.safetensors";
    k.budget = 2;
    k.conf = 0.05;
    k.pre_conf = 0.25;
    k.project = (dir_ / "runs").string();
    k.ls_image_root = "http://h/img/";
    return k;
  }
  DetectorLoader Loader() {
    return [this](const std::string&, const eval::InferenceOptions& options,
                  const DetectorPlacement&) -> Result<std::unique_ptr<Detector>> {
      ++loads_;
      eval::InferenceOptions o = options;
      if (o.imgsz == 0) o.imgsz = 64;
      return std::unique_ptr<Detector>(std::make_unique<WidthDetector>(boxes_, o));
    };
  }
  static nlohmann::json ReadJson(const fs::path& p) {
    std::ifstream in(p);
    return nlohmann::json::parse(in);
  }

  fs::path dir_;
  std::map<int, std::vector<eval::Detection>> boxes_;
  int loads_ = 0;
};

TEST_F(SelectFromPoolTest, UncertaintyWritesTasksForThePicksOnly) {
  Result<SelectReport> r = SelectFromPool(Env::Default(), Keys(), {}, Loader());
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_EQ(r->pool, 4u);
  EXPECT_EQ(r->dir, (dir_ / "runs/select").string());
  ASSERT_EQ(r->selected.size(), 2u);
  EXPECT_EQ(r->selected[0].image, "sub/d.jpg");  // no box: least confident
  EXPECT_EQ(r->selected[1].image, "b.jpg");      // best box 0.40
  EXPECT_EQ(r->selected[1].boxes, 2u);
  EXPECT_NEAR(r->selected[1].pick.score, 0.6, 1e-6);

  // Label Studio tasks: the two picks in pick order, b's 0.10 box (below
  // pre_conf) left out of its pre-annotations.
  const nlohmann::json tasks = ReadJson(dir_ / "runs/select/label_studio.json");
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0]["data"]["image"], "http://h/img/sub/d.jpg");
  EXPECT_EQ(tasks[1]["data"]["image"], "http://h/img/b.jpg");
  EXPECT_TRUE(tasks[0]["predictions"][0]["result"].empty());
  ASSERT_EQ(tasks[1]["predictions"][0]["result"].size(), 1u);
  EXPECT_EQ(tasks[1]["predictions"][0]["result"][0]["value"]["rectanglelabels"][0], "cat");
  EXPECT_TRUE(fs::exists(dir_ / "runs/select/label_studio.label_config.xml"));

  // The selection list, and every pool image's predictions kept.
  const nlohmann::json sel = ReadJson(dir_ / "runs/select/selection.json");
  EXPECT_EQ(sel, SelectReportJson(*r));
  EXPECT_EQ(sel["pool_images"], 4);
  EXPECT_EQ(sel["selected"][1]["reason"], "highest box score 0.400");
  std::ifstream csv(dir_ / "runs/select/selection.csv");
  std::string header, first, second;
  std::getline(csv, header);
  std::getline(csv, first);
  std::getline(csv, second);
  EXPECT_EQ(header, "rank,image,score,reason,boxes,max_score,mean_entropy");
  EXPECT_EQ(first, "1,sub/d.jpg,1.0000,no box at or above conf,0,0.0000,1.0000");
  EXPECT_EQ(second.substr(0, 33), "2,b.jpg,0.6000,highest box score ");
  for (const char* f : {"a.json", "b.json", "c.json", "sub/d.json"})
    EXPECT_TRUE(fs::exists(dir_ / "runs/select/predictions" / f)) << f;
  EXPECT_EQ(r->files.back(), (dir_ / "runs/select/selection.json").string());
  EXPECT_EQ(r->files.front(), (dir_ / "runs/select/label_studio.json").string());

  // A second run takes the next folder; conf=0.5 hides b's 0.40 box, so b
  // now ties d with no box (pool order: b first).
  SelectKeys k = Keys();
  k.conf = 0.5;
  k.pre_conf = 0.5;
  k.format = "cvat";
  Result<SelectReport> r2 = SelectFromPool(Env::Default(), k, {}, Loader());
  ASSERT_TRUE(r2.IsOk()) << r2.GetStatus().ToString();
  EXPECT_EQ(r2->dir, (dir_ / "runs/select2").string());
  EXPECT_EQ(r2->selected[0].image, "b.jpg");
  EXPECT_EQ(r2->selected[1].image, "sub/d.jpg");
  EXPECT_TRUE(fs::exists(dir_ / "runs/select2/cvat_annotations.xml"));
}

TEST_F(SelectFromPoolTest, DiversityAndRandomOverThePool) {
  SelectKeys k = Keys();
  k.strategy = "diversity";
  k.budget = 4;
  k.out = (dir_ / "div").string();
  Result<SelectReport> d = SelectFromPool(Env::Default(), k, {}, Loader());
  ASSERT_TRUE(d.IsOk()) << d.GetStatus().ToString();
  ASSERT_EQ(d->selected.size(), 4u);
  std::set<std::string> seen;
  for (const SelectRow& row : d->selected) seen.insert(row.image);
  EXPECT_EQ(seen.size(), 4u);  // every image once
  EXPECT_NE(d->selected[0].pick.reason.find("medoid"), std::string::npos);
  EXPECT_EQ(d->dir, k.out);

  k = Keys();
  k.strategy = "random";
  k.seed = 11;
  k.format = "yolo";
  k.out = (dir_ / "r1").string();
  Result<SelectReport> a = SelectFromPool(Env::Default(), k, {}, Loader());
  k.out = (dir_ / "r2").string();
  Result<SelectReport> b = SelectFromPool(Env::Default(), k, {}, Loader());
  ASSERT_TRUE(a.IsOk() && b.IsOk());
  EXPECT_EQ(a->selected[0].image, b->selected[0].image);
  EXPECT_EQ(a->selected[1].image, b->selected[1].image);
  EXPECT_TRUE(fs::exists(dir_ / "r1/yolo/data.yaml"));
  EXPECT_TRUE(fs::exists(dir_ / "r1/yolo.zip"));
}

TEST_F(SelectFromPoolTest, DiversityOnModelEmbeddingsStartsFromTheLabelledImages) {
  // Widths 40..43 at angles 0, 0.5, 1, 1.5 rad; the labelled image (width
  // 50) at 2 rad. Farthest from it: a (2 rad away), then c (1 rad from a
  // and from the labelled one), not b or d (0.5 rad from one of them).
  fs::create_directories(dir_ / "labelled");
  ASSERT_TRUE(
      cv::imwrite((dir_ / "labelled/old.png").string(), cv::Mat(30, 50, CV_8UC3, cv::Scalar(9, 9, 9))));
  SelectKeys k = Keys();
  k.strategy = "diversity";
  k.embedding = "model";
  k.labelled = (dir_ / "labelled").string();
  k.budget = 2;
  k.out = (dir_ / "emb").string();
  Result<SelectReport> r = SelectFromPool(Env::Default(), k, {}, Loader());
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  ASSERT_EQ(r->selected.size(), 2u);
  EXPECT_EQ(r->selected[0].image, "a.jpg");
  EXPECT_NEAR(r->selected[0].pick.score, 2 * std::sin(1.0), 1e-5);  // chord of 2 rad
  EXPECT_EQ(r->selected[1].image, "c.jpg");
  EXPECT_NEAR(r->selected[1].pick.score, 2 * std::sin(0.5), 1e-5);
  EXPECT_NE(r->selected[0].pick.reason.find("embedding distance"), std::string::npos);
  const nlohmann::json sel = ReadJson(dir_ / "emb/selection.json");
  EXPECT_EQ(sel["embedding"], "model");
  EXPECT_EQ(sel["labelled"], k.labelled);
  // Without labelled=: the medoid of the four opens.
  k.labelled.clear();
  k.out = (dir_ / "emb2").string();
  Result<SelectReport> m = SelectFromPool(Env::Default(), k, {}, Loader());
  ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
  EXPECT_NE(m->selected[0].pick.reason.find("medoid"), std::string::npos);
  // A labelled folder with an unreadable image: an error naming labelled=.
  std::ofstream(dir_ / "labelled/broken.jpg") << "not a jpeg";
  k.labelled = (dir_ / "labelled").string();
  k.out = (dir_ / "emb3").string();
  Result<SelectReport> bad = SelectFromPool(Env::Default(), k, {}, Loader());
  ASSERT_FALSE(bad.IsOk());
  EXPECT_EQ(bad.GetStatus().Where().field, "labelled") << bad.GetStatus().ToString();
  EXPECT_NE(bad.GetStatus().Message().find("broken.jpg"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ / "emb3"));
}

TEST_F(SelectFromPoolTest, BadKeysNameTheKeyAndLeaveNothing) {
  struct Case {
    std::function<void(SelectKeys&)> change;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](SelectKeys& k) { k.pool.clear(); }, "pool"},
      {[&](SelectKeys& k) { k.pool = (dir_ / "pool/a.jpg").string(); }, "pool"},
      {[&](SelectKeys& k) { k.pool = (dir_ / "nowhere").string(); }, "pool"},
      {[](SelectKeys& k) { k.model.clear(); }, "model"},
      {[](SelectKeys& k) { k.budget = 0; }, "budget"},
      {[](SelectKeys& k) { k.strategy = "coreset"; }, "strategy"},
      {[&](SelectKeys& k) { k.labelled = (dir_ / "pool").string(); }, "labelled"},  // not diversity
      {[&](SelectKeys& k) {
         k.strategy = "diversity";
         k.labelled = (dir_ / "nowhere").string();
       },
       "labelled"},
      {[](SelectKeys& k) {
         k.strategy = "diversity";
         k.embedding = "model";
         k.model = "exported.onnx";
       },
       "embedding"},
      {[](SelectKeys& k) { k.embedding = "clip"; }, "embedding"},
      {[](SelectKeys& k) { k.format = "voc"; }, "format"},
      {[](SelectKeys& k) { k.pre_conf = 0.01; }, "pre_conf"},
      {[](SelectKeys& k) { k.ls_from_name = "a b"; }, "ls_from_name"},
  };
  for (const Case& c : cases) {
    SelectKeys k = Keys();
    c.change(k);
    Result<SelectReport> r = SelectFromPool(Env::Default(), k, {}, Loader());
    ASSERT_FALSE(r.IsOk()) << c.field;
    EXPECT_EQ(r.GetStatus().Code(), StatusCode::kInvalidArgument)
        << c.field << ": " << r.GetStatus().ToString();
    EXPECT_EQ(r.GetStatus().Where().field, c.field) << r.GetStatus().ToString();
  }
  fs::create_directories(dir_ / "empty");
  SelectKeys k = Keys();
  k.pool = (dir_ / "empty").string();
  Result<SelectReport> empty = SelectFromPool(Env::Default(), k, {}, Loader());
  ASSERT_FALSE(empty.IsOk());
  EXPECT_EQ(empty.GetStatus().Where().field, "pool") << empty.GetStatus().ToString();
  EXPECT_EQ(loads_, 0) << "bad keys are refused before the model loads";
  // A model that does not load: its error names the file and the key.
  const DetectorLoader broken = [](const std::string&, const eval::InferenceOptions&,
                                   const DetectorPlacement&) -> Result<std::unique_ptr<Detector>> {
    return Status::Corruption("header length out of range");
  };
  Result<SelectReport> bad_model = SelectFromPool(Env::Default(), Keys(), {}, broken);
  ASSERT_FALSE(bad_model.IsOk());
  EXPECT_EQ(bad_model.GetStatus().Where().field, "model");
  EXPECT_EQ(bad_model.GetStatus().Message(), "scripted.safetensors: header length out of range");
  EXPECT_FALSE(fs::exists(dir_ / "runs")) << "a refused selection leaves no run folder";
}

}  // namespace
}  // namespace kestrel::app
