#include "data/loader.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <numeric>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <set>
#include <thread>
#include <unordered_set>

#include "core/cpu_budget.h"
#include "core/env.h"
#include "core/hash.h"
#include "core/thread_annotations.h"
#include "core/thread_policy.h"
#include "data/augment.h"
#include "data/image.h"

namespace kestrel::data {

ImageSource ArtifactImageSource(store::ArtifactStore& store) {
  return [&store](const ManifestEntry& e) { return store.Get(e.image_sha); };
}

void LoaderOptions::Bind(OptionSet& s, int min_imgsz, int max_imgsz, bool auto_batch, bool auto_workers) {
  s.Int("imgsz", &imgsz, "train/val input size in pixels (multiple of the stride)", min_imgsz, max_imgsz);
  if (auto_batch) {
    s.Int("batch", &batch, "images per batch; -1 = auto (CUDA: the largest fitting ~60% of memory; CPU: 16)",
          -1);
  } else {
    s.Int("batch", &batch, "images per batch", 1);
  }
  // 0 is the reference's "load in the main process": Kestrel always builds
  // batches in a thread, so 0 means one (the results never depend on it).
  if (auto_workers) {
    s.Int(
        "workers", &workers,
        "data loader threads (0: one, the reference's workers=0; -1: a quarter of the CPUs this process may "
        "use, at least one, docs/speed.md)",
        -1, 256);
  } else {
    s.Int("workers", &workers, "data loader threads (0: one, the reference's workers=0)", 0, 256);
  }
  s.Int("prefetch", &prefetch, "batches built ahead of the trainer", 1, 1024);
  s.Float("max_bad_fraction", &max_bad_fraction, "fail when more than this share of images is unreadable",
          Range::Closed(0, 1));
  s.Bool(
      "rect", &rect,
      "rectangular batches: images ordered by aspect ratio, each batch letterboxed to its own shape (train: "
      "no shuffle, no mosaic)");
}

Status LoaderOptions::Validate() const {
  auto bad = [](const char* field, const std::string& msg) {
    return Status::InvalidArgument(msg, {"", 0, field});
  };
  {
    // workers=-1 (the budget's share) is the loader's own value wherever the
    // key is bound without it (auto_workers: train).
    LoaderOptions bound = *this;
    if (bound.workers == -1) bound.workers = 0;
    KESTREL_RETURN_IF_ERROR(CheckBoundValues(bound));
  }
  if (stride < 1) return bad("stride", "must be >= 1");
  if (imgsz < stride || imgsz % stride != 0) {
    int up = std::max(stride, (imgsz + stride - 1) / stride * stride);
    return bad("imgsz", std::to_string(imgsz) + " is not a positive multiple of the stride " +
                            std::to_string(stride) + " (try " + std::to_string(up) + ")");
  }
  if (epochs < 1) return bad("epochs", "must be >= 1");
  if (rect && shuffle)
    return bad("rect", "rect batches are ordered by aspect ratio: they need shuffle=false");
  if (!(rect_pad >= 0)) return bad("rect_pad", "must be >= 0");
  if (cache != "false" && cache != "true" && cache != "ram" && cache != "disk")
    return bad("cache", "'" + cache + "' is not one of ram, disk, false (true = ram)");
  return {};
}

namespace {

constexpr uint64_t kTagShuffle = 0x5348;  // distinguishes derived seeds
constexpr uint64_t kTagScale = 0x5343;

using Clock = std::chrono::steady_clock;
int64_t MicrosSince(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
}

// Per-image facts reported in the batch.
struct SampleMeta {
  int64_t entry = 0;  // index of the primary entry actually used
  int orig_h = 0, orig_w = 0;
  LetterboxInfo letterbox;
};

// cache=disk file: this header, then rows * cols * 3 bytes of BGR pixels.
// The payload's sha256 makes a torn or foreign file a miss, never wrong data.
constexpr char kCacheMagic[8] = {'K', 'S', 'T', 'D', 'C', 'v', '0', '1'};
struct CacheHeader {
  char magic[8];
  uint32_t rows, cols, orig_h, orig_w;
  uint64_t payload_bytes;
  char payload_sha[64];
};

// MemAvailable of /proc/meminfo in bytes; 0 when unknown.
uint64_t AvailableMemory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (in >> key >> kb) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kb * 1024;
  }
  return 0;
}

// The size ResizeLongSide gives a w x h image (augment.h's rule).
std::array<int64_t, 2> LoadSize(int w, int h, int imgsz) {
  if (w <= 0 || h <= 0) return {imgsz, imgsz};
  const double r = static_cast<double>(imgsz) / std::max(w, h);
  if (r == 1.0) return {w, h};
  return {std::clamp(static_cast<int64_t>(std::ceil(w * r)), int64_t{1}, int64_t{imgsz}),
          std::clamp(static_cast<int64_t>(std::ceil(h * r)), int64_t{1}, int64_t{imgsz})};
}

struct Slot {
  int64_t index = -1;
  bool ready = false;
  Status status;
  Batch batch;
  std::vector<int64_t> bad;  // entries found bad while building it
};

}  // namespace

struct Loader::Impl {
  std::vector<ManifestEntry> entries;
  ImageSource source;
  LoaderOptions opts;
  AugmentOptions aug;
  std::vector<int64_t> rect_order;              // rect: entries sorted by aspect ratio
  std::vector<std::array<int, 2>> rect_shapes;  // rect: {H, W} per batch
  float to_unit[256];                           // byte -> [0, 1]
  int epochs = 1;  // the run's planned epochs (close_mosaic); consumer thread only (SetEpochs, SkipTo)

  // Shared with workers. Everything above is set by Create before the
  // workers start and read-only afterwards.
  Mutex mu;
  CondVar work_cv;   // signalled when a batch may be claimed, or on stop
  CondVar ready_cv;  // signalled when a slot is filled, or on stop
  bool stop GUARDED_BY(mu) = false;
  bool started GUARDED_BY(mu) = false;
  uint64_t generation GUARDED_BY(mu) = 0;
  int epoch GUARDED_BY(mu) = 0;
  bool mosaic_on GUARDED_BY(mu) = false;
  // Shared: workers of an abandoned epoch may still read the old order while
  // the consumer installs a new one.
  std::shared_ptr<const std::vector<int64_t>> order GUARDED_BY(mu);
  int64_t next_claim GUARDED_BY(mu) = 0;
  int64_t next_consume GUARDED_BY(mu) = 0;
  int64_t end GUARDED_BY(mu) = 0;
  std::vector<Slot> slots GUARDED_BY(mu);
  std::vector<Batch> pool GUARDED_BY(mu);
  // Consumer-side stats, read by Stats().
  std::unordered_set<int64_t> bad_seen GUARDED_BY(mu);
  std::vector<std::string> bad_paths GUARDED_BY(mu);
  int64_t batches_out GUARDED_BY(mu) = 0;
  int64_t samples_out GUARDED_BY(mu) = 0;
  int64_t wait_us GUARDED_BY(mu) = 0;
  Status failure GUARDED_BY(mu);

  // Entries known to be unreadable (skip re-reading them), with the warning
  // logged once each. Never held together with mu.
  Mutex bad_mu;
  std::unordered_set<int64_t> known_bad GUARDED_BY(bad_mu);
  std::atomic<int64_t> decode_us{0}, augment_us{0};

  // Train image cache (LoaderOptions::cache): images already resized to
  // imgsz, with their original size. ram: per entry, filled on first read.
  enum class CacheMode { kOff, kRam, kDisk };
  CacheMode cache_mode = CacheMode::kOff;
  Mutex cache_mu;
  std::vector<cv::Mat> ram_images GUARDED_BY(cache_mu);
  std::vector<std::array<int, 2>> ram_orig GUARDED_BY(cache_mu);  // {h, w}

  std::vector<std::thread> threads;

  int64_t N() const { return static_cast<int64_t>(entries.size()); }
  int64_t Batches() const {
    int64_t b = opts.batch;
    return opts.drop_last ? N() / b : (N() + b - 1) / b;
  }

  void WorkerLoop() EXCLUDES(mu);
  Status BuildBatch(int ep, bool mosaic, int64_t k, const std::vector<int64_t>& ord, Batch& out,
                    std::vector<int64_t>& bad);
  Status BuildSample(int64_t idx, bool mosaic, int out_w, int out_h, Rng& rng, AugSample& s, SampleMeta& meta,
                     std::vector<int64_t>& bad);
  // `resized`: ResizeLongSide'd to imgsz (through the cache when on);
  // `orig` gets the decoded {h, w} before resizing.
  Result<AugSample> LoadEntry(int64_t idx, bool resized, std::array<int, 2>& orig) EXCLUDES(cache_mu);
  Result<AugSample> LoadGood(int64_t idx, std::vector<int64_t>& bad, int64_t* used, bool resized = false,
                             std::array<int, 2>* orig = nullptr) EXCLUDES(bad_mu);
  bool CacheGet(int64_t idx, cv::Mat& image, std::array<int, 2>& orig) EXCLUDES(cache_mu);
  void CachePut(int64_t idx, const cv::Mat& image, const std::array<int, 2>& orig) EXCLUDES(cache_mu);
  std::string CachePath(int64_t idx) const {
    return opts.cache_dir + "/" + entries[idx].image_sha + "-" + std::to_string(opts.imgsz) + ".bin";
  }
  // Mosaic (imgsz x imgsz), or one image letterboxed to out_w x out_h; then
  // the random affine at that size.
  Status MosaicOrSingle(int64_t idx, bool mosaic, int out_w, int out_h, Rng& rng, AugSample& s,
                        SampleMeta& meta, std::vector<int64_t>& bad);
  void ComputeRect();
  // Chooses cache_mode from opts, prints the cache's size, refuses ram
  // beyond the memory available and creates the disk folder.
  Status SetUpCache() EXCLUDES(cache_mu);
};

bool Loader::Impl::CacheGet(int64_t idx, cv::Mat& image, std::array<int, 2>& orig) {
  if (cache_mode == CacheMode::kRam) {
    MutexLock l(cache_mu);
    if (ram_images[idx].empty()) return false;
    // A copy: the augmentations write into the image they are given.
    image = ram_images[idx].clone();
    orig = ram_orig[idx];
    return true;
  }
  Result<std::string> file = Env::Default().ReadFile(CachePath(idx), uint64_t{1} << 31);
  if (!file.IsOk() || file->size() < sizeof(CacheHeader)) return false;
  CacheHeader h;
  std::memcpy(&h, file->data(), sizeof h);
  const uint64_t payload = file->size() - sizeof h;
  if (std::memcmp(h.magic, kCacheMagic, sizeof h.magic) != 0 || h.payload_bytes != payload ||
      payload != uint64_t{h.rows} * h.cols * 3 || h.rows == 0 || h.cols == 0 || h.orig_h == 0 ||
      h.orig_w == 0)
    return false;
  std::string_view pixels(file->data() + sizeof h, payload);
  if (Sha256Hex(pixels) != std::string_view(h.payload_sha, sizeof h.payload_sha)) return false;
  image = cv::Mat(static_cast<int>(h.rows), static_cast<int>(h.cols), CV_8UC3);
  std::memcpy(image.data, pixels.data(), payload);
  orig = {static_cast<int>(h.orig_h), static_cast<int>(h.orig_w)};
  return true;
}

void Loader::Impl::CachePut(int64_t idx, const cv::Mat& image, const std::array<int, 2>& orig) {
  if (cache_mode == CacheMode::kRam) {
    MutexLock l(cache_mu);
    if (ram_images[idx].empty()) {
      ram_images[idx] = image.clone();
      ram_orig[idx] = orig;
    }
    return;
  }
  if (image.type() != CV_8UC3) return;
  cv::Mat c = image.isContinuous() ? image : image.clone();
  const size_t payload = c.total() * 3;
  CacheHeader h;
  std::memcpy(h.magic, kCacheMagic, sizeof h.magic);
  h.rows = static_cast<uint32_t>(c.rows);
  h.cols = static_cast<uint32_t>(c.cols);
  h.orig_h = static_cast<uint32_t>(orig[0]);
  h.orig_w = static_cast<uint32_t>(orig[1]);
  h.payload_bytes = payload;
  std::string_view pixels(reinterpret_cast<const char*>(c.data), payload);
  const std::string sha = Sha256Hex(pixels);
  std::memcpy(h.payload_sha, sha.data(), sizeof h.payload_sha);
  std::string file(reinterpret_cast<const char*>(&h), sizeof h);
  file.append(pixels);
  // A lost or torn file is only a miss (the header check), so no fsync: the
  // rename keeps readers from seeing a half-written file.
  Status st = Env::Default().WriteFileDeferred(CachePath(idx), file);
  if (!st.IsOk()) spdlog::warn("data: cache=disk: could not write '{}': {}", CachePath(idx), st.ToString());
}

Result<AugSample> Loader::Impl::LoadEntry(int64_t idx, bool resized, std::array<int, 2>& orig) {
  const ManifestEntry& e = entries[idx];
  AugSample s;
  if (resized && cache_mode != CacheMode::kOff && CacheGet(idx, s.image, orig)) {
    // Exactly ResizeLongSide's box arithmetic (a scale of exactly 1.0 when
    // the image kept its size), so batches match cache=false bit for bit.
    s.boxes = BoxesToPixels(e.boxes, orig[1], orig[0]);
    const double sx = static_cast<double>(s.image.cols) / orig[1],
                 sy = static_cast<double>(s.image.rows) / orig[0];
    for (PixelBox& b : s.boxes) {
      b.x1 *= sx;
      b.x2 *= sx;
      b.y1 *= sy;
      b.y2 *= sy;
    }
    return s;
  }
  auto t0 = Clock::now();
  Result<std::string> bytes = source(e);
  if (!bytes.IsOk()) return bytes.GetStatus();
  Result<cv::Mat> img = DecodeImage(*bytes, e.path);
  decode_us += MicrosSince(t0);
  if (!img.IsOk()) return img.GetStatus();
  s.image = std::move(img).Value();
  s.boxes = BoxesToPixels(e.boxes, s.image.cols, s.image.rows);
  orig = {s.image.rows, s.image.cols};
  if (resized) {
    ResizeLongSide(s, opts.imgsz);
    if (cache_mode != CacheMode::kOff) CachePut(idx, s.image, orig);
  }
  return s;
}

Result<AugSample> Loader::Impl::LoadGood(int64_t idx, std::vector<int64_t>& bad, int64_t* used, bool resized,
                                         std::array<int, 2>* orig) {
  std::array<int, 2> unused{};
  for (int64_t j = 0; j < N(); ++j) {
    int64_t c = (idx + j) % N();
    {
      MutexLock l(bad_mu);
      if (known_bad.count(c) != 0) {
        bad.push_back(c);
        continue;
      }
    }
    Result<AugSample> s = LoadEntry(c, resized, orig ? *orig : unused);
    if (s.IsOk()) {
      *used = c;
      return s;
    }
    // An image store that cannot be reached (an S3 outage, a host cut off)
    // says nothing about this image: skipping it would count a healthy image
    // against max_bad_fraction (a permanent dataset_errors failure) or train
    // on fewer images without a word. The attempt fails (retryable) instead.
    if (s.GetStatus().Code() == StatusCode::kUnavailable) return s.GetStatus();
    bad.push_back(c);
    MutexLock l(bad_mu);
    if (known_bad.insert(c).second) {
      spdlog::warn("data: skipping unreadable image '{}': {}", entries[c].path, s.GetStatus().ToString());
    }
  }
  return Status::FailedPrecondition("data: all " + std::to_string(N()) +
                                    " images of the split are unreadable")
      .WithReason(FailureReason::kDatasetErrors);
}

Status Loader::Impl::MosaicOrSingle(int64_t idx, bool mosaic, int out_w, int out_h, Rng& rng, AugSample& s,
                                    SampleMeta& meta, std::vector<int64_t>& bad) {
  int64_t used = idx;
  std::array<int, 2> orig{};
  KESTREL_ASSIGN_OR_RETURN(AugSample first, LoadGood(idx, bad, &used, /*resized=*/true, &orig));
  meta.entry = used;
  meta.orig_h = orig[0];
  meta.orig_w = orig[1];
  if (mosaic) {
    std::array<AugSample, 3> others;
    for (AugSample& o : others) {
      int64_t partner = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(N())));
      int64_t u = partner;
      KESTREL_ASSIGN_OR_RETURN(o, LoadGood(partner, bad, &u, /*resized=*/true));
    }
    s = Mosaic4({&first, &others[0], &others[1], &others[2]}, opts.imgsz, rng);
  } else {
    s = std::move(first);
    Letterbox(s, out_w, out_h);
  }
  RandomPerspective(s, aug, out_w, out_h, rng);
  return {};
}

Status Loader::Impl::BuildSample(int64_t idx, bool mosaic_on_epoch, int out_w, int out_h, Rng& rng,
                                 AugSample& s, SampleMeta& meta, std::vector<int64_t>& bad) {
  if (!opts.augment) {
    int64_t used = idx;
    KESTREL_ASSIGN_OR_RETURN(s, LoadGood(idx, bad, &used, /*resized=*/false));
    meta.entry = used;
    meta.orig_h = s.image.rows;
    meta.orig_w = s.image.cols;
    meta.letterbox = Letterbox(s, out_w, out_h);
    return {};
  }
  // Every draw happens whether or not it is used, so one option does not
  // shift the random stream of the others.
  // rect: the sample is built at the batch's shape (mosaic is never on:
  // SkipTo); otherwise at imgsz^2 and resized below for multi_scale.
  const int sw = opts.rect ? out_w : opts.imgsz, sh = opts.rect ? out_h : opts.imgsz;
  const double u_mosaic = rng.Uniform();
  const bool mosaic = mosaic_on_epoch && u_mosaic < aug.mosaic;
  KESTREL_RETURN_IF_ERROR(MosaicOrSingle(idx, mosaic, sw, sh, rng, s, meta, bad));
  const double u_mixup = rng.Uniform();
  if (mosaic_on_epoch && u_mixup < aug.mixup) {
    int64_t partner = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(N())));
    const bool partner_mosaic = rng.Uniform() < aug.mosaic;
    AugSample other;
    SampleMeta unused;
    KESTREL_RETURN_IF_ERROR(MosaicOrSingle(partner, partner_mosaic, sw, sh, rng, other, unused, bad));
    MixUp(s, other, rng);
  }
  RandomHsv(s.image, aug.hsv_h, aug.hsv_s, aug.hsv_v, rng);
  const double u_flipud = rng.Uniform();
  if (u_flipud < aug.flipud) FlipUd(s);
  const double u_fliplr = rng.Uniform();
  if (u_fliplr < aug.fliplr) FlipLr(s);
  meta.letterbox = LetterboxInfo{};
  if (out_w != s.image.cols || out_h != s.image.rows) {  // multi_scale
    const double sx = static_cast<double>(out_w) / s.image.cols,
                 sy = static_cast<double>(out_h) / s.image.rows;
    cv::Mat r;
    cv::resize(s.image, r, cv::Size(out_w, out_h), 0, 0, cv::INTER_LINEAR);
    s.image = r;
    for (PixelBox& b : s.boxes) b.x1 *= sx, b.x2 *= sx, b.y1 *= sy, b.y2 *= sy;
  }
  return {};
}

Status Loader::Impl::BuildBatch(int ep, bool mosaic, int64_t k, const std::vector<int64_t>& ord, Batch& out,
                                std::vector<int64_t>& bad) {
  const int64_t start = k * opts.batch;
  const int size = static_cast<int>(std::min<int64_t>(opts.batch, N() - start));
  int H = opts.imgsz, W = opts.imgsz;
  if (opts.rect) {
    H = rect_shapes[k][0];
    W = rect_shapes[k][1];
  } else if (opts.augment && aug.multi_scale) {
    Rng r(SeedFrom({opts.seed, static_cast<uint64_t>(ep), static_cast<uint64_t>(k), kTagScale}));
    const int lo = std::max(opts.stride, opts.imgsz / 2 / opts.stride * opts.stride);
    const int hi = std::max(lo, opts.imgsz * 3 / 2 / opts.stride * opts.stride);
    H = W = lo + opts.stride * static_cast<int>(r.Below(static_cast<uint64_t>((hi - lo) / opts.stride) + 1));
  }
  out.epoch = ep;
  out.index = k;
  out.size = size;
  out.height = H;
  out.width = W;
  out.images.resize(static_cast<size_t>(size) * 3 * H * W);
  out.targets.clear();
  out.paths.clear();
  out.orig_hw.clear();
  out.letterbox.clear();
  const size_t plane = static_cast<size_t>(H) * W;
  AugSample s;
  for (int i = 0; i < size; ++i) {
    const int64_t pos = start + i;
    Rng rng(SeedFrom({opts.seed, static_cast<uint64_t>(ep), static_cast<uint64_t>(pos)}));
    SampleMeta meta;
    auto t0 = Clock::now();
    try {
      KESTREL_RETURN_IF_ERROR(BuildSample(ord[pos], mosaic, W, H, rng, s, meta, bad));
    } catch (const cv::Exception& e) {
      return Status::Internal("data: augmenting '" + entries[ord[pos]].path + "' failed: " + e.what());
    }
    if (s.image.rows != H || s.image.cols != W || s.image.type() != CV_8UC3) {
      return Status::Internal("data: sample '" + entries[ord[pos]].path + "' has the wrong shape");
    }
    float* dst = out.images.data() + static_cast<size_t>(i) * 3 * plane;
    for (int y = 0; y < H; ++y) {
      const uint8_t* p = s.image.ptr<uint8_t>(y);
      float* r = dst + static_cast<size_t>(y) * W;
      float* g = r + plane;
      float* b = g + plane;
      for (ptrdiff_t x = 0; x < W; ++x) {
        r[x] = to_unit[p[3 * x]];
        g[x] = to_unit[p[3 * x + 1]];
        b[x] = to_unit[p[3 * x + 2]];
      }
    }
    for (const PixelBox& bx : s.boxes) {
      const float row[6] = {static_cast<float>(i),
                            static_cast<float>(bx.cls),
                            static_cast<float>((bx.x1 + bx.x2) / 2 / W),
                            static_cast<float>((bx.y1 + bx.y2) / 2 / H),
                            static_cast<float>((bx.x2 - bx.x1) / W),
                            static_cast<float>((bx.y2 - bx.y1) / H)};
      out.targets.insert(out.targets.end(), row, row + 6);
    }
    out.paths.push_back(entries[meta.entry].path);
    out.orig_hw.push_back({meta.orig_h, meta.orig_w});
    out.letterbox.push_back({static_cast<float>(meta.letterbox.scale),
                             static_cast<float>(meta.letterbox.pad_x),
                             static_cast<float>(meta.letterbox.pad_y)});
    augment_us += MicrosSince(t0);
  }
  return {};
}

void Loader::Impl::WorkerLoop() {
  for (;;) {
    int64_t k = 0;
    uint64_t gen = 0;
    int ep = 0;
    bool mosaic = false;
    std::shared_ptr<const std::vector<int64_t>> ord;
    Batch batch;
    {
      MutexLock l(mu);
      while (!stop && !(started && next_claim < end && next_claim < next_consume + opts.prefetch)) {
        work_cv.Wait(mu);
      }
      if (stop) return;
      k = next_claim++;
      gen = generation;
      ep = epoch;
      mosaic = mosaic_on;
      ord = order;
      if (!pool.empty()) {
        batch = std::move(pool.back());
        pool.pop_back();
      }
    }

    std::vector<int64_t> bad;
    Status st = BuildBatch(ep, mosaic, k, *ord, batch, bad);

    MutexLock l(mu);
    if (gen != generation || stop) {
      if (pool.size() < slots.size()) pool.push_back(std::move(batch));
      continue;
    }
    Slot& slot = slots[static_cast<size_t>(k % opts.prefetch)];
    slot.index = k;
    slot.ready = true;
    slot.status = std::move(st);
    slot.batch = std::move(batch);
    slot.bad = std::move(bad);
    ready_cv.SignalAll();
  }
}

void Loader::Impl::ComputeRect() {
  const int64_t n = N();
  std::vector<double> ar(n);
  for (int64_t i = 0; i < n; ++i) {
    const auto& e = entries[i];
    ar[i] = (e.width > 0 && e.height > 0) ? static_cast<double>(e.height) / e.width : 1.0;
  }
  rect_order.resize(n);
  std::iota(rect_order.begin(), rect_order.end(), 0);
  std::stable_sort(rect_order.begin(), rect_order.end(), [&](int64_t a, int64_t b) { return ar[a] < ar[b]; });
  rect_shapes.clear();
  for (int64_t k = 0; k < Batches(); ++k) {
    const int64_t s = k * opts.batch, e = std::min<int64_t>(s + opts.batch, n);
    double mini = ar[rect_order[s]], maxi = ar[rect_order[e - 1]];
    double sh = 1, sw = 1;  // relative {h, w}
    if (maxi < 1)
      sh = maxi;
    else if (mini > 1)
      sw = 1 / mini;
    auto side = [&](double rel) {
      return static_cast<int>(std::ceil(rel * opts.imgsz / opts.stride + opts.rect_pad)) * opts.stride;
    };
    rect_shapes.push_back({side(sh), side(sw)});
  }
}

// ---------------------------------------------------------------------------

bool MosaicOpenAt(int epoch, int epochs, int close_mosaic) {
  // The reference closes mosaic when its epoch counter equals this value,
  // so a negative one is never reached.
  const int close_at = epochs - close_mosaic;
  return close_at < 0 || epoch < close_at;
}

Status Loader::Impl::SetUpCache() {
  if (!opts.augment || opts.cache == "false") return {};
  const bool ram = opts.cache == "ram" || opts.cache == "true";
  uint64_t bytes = 0;
  for (const ManifestEntry& e : entries) {
    const auto wh = LoadSize(e.width, e.height, opts.imgsz);
    bytes += static_cast<uint64_t>(wh[0] * wh[1] * 3);
  }
  const double gb = static_cast<double>(bytes) / 1e9;
  if (ram) {
    const uint64_t limit = opts.cache_ram_limit != 0 ? opts.cache_ram_limit : AvailableMemory();
    if (limit != 0 && bytes > limit) {
      char msg[200];
      std::snprintf(msg, sizeof msg,
                    "cache=ram needs %.2f GB for %zu images at imgsz %d but only %.2f GB of memory is "
                    "available: use cache=disk or cache=false",
                    gb, entries.size(), opts.imgsz, static_cast<double>(limit) / 1e9);
      return Status::ResourceExhausted(msg, {"", 0, "cache"});
    }
    cache_mode = CacheMode::kRam;
    MutexLock l(cache_mu);
    ram_images.resize(entries.size());
    ram_orig.resize(entries.size());
  } else {
    if (opts.cache_dir.empty())
      return Status::InvalidArgument("cache=disk needs a cache folder (LoaderOptions::cache_dir)",
                                     {"", 0, "cache"});
    KESTREL_RETURN_IF_ERROR(Env::Default().CreateDirs(opts.cache_dir));
    cache_mode = CacheMode::kDisk;
  }
  spdlog::info("data: caching images ({:.1f} GB {})", gb, ram ? "RAM" : ("disk, " + opts.cache_dir));
  return {};
}

Result<std::unique_ptr<Loader>> Loader::Create(const Manifest& manifest, Split split, ImageSource source,
                                               const LoaderOptions& options, const AugmentOptions& augment) {
  KESTREL_RETURN_IF_ERROR(options.Validate());
  KESTREL_RETURN_IF_ERROR(augment.Validate());
  if (!source) return Status::InvalidArgument("data: loader needs an image source");
  auto impl = std::make_unique<Impl>();
  for (const ManifestEntry& e : manifest.entries) {
    if (e.split == split) impl->entries.push_back(e);
  }
  if (impl->entries.empty()) {
    return Status::FailedPrecondition(std::string("data: the ") + SplitName(split) + " split has no images")
        .WithReason(FailureReason::kDatasetErrors);
  }
  impl->source = std::move(source);
  impl->opts = options;
  impl->aug = augment;
  impl->epochs = options.epochs;
  for (int v = 0; v < 256; ++v) impl->to_unit[v] = static_cast<float>(v) / 255.0f;
  if (options.rect) impl->ComputeRect();
  KESTREL_RETURN_IF_ERROR(impl->SetUpCache());
  {
    MutexLock l(impl->mu);  // no worker runs yet: for the analysis, not a race
    impl->slots.resize(static_cast<size_t>(options.prefetch));
  }
  Impl* raw = impl.get();
  const int workers =
      options.workers < 0 ? SplitThreadBudget(ProcessCpuBudget().usable, 0, -1).loader : options.workers;
  for (int i = 0; i < std::max(1, workers); ++i) raw->threads.emplace_back([raw] { raw->WorkerLoop(); });
  return std::unique_ptr<Loader>(new Loader(std::move(impl)));
}

Loader::Loader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Loader::~Loader() {
  {
    MutexLock l(impl_->mu);
    impl_->stop = true;
  }
  impl_->work_cv.SignalAll();
  impl_->ready_cv.SignalAll();
  for (std::thread& t : impl_->threads) t.join();
}

Status Loader::StartEpoch(int epoch) { return SkipTo(epoch, 0); }

bool Loader::MosaicOn() const {
  MutexLock l(impl_->mu);
  return impl_->started && impl_->mosaic_on;
}

Status Loader::SetEpochs(int epochs) {
  if (epochs < 1) return Status::InvalidArgument("data: epochs must be >= 1, got " + std::to_string(epochs));
  impl_->epochs = epochs;
  return {};
}

Status Loader::SkipTo(int epoch, int64_t batch_index) {
  Impl& m = *impl_;
  if (epoch < 0) return Status::InvalidArgument("data: epoch must be >= 0, got " + std::to_string(epoch));
  if (batch_index < 0 || batch_index > m.Batches()) {
    return Status::InvalidArgument("data: batch index " + std::to_string(batch_index) + " outside [0, " +
                                   std::to_string(m.Batches()) + "]");
  }
  std::shared_ptr<std::vector<int64_t>> ord;
  if (m.opts.rect) {
    ord = std::make_shared<std::vector<int64_t>>(m.rect_order);
  } else {
    ord = std::make_shared<std::vector<int64_t>>(m.N());
    std::iota(ord->begin(), ord->end(), 0);
    if (m.opts.shuffle) {
      Rng rng(SeedFrom({m.opts.seed, static_cast<uint64_t>(epoch), kTagShuffle}));
      for (int64_t i = m.N() - 1; i > 0; --i) {
        std::swap((*ord)[i], (*ord)[static_cast<int64_t>(rng.Below(static_cast<uint64_t>(i + 1)))]);
      }
    }
  }
  {
    MutexLock l(m.mu);
    ++m.generation;
    for (Slot& s : m.slots) {
      if (s.ready && m.pool.size() < m.slots.size()) m.pool.push_back(std::move(s.batch));
      s = Slot{};
    }
    m.epoch = epoch;
    m.mosaic_on = m.opts.augment && !m.opts.rect && MosaicOpenAt(epoch, m.epochs, m.aug.close_mosaic);
    m.order = std::move(ord);
    m.end = m.Batches();
    m.next_claim = m.next_consume = batch_index;
    m.started = true;
    m.failure = Status();
  }
  m.work_cv.SignalAll();
  return {};
}

Result<std::optional<Batch>> Loader::Next() {
  Impl& m = *impl_;
  MutexLock l(m.mu);
  if (!m.failure.IsOk()) return m.failure;
  if (!m.started) return Status::FailedPrecondition("data: Next() before StartEpoch()");
  if (m.next_consume >= m.end) return std::optional<Batch>();
  const int64_t k = m.next_consume;
  Slot& slot = m.slots[static_cast<size_t>(k % m.opts.prefetch)];
  auto t0 = Clock::now();
  while (!m.stop && !(slot.ready && slot.index == k)) m.ready_cv.Wait(m.mu);
  m.wait_us += MicrosSince(t0);
  if (m.stop) return Status::Aborted("data: loader is shutting down");
  Status st = std::move(slot.status);
  Batch batch = std::move(slot.batch);
  std::vector<int64_t> bad = std::move(slot.bad);
  slot = Slot{};
  ++m.next_consume;
  m.work_cv.SignalAll();
  if (!st.IsOk()) {
    m.failure = st;
    return st;
  }
  for (int64_t b : bad) {
    if (m.bad_seen.insert(b).second) m.bad_paths.push_back(m.entries[b].path);
  }
  const double limit = m.opts.max_bad_fraction * static_cast<double>(m.N());
  if (static_cast<double>(m.bad_seen.size()) > limit) {
    std::string names;
    for (size_t i = 0; i < m.bad_paths.size() && i < 5; ++i) names += (i ? ", " : "") + m.bad_paths[i];
    if (m.bad_paths.size() > 5) names += ", ...";
    m.failure = Status::FailedPrecondition("data: " + std::to_string(m.bad_seen.size()) + " of " +
                                           std::to_string(m.N()) +
                                           " images are unreadable, more than max_bad_fraction=" +
                                           std::to_string(m.opts.max_bad_fraction) + " (" + names + ")")
                    .WithReason(FailureReason::kDatasetErrors);
    return m.failure;
  }
  ++m.batches_out;
  m.samples_out += batch.size;
  return std::optional<Batch>(std::move(batch));
}

void Loader::Recycle(Batch&& batch) {
  MutexLock l(impl_->mu);
  if (impl_->pool.size() < impl_->slots.size()) impl_->pool.push_back(std::move(batch));
}

int64_t Loader::BatchesPerEpoch() const { return impl_->Batches(); }
int64_t Loader::NumSamples() const { return impl_->N(); }

LoaderStats Loader::Stats() const {
  Impl& m = *impl_;
  LoaderStats s;
  MutexLock l(m.mu);
  s.batches = m.batches_out;
  s.samples = m.samples_out;
  s.bad_samples = static_cast<int64_t>(m.bad_seen.size());
  s.bad_paths = m.bad_paths;
  s.decode_seconds = static_cast<double>(m.decode_us.load()) / 1e6;
  s.augment_seconds = static_cast<double>(m.augment_us.load()) / 1e6;
  s.wait_seconds = static_cast<double>(m.wait_us) / 1e6;
  return s;
}

}  // namespace kestrel::data
