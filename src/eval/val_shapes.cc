#include "eval/val_shapes.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <string>

namespace kestrel::eval {
namespace {

// numpy's default argsort (introsort: median-of-3 quicksort, insertion sort
// below 17 elements, heapsort past the depth limit) on doubles, step for
// step, so that images with equal aspect ratios fall into the same batches
// as in the reference, which cuts `ar.argsort()` into batches.
// Moves `tmp` down from heap position i of the 1-based max-heap a[1..n]
// (ordered by v[a[k]]), as numpy's heapsort does.
void SiftDown(const std::vector<double>& v, int64_t* a, int64_t i, int64_t n, int64_t tmp) {
  for (int64_t j = i << 1; j <= n;) {
    if (j < n && v[a[j]] < v[a[j + 1]]) j += 1;
    if (!(v[tmp] < v[a[j]])) break;
    a[i] = a[j];
    i = j;
    j += j;
  }
  a[i] = tmp;
}

void NumpyHeapArgsort(const std::vector<double>& v, int64_t* tosort, int64_t n) {
  int64_t* a = tosort - 1;  // 1-based heap indexing
  for (int64_t l = n >> 1; l > 0; --l) SiftDown(v, a, l, n, a[l]);
  for (; n > 1;) {
    const int64_t tmp = a[n];
    a[n] = a[1];
    n -= 1;
    SiftDown(v, a, 1, n, tmp);
  }
}

std::vector<int64_t> NumpyArgsort(const std::vector<double>& v) {
  const int64_t num = static_cast<int64_t>(v.size());
  std::vector<int64_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), int64_t{0});
  if (num < 2) return idx;
  constexpr int64_t kSmall = 15;
  int64_t* pl = idx.data();
  int64_t* pr = idx.data() + num - 1;
  std::vector<int64_t*> stack;
  std::vector<int> depth;
  int msb = 0;
  for (int64_t u = num; u > 1; u >>= 1) ++msb;
  int cdepth = msb * 2;
  for (;;) {
    if (cdepth < 0) {
      NumpyHeapArgsort(v, pl, pr - pl + 1);
    } else {
      while ((pr - pl) > kSmall) {
        int64_t* pm = pl + ((pr - pl) >> 1);
        if (v[*pm] < v[*pl]) std::swap(*pm, *pl);
        if (v[*pr] < v[*pm]) std::swap(*pr, *pm);
        if (v[*pm] < v[*pl]) std::swap(*pm, *pl);
        const double vp = v[*pm];
        int64_t* pi = pl;
        int64_t* pj = pr - 1;
        std::swap(*pm, *pj);
        for (;;) {
          do ++pi;
          while (v[*pi] < vp);
          do --pj;
          while (vp < v[*pj]);
          if (pi >= pj) break;
          std::swap(*pi, *pj);
        }
        int64_t* pk = pr - 1;
        std::swap(*pi, *pk);
        // The larger part goes on the stack.
        if (pi - pl < pr - pi) {
          stack.push_back(pi + 1);
          stack.push_back(pr);
          pr = pi - 1;
        } else {
          stack.push_back(pl);
          stack.push_back(pi - 1);
          pl = pi + 1;
        }
        depth.push_back(--cdepth);
      }
      for (int64_t* pi = pl + 1; pi <= pr; ++pi) {
        const int64_t vi = *pi;
        const double vpi = v[vi];
        int64_t* pj = pi;
        int64_t* pk = pi - 1;
        while (pj > pl && vpi < v[*pk]) *pj-- = *pk--;
        *pj = vi;
      }
    }
    if (stack.empty()) break;
    pr = stack.back();
    stack.pop_back();
    pl = stack.back();
    stack.pop_back();
    cdepth = depth.back();
    depth.pop_back();
  }
  return idx;
}

}  // namespace

Status ValShapeOptions::Validate() const {
  auto bad = [](const char* field, const std::string& msg) {
    return Status::InvalidArgument(msg, {"", 0, field});
  };
  if (stride < 1) return bad("stride", "must be >= 1, got " + std::to_string(stride));
  if (imgsz < stride || imgsz % stride != 0) {
    return bad("imgsz", "must be a positive multiple of the stride " + std::to_string(stride) + ", got " +
                            std::to_string(imgsz));
  }
  if (batch < 1) return bad("batch", "must be >= 1, got " + std::to_string(batch));
  if (!(pad >= 0 && std::isfinite(pad))) return bad("pad", "must be a finite number >= 0");
  return {};
}

std::vector<ValBatchShape> PlanValBatches(const std::vector<ImageSize>& sizes, const ValShapeOptions& opts) {
  const size_t n = sizes.size();
  const size_t per = static_cast<size_t>(std::max(1, opts.batch));
  std::vector<ValBatchShape> out;
  if (!opts.rect) {
    for (size_t s = 0; s < n; s += per) {
      ValBatchShape b;
      for (size_t i = s; i < std::min(n, s + per); ++i) b.images.push_back(i);
      b.height = b.width = opts.imgsz;
      out.push_back(std::move(b));
    }
    return out;
  }
  std::vector<double> ar(n);
  for (size_t i = 0; i < n; ++i) {
    const ImageSize& z = sizes[i];
    ar[i] = (z.width > 0 && z.height > 0) ? double(z.height) / double(z.width) : 1.0;
  }
  const std::vector<int64_t> order = NumpyArgsort(ar);
  // Same operation order as the reference: ceil(rel * imgsz / stride + pad) * stride.
  auto side = [&](double rel) {
    return static_cast<int>(std::ceil(rel * opts.imgsz / opts.stride + opts.pad)) * opts.stride;
  };
  for (size_t s = 0; s < n; s += per) {
    const size_t e = std::min(n, s + per);
    ValBatchShape b;
    for (size_t k = s; k < e; ++k) b.images.push_back(static_cast<size_t>(order[k]));
    const double mini = ar[size_t(order[s])], maxi = ar[size_t(order[e - 1])];
    double rel_h = 1, rel_w = 1;
    if (maxi < 1) {
      rel_h = maxi;
    } else if (mini > 1) {
      rel_w = 1 / mini;
    }
    b.height = side(rel_h);
    b.width = side(rel_w);
    out.push_back(std::move(b));
  }
  return out;
}

ValGeometry ComputeValGeometry(int width, int height, int imgsz, int input_width, int input_height) {
  ValGeometry g;
  g.input_width = input_width;
  g.input_height = input_height;
  g.resized_width = width;
  g.resized_height = height;
  const double r = double(imgsz) / double(std::max(width, height));
  if (r != 1.0) {
    g.resized_width = std::min(static_cast<int>(std::ceil(width * r)), imgsz);
    g.resized_height = std::min(static_cast<int>(std::ceil(height * r)), imgsz);
  }
  // Step 2 never enlarges (the reference's scaleup=False).
  const double r2 =
      std::min({double(input_height) / g.resized_height, double(input_width) / g.resized_width, 1.0});
  g.placed_width = static_cast<int>(std::nearbyint(g.resized_width * r2));
  g.placed_height = static_cast<int>(std::nearbyint(g.resized_height * r2));
  const double dw = (input_width - g.placed_width) / 2.0, dh = (input_height - g.placed_height) / 2.0;
  g.letterbox.scale = double(g.resized_height) / double(height);
  g.letterbox.pad_x = std::nearbyint(dw - 0.1);
  g.letterbox.pad_y = std::nearbyint(dh - 0.1);
  return g;
}

ValGeometry ComputeSquareGeometry(int width, int height, int size) {
  ValGeometry g;
  g.input_width = g.input_height = size;
  g.letterbox = ComputeLetterbox(width, height, size, size);
  g.resized_width = g.placed_width = static_cast<int>(std::nearbyint(width * g.letterbox.scale));
  g.resized_height = g.placed_height = static_cast<int>(std::nearbyint(height * g.letterbox.scale));
  return g;
}

Status ValLetterboxToChw(const uint8_t* pixels, int rows, int cols, size_t row_bytes, const ValGeometry& g,
                         float* chw) {
  if (pixels == nullptr || chw == nullptr || rows <= 0 || cols <= 0 || row_bytes < size_t(cols) * 3) {
    return Status::InvalidArgument("val letterbox: bad image buffer");
  }
  try {
    // The caller's pixels are only read (cv::Mat header without a copy).
    const cv::Mat src(rows, cols, CV_8UC3, const_cast<uint8_t*>(pixels), row_bytes);
    cv::Mat resized = src;
    if (g.resized_width != cols || g.resized_height != rows) {
      cv::resize(src, resized, cv::Size(g.resized_width, g.resized_height), 0, 0, cv::INTER_LINEAR);
    }
    cv::Mat placed = resized;
    if (g.placed_width != g.resized_width || g.placed_height != g.resized_height) {
      cv::resize(resized, placed, cv::Size(g.placed_width, g.placed_height), 0, 0, cv::INTER_LINEAR);
    }
    const int W = g.input_width, H = g.input_height;
    const int left = static_cast<int>(g.letterbox.pad_x), top = static_cast<int>(g.letterbox.pad_y);
    const int64_t plane = int64_t(W) * H;
    const float grey = 114.0f / 255.0f;
    std::fill(chw, chw + 3 * plane, grey);
    const int w = std::min(placed.cols, W - left), h = std::min(placed.rows, H - top);
    for (int y = 0; y < h; ++y) {
      const uint8_t* row = placed.ptr<uint8_t>(y);
      const int64_t o = int64_t(y + top) * W + left;
      for (ptrdiff_t x = 0; x < w; ++x) {
        chw[o + x] = row[3 * x] * (1.0f / 255.0f);
        chw[plane + o + x] = row[3 * x + 1] * (1.0f / 255.0f);
        chw[2 * plane + o + x] = row[3 * x + 2] * (1.0f / 255.0f);
      }
    }
  } catch (const cv::Exception& e) {
    return Status::InvalidArgument(std::string("val letterbox: OpenCV: ") + e.what());
  }
  return {};
}

Box ValLabelRoundTrip(const Box& b, const ValGeometry& g, int width, int height) {
  // float32 like the reference: normalized label -> resized pixels (+ pad) ->
  // minus pad, divided by the height ratio.
  const float sx = float(g.resized_width) / float(width), sy = float(g.resized_height) / float(height);
  const float gain = float(g.letterbox.scale);
  const Box m{b.x1 * sx / gain, b.y1 * sy / gain, b.x2 * sx / gain, b.y2 * sy / gain};
  return ClipBox(m, width, height);
}

}  // namespace kestrel::eval
