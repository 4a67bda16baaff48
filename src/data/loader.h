// The training/validation data loader: manifest entries -> fixed-shape float
// batches, multi-threaded with bounded prefetch, torch-free (no OpenCV or
// LibTorch types in this header; the trainer wraps Batch buffers in tensors).
//
// Determinism contract: the bytes of batch (epoch, index) depend only on the
// manifest entries of the split, the image bytes, LoaderOptions and
// AugmentOptions — never on thread timing, `workers` or `prefetch`:
//   - epoch order = Fisher-Yates shuffle with Rng(SeedFrom({seed, epoch}))
//     (identity when shuffle=false);
//   - the sample at position p of the epoch uses Rng(SeedFrom({seed, epoch, p}))
//     for every random choice: mosaic partners, affine, mixup, HSV, flips;
//   - multi_scale picks the batch size from SeedFrom({seed, epoch, index}).
// Workers build whole batches in parallel into `prefetch` slots; Next() hands
// them out strictly in index order. SkipTo(e, k) makes the next Next() return
// exactly batch k of epoch e of an uninterrupted run (exact resume).
//
// Bad samples (source failure: missing/corrupted blob, decode failure) are
// skipped: the sample is replaced by the next good entry of the split (in
// manifest order, wrapping), so shapes stay constant; a mosaic/mixup partner
// that is bad is replaced the same way. Each bad entry is logged once
// (spdlog::warn) and counted. When distinct bad entries seen so far exceed
// max_bad_fraction * (entries in the split), Next() fails with
// kFailedPrecondition, message "data: N of M images unreadable ... (a, b, c)".
// The decision is taken in batch order, so it is deterministic too.
//
// Thread-safety: one consumer thread calls StartEpoch/SkipTo/Next/Recycle;
// Stats() may be called from any thread. The destructor stops the workers
// cleanly, also mid-epoch. Memory is bounded: at most `prefetch` batches in
// flight plus one being built per worker; buffers handed back with Recycle()
// are reused.
//
// Performance: the process should run OpenCV calls on the calling thread
// (data::SetImageCodecThreads(0) in main(), as the kestrel CLI does);
// OpenCV's own pool under `workers` threads oversubscribes the cores
// (measured 1.5-3.7x slower). With mosaic each image costs 4 decodes.
// Numbers and allocator tuning: docs/data-pipeline.md.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/options.h"
#include "core/status.h"
#include "data/dataset.h"
#include "data/manifest.h"
#include "store/artifact_store.h"

namespace kestrel::data {

// Returns the encoded image bytes of an entry. Called concurrently from the
// worker threads, so it must be thread-safe. A non-OK result marks the entry
// bad (see the file comment).
using ImageSource = std::function<Result<std::string>(const ManifestEntry&)>;

// Reads entry.image_sha from `store` (hash verified: a corrupted blob is
// kCorruption -> a bad sample). Borrows `store`, which must outlive the source.
ImageSource ArtifactImageSource(store::ArtifactStore& store);

// Augmentation hyperparameters: Ultralytics names and defaults (default.yaml).
// The functions that apply them are in data/augment.h.
struct AugmentOptions {
  double hsv_h = 0.015;      // hue gain: hue scaled by U(1-h, 1+h) (fraction)
  double hsv_s = 0.7;        // saturation gain: scaled by U(1-s, 1+s)
  double hsv_v = 0.4;        // value gain: scaled by U(1-v, 1+v)
  double degrees = 0.0;      // rotation, uniform in +-degrees
  double translate = 0.1;    // translation, +-fraction of the output size
  double scale = 0.5;        // zoom factor uniform in [1-scale, 1+scale]
  double shear = 0.0;        // shear, uniform in +-degrees per axis
  double perspective = 0.0;  // perspective coefficient, +-value
  double flipud = 0.0;       // probability of a vertical flip
  double fliplr = 0.5;       // probability of a horizontal flip
  double mosaic = 1.0;       // probability of a 4-image mosaic
  double mixup = 0.0;        // probability of blending with a second sample
  int close_mosaic = 10;     // no mosaic (nor mixup) from epoch epochs - N on (see MosaicOpenAt)
  // Each train batch is resized to a random multiple of the loader stride in
  // [0.5, 1.5] * imgsz (decided per batch, deterministically).
  bool multi_scale = false;

  // Binds every field above under its own name, with its range: the one
  // place the ranges are written.
  void Bind(OptionSet& s);
  // The bound ranges applied to values set in code (CheckBoundValues):
  // kInvalidArgument naming the field.
  Status Validate() const;
};

// Whether 0-based epoch `epoch` of a run of `epochs` epochs trains with
// mosaic (and mixup), decided as the reference trainer does: mosaic closes
// at the start of epoch `epochs - close_mosaic` and stays closed. A run
// shorter than close_mosaic (epochs - close_mosaic < 0) never reaches that
// epoch and keeps mosaic on throughout; close_mosaic = 0 never closes it.
// E.g. close_mosaic 10: epochs 9 -> on in all 9, epochs 10 -> off in all,
// epochs 11 -> on only in epoch 0. A pure function of its arguments, so a
// resumed run gets the same epochs with mosaic as an uninterrupted one.
bool MosaicOpenAt(int epoch, int epochs, int close_mosaic);

struct LoaderOptions {
  int imgsz = 640;                 // square input side in pixels (train), multiple of stride
  int batch = 16;                  // images per batch
  int workers = 2;                 // worker threads (each builds whole batches); -1: the budget's share
  int prefetch = 4;                // batches built ahead of the consumer
  bool shuffle = true;             // shuffle the order every epoch (train)
  bool augment = true;             // train augmentations; false: letterbox only (val)
  uint64_t seed = 0;               // root of all randomness, see the file comment
  double max_bad_fraction = 0.01;  // tolerated share of unreadable images
  // Rectangular batches (the reference's rect=): entries ordered by aspect
  // ratio h/w (stable, manifest order within ties), each batch letterboxed
  // to its own H x W = ceil(rel * imgsz / stride + rect_pad) * stride per
  // side, where rel = {max h/w, 1} when the batch is all wide, {1, w/h of
  // its least tall} when all tall, else {1, 1}. Needs shuffle=false (the
  // order is the point). Train (augment=true): each sample is its image
  // resized to imgsz on the long side, letterboxed to the batch shape, then
  // the random affine, HSV and flips at that shape; never mosaic or mixup
  // (as the reference's rect training).
  bool rect = false;
  // rect: border in strides added before rounding up (the reference: 0.5
  // for val, 0.0 for train), >= 0.
  double rect_pad = 0.5;
  int epochs = 100;        // total epochs of the run, for close_mosaic
  int stride = 32;         // model stride: rect/multi_scale sizes are multiples
  bool drop_last = false;  // drop the last partial batch of an epoch
  // Train (augment=true) image cache, the reference's `cache=`: "false" (decode
  // every read), "ram" (or "true": each image kept decoded and resized to
  // imgsz after its first read), "disk" (the same image written to
  // cache_dir/<image_sha>-<imgsz>.bin, crash-safe, header-checked on read,
  // safe to delete, reused by later epochs and runs). Batches are
  // byte-identical for every value. Ignored when augment=false. Bound by the
  // trainer (train key `cache`), not by Bind.
  std::string cache = "false";
  std::string cache_dir;  // cache=disk: the folder (the trainer: <home>/cache/decoded)
  // cache=ram: memory the cache may take; 0 = MemAvailable of /proc/meminfo.
  // Create fails (kResourceExhausted naming `cache`) when the estimate is larger.
  uint64_t cache_ram_limit = 0;

  // Binds imgsz, batch, workers, prefetch, max_bad_fraction, rect under those
  // names, imgsz within [min_imgsz, max_imgsz] (train binds the model's
  // limits). Not bound (the trainer owns and copies them): shuffle, augment,
  // seed, epochs, stride, drop_last. `auto_batch`: batch also takes -1 (the
  // trainer's automatic batch size, train/autobatch.h; the loader itself
  // needs a batch >= 1, which Validate checks).
  // `auto_workers`: workers also takes -1 (the budget's share).
  void Bind(OptionSet& s, int min_imgsz = 1, int max_imgsz = std::numeric_limits<int>::max(),
            bool auto_batch = false, bool auto_workers = false);
  // The bound ranges (CheckBoundValues) plus the rules between fields: imgsz
  // a multiple of stride, rect only without shuffle. kInvalidArgument
  // naming the field.
  Status Validate() const;
};

// One batch. All buffers are row-major and contiguous.
struct Batch {
  int epoch = 0;
  int64_t index = 0;  // batch index within the epoch, 0-based
  int size = 0;       // B: images in this batch (< batch only for the last one)
  int height = 0;     // H, pixels of the network input
  int width = 0;      // W
  // [B, 3, H, W] float32, RGB, CHW, values in [0, 1] (pixel / 255).
  std::vector<float> images;
  // [N, 6] float32 rows: batch_idx, cls, cx, cy, w, h; boxes normalized to
  // this batch's W and H (so x_pixel = cx * width). Rows grouped by batch_idx
  // ascending.
  std::vector<float> targets;
  // Per image (size B): manifest path (ManifestEntry::path) of the primary
  // sample, original oriented size {height, width}, and letterbox
  // {scale, pad_x, pad_y} mapping original pixels to this batch's pixels
  // (x_in = x_orig * scale + pad_x). For augmented train samples the
  // geometry is random: letterbox is {1, 0, 0} and means nothing.
  std::vector<std::string> paths;
  std::vector<std::array<int, 2>> orig_hw;
  std::vector<std::array<float, 3>> letterbox;

  int64_t NumTargets() const { return static_cast<int64_t>(targets.size() / 6); }
};

struct LoaderStats {
  int64_t batches = 0;                 // handed out by Next()
  int64_t samples = 0;                 // images in those batches
  int64_t bad_samples = 0;             // distinct bad entries seen
  std::vector<std::string> bad_paths;  // their paths, in the order seen
  double decode_seconds = 0;           // source + DecodeImage, summed over workers
  double augment_seconds = 0;          // whole sample builds (decode included), summed over workers
  double wait_seconds = 0;             // Next() blocked waiting for a batch
};

class Loader {
 public:
  // Uses the entries of `manifest` whose split is `split` (manifest order).
  // kInvalidArgument for bad options, kFailedPrecondition for an empty split.
  // Starts the worker threads (idle until StartEpoch/SkipTo).
  static Result<std::unique_ptr<Loader>> Create(const Manifest& manifest, Split split, ImageSource source,
                                                const LoaderOptions& options,
                                                const AugmentOptions& augment = {});
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Begins epoch `epoch` (>= 0) at batch 0, abandoning any batches of the
  // previous epoch that were not consumed. Mosaic and mixup are on when
  // options.augment, !options.rect and MosaicOpenAt(epoch, epochs,
  // augment.close_mosaic), epochs being options.epochs or the last
  // SetEpochs() value.
  Status StartEpoch(int epoch);
  // The run's planned epoch count changed (train's time= re-plans it after
  // each epoch): later StartEpoch/SkipTo decide mosaic from `epochs`, so
  // close_mosaic counts from the new end. kInvalidArgument when < 1.
  // Consumer thread only, as StartEpoch.
  Status SetEpochs(int epochs);
  // Whether the epoch begun by the last StartEpoch/SkipTo builds mosaics
  // (false before the first). Consumer thread only.
  bool MosaicOn() const;
  // Like StartEpoch, but the next Next() returns batch `batch_index`
  // (0 <= batch_index <= BatchesPerEpoch(); == means the epoch is done).
  Status SkipTo(int epoch, int64_t batch_index);
  // The next batch in order; std::nullopt once the epoch is exhausted (until
  // the next StartEpoch). Errors: kFailedPrecondition "data: ..." when bad
  // samples exceed max_bad_fraction (sticky until StartEpoch/SkipTo), or
  // when no epoch was started.
  Result<std::optional<Batch>> Next();
  // Optional: gives a consumed batch's buffers back for reuse.
  void Recycle(Batch&& batch);

  int64_t BatchesPerEpoch() const;
  int64_t NumSamples() const;  // entries in the split
  LoaderStats Stats() const;

 private:
  struct Impl;
  explicit Loader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kestrel::data
