// What a user types as `data=` (train, submit, val, compare): a registry
// reference or a path to a dataset source, which is then imported first.
//
//   NAME, NAME@vN, NAME@<id prefix>   a registry reference, used as is
//   anything with a '/', or ending in .yaml/.yml/.json (also "." and "..")
//                                     a path: data.yaml, a YOLO folder, a COCO
//                                     instances JSON or folder, a VOC folder
//
// A path is imported exactly like `kestrel dataset import PATH --name NAME`
// with the default ImportOptions (validated; with errors nothing is stored
// and the error and report are those of `dataset import`). Versions are
// content-addressed, so importing unchanged content again stores nothing: the
// existing version is reused, under NAME or, when the identical content is
// already registered under another name, under that name.
//
// NAME for a path (DatasetNameForPath):
//   - a folder: its name ("datasets/shapes/" -> "shapes");
//   - a file: its stem ("coco128.yaml" -> "coco128"), unless the stem is a
//     generic one (data, dataset, annotations, _annotations.coco, instances*,
//     train, val, test): then the name of the folder holding it, skipping a
//     folder named annotations or labels ("shapes/data.yaml" -> "shapes",
//     "coco/annotations/instances_val2017.json" -> "coco");
//   - characters other than letters, digits, '.', '_' and '-' become '_';
//     an empty result is "dataset".
// Torch-free.
#pragma once

#include <string>

#include "core/env.h"
#include "core/status.h"
#include "data/registry.h"
#include "store/metadata_store.h"

namespace kestrel::data {

// True when `data` names a path rather than a registry reference (see above).
// Purely lexical: a registry name never contains '/'.
bool IsDatasetPath(const std::string& data);

// The registry name an auto-import of `path` uses (rules above).
std::string DatasetNameForPath(const std::string& path);

struct ResolvedDataset {
  // What to hand to Registry::Load / the trainer: the user's reference
  // unchanged for a registry reference, "NAME@<version id>" for a path.
  std::string spec;
  bool from_path = false;              // `data` was a path (imported or reused)
  bool created = false;                // a new version was stored (from_path only)
  store::DatasetVersionRecord record;  // the version (from_path only)
  // One line for the user (from_path only), e.g.
  // "data: ds/data.yaml -> imported as shapes@v3 (version 1a2b3c4d5e6f, 96 images)".
  std::string message;
  // Registry references only: set when no dataset has that name but a file
  // or folder does ("... write data=./shapes"); the caller's Load still
  // reports the missing dataset.
  std::string hint;
};

// Resolves `data`. A registry reference is returned as is (the caller's
// Load reports a missing one; see `hint`). A path is imported (see the file
// comment); on failure the Status is what Registry::Import returns and
// `report_out`, when given, receives the validation report (empty `source`
// when the source could not be read at all), exactly as for
// `dataset import`.
Result<ResolvedDataset> ResolveDataset(Registry& registry, store::MetadataStore& meta,
                                       const std::string& data, ValidationReport* report_out = nullptr,
                                       Env& env = Env::Default());

}  // namespace kestrel::data
