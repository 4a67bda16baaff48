// Predictor: forward + decode + NMS equals the reference model's eval output
// run through the same postprocess; timing; load errors. The letterbox is
// eval's (tests/eval/val_shapes_test.cc).
#include "model/predictor.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <opencv2/imgproc.hpp>

#include "model/weights.h"
#include "model/yolo.h"
#include "test_util.h"

namespace kestrel::model {
namespace {

using testing::HaveReference;
using testing::RefForward;
using testing::RefWeights;

class PredictorTest : public testing::TorchTest {};

// A temporary weights file path for this process, tagged.
std::string TempWeights(const std::string& tag) {
  return (std::filesystem::temp_directory_path() /
          ("kestrel_" + tag + "_" + std::to_string(::getpid()) + ".safetensors"))
      .string();
}

TEST_F(PredictorTest, ReferenceInputMatchesReferenceEvalOutputAfterPostprocess) {
  if (!HaveReference()) GTEST_SKIP() << "no ../shared/reference";
  PredictorOptions po;
  po.fuse = false;  // the reference output is of the unfused model
  po.nms.conf = 0.001f;
  po.nms.multi_label = true;
  auto p = Predictor::Load(RefWeights(), po);
  ASSERT_TRUE(p.IsOk()) << p.GetStatus().ToString();
  EXPECT_EQ((*p)->NumClasses(), 3);
  auto file = ReadSafeTensorsFile(RefForward());
  ASSERT_TRUE(file.IsOk());
  const SafeTensor& input = file->tensors.at("input");
  const SafeTensor& ref = file->tensors.at("eval_output");  // [2, 7, 252]
  auto got = (*p)->PredictInput(input);
  ASSERT_TRUE(got.IsOk()) << got.GetStatus().ToString();
  ASSERT_EQ(got->size(), 2u);
  const auto* raw = reinterpret_cast<const float*>(ref.data.data());
  for (int b = 0; b < 2; ++b) {
    auto want = eval::PostprocessYolo(raw + b * 7 * 252, 3, 252, po.nms);
    ASSERT_EQ((*got)[size_t(b)].size(), want.size()) << "image " << b;
    ASSERT_FALSE(want.empty());
    for (size_t i = 0; i < want.size(); ++i) {
      const auto& g = (*got)[size_t(b)][i];
      EXPECT_EQ(g.class_id, want[i].class_id);
      EXPECT_NEAR(g.score, want[i].score, 1e-4);
      EXPECT_NEAR(g.box.x1, want[i].box.x1, 1e-2);
      EXPECT_NEAR(g.box.y2, want[i].box.y2, 1e-2);
    }
  }
}

TEST_F(PredictorTest, RandomModelPredictsBatchesWithTimingAndBoxesInsideImages) {
  auto m = CreateModel("t", 2);
  ASSERT_TRUE(m.IsOk());
  const std::string path = TempWeights("pred");
  SaveOptions so;
  so.names = {"a", "b"};
  ASSERT_TRUE(SaveWeights(**m, path, so).IsOk());
  PredictorOptions po;
  po.imgsz = 64;
  po.batch = 2;
  po.nms.conf = 0.0f;
  po.nms.max_det = 50;
  auto p = Predictor::Load(path, po);
  std::filesystem::remove(path);
  ASSERT_TRUE(p.IsOk()) << p.GetStatus().ToString();
  EXPECT_EQ((*p)->Names(), (std::vector<std::string>{"a", "b"}));
  std::vector<cv::Mat> images = {cv::Mat(48, 80, CV_8UC3, cv::Scalar(10, 200, 30)),
                                 cv::Mat(90, 30, CV_8UC3, cv::Scalar(200, 20, 30)),
                                 cv::Mat(64, 64, CV_8UC3, cv::Scalar(0, 0, 0))};
  auto r = (*p)->Predict(images);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  ASSERT_EQ(r->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const ImagePrediction& ip = (*r)[i];
    EXPECT_EQ(ip.width, images[i].cols);
    EXPECT_EQ(ip.height, images[i].rows);
    EXPECT_LE(ip.detections.size(), 50u);
    EXPECT_FALSE(ip.detections.empty()) << "conf 0 keeps candidates";
    for (const auto& d : ip.detections) {
      EXPECT_GE(d.box.x1, 0);
      EXPECT_LE(d.box.x2, ip.width);
      EXPECT_LE(d.box.y2, ip.height);
      EXPECT_LT(d.class_id, 2);
    }
  }
  for (const ImagePrediction& ip : *r) EXPECT_TRUE(ip.embedding.empty()) << "embeddings only when asked";
  const StageTimes t = (*p)->Timing();
  EXPECT_EQ(t.images, 1) << "the first batch (2 images) is the warm-up";
  EXPECT_GT(t.inference_ms, 0);
  EXPECT_GE(t.preprocess_ms, 0);
  EXPECT_GE(t.postprocess_ms, 0);
  EXPECT_GT(t.Fps(), 0);
}

// InferenceOptions::embeddings: one unit vector per image, 2 x the Detect
// inputs' channels long (average- and max-pooled), the same for an image
// whatever batch it is in, different for different pictures.
TEST_F(PredictorTest, EmbeddingsAreUnitVectorsOfPooledFeatures) {
  auto m = CreateModel("t", 2);
  ASSERT_TRUE(m.IsOk());
  const std::string path = TempWeights("embed");
  ASSERT_TRUE(SaveWeights(**m, path, {}).IsOk());
  PredictorOptions po;
  po.imgsz = 64;
  po.batch = 2;
  po.embeddings = true;
  auto p = Predictor::Load(path, po);
  po.batch = 1;
  auto one = Predictor::Load(path, po);
  std::filesystem::remove(path);
  ASSERT_TRUE(p.IsOk() && one.IsOk()) << p.GetStatus().ToString();
  cv::Mat noise(64, 64, CV_8UC3);
  cv::randu(noise, 0, 255);
  std::vector<cv::Mat> images = {cv::Mat(64, 64, CV_8UC3, cv::Scalar(10, 200, 30)), noise,
                                 cv::Mat(40, 64, CV_8UC3, cv::Scalar(200, 20, 30))};
  auto r = (*p)->Predict(images);
  auto r1 = (*one)->Predict(images);
  ASSERT_TRUE(r.IsOk() && r1.IsOk());
  (*m)->eval();
  int64_t channels = 0;
  for (const torch::Tensor& f : (*m)->forward(torch::zeros({1, 3, 64, 64})).features) channels += f.size(1);
  EXPECT_GT(channels, 0);
  for (size_t i = 0; i < images.size(); ++i) {
    const std::vector<float>& e = (*r)[i].embedding;
    ASSERT_EQ(int64_t(e.size()), 2 * channels);
    double norm = 0;
    for (float v : e) norm += double(v) * v;
    EXPECT_NEAR(norm, 1.0, 1e-4);
    ASSERT_EQ(e.size(), (*r1)[i].embedding.size());
    for (size_t k = 0; k < e.size(); ++k) ASSERT_NEAR(e[k], (*r1)[i].embedding[k], 1e-4) << i << " " << k;
  }
  double diff = 0;
  for (size_t k = 0; k < (*r)[0].embedding.size(); ++k)
    diff += std::abs((*r)[0].embedding[k] - (*r)[1].embedding[k]);
  EXPECT_GT(diff, 1e-3) << "a flat colour and noise embed differently";
}

TEST_F(PredictorTest, LoadErrors) {
  auto missing = Predictor::Load("/nonexistent/w.safetensors", {});
  ASSERT_FALSE(missing.IsOk());
  EXPECT_EQ(missing.GetStatus().Code(), StatusCode::kNotFound);
  PredictorOptions bad;
  bad.imgsz = 50;
  auto b = Predictor::Load("/nonexistent/w.safetensors", bad);
  ASSERT_FALSE(b.IsOk());
  EXPECT_EQ(b.GetStatus().Where().field, "imgsz");
}

}  // namespace
}  // namespace kestrel::model
