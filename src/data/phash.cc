#include "data/phash.h"

#include <algorithm>
#include <array>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

namespace kestrel::data {
namespace {

constexpr int kDctSize = 32;
constexpr int kHashSide = 8;

// Equal-weight gray as float; see the header for why not BT.601.
cv::Mat GrayFloat(const cv::Mat& image) {
  cv::Mat f;
  image.convertTo(f, CV_32F);
  if (f.channels() == 1) return f;
  std::vector<cv::Mat> planes;
  cv::split(f, planes);
  // A 4th channel is alpha and does not take part.
  const size_t n = planes.size() == 4 ? 3 : planes.size();
  cv::Mat gray = planes[0].clone();
  for (size_t c = 1; c < n; ++c) gray += planes[c];
  gray *= 1.0 / static_cast<double>(n);
  return gray;
}

}  // namespace

uint64_t PerceptualHash(const cv::Mat& image) {
  if (image.empty()) return 0;
  cv::Mat gray = GrayFloat(image);
  cv::Mat small;
  cv::resize(gray, small, cv::Size(kDctSize, kDctSize), 0, 0, cv::INTER_AREA);
  cv::Mat freq;
  cv::dct(small, freq);

  std::array<float, kHashSide * kHashSide> coef{};
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
