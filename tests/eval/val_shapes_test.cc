// The validation batch rule (eval/val_shapes.h PlanValBatches /
// ComputeValGeometry, ComputeSquareGeometry, the letterbox): runs everywhere.
#include "eval/val_shapes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

namespace kestrel::eval {
namespace {

ValShapeOptions Opts(int imgsz, int batch, bool rect = true, double pad = 0.5) {
  ValShapeOptions o;
  o.imgsz = imgsz;
  o.batch = batch;
  o.rect = rect;
  o.pad = pad;
  return o;
}

TEST(ValShapes, WideBatchGetsHeightFromLargestRatioPlusHalfStride) {
  // r = 480 / 640 = 0.75: h = ceil(0.75 * 640 / 32 + 0.5) * 32 = 512, w = ceil(20.5) * 32 = 672.
  const auto plan = PlanValBatches({{640, 480}, {640, 480}}, Opts(640, 2));
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].height, 512);
  EXPECT_EQ(plan[0].width, 672);
  const auto no_pad = PlanValBatches({{640, 480}, {640, 480}}, Opts(640, 2, true, 0.0));
  EXPECT_EQ(no_pad[0].height, 480);
  EXPECT_EQ(no_pad[0].width, 640);
}

TEST(ValShapes, TallBatchGetsWidthFromSmallestRatio) {
  const auto plan = PlanValBatches({{480, 640}, {300, 600}}, Opts(640, 2));
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].height, 672);
  EXPECT_EQ(plan[0].width, 512);  // 1 / r_min = 0.75
}

TEST(ValShapes, MixedBatchIsSquareWithPadding) {
  const auto plan = PlanValBatches({{640, 480}, {480, 640}}, Opts(640, 2));
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].height, 672);
  EXPECT_EQ(plan[0].width, 672);
  // Square images at imgsz 320 are evaluated at 352 x 352.
  const auto sq = PlanValBatches(std::vector<ImageSize>(24, {320, 320}), Opts(320, 16));
  ASSERT_EQ(sq.size(), 2u);
  EXPECT_EQ(sq[0].images.size(), 16u);
  EXPECT_EQ(sq[1].images.size(), 8u);
  for (const auto& b : sq) {
    EXPECT_EQ(b.height, 352);
    EXPECT_EQ(b.width, 352);
  }
}

TEST(ValShapes, ImagesAreSortedByAspectRatioThenCut) {
  // r = 1.5, 0.5, 1.0, 0.8 -> order 1, 3, 2, 0.
  const std::vector<ImageSize> sizes = {{400, 600}, {600, 300}, {500, 500}, {500, 400}};
  const auto plan = PlanValBatches(sizes, Opts(640, 2));
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].images, (std::vector<size_t>{1, 3}));
  EXPECT_EQ(plan[0].height, 544);  // ceil(0.8 * 20 + 0.5) * 32
  EXPECT_EQ(plan[0].width, 672);
  EXPECT_EQ(plan[1].images, (std::vector<size_t>{2, 0}));
  EXPECT_EQ(plan[1].height, 672);  // r_min = 1.0 is not > 1
  EXPECT_EQ(plan[1].width, 672);
}

TEST(ValShapes, EveryImageExactlyOnceWithManyTies) {
  std::vector<ImageSize> sizes;
  const ImageSize kinds[] = {{480, 320}, {320, 416}, {320, 360}, {384, 320}};
  for (int i = 0; i < 203; ++i) sizes.push_back(kinds[i % 4]);
  for (int batch : {1, 5, 16, 64, 300}) {
    const auto plan = PlanValBatches(sizes, Opts(320, batch));
    std::vector<size_t> all;
    double last_r = 0;
    for (size_t k = 0; k < plan.size(); ++k) {
      if (k + 1 < plan.size()) {
        EXPECT_EQ(plan[k].images.size(), size_t(batch));
      }
      for (size_t i : plan[k].images) {
        const double r = double(sizes[i].height) / sizes[i].width;
        EXPECT_GE(r, last_r);  // sorted
        last_r = r;
        all.push_back(i);
      }
    }
    std::sort(all.begin(), all.end());
    std::vector<size_t> want(sizes.size());
    std::iota(want.begin(), want.end(), size_t{0});
    EXPECT_EQ(all, want) << "batch " << batch;
  }
}

TEST(ValShapes, RectFalseKeepsSplitOrderAtImgsz) {
  const std::vector<ImageSize> sizes = {{400, 600}, {600, 300}, {500, 500}};
  const auto plan = PlanValBatches(sizes, Opts(320, 2, false));
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].images, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(plan[1].images, (std::vector<size_t>{2}));
  for (const auto& b : plan) {
    EXPECT_EQ(b.height, 320);
    EXPECT_EQ(b.width, 320);
  }
}

TEST(ValShapes, OptionsAreValidated) {
  EXPECT_TRUE(Opts(320, 16).Validate().IsOk());
  EXPECT_FALSE(Opts(330, 16).Validate().IsOk());
  EXPECT_FALSE(Opts(320, 0).Validate().IsOk());
  EXPECT_FALSE(Opts(320, 16, true, -0.5).Validate().IsOk());
}

TEST(ValGeometry, LongSideToImgszWithCeilThenCentredPads) {
  // 480 x 320 -> 320 x ceil(213.3) = 214, into 352 x 352: pads 16, round(68.9) = 69.
  ValGeometry g = ComputeValGeometry(480, 320, 320, 352, 352);
  EXPECT_EQ(g.resized_width, 320);
  EXPECT_EQ(g.resized_height, 214);
  EXPECT_EQ(g.placed_width, 320);
  EXPECT_EQ(g.placed_height, 214);
  EXPECT_EQ(g.letterbox.pad_x, 16);
  EXPECT_EQ(g.letterbox.pad_y, 69);
  EXPECT_DOUBLE_EQ(g.letterbox.scale, 214.0 / 320.0);  // the height ratio
  // 320 x 360 -> ceil(284.4) = 285 x 320, into 320 wide: dw = 17.5 -> left round(17.4) = 17.
  g = ComputeValGeometry(320, 360, 320, 320, 352);
  EXPECT_EQ(g.resized_width, 285);
  EXPECT_EQ(g.resized_height, 320);
  EXPECT_EQ(g.letterbox.pad_x, 17);
  EXPECT_EQ(g.letterbox.pad_y, 16);
  // Already imgsz: no resize, no scaling up into the bigger input.
  g = ComputeValGeometry(320, 320, 320, 352, 352);
  EXPECT_EQ(g.placed_width, 320);
  EXPECT_DOUBLE_EQ(g.letterbox.scale, 1.0);
  EXPECT_EQ(g.letterbox.pad_x, 16);
  // Small images are enlarged to imgsz.
  g = ComputeValGeometry(100, 50, 320, 352, 352);
  EXPECT_EQ(g.resized_width, 320);
  EXPECT_EQ(g.resized_height, 160);
}

TEST(ValGeometry, LetterboxWritesGreyBorderAndPixels) {
  std::vector<uint8_t> img(32 * 32 * 3);
  for (size_t i = 0; i < img.size(); i += 3) img[i] = 10, img[i + 1] = 20, img[i + 2] = 30;
  const ValGeometry g = ComputeValGeometry(32, 32, 32, 64, 64);
  std::vector<float> chw(3 * 64 * 64, -1.0f);
  ASSERT_TRUE(ValLetterboxToChw(img.data(), 32, 32, 32 * 3, g, chw.data()).IsOk());
  const int plane = 64 * 64;
  EXPECT_FLOAT_EQ(chw[0], 114.0f / 255.0f);
  EXPECT_FLOAT_EQ(chw[16 * 64 + 16], 10.0f / 255.0f);
  EXPECT_FLOAT_EQ(chw[plane + 47 * 64 + 47], 20.0f / 255.0f);
  EXPECT_FLOAT_EQ(chw[2 * plane + 47 * 64 + 48], 114.0f / 255.0f);
  EXPECT_FALSE(ValLetterboxToChw(nullptr, 32, 32, 96, g, chw.data()).IsOk());
}

// predict's square letterbox (what model::Predictor and the ONNX runner both
// use): a white box in a 128 x 64 image lands in the 64 x 64 input at half
// scale, 16 px down, and maps back to where it was within one pixel.
TEST(ValGeometry, SquareLetterboxRoundTripMapsABoxBackWithinOnePixel) {
  const int w = 128, h = 64;
  std::vector<uint8_t> img(size_t(w) * h * 3, 0);
  for (int y = 10; y < 40; ++y)
    for (int x = 20; x < 60; ++x)
      for (int c = 0; c < 3; ++c) img[(size_t(y) * w + x) * 3 + c] = 255;
  const ValGeometry g = ComputeSquareGeometry(w, h, 64);
  EXPECT_NEAR(g.letterbox.scale, 0.5, 1e-12);
  EXPECT_EQ(g.letterbox.pad_x, 0);
  EXPECT_EQ(g.letterbox.pad_y, 16);
  EXPECT_EQ(g.placed_width, 64);
  EXPECT_EQ(g.placed_height, 32);
  std::vector<float> chw(3 * 64 * 64, -1.0f);
  ASSERT_TRUE(ValLetterboxToChw(img.data(), h, w, size_t(w) * 3, g, chw.data()).IsOk());
  EXPECT_FLOAT_EQ(chw[0], 114.0f / 255.0f) << "pad value";
  int x1 = 64, y1 = 64, x2 = -1, y2 = -1;
  for (int y = 0; y < 64; ++y) {
    for (int x = 0; x < 64; ++x) {
      if (chw[size_t(y) * 64 + x] > 200.0f / 255.0f) {
        x1 = std::min(x1, x), y1 = std::min(y1, y), x2 = std::max(x2, x + 1), y2 = std::max(y2, y + 1);
      }
    }
  }
  const Box back = ScaleToOriginal(Box{float(x1), float(y1), float(x2), float(y2)}, g.letterbox, w, h);
  EXPECT_NEAR(back.x1, 20, 1.0);
  EXPECT_NEAR(back.y1, 10, 1.0);
  EXPECT_NEAR(back.x2, 60, 1.0);
  EXPECT_NEAR(back.y2, 40, 1.0);
}

TEST(ValGeometry, LabelRoundTripIsIdentityWhenTheResizeKeptTheAspect) {
  const ValGeometry g = ComputeValGeometry(640, 640, 320, 352, 352);
  const Box b{10, 20, 300, 400};
  const Box r = ValLabelRoundTrip(b, g, 640, 640);
  EXPECT_NEAR(r.x1, 10, 1e-4);
  EXPECT_NEAR(r.y2, 400, 1e-4);
  // 480 x 320 -> 320 x 214: x is stretched by (320 / 480) / (214 / 320).
  const ValGeometry w = ComputeValGeometry(480, 320, 320, 352, 352);
  const Box rw = ValLabelRoundTrip(Box{0, 0, 300, 300}, w, 480, 320);
  EXPECT_NEAR(rw.x2, 300 * (320.0 / 480.0) / (214.0 / 320.0), 1e-3);
  EXPECT_NEAR(rw.y2, 300, 1e-3);
}

}  // namespace
}  // namespace kestrel::eval
