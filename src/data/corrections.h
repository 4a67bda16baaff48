// Corrected labels back from a labelling tool (issue 34): a Label Studio
// JSON export (tasks with their annotations) or a CVAT for images 1.1 XML
// file, read into boxes per image reference, and the reference matched to a
// version's manifest entry. `kestrel dataset merge NAME@vN corrections=FILE`
// (app::Datasets::Merge) applies them as a new version. Torch-free.
//
// Problems with one task, image or box are findings (check ids in
// docs/datasets.md "Validation checks": corrections.*) naming the export
// file and the field ("tasks[3].annotations[0].result[1].value.x",
// "image[2].box[0].xtl"); a file that is not JSON/XML at all is a Status.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "data/dataset.h"
#include "data/manifest.h"

namespace kestrel::data {

struct CorrectionBox {
  std::string label;                    // the class name as the tool has it
  double cx = 0, cy = 0, w = 0, h = 0;  // normalized to the image, centre and size (YOLO)
  std::string field;                    // where in the export, for findings
};

struct CorrectedImage {
  // The image as the export names it: Label Studio's data.image with the
  // local-files "?d=" value taken and %XX decoded; CVAT's <image name>.
  std::string ref;
  std::string field;  // "tasks[3]" / "image[5]"
  std::vector<CorrectionBox> boxes;
};

struct Corrections {
  std::string file;    // the export's path as given
  std::string format;  // "label-studio" or "cvat"
  std::vector<CorrectedImage> images;
  FindingList findings;  // any error: nothing may be stored
};

// Label Studio's JSON export: an array of tasks {"data": {"image"},
// "annotations": [{"result": [...], "was_cancelled"}]}. A task's last
// annotation that was not cancelled is its labels (every box of the image);
// a task without one is not a correction (skipped, an info finding).
// Results of type rectanglelabels are read (x, y, width, height in percent
// of the image, top-left; value.rectanglelabels[0]); other types are
// ignored. Errors: a missing or mistyped field, rotation != 0, a box past
// the image by more than 0.01 % of its size (within that it is clipped), a
// zero-size box.
Result<Corrections> ParseLabelStudioExport(std::string_view json, const std::string& file);
// CVAT for images 1.1: <annotations><image name width height><box label
// xtl ytl xbr ybr [rotation]/></image>; pixels, converted with the
// image's width and height. The same errors as above.
Result<Corrections> ParseCvatXml(std::string_view xml, const std::string& file);
// Reads `path` (at most 1 GiB) and parses it by its first non-blank byte:
// '[' or '{' Label Studio, '<' CVAT; kInvalidArgument naming the file
// otherwise.
Result<Corrections> ReadCorrections(const std::string& path, Env& env = Env::Default());

// The manifest entry a reference names: the entry whose "<split>/<path>"
// (the layout of `dataset export` and `dataset predict`) or "<path>" is the
// reference or its '/'-separated tail, the longest such key winning; a
// Label Studio upload name ("/data/upload/3/1a2b3c4d-x.jpg") also matches
// by its name without the 8-hex-digit prefix. -1: no entry; -2: several
// entries match equally well.
int64_t MatchCorrectedImage(const Manifest& m, const std::string& ref);

}  // namespace kestrel::data
