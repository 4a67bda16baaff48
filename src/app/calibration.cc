// Decodes with data::DecodeImage (OpenCV only as its result) and letterboxes
// with eval's validation geometry.
#include "app/calibration.h"

#include <algorithm>
#include <cmath>
#include <opencv2/core.hpp>

#include "app/evaluate.h"
#include "data/image.h"
#include "data/version_files.h"
#include "eval/val_shapes.h"

namespace kestrel::app {

Result<CalibrationSet> LoadCalibrationImages(store::MetadataStore& meta, store::ArtifactStore& blobs,
                                             const std::string& data, int count, double fraction, int h,
                                             int w) {
  if (count < 1) return Status::InvalidArgument("calib must be >= 1", {"command line", 0, "calib"});
  if (!(fraction > 0 && fraction <= 1))
    return Status::InvalidArgument("fraction must be in (0, 1]", {"command line", 0, "fraction"});
  Result<LoadedSplit> train = LoadSplit(meta, blobs, data, "train");
  // A dataset with no train images (a val-only set) calibrates on its val split.
  const bool no_train = !train.IsOk() && train.GetStatus().Code() == StatusCode::kFailedPrecondition;
  Result<LoadedSplit> loaded = no_train ? LoadSplit(meta, blobs, data, "val") : std::move(train);
  if (!loaded.IsOk()) return loaded.GetStatus();
  const eval::EvalSplit& split = loaded->split;
  CalibrationSet out;
  const auto& rec = loaded->version.record;
  out.dataset = rec.dataset + "@v" + std::to_string(rec.seq);
  out.version_id = rec.version_id;
  out.split = split.split;
  out.split_images = static_cast<int64_t>(split.images.size());
  out.candidates = std::clamp<int64_t>(std::llround(fraction * static_cast<double>(out.split_images)), 1,
                                       out.split_images);
  const int64_t n = std::min<int64_t>(count, out.candidates);
  for (int64_t k = 0; k < n; ++k) {
    const auto& im = split.images[static_cast<size_t>(k * out.candidates / n)];
    KESTREL_ASSIGN_OR_RETURN(std::string bytes, data::ReadImageBytes(im.path, im.image_sha, im.file,
                                                                     split.version, blobs, Env::Default()));
    KESTREL_ASSIGN_OR_RETURN(cv::Mat rgb, data::DecodeImage(bytes, im.path));
    const eval::ValGeometry g = eval::ComputeValGeometry(rgb.cols, rgb.rows, std::max(h, w), w, h);
    std::vector<float> chw(static_cast<size_t>(3) * h * w);
    KESTREL_RETURN_IF_ERROR(eval::ValLetterboxToChw(rgb.data, rgb.rows, rgb.cols, rgb.step[0], g, chw.data())
                                .WithContext(im.path));
    out.images.push_back(std::move(chw));
  }
  return out;
}

}  // namespace kestrel::app
