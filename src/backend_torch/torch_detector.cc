// The LibTorch detector (torch_backend.h): a .safetensors/.pt model run by
// model::Predictor behind app::Detector, the interface predict, val model=
// and compare run (app/detector.h).
#include <opencv2/core.hpp>

#include "app/detector.h"
#include "backend_torch/torch_backend.h"
#include "model/predictor.h"

namespace kestrel::backend_torch {
namespace {

using app::Detector;

// model::Predictor as a Detector: the views become cv::Mat headers over the
// same pixels (no copy; model::Predictor reads them before the next load).
class TorchDetector final : public Detector {
 public:
  explicit TorchDetector(std::unique_ptr<model::Predictor> p) : p_(std::move(p)) {}
  int NumClasses() const override { return p_->NumClasses(); }
  const std::vector<std::string>& Names() const override { return p_->Names(); }
  std::string Arch() const override { return p_->Spec().Name(); }
  const eval::InferenceOptions& Options() const override { return p_->Options(); }
  Result<std::vector<eval::ImagePrediction>> Predict(const std::vector<eval::ImageView>& images) override {
    std::vector<cv::Mat> mats;
    mats.reserve(images.size());
    for (const auto& v : images) mats.push_back(Header(v));
    return p_->Predict(mats);
  }
  Result<std::vector<eval::ImagePrediction>> PredictVal(
      const std::vector<eval::ImageSize>& sizes, const eval::ValShapeOptions& shapes,
      const std::function<Result<eval::ImageView>(size_t index)>& load) override {
    return p_->PredictVal(sizes, shapes, [&load](size_t i) -> Result<cv::Mat> {
      KESTREL_ASSIGN_OR_RETURN(eval::ImageView v, load(i));
      return Header(v);
    });
  }
  eval::StageTimes Timing() const override { return p_->Timing(); }

 private:
  static cv::Mat Header(const eval::ImageView& v) {
    return {v.height, v.width, CV_8UC(v.channels), const_cast<uint8_t*>(v.data),
            v.stride != 0 ? v.stride : size_t(cv::Mat::AUTO_STEP)};
  }
  std::unique_ptr<model::Predictor> p_;
};

}  // namespace

Result<std::unique_ptr<app::Detector>> LoadTorchDetector(const std::string& weights,
                                                         const eval::InferenceOptions& options,
                                                         const app::DetectorPlacement& where) {
  model::PredictorOptions po;
  static_cast<eval::InferenceOptions&>(po) = options;
  po.device = where.device;
  KESTREL_ASSIGN_OR_RETURN(auto pred, model::Predictor::Load(weights, po));
  return std::unique_ptr<Detector>(std::make_unique<TorchDetector>(std::move(pred)));
}

}  // namespace kestrel::backend_torch
