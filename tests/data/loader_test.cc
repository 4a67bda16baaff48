#include "data/loader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <optional>

#include "core/hash.h"
#include "data/formats.h"
#include "data/image.h"
#include "data/preview.h"
#include "data/synth.h"
#include "loader_test_util.h"
#include "store/artifact_store.h"
#include "store/local_artifact_store.h"

namespace kestrel::data {
namespace {

namespace fs = std::filesystem;

std::string EncodeJpeg(const cv::Mat& bgr) {
  std::vector<uint8_t> buf;
  cv::imencode(".jpg", bgr, buf, {cv::IMWRITE_JPEG_QUALITY, 90});
  return std::string(buf.begin(), buf.end());
}

// `n` synthetic train images (imgsz 64), all in the train split.
const MemData& Synth(int n) {
  static std::map<int, std::unique_ptr<MemData>> cache;
  auto& slot = cache[n];
  if (slot) return *slot;
  slot = std::make_unique<MemData>();
  SynthOptions o;
  o.images = n;
  o.imgsz = 64;
  o.classes = 3;
  o.seed = 11;
  slot->manifest.names = SynthClassNames(3);
  for (int i = 0; i < n; ++i) {
    auto s = RenderSynthSample(o, i);
    EXPECT_TRUE(s.IsOk());
    AddEntry(*slot, s->stem + ".jpg", Split::kTrain, EncodeJpeg(s->image), 64, 64, s->boxes);
  }
  return *slot;
}

LoaderOptions TrainOptions() {
  LoaderOptions o;
  o.imgsz = 64;
  o.batch = 4;
  o.workers = 2;
  o.prefetch = 2;
  o.epochs = 4;
  return o;
}

AugmentOptions StrongAugment() {
  AugmentOptions a;
  a.degrees = 10;
  a.shear = 3;
  a.perspective = 0.0005;
  a.mixup = 0.3;
  a.flipud = 0.2;
  a.close_mosaic = 1;
  return a;
}

std::vector<Batch> Epoch(Loader& l, int epoch, bool recycle = false) {
  std::vector<Batch> out;
  EXPECT_TRUE(l.StartEpoch(epoch).IsOk());
  for (;;) {
    auto b = l.Next();
    EXPECT_TRUE(b.IsOk()) << b.GetStatus().ToString();
    if (!b.IsOk() || !b->has_value()) break;
    out.push_back(**b);
    if (recycle) l.Recycle(std::move(**b));
  }
  return out;
}

void ExpectSameBatch(const Batch& a, const Batch& b) {
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.index, b.index);
  EXPECT_EQ(a.size, b.size);
  EXPECT_EQ(a.height, b.height);
  EXPECT_EQ(a.width, b.width);
  EXPECT_TRUE(a.images == b.images) << "images differ in batch " << a.index;
  EXPECT_TRUE(a.targets == b.targets) << "targets differ in batch " << a.index;
  EXPECT_EQ(a.paths, b.paths);
  EXPECT_EQ(a.orig_hw, b.orig_hw);
  EXPECT_EQ(a.letterbox, b.letterbox);
}

TEST(LoaderTest, ShapesAndTargetsAreWellFormed) {
  const MemData& d = Synth(10);
  auto l = Make(d, TrainOptions(), StrongAugment());
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->BatchesPerEpoch(), 3);
  auto batches = Epoch(*l, 0);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[2].size, 2);  // 10 = 4 + 4 + 2
  int64_t targets = 0;
  for (const Batch& b : batches) {
    EXPECT_EQ(b.images.size(), static_cast<size_t>(b.size) * 3 * 64 * 64);
    EXPECT_EQ(b.paths.size(), static_cast<size_t>(b.size));
    for (float v : b.images) ASSERT_TRUE(v >= 0 && v <= 1);
    for (int64_t t = 0; t < b.NumTargets(); ++t) {
      const float* r = b.targets.data() + t * 6;
      EXPECT_GE(r[0], 0);
      EXPECT_LT(r[0], b.size);
      EXPECT_GE(r[1], 0);
      EXPECT_LT(r[1], 3);
      EXPECT_GE(r[2] - r[4] / 2, -1e-6);
      EXPECT_LE(r[2] + r[4] / 2, 1 + 1e-6);
      EXPECT_GT(r[4] * 64, 2 - 1e-4);
      EXPECT_GT(r[5] * 64, 2 - 1e-4);
    }
    targets += b.NumTargets();
  }
  EXPECT_GT(targets, 10);
  EXPECT_EQ(l->Stats().batches, 3);
  EXPECT_EQ(l->Stats().samples, 10);
}

TEST(LoaderTest, BatchesDoNotDependOnWorkersOrPrefetch) {
  const MemData& d = Synth(20);
  LoaderOptions a = TrainOptions(), b = TrainOptions();
  a.workers = 1, a.prefetch = 1;
  b.workers = 3, b.prefetch = 5;
  AugmentOptions aug = StrongAugment();
  aug.multi_scale = true;
  auto la = Make(d, a, aug), lb = Make(d, b, aug);
  ASSERT_TRUE(la && lb);
  bool sizes_vary = false;
  for (int epoch : {0, 1}) {
    auto ba = Epoch(*la, epoch), bb = Epoch(*lb, epoch, /*recycle=*/true);
    ASSERT_EQ(ba.size(), bb.size());
    for (size_t i = 0; i < ba.size(); ++i) {
      ExpectSameBatch(ba[i], bb[i]);
      sizes_vary |= ba[i].width != 64;
      EXPECT_EQ(ba[i].width % 32, 0);
    }
  }
  EXPECT_TRUE(sizes_vary);  // multi_scale picked another size somewhere
  // Different epochs differ.
  LoaderOptions c = TrainOptions();
  auto lc = Make(d, c, StrongAugment());
  auto e0 = Epoch(*lc, 0), e1 = Epoch(*lc, 1);
  EXPECT_FALSE(e0[0].images == e1[0].images);
}

TEST(LoaderTest, SkipToResumesBitIdentically) {
  const MemData& d = Synth(20);
  auto full = Make(d, TrainOptions(), StrongAugment());
  auto e1 = Epoch(*full, 1);
  ASSERT_EQ(e1.size(), 5u);
  LoaderOptions o = TrainOptions();
  o.workers = 3;
  auto resumed = Make(d, o, StrongAugment());
  ASSERT_TRUE(resumed->SkipTo(1, 3).IsOk());
  for (size_t k = 3; k < e1.size(); ++k) {
    auto b = resumed->Next();
    ASSERT_TRUE(b.IsOk() && b->has_value());
    ExpectSameBatch(**b, e1[k]);
  }
  auto end = resumed->Next();
  ASSERT_TRUE(end.IsOk());
  EXPECT_FALSE(end->has_value());
  // Restarting mid-epoch abandons the prefetched batches cleanly.
  ASSERT_TRUE(resumed->StartEpoch(1).IsOk());
  auto first = resumed->Next();
  ASSERT_TRUE(first.IsOk() && first->has_value());
  ExpectSameBatch(**first, e1[0]);
  EXPECT_EQ(resumed->SkipTo(1, 6).Code(), StatusCode::kInvalidArgument);
}

TEST(LoaderTest, BadSampleIsSkippedCountedAndReplaced) {
  const MemData& d = Synth(50);
  const std::string bad = d.manifest.entries[17].path;
  LoaderOptions o = TrainOptions();
  o.batch = 8;
  o.max_bad_fraction = 0.05;
  auto l = Make(d, o, {}, d.Source(bad));
  auto batches = Epoch(*l, 0);
  ASSERT_EQ(batches.size(), 7u);
  for (size_t i = 0; i + 1 < batches.size(); ++i) EXPECT_EQ(batches[i].size, 8);
  for (const Batch& b : batches) {
    for (const auto& p : b.paths) EXPECT_NE(p, bad);
  }
  LoaderStats s = l->Stats();
  EXPECT_EQ(s.bad_samples, 1);
  ASSERT_EQ(s.bad_paths.size(), 1u);
  EXPECT_EQ(s.bad_paths[0], bad);
  EXPECT_GT(s.decode_seconds, 0);

  // Deterministic with bad samples too.
  o.workers = 3;
  auto l2 = Make(d, o, {}, d.Source(bad));
  auto again = Epoch(*l2, 0);
  ASSERT_EQ(again.size(), batches.size());
  for (size_t i = 0; i < again.size(); ++i) ExpectSameBatch(again[i], batches[i]);

  // No tolerance: a "data:" error naming the file.
  o.max_bad_fraction = 0.0;
  auto strict = Make(d, o, {}, d.Source(bad));
  ASSERT_TRUE(strict->StartEpoch(0).IsOk());
  Status failure;
  for (int i = 0; i < 10 && failure.IsOk(); ++i) {
    auto b = strict->Next();
    if (!b.IsOk())
      failure = b.GetStatus();
    else if (!b->has_value())
      break;
  }
  EXPECT_EQ(failure.Code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(failure.Message().rfind("data:", 0), 0u) << failure.Message();
  EXPECT_NE(failure.Message().find(bad), std::string::npos) << failure.Message();
}

TEST(LoaderTest, CorruptedBlobInArtifactStoreIsABadSample) {
  const MemData& d = Synth(10);
  const fs::path root = fs::temp_directory_path() / ("kestrel_loader_" + std::to_string(::getpid()));
  fs::remove_all(root);
  store::LocalArtifactStore blobs(root.string());
  for (const auto& [path, bytes] : d.bytes) ASSERT_TRUE(blobs.Put(bytes).IsOk());
  const ManifestEntry& victim = d.manifest.entries[3];
  {
    std::string path = blobs.PathFor(victim.image_sha);
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add);
    std::FILE* f = std::fopen(path.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fseek(f, 100, SEEK_SET);
    std::fputc('X', f);
    std::fclose(f);
  }
  LoaderOptions o = TrainOptions();
  o.max_bad_fraction = 0.2;
  auto l = Make(d, o, {}, ArtifactImageSource(blobs));
  auto batches = Epoch(*l, 0);
  EXPECT_EQ(batches.size(), 3u);
  EXPECT_EQ(l->Stats().bad_samples, 1);
  EXPECT_EQ(l->Stats().bad_paths.at(0), victim.path);
  l.reset();
  fs::remove_all(root);
}

// An image store that does not answer (S3 down, the host's link cut) is not a
// bad image: the epoch fails with the store's kUnavailable (a retryable
// attempt failure), the image is not counted against max_bad_fraction (whose
// dataset_errors is permanent) and not skipped (found by the multi-host soak:
// an S3 restart made a job's attempt report 6 of 12 healthy images
// unreadable).
TEST(LoaderTest, UnreachableImageStoreFailsTheEpochInsteadOfSkippingImages) {
  const MemData& d = Synth(10);
  const std::string victim = d.manifest.entries[3].path;
  ImageSource outage = [&d, victim](const ManifestEntry& e) -> Result<std::string> {
    if (e.path == victim)
      return Status::Unavailable("S3 GetObject: Couldn't connect to server (after 4 tries)");
    return d.bytes.at(e.path);
  };
  LoaderOptions o = TrainOptions();
  o.max_bad_fraction = 0.5;  // a tolerance that would hide the outage if it counted as bad data
  auto l = Make(d, o, {}, outage);
  ASSERT_TRUE(l->StartEpoch(0).IsOk());
  Status failure;
  for (int i = 0; i < 10 && failure.IsOk(); ++i) {
    auto b = l->Next();
    if (!b.IsOk())
      failure = b.GetStatus();
    else if (!b->has_value())
      break;
  }
  EXPECT_EQ(failure.Code(), StatusCode::kUnavailable) << failure.ToString();
  EXPECT_NE(failure.Reason(), FailureReason::kDatasetErrors);
  EXPECT_EQ(l->Stats().bad_samples, 0);
}

TEST(LoaderTest, CloseMosaicTurnsMosaicOffInTheLastEpochs) {
  const MemData& d = Synth(8);
  LoaderOptions o = TrainOptions();
  o.epochs = 3;
  AugmentOptions with;  // mosaic 1.0
  with.close_mosaic = 1;
  AugmentOptions without;
  without.mosaic = 0;
  auto a = Make(d, o, with), b = Make(d, o, without);
  // Epoch 2 >= 3 - 1: no mosaic, so identical to a run without mosaic.
  auto a2 = Epoch(*a, 2), b2 = Epoch(*b, 2);
  ASSERT_EQ(a2.size(), b2.size());
  for (size_t i = 0; i < a2.size(); ++i) ExpectSameBatch(a2[i], b2[i]);
  // Epoch 1 still has mosaic.
  auto a1 = Epoch(*a, 1), b1 = Epoch(*b, 1);
  EXPECT_FALSE(a1[0].images == b1[0].images);
}

// The reference closes mosaic when its epoch counter equals epochs -
// close_mosaic (issue 28 item 6): a run shorter than close_mosaic never gets
// there. The boundary with close_mosaic 10: which 0-based epochs get mosaic.
TEST(MosaicOpenAtTest, ShortRunsKeepMosaicAsTheReferenceDoes) {
  auto open_epochs = [](int epochs, int close_mosaic) {
    std::vector<int> on;
    for (int e = 0; e < epochs; ++e)
      if (MosaicOpenAt(e, epochs, close_mosaic)) on.push_back(e);
    return on;
  };
  EXPECT_EQ(open_epochs(9, 10), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8}));  // never closes
  EXPECT_EQ(open_epochs(10, 10), std::vector<int>{});                            // closes at epoch 0
  EXPECT_EQ(open_epochs(11, 10), std::vector<int>{0});                           // closes at epoch 1
  EXPECT_EQ(open_epochs(1, 10), std::vector<int>{0});
  EXPECT_EQ(open_epochs(30, 10).size(), 20u);        // epochs 0..19, closed from 20 on
  EXPECT_EQ(open_epochs(5, 0).size(), 5u);           // close_mosaic 0: never closes
  EXPECT_EQ(open_epochs(3, 3), std::vector<int>{});  // equal: closed from epoch 0
}

// A 3-epoch run with the default close_mosaic 10 trains every epoch with
// mosaic (it used to train none), so its batches differ from mosaic=0's.
TEST(LoaderTest, RunShorterThanCloseMosaicKeepsMosaicInEveryEpoch) {
  const MemData& d = Synth(8);
  LoaderOptions o = TrainOptions();
  o.epochs = 3;
  AugmentOptions with;  // mosaic 1.0, close_mosaic 10
  AugmentOptions without;
  without.mosaic = 0;
  auto a = Make(d, o, with), b = Make(d, o, without);
  for (int e = 0; e < 3; ++e) {
    auto ae = Epoch(*a, e), be = Epoch(*b, e);
    ASSERT_FALSE(ae.empty());
    ASSERT_EQ(ae.size(), be.size());
    EXPECT_FALSE(ae[0].images == be[0].images) << "epoch " << e << " had no mosaic";
  }
}

// Val data: black images of various aspect ratios with one magenta rectangle.
MemData ValData() {
  MemData d;
  d.manifest.names = {"thing"};
  const int sizes[][2] = {{80, 40}, {30, 60}, {64, 64}, {100, 50}, {45, 90}};
  int i = 0;
  for (const auto& wh : sizes) {
    cv::Mat img(wh[1], wh[0], CV_8UC3, cv::Scalar(0, 0, 0));
    const int x1 = wh[0] / 4, y1 = wh[1] / 5, x2 = wh[0] * 3 / 4, y2 = wh[1] * 4 / 5;
    img(cv::Rect(x1, y1, x2 - x1, y2 - y1)).setTo(cv::Scalar(255, 0, 255));
    std::vector<Box> boxes = {{0, (x1 + x2) / 2.0 / wh[0], (y1 + y2) / 2.0 / wh[1], double(x2 - x1) / wh[0],
                               double(y2 - y1) / wh[1]}};
    std::vector<uint8_t> png;
    cv::imencode(".png", img, png);
    AddEntry(d, "v" + std::to_string(i++) + ".png", Split::kVal, std::string(png.begin(), png.end()), wh[0],
             wh[1], boxes);
  }
  return d;
}

// Checks targets against the magenta pixels and the original boxes.
void CheckValBatch(const Batch& b, const Manifest& m) {
  const size_t plane = static_cast<size_t>(b.height) * b.width;
  ASSERT_EQ(b.NumTargets(), b.size);
  for (int t = 0; t < b.size; ++t) {
    const float* r = b.targets.data() + t * 6;
    const int i = static_cast<int>(r[0]);
    const float* img = b.images.data() + static_cast<size_t>(i) * 3 * plane;
    int x1 = b.width, y1 = b.height, x2 = -1, y2 = -1;
    for (int y = 0; y < b.height; ++y) {
      for (int x = 0; x < b.width; ++x) {
        const size_t o = static_cast<size_t>(y) * b.width + x;
        if (img[o] > 0.7f && img[plane + o] < 0.3f && img[2 * plane + o] > 0.7f) {
          x1 = std::min(x1, x), y1 = std::min(y1, y), x2 = std::max(x2, x), y2 = std::max(y2, y);
        }
      }
    }
    EXPECT_NEAR((r[2] - r[4] / 2) * b.width, x1, 1.0);
    EXPECT_NEAR((r[2] + r[4] / 2) * b.width, x2 + 1, 1.0);
    EXPECT_NEAR((r[3] - r[5] / 2) * b.height, y1, 1.0);
    EXPECT_NEAR((r[3] + r[5] / 2) * b.height, y2 + 1, 1.0);
    // Back to original pixels with the letterbox parameters.
    const auto& lb = b.letterbox[i];
    const ManifestEntry* e = nullptr;
    for (const auto& x : m.entries) e = x.path == b.paths[i] ? &x : e;
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(b.orig_hw[i][0], e->height);
    EXPECT_EQ(b.orig_hw[i][1], e->width);
    const double ox1 = ((r[2] - r[4] / 2) * b.width - lb[1]) / lb[0];
    EXPECT_NEAR(ox1, (e->boxes[0].cx - e->boxes[0].w / 2) * e->width, 1e-3);
    const double oy2 = ((r[3] + r[5] / 2) * b.height - lb[2]) / lb[0];
    EXPECT_NEAR(oy2, (e->boxes[0].cy + e->boxes[0].h / 2) * e->height, 1e-3);
  }
}

TEST(LoaderTest, ValModeLetterboxesWithExactTargets) {
  MemData d = ValData();
  LoaderOptions o = TrainOptions();
  o.augment = false;
  o.shuffle = false;
  o.batch = 2;
  auto l = Make(d, o, {}, d.Source(), Split::kVal);
  auto batches = Epoch(*l, 0);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].paths[0], "v0.png");  // manifest order
  for (const Batch& b : batches) {
    EXPECT_EQ(b.width, 64);
    EXPECT_EQ(b.height, 64);
    CheckValBatch(b, d.manifest);
  }
  // Rect: per-batch shapes, multiples of the stride, never above imgsz + stride.
  o.rect = true;
  auto r = Make(d, o, {}, d.Source(), Split::kVal);
  bool non_square = false;
  for (const Batch& b : Epoch(*r, 0)) {
    EXPECT_EQ(b.width % 32, 0);
    EXPECT_EQ(b.height % 32, 0);
    non_square |= b.width != b.height;
    CheckValBatch(b, d.manifest);
  }
  EXPECT_TRUE(non_square);
}

// rect=true for training (issue 28 item 4), as the reference's train
// loader: six images of mixed aspect ratio in aspect order (h/w: A .42,
// B .6, C 1, F 1.4, D 1.5, E 2.5), batches of 2 at imgsz 128, stride 32, no
// border (the reference's train pad 0.0). By hand, ceil(rel * 128 / 32 +
// pad) * 32 per side:
//   [A, B] all wide, rel h = max h/w .6: H ceil(2.4) = 3 -> 96, W 128;
//   [C, F] mixed: 128 x 128;
//   [D, E] all tall, rel w = 1 / 1.5: W ceil(2.67) = 3 -> 96, H 128.
// With the val border (pad 0.5): 96 x 160, 160 x 160, 160 x 128.
// Augmented samples keep exactly their own box (no mosaic, no mixup, though
// mosaic=1 and mixup=1 are asked for), letterboxed into the batch shape.
MemData AspectData() {
  MemData d;
  d.manifest.names = {"thing"};
  const int sizes[][2] = {{120, 50}, {100, 60}, {64, 64}, {60, 90}, {40, 100}, {50, 70}};  // A B C D E F
  const char* names[] = {"A.png", "B.png", "C.png", "D.png", "E.png", "F.png"};
  for (int i = 0; i < 6; ++i) {
    const int w = sizes[i][0], h = sizes[i][1];
    cv::Mat img(h, w, CV_8UC3, cv::Scalar(0, 0, 0));
    const int x1 = w / 4, y1 = h / 5, x2 = w * 3 / 4, y2 = h * 4 / 5;
    img(cv::Rect(x1, y1, x2 - x1, y2 - y1)).setTo(cv::Scalar(255, 0, 255));
    std::vector<uint8_t> png;
    cv::imencode(".png", img, png);
    AddEntry(d, names[i], Split::kTrain, std::string(png.begin(), png.end()), w, h,
             {{0, (x1 + x2) / 2.0 / w, (y1 + y2) / 2.0 / h, double(x2 - x1) / w, double(y2 - y1) / h}});
  }
  return d;
}

TEST(LoaderTest, TrainRectBatchesHaveTheHandComputedShapesInAspectOrder) {
  MemData d = AspectData();
  LoaderOptions o = TrainOptions();
  o.imgsz = 128;
  o.batch = 2;
  o.rect = true;
  o.rect_pad = 0.0;
  // Shuffled rect batches are refused by name (the trainer turns shuffle off).
  auto shuffled = Loader::Create(d.manifest, Split::kTrain, d.Source(), o, {});
  ASSERT_FALSE(shuffled.IsOk());
  EXPECT_EQ(shuffled.GetStatus().Where().field, "rect");
  o.shuffle = false;
  AugmentOptions a;  // mosaic 1.0 and mixup 1.0: rect must leave both out
  a.mixup = 1.0;
  a.hsv_h = a.hsv_s = a.hsv_v = 0;  // the magenta stays magenta for the pixel check
  a.translate = 0;
  a.scale = 0;
  auto l = Make(d, o, a);
  ASSERT_NE(l, nullptr);
  const std::vector<std::array<int, 2>> want_hw = {{96, 128}, {128, 128}, {128, 96}};
  const std::vector<std::vector<std::string>> want_paths = {
      {"A.png", "B.png"}, {"C.png", "F.png"}, {"D.png", "E.png"}};
  for (int e = 0; e < 2; ++e) {
    auto batches = Epoch(*l, e);
    EXPECT_FALSE(l->MosaicOn());
    ASSERT_EQ(batches.size(), 3u);
    for (size_t k = 0; k < 3; ++k) {
      const Batch& b = batches[k];
      EXPECT_EQ((std::array<int, 2>{b.height, b.width}), want_hw[k]) << "epoch " << e << " batch " << k;
      EXPECT_EQ(b.paths, want_paths[k]) << "epoch " << e << " batch " << k;  // same order every epoch
      // One box per image (a mosaic or mixup would bring others), on the
      // magenta pixels of the letterboxed image.
      const size_t plane = static_cast<size_t>(b.height) * b.width;
      ASSERT_EQ(b.NumTargets(), b.size);
      for (int t = 0; t < b.size; ++t) {
        const float* r = b.targets.data() + t * 6;
        const float* img = b.images.data() + static_cast<size_t>(r[0]) * 3 * plane;
        int x1 = b.width, y1 = b.height, x2 = -1, y2 = -1;
        for (int y = 0; y < b.height; ++y) {
          for (int x = 0; x < b.width; ++x) {
            const size_t p = static_cast<size_t>(y) * b.width + x;
            if (img[p] > 0.7f && img[plane + p] < 0.3f && img[2 * plane + p] > 0.7f)
              x1 = std::min(x1, x), y1 = std::min(y1, y), x2 = std::max(x2, x), y2 = std::max(y2, y);
          }
        }
        EXPECT_NEAR((r[2] - r[4] / 2) * b.width, x1, 1.5) << b.paths[t];
        EXPECT_NEAR((r[2] + r[4] / 2) * b.width, x2 + 1, 1.5) << b.paths[t];
        EXPECT_NEAR((r[3] - r[5] / 2) * b.height, y1, 1.5) << b.paths[t];
        EXPECT_NEAR((r[3] + r[5] / 2) * b.height, y2 + 1, 1.5) << b.paths[t];
      }
    }
  }
  // The val border: the same order, half a stride more before rounding up.
  o.rect_pad = 0.5;
  o.augment = false;
  auto v = Make(d, o);
  const std::vector<std::array<int, 2>> val_hw = {{96, 160}, {160, 160}, {160, 128}};
  auto vb = Epoch(*v, 0);
  ASSERT_EQ(vb.size(), 3u);
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ((std::array<int, 2>{vb[k].height, vb[k].width}), val_hw[k]) << k;
}

// time= re-plans a run's epochs (train/trainer.cc): SetEpochs moves the
// close_mosaic point to the new end. close_mosaic 2 of 100 epochs: epoch 3
// has mosaic; re-planned to 5 epochs it is one of the last 2 and has none
// (batches identical to a mosaic=0 loader's).
TEST(LoaderTest, SetEpochsMovesTheCloseMosaicPointToTheNewEnd) {
  const MemData& d = Synth(8);
  LoaderOptions o = TrainOptions();
  o.epochs = 100;
  AugmentOptions with;
  with.close_mosaic = 2;
  AugmentOptions without;
  without.mosaic = 0;
  auto a = Make(d, o, with), b = Make(d, o, without);
  auto a3 = Epoch(*a, 3), b3 = Epoch(*b, 3);
  EXPECT_TRUE(a->MosaicOn());
  ASSERT_FALSE(a3.empty());
  EXPECT_FALSE(a3[0].images == b3[0].images);
  ASSERT_TRUE(a->SetEpochs(5).IsOk());
  a3 = Epoch(*a, 3);
  EXPECT_FALSE(a->MosaicOn());
  ASSERT_EQ(a3.size(), b3.size());
  for (size_t i = 0; i < a3.size(); ++i) ExpectSameBatch(a3[i], b3[i]);
  EXPECT_EQ(a->SetEpochs(0).Code(), StatusCode::kInvalidArgument);
}

TEST(LoaderTest, OptionErrorsAndShutdownMidEpoch) {
  const MemData& d = Synth(10);
  LoaderOptions o = TrainOptions();
  o.imgsz = 70;
  auto bad = Loader::Create(d.manifest, Split::kTrain, d.Source(), o, {});
  ASSERT_FALSE(bad.IsOk());
  EXPECT_EQ(bad.GetStatus().Where().field, "imgsz");
  auto empty = Loader::Create(d.manifest, Split::kVal, d.Source(), TrainOptions(), {});
  EXPECT_EQ(empty.GetStatus().Code(), StatusCode::kFailedPrecondition);
  auto l = Make(d, TrainOptions());
  EXPECT_EQ(l->Next().GetStatus().Code(), StatusCode::kFailedPrecondition);  // no epoch yet
  ASSERT_TRUE(l->StartEpoch(0).IsOk());
  ASSERT_TRUE(l->Next().IsOk());
  l.reset();  // workers busy or waiting: must join without hanging
}

// cache=ram and cache=disk (train key `cache`) give the batches of
// cache=false byte for byte, read each image once, and a second loader on the
// same disk folder decodes nothing (the files are reused).
TEST(LoaderTest, CachedBatchesEqualUncachedAndDiskFilesAreReused) {
  const MemData& d = Synth(12);
  LoaderOptions o = TrainOptions();
  o.imgsz = 32;  // the 64 px images are resized on load: the cache holds the resized ones
  const AugmentOptions aug = StrongAugment();
  auto counted = [&d](std::atomic<int>& n) {
    ImageSource inner = d.Source();
    return [inner, &n](const ManifestEntry& e) {
      ++n;
      return inner(e);
    };
  };
  std::atomic<int> plain_reads{0}, ram_reads{0}, disk_reads{0}, disk2_reads{0};
  auto plain = Make(d, o, aug, counted(plain_reads));
  const fs::path dir = fs::temp_directory_path() / ("kestrel-cache-test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  LoaderOptions ro = o, dopt = o;
  ro.cache = "ram";
  dopt.cache = "disk";
  dopt.cache_dir = dir.string();
  ro.workers = dopt.workers = 1;  // exact read counts (bytes do not depend on workers)
  auto ram = Make(d, ro, aug, counted(ram_reads));
  auto disk = Make(d, dopt, aug, counted(disk_reads));
  ASSERT_TRUE(plain && ram && disk);
  for (int epoch : {0, 1, 3}) {  // 3: mosaic closed (close_mosaic 1 of 4 epochs)
    auto p = Epoch(*plain, epoch), r = Epoch(*ram, epoch), k = Epoch(*disk, epoch);
    ASSERT_EQ(p.size(), r.size());
    ASSERT_EQ(p.size(), k.size());
    for (size_t i = 0; i < p.size(); ++i) {
      ExpectSameBatch(p[i], r[i]);
      ExpectSameBatch(p[i], k[i]);
    }
  }
  EXPECT_GT(plain_reads.load(), 3 * 12);  // mosaic reads 4 images per sample
  EXPECT_EQ(ram_reads.load(), 12);        // each image once
  EXPECT_EQ(disk_reads.load(), 12);
  int files = 0;
  for (const auto& f : fs::directory_iterator(dir)) files += f.path().extension() == ".bin";
  EXPECT_EQ(files, 12);

  auto disk2 = Make(d, dopt, aug, counted(disk2_reads));
  ASSERT_TRUE(disk2);
  auto p = Epoch(*plain, 2), k2 = Epoch(*disk2, 2);
  ASSERT_EQ(p.size(), k2.size());
  for (size_t i = 0; i < p.size(); ++i) ExpectSameBatch(p[i], k2[i]);
  EXPECT_EQ(disk2_reads.load(), 0);

  // A damaged file is a miss (decoded again and rewritten), never wrong pixels.
  const fs::path one = *fs::directory_iterator(dir);
  { std::ofstream(one, std::ios::binary | std::ios::in | std::ios::out).seekp(100).put('\x7f'); }
  std::atomic<int> disk3_reads{0};
  auto disk3 = Make(d, dopt, aug, counted(disk3_reads));
  auto k3 = Epoch(*disk3, 2);
  for (size_t i = 0; i < p.size(); ++i) ExpectSameBatch(p[i], k3[i]);
  EXPECT_EQ(disk3_reads.load(), 1);
  fs::remove_all(dir);
}

TEST(LoaderTest, CacheRamBeyondAvailableMemoryIsRefusedNamingCache) {
  const MemData& d = Synth(10);
  LoaderOptions o = TrainOptions();
  o.cache = "true";          // = ram
  o.cache_ram_limit = 1000;  // 10 images of 64x64x3 need 122880 bytes
  auto l = Loader::Create(d.manifest, Split::kTrain, d.Source(), o, {});
  ASSERT_FALSE(l.IsOk());
  EXPECT_EQ(l.GetStatus().Code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(l.GetStatus().Where().field, "cache");
  EXPECT_NE(l.GetStatus().ToString().find("cache=disk"), std::string::npos) << l.GetStatus().ToString();
  o.cache = "maybe";
  auto bad = Loader::Create(d.manifest, Split::kTrain, d.Source(), o, {});
  ASSERT_FALSE(bad.IsOk());
  EXPECT_EQ(bad.GetStatus().Where().field, "cache");
}

TEST(PreviewTest, WritesAGridPng) {
  const MemData& d = Synth(10);
  const std::string out =
      (fs::temp_directory_path() / ("kestrel_preview_" + std::to_string(::getpid()) + ".png")).string();
  LoaderOptions o = TrainOptions();
  Status s = WriteAugmentedPreview(d.manifest, d.Source(), StrongAugment(), o, d.manifest.names, out, 4);
  ASSERT_TRUE(s.IsOk()) << s.ToString();
  cv::Mat img = cv::imread(out);
  EXPECT_EQ(img.cols, 128);
  EXPECT_EQ(img.rows, 128);
  fs::remove(out);
}

}  // namespace
}  // namespace kestrel::data
