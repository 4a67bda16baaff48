// The per-epoch Validator against the reference validator's numbers for one
// trained model (../shared/reference/val_parity, README there): square and
// non-square splits at batch 16 and 1, rect batches with pad 0.5, and
// rect=false at exactly imgsz. Skips when ../shared/reference is absent.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <sstream>

#include "core/env.h"
#include "data/image.h"
#include "data/manifest.h"
#include "data/synth.h"
#include "model/spec.h"
#include "model/weights.h"
#include "model/yolo.h"
#include "train/validator.h"

namespace kestrel::train {
namespace {

const std::string kParity = std::string(KESTREL_SHARED_DIR) + "/reference/val_parity";

bool HaveFixture() {
  Env& env = Env::Default();
  return env.Stat(kParity + "/expected.json").exists &&
         env.Stat(kParity + "/yolov8n_shapes_p.safetensors").exists &&
         env.Stat(kParity + "/square/images/val").is_dir &&
         env.Stat(kParity + "/nonsquare/images/val").is_dir;
}

// The val split of a YOLO-layout fixture folder as a manifest (paths relative
// to `root`, sizes from the image headers, labels as written).
data::Manifest LoadFixture(const std::string& root) {
  Env& env = Env::Default();
  data::Manifest m;
  m.names = {"circle", "rectangle", "triangle"};
  auto files = env.ListDir(root + "/images/val");
  EXPECT_TRUE(files.IsOk());
  if (!files.IsOk()) return m;
  std::vector<std::string> names = *files;
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    data::ManifestEntry e;
    e.path = "images/val/" + n;
    e.split = data::Split::kVal;
    auto bytes = env.ReadFile(JoinPath(root, e.path));
    EXPECT_TRUE(bytes.IsOk()) << e.path;
    auto info = data::ProbeImage(*bytes, e.path);
    EXPECT_TRUE(info.IsOk()) << e.path;
    e.width = info->width;
    e.height = info->height;
    std::ifstream in(root + "/labels/val/" + Stem(n) + ".txt");
    data::Box b;
    while (in >> b.cls >> b.cx >> b.cy >> b.w >> b.h) e.boxes.push_back(b);
    m.entries.push_back(std::move(e));
  }
  return m;
}

data::ImageSource FileSource(const std::string& root) {
  return [root](const data::ManifestEntry& e) { return Env::Default().ReadFile(JoinPath(root, e.path)); };
}

model::Yolo LoadParityModel() {
  const std::string path = kParity + "/yolov8n_shapes_p.safetensors";
  auto info = model::ReadWeightsInfo(path);
  EXPECT_TRUE(info.IsOk()) << info.GetStatus().ToString();
  auto m = model::CreateModel(info->spec);
  EXPECT_TRUE(m.IsOk()) << m.GetStatus().ToString();
  Status s = model::LoadWeights(**m, path, model::LoadMode::kStrict);
  EXPECT_TRUE(s.IsOk()) << s.ToString();
  return *m;
}

nlohmann::json Expected() {
  std::ifstream in(kParity + "/expected.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

// With `samples`, also the epoch samples of the first 4 val images (ValidatorOptions::samples).
Result<eval::EvalResult> Validate(const data::Manifest& m, const std::string& root, model::YoloImpl& model,
                                  int batch, bool rect, std::vector<SampleImage>* samples = nullptr) {
  data::LoaderOptions lo;
  lo.imgsz = 320;
  lo.batch = 16;
  ValidatorOptions vo;
  vo.rect = rect;
  vo.batch = batch;
  vo.samples = samples != nullptr ? 4 : 0;
  KESTREL_ASSIGN_OR_RETURN(auto v, Validator::Create(m, FileSource(root), lo, m.names, torch::kCPU, vo));
  auto r = v->Run(model);
  EXPECT_EQ(v->BadImages(), 0);
  if (samples != nullptr) *samples = v->LastSamples();
  return r;
}

// The epoch samples of a rect run on non-square images: the first 4 val
// entries in manifest order (whatever batch each landed in), detections
// >= kSampleConf inside the original image, and in its pixels: some overlap
// a label of their class at IoU >= 0.5 (letterboxed coordinates would not).
void ExpectSamplesInOriginalPixels(const std::vector<SampleImage>& samples, const data::Manifest& m,
                                   const std::string& what) {
  ASSERT_EQ(samples.size(), 4u) << what;
  int dets = 0, hits = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    const data::ManifestEntry& e = *samples[i].entry;
    EXPECT_EQ(&e, &m.entries[i]) << what;
    for (const eval::Detection& d : samples[i].detections) {
      ++dets;
      EXPECT_GE(d.score, kSampleConf) << what;
      EXPECT_TRUE(d.box.x1 >= 0 && d.box.y1 >= 0 && d.box.x2 <= e.width && d.box.y2 <= e.height) << what;
      for (const data::Box& b : e.boxes) {
        const eval::Box px{float((b.cx - b.w / 2) * e.width), float((b.cy - b.h / 2) * e.height),
                           float((b.cx + b.w / 2) * e.width), float((b.cy + b.h / 2) * e.height)};
        if (b.cls == d.class_id && eval::Iou(px, d.box) >= 0.5) {
          ++hits;
          break;
        }
      }
    }
  }
  std::printf("%s: %d sample detections, %d on a label (IoU >= 0.5)\n", what.c_str(), dets, hits);
  EXPECT_GT(hits, 0) << what;
}

void ExpectMatches(const Result<eval::EvalResult>& run, const nlohmann::json& e, const std::string& what) {
  ASSERT_TRUE(run.IsOk()) << what << ": " << run.GetStatus().ToString();
  const eval::EvalResult& r = *run;
  constexpr double kTol = 1e-4;
  std::printf("%s: mAP50 %.6f (ref %.6f) mAP50-95 %.6f (ref %.6f) P %.6f (ref %.6f) R %.6f (ref %.6f)\n",
              what.c_str(), r.map50, e["map50"].get<double>(), r.map5095, e["map5095"].get<double>(),
              r.precision, e["precision"].get<double>(), r.recall, e["recall"].get<double>());
  EXPECT_NEAR(r.map50, e["map50"].get<double>(), kTol) << what;
  EXPECT_NEAR(r.map5095, e["map5095"].get<double>(), kTol) << what;
  EXPECT_NEAR(r.precision, e["precision"].get<double>(), kTol) << what;
  EXPECT_NEAR(r.recall, e["recall"].get<double>(), kTol) << what;
  const auto& pc = e["per_class_map5095"];
  ASSERT_EQ(r.classes.size(), pc.size()) << what;
  for (size_t c = 0; c < pc.size(); ++c) {
    EXPECT_NEAR(r.classes[c].ap5095, pc[c].get<double>(), kTol) << what << " class " << c;
  }
}

class ValParity : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveFixture()) GTEST_SKIP() << "../shared/reference/val_parity not present";
    torch::set_num_threads(1);
  }
};

TEST_F(ValParity, SquareSplitMatchesReferenceAtBatch16And1) {
  const std::string root = kParity + "/square";
  const data::Manifest m = LoadFixture(root);
  ASSERT_EQ(m.entries.size(), 24u);
  model::Yolo model = LoadParityModel();
  const nlohmann::json e = Expected()["square"];
  ExpectMatches(Validate(m, root, *model, 16, true), e["batch16"], "square batch16");
  ExpectMatches(Validate(m, root, *model, 1, true), e["batch1"], "square batch1");
}

TEST_F(ValParity, NonSquareSplitMatchesReferenceAtBatch16And1) {
  const std::string root = kParity + "/nonsquare";
  const data::Manifest m = LoadFixture(root);
  ASSERT_EQ(m.entries.size(), 24u);
  model::Yolo model = LoadParityModel();
  const nlohmann::json e = Expected()["nonsquare"];
  std::vector<SampleImage> s16, s1;
  ExpectMatches(Validate(m, root, *model, 16, true, &s16), e["batch16"], "nonsquare batch16");
  ExpectMatches(Validate(m, root, *model, 1, true, &s1), e["batch1"], "nonsquare batch1");
  ExpectSamplesInOriginalPixels(s16, m, "nonsquare batch16 samples");
  ExpectSamplesInOriginalPixels(s1, m, "nonsquare batch1 samples");
}

// rect=false evaluates at exactly imgsz x imgsz: on 320x320 images that is
// no resize and no border, which the reference README reports as 0.275 /
// 0.163 (three decimals) for these weights.
TEST_F(ValParity, RectFalseEvaluatesAtExactlyImgsz) {
  const std::string root = kParity + "/square";
  const data::Manifest m = LoadFixture(root);
  model::Yolo model = LoadParityModel();
  const auto run = Validate(m, root, *model, 16, false);
  ASSERT_TRUE(run.IsOk()) << run.GetStatus().ToString();
  const eval::EvalResult& r = *run;
  std::printf("square rect=false: mAP50 %.6f mAP50-95 %.6f\n", r.map50, r.map5095);
  EXPECT_NEAR(r.map50, 0.275, 5e-4);
  EXPECT_NEAR(r.map5095, 0.163, 5e-4);
}

// An image store that does not answer during validation (S3 restarting, the
// host's link cut) fails the run with its kUnavailable, a retryable attempt
// failure, instead of counting the image as unreadable ("val images could not
// be read": dataset_errors, permanent). Found by the multi-host soak: an S3
// restart failed a valid job for good. Needs no fixture.
TEST(ValidatorTest, UnreachableImageStoreFailsTheRunInsteadOfCountingBadImages) {
  data::SynthOptions so;
  so.images = 8;
  so.classes = 2;
  so.imgsz = 64;
  so.val_fraction = 1.0;
  data::Manifest m;
  m.names = data::SynthClassNames(so.classes);
  std::map<std::string, std::string> bytes;
  for (int i = 0; i < so.images; ++i) {
    auto s = data::RenderSynthSample(so, i);
    ASSERT_TRUE(s.IsOk()) << s.GetStatus().ToString();
    data::ManifestEntry e;
    e.path = "images/val/" + s->stem + ".jpg";
    e.split = data::Split::kVal;
    e.width = s->image.cols;
    e.height = s->image.rows;
    e.boxes = s->boxes;
    std::vector<uint8_t> buf;
    ASSERT_TRUE(cv::imencode(".jpg", s->image, buf));
    bytes[e.path] = std::string(buf.begin(), buf.end());
    m.entries.push_back(std::move(e));
  }
  const std::string victim = m.entries[2].path;
  data::ImageSource source = [&bytes, victim](const data::ManifestEntry& e) -> Result<std::string> {
    if (e.path == victim)
      return Status::Unavailable("S3 GetObject: Couldn't connect to server (after 4 tries)");
    return bytes.at(e.path);
  };
  data::LoaderOptions lo;
  lo.imgsz = 64;
  lo.batch = 4;
  lo.max_bad_fraction = 0.5;  // a tolerance that would hide the outage if it counted as bad data
  auto model = model::CreateModel("t", so.classes);
  ASSERT_TRUE(model.IsOk()) << model.GetStatus().ToString();
  auto v = Validator::Create(m, source, lo, m.names, torch::kCPU, ValidatorOptions{});
  ASSERT_TRUE(v.IsOk()) << v.GetStatus().ToString();
  auto r = (*v)->Run(**model);
  ASSERT_FALSE(r.IsOk()) << "an unreachable image store was taken for a bad image";
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kUnavailable) << r.GetStatus().ToString();
  EXPECT_NE(r.GetStatus().Reason(), FailureReason::kDatasetErrors);
  EXPECT_EQ((*v)->BadImages(), 0);
}

}  // namespace
}  // namespace kestrel::train
