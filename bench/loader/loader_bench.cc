// loader_bench [images=64] [src_px=640] [imgsz=320] [workers=2] [epochs=3] [cv_threads=0]
//
// Synthetic JPEGs (src_px square, rendered in memory) through:
//   decode      : source + DecodeImage only, on `workers` threads
//   val         : Loader, augment=false (decode + letterbox + collate)
//   train       : Loader, default Ultralytics augmentation (mosaic = 4 decodes per image)
//   train-nomos : Loader, augmentation with mosaic=0
// Prints images/s of each and the ratio to decode-only.
//
// cv_threads is passed to data::SetImageCodecThreads (process-wide, so set
// here in main): 0 = OpenCV runs each call on the calling thread, which is what a
// loader with its own workers wants; -1 = OpenCV's default pool.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <opencv2/imgcodecs.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/hash.h"
#include "data/image.h"
#include "data/loader.h"
#include "data/synth.h"

using namespace kestrel;
using namespace kestrel::data;

namespace {
double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 64;
  const int src_px = argc > 2 ? std::atoi(argv[2]) : 640;
  const int imgsz = argc > 3 ? std::atoi(argv[3]) : 320;
  const int workers = argc > 4 ? std::atoi(argv[4]) : 2;
  const int epochs = argc > 5 ? std::atoi(argv[5]) : 3;
  const int cv_threads = argc > 6 ? std::atoi(argv[6]) : 0;
  QuietImageCodecLogs();
  SetImageCodecThreads(cv_threads);

  SynthOptions so;
  so.images = n;
  so.imgsz = src_px;
  so.val_fraction = 0;
  Manifest m;
  m.names = SynthClassNames(so.classes);
  std::map<std::string, std::string> bytes;
  for (int i = 0; i < n; ++i) {
    auto s = RenderSynthSample(so, i);
    if (!s.IsOk()) return 1;
    std::vector<uint8_t> buf;
    cv::imencode(".jpg", s->image, buf, {cv::IMWRITE_JPEG_QUALITY, 90});
    ManifestEntry e;
    e.path = s->stem + ".jpg";
    e.split = Split::kTrain;
    e.width = e.height = src_px;
    e.boxes = s->boxes;
    bytes[e.path] = std::string(buf.begin(), buf.end());
    e.image_sha = Sha256Hex(bytes[e.path]);
    m.entries.push_back(e);
  }
  ImageSource source = [&bytes](const ManifestEntry& e) -> Result<std::string> { return bytes.at(e.path); };

  // Decode only.
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> ts;
  for (int w = 0; w < workers; ++w) {
    ts.emplace_back([&, w] {
      for (int ep = 0; ep < epochs; ++ep) {
        for (int i = w; i < n; i += workers) {
          auto b = source(m.entries[i]);
          auto img = DecodeImage(*b, m.entries[i].path);
          if (!img.IsOk()) std::abort();
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  const double decode_ips = n * epochs / Seconds(t0);
  std::printf("%-12s %8.1f images/s  (src %dx%d JPEG, %d workers)\n", "decode", decode_ips, src_px, src_px,
              workers);

  auto run = [&](const char* name, bool augment, double mosaic) {
    LoaderOptions lo;
    lo.imgsz = imgsz;
    lo.batch = 16;
    lo.workers = workers;
    lo.augment = augment;
    lo.shuffle = augment;
    lo.epochs = 1000;
    AugmentOptions ao;
    ao.mosaic = mosaic;
    auto l = Loader::Create(m, Split::kTrain, source, lo, ao);
    if (!l.IsOk()) {
      std::printf("%s\n", l.GetStatus().ToString().c_str());
      std::exit(1);
    }
    auto start = std::chrono::steady_clock::now();
    int64_t images = 0;
    for (int ep = 0; ep < epochs; ++ep) {
      if (!(*l)->StartEpoch(ep).IsOk()) std::exit(1);
      for (;;) {
        auto b = (*l)->Next();
        if (!b.IsOk()) std::exit(1);
        if (!b->has_value()) break;
        images += (*b)->size;
        (*l)->Recycle(std::move(**b));
      }
    }
    const double ips = images / Seconds(start);
    const LoaderStats st = (*l)->Stats();
    std::printf(
        "%-12s %8.1f images/s  (imgsz %d)  %.2fx decode-only;  per image: decode %.2f ms, build %.2f ms\n",
        name, ips, imgsz, ips / decode_ips, 1e3 * st.decode_seconds / images,
        1e3 * st.augment_seconds / images);
  };
  run("val", false, 0);
  run("train", true, 1.0);
  run("train-nomos", true, 0.0);
  return 0;
}
