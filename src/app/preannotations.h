// Pre-annotations out (issue 34): a predict run's boxes as the documents
// labelling tools import, so annotators correct the model instead of
// drawing every box — Label Studio tasks JSON with its labelling config,
// CVAT for images 1.1 XML, a YOLO labels tree (Ultralytics YOLO Detection
// 1.0, also zipped: the archive CVAT's "Upload annotations" takes) and COCO
// instances JSON with scores. `kestrel predict format=...` and `kestrel
// dataset predict` write them (docs/cli.md "predict"). Torch-free and
// OpenCV-free.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "app/predict.h"
#include "core/env.h"
#include "core/status.h"

namespace kestrel::app {

struct PreannotationOptions {
  std::string format;  // "label-studio", "cvat", "yolo" or "coco"
  // The document's path; "" = in the run folder: label_studio.json,
  // cvat_annotations.xml, yolo (a folder) or coco_annotations.json. Label
  // Studio's labelling config is written beside the tasks: the path with its
  // extension replaced by ".label_config.xml"; the YOLO folder's zip beside
  // the folder: the path + ".zip".
  std::string out;
  // The folder the images were listed under (the predict source when it is
  // a folder): an image's name is its path relative to it, '/'-separated.
  // "" (a single file, a glob): the path as found.
  std::string source_root;
  // Label Studio: data.image = ls_image_root + the image's name,
  // percent-encoded except '/' (a URL prefix such as
  // "https://host/images/" or "/data/local-files/?d=images/"). "" = Label
  // Studio's local-files URL of the image's absolute path,
  // "/data/local-files/?d=" + the path without its leading '/' (serving
  // with LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT=/).
  std::string ls_image_root;
  // The RectangleLabels tag's name (a result's from_name) and the Image
  // tag's name (to_name), as in the labelling config.
  std::string ls_from_name = "label", ls_to_name = "image";
  std::string model_version;  // each prediction's model_version (the model= value)
};

// kInvalidArgument naming the field: format not label-studio|cvat|yolo|coco, an
// empty or non-identifier (letters, digits, '_', '-') ls_from_name or
// ls_to_name.
Status ValidatePreannotationOptions(const PreannotationOptions& options);

// An image's name: its path relative to options.source_root ('/'-separated),
// or the path as found when it is not under it.
std::string PreannotationImageName(const PredictedImage& image, const PreannotationOptions& options);

// Label Studio tasks: a JSON array, one task per image in `images` order:
//   {"data": {"image": URL}, "predictions": [ONE prediction]}
// The one prediction holds all the image's boxes (Label Studio shows one
// prediction per task): {"model_version", "score", "result": [...]}, where
// score is the image's uncertainty, 1 - the highest box score (1 when there
// is no box), so sorting by prediction score puts the images the model is
// least sure of first (descending). Each result:
//   {"id" (unique across all tasks: "<task>-<box>", both 0-based),
//    "type": "rectanglelabels", "from_name", "to_name", "original_width",
//    "original_height", "image_rotation": 0, "score" (the box's),
//    "value": {"x", "y", "width", "height" (percent of the original image,
//    top-left corner, box clipped to the image), "rotation": 0,
//    "rectanglelabels": [class name]}}
// A class id without a name is named by its number.
nlohmann::json LabelStudioTasksJson(const std::vector<PredictedImage>& images,
                                    const std::vector<std::string>& names,
                                    const PreannotationOptions& options);
// The labelling config matching the tasks: <View> with
// <Image name=TO value="$image"/> and <RectangleLabels name=FROM toName=TO>
// holding one <Label value=NAME/> per class of the model.
std::string LabelStudioConfigXml(const std::vector<std::string>& names, const PreannotationOptions& options);
// CVAT for images 1.1: <annotations><version>1.1</version><meta><task> with
// <size> and <labels> (one per class of the model), then one
// <image id name width height> per image (id 0-based in order, name as
// PreannotationImageName) holding
// <box label xtl ytl xbr ybr occluded="0" source="auto" z_order="0"> in
// original pixels, 2 decimals (CVAT's precision), clipped to the image.
std::string CvatXml(const std::vector<PredictedImage>& images, const std::vector<std::string>& names,
                    const PreannotationOptions& options);

// Ultralytics YOLO Detection 1.0 (CVAT's "Ultralytics YOLO Detection 1.0"
// import and export format): relative path -> content, in this order:
//   data.yaml   path: ./, train: train.txt, names: {0: NAME, ...}
//   train.txt   "images/train/<name>" per image, in `images` order
//   labels/train/<name without extension>.txt, one per image (empty when
//   it has no box): "cls cx cy w h", normalized to the original image, 6
//   decimals, box clipped to the image, no score (CVAT reads 5 columns).
// <name> is PreannotationImageName. kInvalidArgument naming `format` when
// two images share a label file (a/x.jpg and a/x.png): the tool could not
// tell them apart.
Result<std::vector<std::pair<std::string, std::string>>> YoloLabelTree(
    const std::vector<PredictedImage>& images, const std::vector<std::string>& names,
    const PreannotationOptions& options);
// COCO instances JSON with scores: {"info", "images": [{"id" (1-based, in
// order), "file_name" (PreannotationImageName), "width", "height"}],
// "categories": [{"id": class + 1, "name"}] (one per class of the model,
// as `dataset export format=coco`), "annotations": [{"id" (1-based),
// "image_id", "category_id", "bbox": [x, y, w, h] (pixels, top-left, clipped
// to the image), "area", "iscrowd": 0, "score"}]}.
nlohmann::json CocoPredictionsJson(const std::vector<PredictedImage>& images,
                                   const std::vector<std::string>& names,
                                   const PreannotationOptions& options);
// A zip archive of STORED (uncompressed) entries, in the given order, for
// files a labelling tool uploads. kResourceExhausted past zip's 32-bit
// limits (4 GiB, 65535 entries).
Result<std::string> StoredZip(const std::vector<std::pair<std::string, std::string>>& entries);

// Writes `result`'s documents for options.format (crash-safe: files by
// Env::WriteFileAtomic, the YOLO folder staged and renamed in only onto an
// absent or empty folder, core/staged_dir.h) and returns their paths (the
// tasks, annotations file or YOLO folder first; the YOLO zip second). kInvalidArgument naming `format` when
// the result holds video, camera or stream frames (no image file for a tool to open) or was run with
// stream=true (no image kept); the options' errors as above.
Result<std::vector<std::string>> WritePreannotations(Env& env, const PredictResult& result,
                                                     const PreannotationOptions& options);

}  // namespace kestrel::app
