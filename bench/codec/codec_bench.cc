// codec_bench [DIR] [passes=5]: decode time of data/codec.h's DecodeJpeg
// against OpenCV's cv::imdecode(IMREAD_UNCHANGED) on every JPEG under DIR
// (default ../shared/datasets/coco128/images), the two interleaved file by
// file so that a busy machine slows both alike. Prints both totals and the
// ratio ours / OpenCV (< 1: ours is faster); exit 1 if a file decodes in one
// and not the other.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <string>
#include <vector>

#include "data/codec.h"

int main(int argc, char** argv) {
  using Clock = std::chrono::steady_clock;
  const std::string dir = argc > 1 ? argv[1] : std::string(KESTREL_SHARED_DIR) + "/datasets/coco128/images";
  const int passes = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  cv::setNumThreads(0);
  std::vector<std::string> files;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    const std::string ext = it->path().extension().string();
    if (!it->is_regular_file() || (ext != ".jpg" && ext != ".jpeg" && ext != ".JPG")) continue;
    std::ifstream in(it->path(), std::ios::binary);
    files.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (files.empty()) {
    std::fprintf(stderr, "codec_bench: no JPEG files under %s\n", dir.c_str());
    return 2;
  }
  double ours = 0, opencv = 0;
  for (int pass = 0; pass < passes; ++pass) {
    for (const std::string& b : files) {
      const auto t0 = Clock::now();
      const kestrel::Result<cv::Mat> mine = kestrel::data::DecodeJpeg(b);
      const auto t1 = Clock::now();
      const cv::Mat theirs = cv::imdecode(
          cv::Mat(1, static_cast<int>(b.size()), CV_8UC1, const_cast<char*>(b.data())), cv::IMREAD_UNCHANGED);
      const auto t2 = Clock::now();
      ours += std::chrono::duration<double>(t1 - t0).count();
      opencv += std::chrono::duration<double>(t2 - t1).count();
      if (mine.IsOk() == theirs.empty()) {
        std::fprintf(stderr, "codec_bench: a file decodes in only one of the two\n");
        return 1;
      }
    }
  }
  std::printf("%zu JPEG files x %d passes: DecodeJpeg %.3f s, cv::imdecode %.3f s, ratio %.3f\n",
              files.size(), passes, ours, opencv, ours / opencv);
  return 0;
}
