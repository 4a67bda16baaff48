#include "data/phash.h"

#include <algorithm>
#include <array>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <vector>

namespace kestrel::data {
namespace {

constexpr int kDctSize = 32;
constexpr int kHashSide = 8;

// Equal-weight gray of a small float image; see the header for why not BT.601.
cv::Mat GrayFloat(const cv::Mat& small) {
  cv::Mat f;
  small.convertTo(f, CV_32F);
  if (f.channels() == 1) return f;
  // A 4th channel is alpha and does not take part.
  const int n = f.channels() == 4 ? 3 : f.channels();
  cv::Mat gray(f.rows, f.cols, CV_32F);
  for (int y = 0; y < f.rows; ++y) {
    const float* src = f.ptr<float>(y);
    float* dst = gray.ptr<float>(y);
    for (int x = 0; x < f.cols; ++x) {
      float sum = 0;
      for (int c = 0; c < n; ++c) sum += src[x * f.channels() + c];
      dst[x] = sum / static_cast<float>(n);
    }
  }
  return gray;
}

}  // namespace

uint64_t PerceptualHash(const cv::Mat& image) {
  if (image.empty()) return 0;
  // Area-downscale first (per channel, in the image's own depth), then take
  // gray of the 32x32 block: gray and area averaging are both linear, so the
  // order only adds sub-level rounding, and the full-size float copies (the
  // dominant cost of import) disappear.
  cv::Mat small3;
  cv::resize(image, small3, cv::Size(kDctSize, kDctSize), 0, 0, cv::INTER_AREA);
  cv::Mat small = GrayFloat(small3);
  cv::Mat freq;
  cv::dct(small, freq);

  std::array<float, size_t{kHashSide} * kHashSide> coef{};
  for (int u = 0; u < kHashSide; ++u) {
    for (int v = 0; v < kHashSide; ++v) coef[u * kHashSide + v] = freq.at<float>(u, v);
  }
  // Median of the 63 AC terms: the 32nd smallest (odd count, exact middle).
  std::array<float, kHashSide * kHashSide - 1> ac{};
  std::copy(coef.begin() + 1, coef.end(), ac.begin());
  auto mid = ac.begin() + ac.size() / 2;
  std::nth_element(ac.begin(), mid, ac.end());
  const float median = *mid;

  uint64_t hash = 0;
  for (size_t k = 0; k < coef.size(); ++k) {
    if (coef[k] > median) hash |= uint64_t{1} << (63 - k);
  }
  return hash;
}

}  // namespace kestrel::data
