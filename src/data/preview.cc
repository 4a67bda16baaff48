#include "data/preview.h"

#include <cmath>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <utility>

#include "core/env.h"
#include "data/codec.h"
#include "data/text_render.h"

namespace kestrel::data {

namespace {
constexpr double kPreviewTextPx = 11;  // file names and box captions (text_render.h px)

// A stable, well-separated colour per class (BGR for OpenCV drawing).
cv::Scalar ClassColor(int cls) {
  static const int kPalette[][3] = {{56, 56, 255},  {151, 157, 255}, {31, 112, 255}, {29, 178, 255},
                                    {49, 210, 207}, {10, 249, 72},   {23, 204, 146}, {134, 219, 61},
                                    {211, 188, 0},  {209, 148, 0},   {255, 115, 0},  {147, 69, 52}};
  const auto& c = kPalette[(static_cast<unsigned>(cls) * 5) % 12];  // neighbours far apart
  return {static_cast<double>(c[0]), static_cast<double>(c[1]), static_cast<double>(c[2])};
}
}  // namespace

Status WriteAugmentedPreview(const Manifest& manifest, const ImageSource& source,
                             const AugmentOptions& augment, const LoaderOptions& loader,
                             const std::vector<std::string>& names, const std::string& out_png, int images) {
  if (images < 1 || images > 64) {
    return Status::InvalidArgument("must be in [1, 64], got " + std::to_string(images), {"", 0, "images"});
  }
  LoaderOptions lo = loader;
  lo.augment = true;
  lo.shuffle = true;
  lo.rect = false;
  lo.drop_last = false;
  lo.batch = images;
  lo.prefetch = 1;
  KESTREL_ASSIGN_OR_RETURN(std::unique_ptr<Loader> l,
                           Loader::Create(manifest, Split::kTrain, source, lo, augment));
  KESTREL_RETURN_IF_ERROR(l->StartEpoch(0));
  KESTREL_ASSIGN_OR_RETURN(std::optional<Batch> b, l->Next());
  if (!b.has_value()) return Status::FailedPrecondition("data: the train split produced no batch");
  const int n = b->size, H = b->height, W = b->width;
  const int cols = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(n))));
  const int rows = (n + cols - 1) / cols;
  std::string png;
  try {
    cv::Mat grid(rows * H, cols * W, CV_8UC3, cv::Scalar(0, 0, 0));
    const size_t plane = static_cast<size_t>(H) * W;
    for (int i = 0; i < n; ++i) {
      cv::Mat cell = grid(cv::Rect((i % cols) * W, (i / cols) * H, W, H));
      const float* src = b->images.data() + static_cast<size_t>(i) * 3 * plane;
      for (int y = 0; y < H; ++y) {
        auto* p = cell.ptr<cv::Vec3b>(y);
        for (int x = 0; x < W; ++x) {
          for (int c = 0; c < 3; ++c) {  // RGB planes -> BGR pixel
            p[x][2 - c] =
                cv::saturate_cast<uint8_t>(src[c * plane + static_cast<size_t>(y) * W + x] * 255.0f);
          }
        }
      }
      PutText(cell, b->paths[i], {3, H - 3}, kPreviewTextPx, {255, 255, 255}, FontWeight::kRegular,
              HAlign::kLeft, VAlign::kBottom);
    }
    for (int64_t t = 0; t < b->NumTargets(); ++t) {
      const float* r = b->targets.data() + t * 6;
      const int i = static_cast<int>(r[0]), cls = static_cast<int>(r[1]);
      const int ox = (i % cols) * W, oy = (i / cols) * H;
      cv::Point p1(ox + static_cast<int>(std::lround((r[2] - r[4] / 2) * W)),
                   oy + static_cast<int>(std::lround((r[3] - r[5] / 2) * H)));
      cv::Point p2(ox + static_cast<int>(std::lround((r[2] + r[4] / 2) * W)) - 1,
                   oy + static_cast<int>(std::lround((r[3] + r[5] / 2) * H)) - 1);
      const cv::Scalar color = ClassColor(cls);
      cv::rectangle(grid, p1, p2, color, 1);
      const std::string label =
          cls >= 0 && static_cast<size_t>(cls) < names.size() ? names[cls] : std::to_string(cls);
      DrawBoxLabel(grid, label, p1, kPreviewTextPx, color, oy);
    }
    Result<std::string> encoded = EncodePng(grid);
    if (!encoded.IsOk())
      return Status::Internal("data: " + encoded.GetStatus().Message() + " for " + out_png);
    png = std::move(*encoded);
  } catch (const cv::Exception& e) {
    return Status::Internal(std::string("data: drawing the preview failed: ") + e.what());
  }
  return Env::Default().WriteFileAtomic(out_png, png);
}

}  // namespace kestrel::data
