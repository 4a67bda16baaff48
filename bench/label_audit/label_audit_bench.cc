// label_audit_bench (bench/label_audit/run.sh):
//   label_audit_bench plant SRC DST IMGSZ NUM_CLASSES RATE SEED
//     copies the YOLO dataset SRC (images/, labels/, data.yaml; square images
//     of IMGSZ pixels, as `kestrel dataset synth` writes) to DST with RATE of
//     the boxes of each kind corrupted (eval::PlantLabelErrors: removed,
//     relabelled, shifted, added) and DST.planted.json listing them.
//   label_audit_bench score PLANTED_JSON AUDIT_JSON
//     recall of the planted errors in the top 5/10/20 % of the audit's items
//     (eval::RecallAt; images matched by file stem), overall and per kind.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "eval/label_audit.h"

namespace fs = std::filesystem;
using kestrel::eval::AuditItem;
using kestrel::eval::AuditKind;
using kestrel::eval::Box;
using kestrel::eval::GroundTruth;
using kestrel::eval::PlantedError;

namespace {

AuditKind KindOf(const std::string& name) {
  for (AuditKind k : {AuditKind::kOk, AuditKind::kMissing, AuditKind::kSpurious, AuditKind::kWrongClass,
                      AuditKind::kLocalisation}) {
    if (name == kestrel::eval::AuditKindName(k)) return k;
  }
  return AuditKind::kOk;
}

Box JsonBox(const nlohmann::json& a) {
  return Box{a[0].get<float>(), a[1].get<float>(), a[2].get<float>(), a[3].get<float>()};
}

int Plant(const fs::path& src, const fs::path& dst, int imgsz, int nc, double rate, uint64_t seed) {
  if (fs::exists(dst)) {
    std::fprintf(stderr, "%s exists\n", dst.c_str());
    return 2;
  }
  fs::copy(src, dst, fs::copy_options::recursive);
  std::vector<fs::path> files;  // label files, sorted
  for (const auto& e : fs::recursive_directory_iterator(dst / "labels")) {
    if (e.is_regular_file() && e.path().extension() == ".txt") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<std::vector<GroundTruth>> truth;
  for (const fs::path& f : files) {
    std::ifstream in(f);
    truth.emplace_back();
    int c = 0;
    double cx = 0, cy = 0, w = 0, h = 0;
    while (in >> c >> cx >> cy >> w >> h) {
      truth.back().push_back({Box{float((cx - w / 2) * imgsz), float((cy - h / 2) * imgsz),
                                  float((cx + w / 2) * imgsz), float((cy + h / 2) * imgsz)},
                              c});
    }
  }
  const std::vector<std::pair<int, int>> sizes(truth.size(), {imgsz, imgsz});
  const auto planted = kestrel::eval::PlantLabelErrors(truth, sizes, nc, rate, seed);
  for (size_t i = 0; i < files.size(); ++i) {
    std::ofstream out(files[i], std::ios::trunc);
    for (const GroundTruth& g : planted.labels[i]) {
      const double cx = (g.box.x1 + g.box.x2) / 2.0 / imgsz, cy = (g.box.y1 + g.box.y2) / 2.0 / imgsz;
      const double w = (g.box.x2 - g.box.x1) / double(imgsz), h = (g.box.y2 - g.box.y1) / double(imgsz);
      char line[128];
      std::snprintf(line, sizeof line, "%d %.6f %.6f %.6f %.6f\n", g.class_id, cx, cy, w, h);
      out << line;
    }
  }
  nlohmann::json j = nlohmann::json::array();
  for (const PlantedError& e : planted.errors) {
    j.push_back({{"stem", files[e.image].stem().string()},
                 {"kind", kestrel::eval::AuditKindName(e.kind)},
                 {"box", {e.box.x1, e.box.y1, e.box.x2, e.box.y2}}});
  }
  std::ofstream(dst.string() + ".planted.json") << j.dump(1) << "\n";
  size_t boxes = 0;
  for (const auto& t : truth) boxes += t.size();
  std::printf("planted %zu errors (%.2f %% of %zu boxes of each kind) in %zu label files\n",
              planted.errors.size(), rate * 100, boxes, files.size());
  return 0;
}

int Score(const fs::path& planted_path, const fs::path& audit_path) {
  nlohmann::json planted, audit;
  std::ifstream(planted_path) >> planted;
  std::ifstream(audit_path) >> audit;
  std::map<std::string, size_t> image_of;  // stem -> audit image index
  std::vector<AuditItem> items;
  for (const auto& e : audit["items"]) {
    const std::string stem = fs::path(e["image"].get<std::string>()).stem().string();
    const size_t idx = image_of.emplace(stem, image_of.size()).first->second;
    AuditItem it;
    it.image = idx;
    it.kind = KindOf(e["kind"].get<std::string>());
    it.score = e["score"].get<double>();
    if (e.contains("label")) it.label_box = JsonBox(e["label"]["box"]);
    if (e.contains("prediction")) it.predicted_box = JsonBox(e["prediction"]["box"]);
    items.push_back(it);
  }
  std::vector<PlantedError> errors;
  for (const auto& p : planted) {
    PlantedError e;
    const std::string stem = p["stem"].get<std::string>();
    e.image = image_of.count(stem) ? image_of[stem] : size_t(-1);
    e.kind = KindOf(p["kind"].get<std::string>());
    e.box = JsonBox(p["box"]);
    errors.push_back(e);
  }
  std::printf("%zu items ranked, %zu planted errors\n", items.size(), errors.size());
  std::printf("share  reviewed  found  recall  missing  spurious  wrong_class  localisation\n");
  for (double share : {0.05, 0.10, 0.20}) {
    const auto r = kestrel::eval::RecallAt(items, errors, share);
    auto pk = [&](AuditKind k) {
      const auto& [f, n] = r.per_kind[size_t(k)];
      char b[32];
      std::snprintf(b, sizeof b, "%zu/%zu", f, n);
      return std::string(b);
    };
    std::printf("%4.0f%%  %8zu  %5zu  %6.3f  %7s  %8s  %11s  %12s\n", share * 100, r.reviewed, r.found,
                r.recall, pk(AuditKind::kMissing).c_str(), pk(AuditKind::kSpurious).c_str(),
                pk(AuditKind::kWrongClass).c_str(), pk(AuditKind::kLocalisation).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "plant" && argc == 8) {
    return Plant(argv[2], argv[3], std::stoi(argv[4]), std::stoi(argv[5]), std::stod(argv[6]),
                 std::stoull(argv[7]));
  }
  if (mode == "score" && argc == 4) return Score(argv[2], argv[3]);
  std::fprintf(stderr,
               "usage: label_audit_bench plant SRC DST IMGSZ NUM_CLASSES RATE SEED\n"
               "       label_audit_bench score PLANTED_JSON AUDIT_JSON\n");
  return 2;
}
