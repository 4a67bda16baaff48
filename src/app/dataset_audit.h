// `kestrel dataset audit NAME@vN model=…`: the labels of a dataset version
// that are probably wrong, ranked (eval/label_audit.h), from a model run
// over the version's images with the validator's settings. Writes
// `audit.json` (every item) and `audit.csv` into the run folder
// (runs/detect/audit, audit2, ... or out=), prints the top items.
// docs/label-audit.md. Torch-free: the detector comes from the
// caller's loader (app/backends.h LoadDetector in the programs).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/detector.h"
#include "app/score_split.h"
#include "core/env.h"
#include "core/options.h"
#include "core/status.h"
#include "eval/label_audit.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::app {

struct AuditKeys {
  std::string data;           // NAME@vN (resolved by the caller)
  std::string model;          // the weights file (resolved by the caller)
  std::string split = "all";  // train, val, test or all (every split that has images)
  int imgsz = 0;              // 0: from the weights (app/imgsz.h)
  int batch = 16;
  double conf = 0.25;  // eval::AuditOptions::conf
  double match_iou = 0.5;
  double loose_iou = 0.1;
  int top = 20;  // items printed (the files hold every item)
  std::string device = "cpu";
  std::string project = "runs/detect";
  std::string name;  // default "audit"
  std::string out;   // the run folder itself (overrides project/name)
  bool exist_ok = false;
  void Bind(OptionSet& s);
  Status Validate() const;
};

struct AuditImage {
  std::string split;
  std::string path;  // manifest key
  int width = 0, height = 0;
};

struct AuditReport {
  std::string data;   // NAME@vN as stored
  std::string model;  // weights path
  int imgsz = 0;      // the network input side in effect
  std::vector<std::string> names;
  std::vector<AuditImage> images;      // AuditItem::image indexes this
  std::vector<eval::AuditItem> items;  // review order
  size_t labels = 0;
  std::string dir;  // the run folder written ("" when none)
  // Its number among the version's stored audits (app/dataset_audits.h,
  // the server's audit page); 0 when not stored.
  int64_t stored = 0;
};

// Runs the model over the chosen splits and ranks every label and every
// unexplained prediction. kInvalidArgument naming `split` when the version
// has no images in it, the model/data class-count error of val otherwise.
Result<AuditReport> AuditDataset(store::MetadataStore& meta, store::ArtifactStore& blobs,
                                 const AuditKeys& keys, const DetectorLoader& load);
// AuditDataset, then audit.json and audit.csv written (StagedDir) into the
// next free project/name (or out=), and audit.json stored on the version
// (RecordAudit, app/dataset_audits.h) for the web UI's audit page.
Result<AuditReport> AuditDatasetAndWrite(Env& env, store::MetadataStore& meta, store::ArtifactStore& blobs,
                                         const AuditKeys& keys, const DetectorLoader& load);

nlohmann::json AuditReportJson(const AuditReport& r, size_t top);  // top = 0: every item
std::string AuditReportCsv(const AuditReport& r);
std::string AuditReportText(const AuditReport& r, size_t top);

}  // namespace kestrel::app
