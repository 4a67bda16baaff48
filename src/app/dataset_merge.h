// `kestrel dataset merge NAME@vN corrections=FILE` (issue 34): corrected
// labels from a labelling tool (a Label Studio JSON export or CVAT for
// images 1.1 XML, data/corrections.h) applied on top of a version as a NEW
// version of the same dataset. Images in the corrections take the corrected
// boxes (all of them: an image with every box deleted becomes a
// background); images absent keep theirs — never CVAT's replace-everything.
// Torch-free.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/env.h"
#include "core/status.h"
#include "data/analyze.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::app {

struct DatasetMerge {
  store::DatasetVersionRecord base;    // vN
  store::DatasetVersionRecord record;  // the new version (or the identical one already stored)
  bool created = false;
  int64_t images_corrected = 0;               // manifest images whose boxes came from the corrections
  int64_t images_changed = 0;                 // of which the boxes differ from vN's
  int64_t boxes_before = 0, boxes_after = 0;  // in all images of vN and of the new version
  data::ValidationReport report;              // the corrections' findings
};

// Reads `corrections_path`, matches each image to vN's manifest
// (data::MatchCorrectedImage) and each label to vN's class names, and
// stores the result as a version of vN's dataset (manifest and report
// blobs, then the record; the images are vN's blobs already). Any error
// finding — a missing field, a box outside the image, a rotated box, an
// unknown label, an image that matches no file of vN or several, an image
// corrected twice — stores nothing: kInvalidArgument whose message carries
// the report text, the report in `report_out`. A file that is neither
// format: ReadCorrections' error. Identical content already stored is
// that version (created false).
Result<DatasetMerge> MergeCorrections(store::MetadataStore& meta, store::ArtifactStore& blobs,
                                      const std::string& spec, const std::string& corrections_path,
                                      Env& env = Env::Default(),
                                      data::ValidationReport* report_out = nullptr);

// {"base", "version": DatasetVersionJson, "created", "images_corrected",
// "images_changed", "boxes_before", "boxes_after", "report"}.
nlohmann::json DatasetMergeJson(const DatasetMerge& m);

}  // namespace kestrel::app
