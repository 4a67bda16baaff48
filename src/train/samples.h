// Per-epoch prediction samples (docs/formats.md "Epoch samples"): at each
// epoch's validation the trainer keeps the detections of the first
// `val_samples` val images (manifest order) and writes them, with the
// images' identity, size and labels, to <run_dir>/samples/epoch-<E>.json
// (crash-safe replace, so a resumed or rolled-back epoch overwrites its file
// instead of adding a second one). The job page's epoch slider reads them
// through app/job_media.h. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "data/manifest.h"
#include "eval/detection.h"

namespace kestrel::train {

// What a samples file stores under "format" and "format_version".
inline constexpr const char* kSamplesFormat = "kestrel-epoch-samples";
inline constexpr int kSamplesFormatVersion = 1;
// Detections below this confidence are not stored (the validator's own NMS
// keeps everything >= 0.001 for the mAP; a panel of those is unreadable).
inline constexpr double kSampleConf = 0.25;

// One sample image of one validation.
struct SampleImage {
  const data::ManifestEntry* entry = nullptr;  // borrowed from the run's manifest, non-null
  // Confidence >= kSampleConf, after NMS; box xyxy in pixels of the original
  // (oriented) image, as the validator scores them.
  std::vector<eval::Detection> detections;
};

// The dataset version the samples come from (its image route serves them
// by SHA-256: /api/datasets/{dataset}@v{version}/images/{sha}).
struct SampleSource {
  std::string dataset;     // registry name
  int64_t version = 0;     // the version's seq ("v3" = 3)
  std::string version_id;  // sha256 of the canonical manifest
  std::vector<std::string> names;
};

// <run_dir>/samples/epoch-<epoch>.json
std::string EpochSamplesPath(const std::string& run_dir, int epoch);

// The file's JSON text (docs/formats.md): format, format_version, epoch
// (1-based), dataset, version, version_id, conf, names, images [{sha, path,
// width, height, labels [{class_id, box}], detections [{class_id, score,
// box}]}], boxes xyxy pixels of the original image.
std::string EpochSamplesText(int epoch, const SampleSource& source, const std::vector<SampleImage>& images);

// Writes EpochSamplesText to EpochSamplesPath with Env::WriteFileAtomic
// (temp + fsync + rename + folder fsync), creating samples/ first.
Status WriteEpochSamples(Env& env, const std::string& run_dir, int epoch, const SampleSource& source,
                         const std::vector<SampleImage>& images);

}  // namespace kestrel::train
