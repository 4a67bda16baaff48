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
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "data/dataset.h"
#include "data/formats.h"
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
  // The class names the export declares, in its order: CVAT's
  // <meta>...<labels><label><name>; empty for Label Studio (its export
  // carries no label list) and for a CVAT file without <meta>.
  std::vector<std::string> labels;
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

// An image file a reference names under `images_dir` (merge's new images,
// import's samples). The reference's longest '/'-separated tail that is a
// regular file under `images_dir` wins (tails with an empty, "." or ".."
// component are never tried, so nothing outside the folder is read); a
// Label Studio upload name ("<8 hex>-a.jpg") is also tried without its
// prefix. Its manifest key is that tail after its first "images" folder
// (the whole tail without one), less a leading "train/", "val/" or "test/"
// folder, which is its split — the layout `dataset export` and `dataset
// predict` write.
struct ImageFile {
  std::string path;                  // JoinPath(images_dir, tail)
  std::string rel_path;              // the manifest key
  Split split = Split::kUnassigned;  // kUnassigned: the tail names no split folder
};
std::optional<ImageFile> ResolveImageFile(const std::string& images_dir, const std::string& ref,
                                          Env& env = Env::Default());

// A new image read and decoded through the importer's decode entry point:
// its manifest entry (path, split, sha256, oriented size; no boxes) and its
// bytes. On failure the Status names the file and `failed_check` (nullable)
// gets the importer's check id ("image.unreadable", "image.decode", ...).
struct NewImage {
  ManifestEntry entry;
  std::string bytes;
};
Result<NewImage> ReadNewImage(const ImageFile& f, Env& env, std::string* failed_check = nullptr);

// The split a new image `e` takes when added to a version `m` whose split
// was assigned (AssignSplits with `seed`, data/manifest.h), without moving
// any of m's images: the place of its key sha256(seed ":" image_sha ":"
// path) in m's order — val when it sorts before the key of m's last val
// image, train otherwise (so the val share stays the assigned one on
// average). kFailedPrecondition when m's split is not that order: its
// source had its own splits, or it was split with another seed.
Result<Split> AssignedSplitOf(const Manifest& m, const ManifestEntry& e, uint64_t seed);

// `dataset import` of an export (ReadDataset's "label-studio" and "cvat"
// formats): the export at `path` read as a SourceDataset whose images are
// the files its references name under the export's folder
// (ResolveImageFile). Class names: the export's declared labels (CVAT
// <meta>), else every label used, sorted. A reference matching no file
// ("corrections.unmatched_image"), two references of one file
// ("corrections.duplicate_image") and a label the <meta> does not declare
// ("corrections.unknown_label") are error findings naming the export's
// field, like the parse errors; the source has splits when every image is
// under a split folder. A file that is neither format: a Status.
Result<SourceDataset> ReadCorrectionsDataset(const std::string& path, const std::string& format,
                                             const ReadOptions& opts);

}  // namespace kestrel::data
