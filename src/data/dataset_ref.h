// What a user types as `data=` (train, submit, val, compare): a registry
// reference or a path to a dataset source, which is then imported first.
//
//   NAME, NAME@vN, NAME@<id prefix>   a registry reference, used as is
//   anything with a '/', or ending in .yaml/.yml/.json (also "." and "..")
//                                     a path: data.yaml, a YOLO folder, a COCO
//                                     instances JSON or folder, a VOC folder
//
// A path is imported first (app::Datasets::Resolve, app/datasets.h); this
// header holds the lexical rules only.
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

namespace kestrel::data {

// True when `data` names a path rather than a registry reference (see above).
// Purely lexical: a registry name never contains '/'.
bool IsDatasetPath(const std::string& data);

// The registry name an auto-import of `path` uses (rules above).
std::string DatasetNameForPath(const std::string& path);

}  // namespace kestrel::data
