#include "train/samples.h"

#include <nlohmann/json.hpp>

namespace kestrel::train {

namespace {

nlohmann::json BoxJson(double x1, double y1, double x2, double y2) { return {x1, y1, x2, y2}; }

}  // namespace

std::string EpochSamplesPath(const std::string& run_dir, int epoch) {
  return JoinPath(JoinPath(run_dir, "samples"), "epoch-" + std::to_string(epoch) + ".json");
}

std::string EpochSamplesText(int epoch, const SampleSource& source, const std::vector<SampleImage>& images) {
  nlohmann::json doc = {{"format", kSamplesFormat},
                        {"format_version", kSamplesFormatVersion},
                        {"epoch", epoch},
                        {"dataset", source.dataset},
                        {"version", source.version},
                        {"version_id", source.version_id},
                        {"conf", kSampleConf},
                        {"names", source.names}};
  nlohmann::json list = nlohmann::json::array();
  for (const SampleImage& s : images) {
    const data::ManifestEntry& e = *s.entry;
    nlohmann::json labels = nlohmann::json::array();
    for (const data::Box& b : e.boxes) {
      // Normalized centre/size -> xyxy pixels of the original image.
      const double cx = b.cx * e.width, cy = b.cy * e.height, w = b.w * e.width, h = b.h * e.height;
      labels.push_back(
          {{"class_id", b.cls}, {"box", BoxJson(cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)}});
    }
    nlohmann::json dets = nlohmann::json::array();
    for (const eval::Detection& d : s.detections) {
      dets.push_back({{"class_id", d.class_id},
                      {"score", d.score},
                      {"box", BoxJson(d.box.x1, d.box.y1, d.box.x2, d.box.y2)}});
    }
    list.push_back({{"sha", e.image_sha},
                    {"path", e.path},
                    {"width", e.width},
                    {"height", e.height},
                    {"labels", std::move(labels)},
                    {"detections", std::move(dets)}});
  }
  doc["images"] = std::move(list);
  return doc.dump() + "\n";
}

Status WriteEpochSamples(Env& env, const std::string& run_dir, int epoch, const SampleSource& source,
                         const std::vector<SampleImage>& images) {
  KESTREL_RETURN_IF_ERROR(env.CreateDirs(JoinPath(run_dir, "samples")));
  return env.WriteFileAtomic(EpochSamplesPath(run_dir, epoch), EpochSamplesText(epoch, source, images));
}

}  // namespace kestrel::train
