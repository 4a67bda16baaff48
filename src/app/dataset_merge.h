// `kestrel dataset merge NAME@vN corrections=FILE` (issue 34): corrected
// labels from a labelling tool (a Label Studio JSON export or CVAT for
// images 1.1 XML, data/corrections.h) applied on top of a version as a NEW
// version of the same dataset. Images in the corrections take the corrected
// boxes (all of them: an image with every box deleted becomes a
// background); images absent keep theirs — never CVAT's replace-everything.
// An image the corrections name that is not in the version but is a file
// under the images folder is added with its boxes, in the split its path
// names or else the version's assigned split rule (docs/datasets.md
// "Merging corrected labels"). Torch-free.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/env.h"
#include "core/options.h"
#include "core/status.h"
#include "data/analyze.h"
#include "data/corrections.h"
#include "data/version.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::app {

struct MergeOptions {
  std::string corrections;  // the Label Studio JSON export or CVAT 1.1 XML file (required)
  // The folder new images are looked up under (data::ResolveImageFile);
  // "" = the corrections file's folder.
  std::string images;
  // The seed vN's split was assigned with at import (`dataset import
  // seed=`), for new images whose path names no split folder.
  int64_t seed = 0;
  void Bind(OptionSet& s);
};

struct DatasetMerge {
  store::DatasetVersionRecord base;    // vN
  store::DatasetVersionRecord record;  // the new version (or the identical one already stored)
  bool created = false;
  int64_t images_corrected = 0;               // manifest images whose boxes came from the corrections
  int64_t images_changed = 0;                 // of which the boxes differ from vN's
  int64_t images_added = 0;                   // new images (files under MergeOptions::images)
  int64_t boxes_before = 0, boxes_after = 0;  // in all images of vN and of the new version
  data::ValidationReport report;              // the corrections' findings
};

// Reads `opts.corrections`, matches each image to vN's manifest
// (data::MatchCorrectedImage) and each label to vN's class names, and
// stores the result as a version of vN's dataset (new image blobs, the
// manifest and report blobs, then the record; vN's images are its blobs
// already). An image matching no entry of vN is a new image when
// data::ResolveImageFile finds its file under `opts.images`: decoded like
// an import, in the split its path names ("train/", "val/", "test/" after
// an optional "images/") or else data::AssignedSplitOf(vN, seed). Any
// error finding — a missing field, a box outside the image, a rotated box,
// an unknown label, an image that matches neither an entry of vN nor a
// file ("corrections.unmatched_image") or several entries, an image
// corrected twice, a new image that does not decode (the importer's image.*
// check), a new image without a split folder in a version whose split was
// not assigned with `seed` ("corrections.no_split") — stores nothing:
// kInvalidArgument whose message carries the report text, the report in
// `report_out`. A file that is neither format: ReadCorrections' error.
// Identical content already stored is that version (created false).
Result<DatasetMerge> MergeCorrections(store::MetadataStore& meta, store::ArtifactStore& blobs,
                                      const std::string& spec, const MergeOptions& opts,
                                      Env& env = Env::Default(),
                                      data::ValidationReport* report_out = nullptr);

// MergeCorrections after its reads: vN (`v`, read as `spec`) and the
// corrections already parsed (`c`, e.g. built from Label Studio webhook
// annotations, server/api_ls.h; c.file names them in findings and in the
// record's source). New images are looked up under `images_dir`; "" = none
// (an image matching no entry of vN is corrections.unmatched_image). `seed`
// as MergeOptions::seed.
Result<DatasetMerge> MergeReadCorrections(store::MetadataStore& meta, store::ArtifactStore& blobs,
                                          const std::string& spec, data::VersionView v,
                                          const data::Corrections& c, const std::string& images_dir,
                                          int64_t seed, Env& env = Env::Default(),
                                          data::ValidationReport* report_out = nullptr);

// {"base", "version": DatasetVersionJson, "created", "images_corrected",
// "images_changed", "images_added", "boxes_before", "boxes_after", "report"}.
nlohmann::json DatasetMergeJson(const DatasetMerge& m);

}  // namespace kestrel::app
