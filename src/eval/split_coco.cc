#include "eval/split_coco.h"

#include <map>
#include <utility>

#include "eval/prediction_io.h"

namespace kestrel::eval {
Result<SplitImageIds> ResolveSplitImageIds(const EvalSplit& split, const std::string& mode) {
  if (mode != "auto" && mode != "stem" && mode != "export") {
    return Status::InvalidArgument("image_ids must be auto, stem or export, got '" + mode + "'",
                                   {"command line", 0, "image_ids"});
  }
  SplitImageIds out;
  std::map<int64_t, size_t> seen;
  bool stems_ok = true;
  std::vector<int64_t> stems;
  stems.reserve(split.images.size());
  for (size_t i = 0; i < split.images.size(); ++i) {
    const int64_t id = NumericStem(split.images[i].stem);
    if (id < 0 || !seen.emplace(id, i).second) stems_ok = false;
    stems.push_back(id);
  }
  out.mode = mode == "auto" ? (stems_ok ? "stem" : "export") : mode;
  if (out.mode == "stem" && !stems_ok) {
    return Status::InvalidArgument(
        "image_ids=stem needs every image stem of split '" + split.split + "' to be a distinct integer",
        {"command line", 0, "image_ids"});
  }
  if (out.mode == "stem") {
    out.ids = std::move(stems);
  } else {
    out.ids.reserve(split.images.size());
    for (const SplitImage& im : split.images) out.ids.push_back(im.export_id);
  }
  return out;
}

Result<SplitCocoJson> SplitPredictionsCocoJson(const EvalSplit& split,
                                               const std::vector<std::vector<Detection>>& per_image,
                                               const std::string& image_ids_mode) {
  if (per_image.size() != split.images.size()) {
    return Status::Internal("predictions for " + std::to_string(per_image.size()) + " images, split has " +
                            std::to_string(split.images.size()));
  }
  KESTREL_ASSIGN_OR_RETURN(SplitImageIds ids, ResolveSplitImageIds(split, image_ids_mode));
  const int nc = static_cast<int>(split.names.size());
  std::vector<int> category_ids(split.names.size());
  for (size_t c = 0; c < category_ids.size(); ++c) category_ids[c] = static_cast<int>(c) + 1;
  std::vector<std::pair<int64_t, std::vector<Detection>>> images;
  images.reserve(split.images.size());
  SplitCocoJson out;
  for (size_t i = 0; i < split.images.size(); ++i) {
    for (const Detection& d : per_image[i]) {
      // The writer passes unknown classes through unmapped; refuse them here
      // so the file always reads back.
      if (d.class_id < 0 || d.class_id >= nc) {
        return Status::InvalidArgument(
            "class id " + std::to_string(d.class_id) + " outside 0.." + std::to_string(nc - 1),
            {split.images[i].path, 0, "class"});
      }
    }
    out.detections += static_cast<int64_t>(per_image[i].size());
    images.emplace_back(ids.ids[i], per_image[i]);
  }
  CocoWriteOptions wo;
  wo.round = false;
  out.text = CocoResultsJson(images, category_ids, wo);
  out.image_ids = ids.mode;
  return out;
}

Result<CocoMetrics> CocoEvaluateSplit(const EvalSplit& split,
                                      const std::vector<std::vector<Detection>>& per_image) {
  if (per_image.size() != split.images.size()) {
    return Status::Internal("predictions for " + std::to_string(per_image.size()) + " images, split has " +
                            std::to_string(split.images.size()));
  }
  if (split.names.empty()) return Status::InvalidArgument("the dataset has no classes", {"", 0, "names"});
  CocoEvaluator ev(static_cast<int>(split.names.size()));
  for (size_t i = 0; i < split.images.size(); ++i) {
    Status s = ev.AddImage(split.images[i].labels, per_image[i]);
    if (!s.IsOk()) return s.WithContext("image " + split.images[i].path);
  }
  return ev.Evaluate();
}

}  // namespace kestrel::eval
