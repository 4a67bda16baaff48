// A training job's per-epoch sample panels (the job page's epoch slider,
// `kestrel jobs samples`, GET /api/jobs/{id}/samples[/{epoch}]): each
// attempt's trainer writes <home>/jobs/<id>/attempt-<n>/samples/epoch-<E>.json
// (train/samples.h; format in docs/formats.md "Epoch samples"). An epoch
// can be in several attempts (an attempt that died after writing it but
// before its checkpoint; the next one redoes it): the latest attempt's file
// wins, so each epoch is listed once. Torch-free; reads files only, through
// `env`, under the home (paths are built from numbers, never from request text).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "store/metadata_store.h"

namespace kestrel::app {

// The epochs with a samples file, ascending, each with the attempt whose
// file is the one served.
struct JobSampleEpochs {
  int64_t job_id = 0;
  struct Epoch {
    int epoch = 0;  // 1-based
    int64_t attempt = 0;
  };
  std::vector<Epoch> epochs;
};

// One epoch's panel: the samples file of the attempt that wins, checked
// (format, epoch) and passed on as stored.
struct JobSamplePanel {  // NOLINT(bugprone-exception-escape): an aggregate; the check misreads its
                         // implicit members (nlohmann::json)
  int64_t job_id = 0;
  int epoch = 0;
  int64_t attempt = 0;
  nlohmann::json samples;  // the file's object (dataset, version, conf, names, images)
};

class JobMedia {
 public:
  // The largest samples file read (val_samples <= 64 images).
  static constexpr uint64_t kMaxFileBytes = uint64_t{16} << 20;

  // All borrowed; `home` holds jobs/<id>/attempt-<n>.
  JobMedia(store::MetadataStore& meta, Env& env, std::string home);

  // The store's kNotFound for an unknown job; a job without samples (not
  // trained yet, val_samples=0, val=false, not a train job) has none.
  Result<JobSampleEpochs> Epochs(int64_t job_id);
  // kNotFound (field "epoch") when no attempt has that epoch's file, naming
  // the epochs there are; kCorruption naming the file when it is not a
  // samples file of that epoch.
  Result<JobSamplePanel> Panel(int64_t job_id, int64_t epoch);

 private:
  store::MetadataStore& meta_;
  Env& env_;
  std::string home_;
};

// {"job": ID, "epochs": [{"epoch": E, "attempt": N}, ...]}
nlohmann::json JobSampleEpochsJson(const JobSampleEpochs& e);
// {"job": ID, "epoch": E, "attempt": N, "dataset", "version", "version_id",
//  "conf", "names", "images": [{sha, path, width, height, labels:
//  [{class_id, box}], detections: [{class_id, score, box}]}]}; boxes xyxy
// pixels of the original image.
nlohmann::json JobSamplePanelJson(const JobSamplePanel& p);

}  // namespace kestrel::app
