#include "app/dataset_audit.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>
#include <utility>

#include "app/dataset_audits.h"
#include "app/evaluate.h"
#include "core/staged_dir.h"
#include "eval/dataset_eval.h"

namespace kestrel::app {

void AuditKeys::Bind(OptionSet& s) {
  s.String("data", &data, "the dataset version to audit (NAME or NAME@vN)");
  s.String("model", &model, "weights that did not train on these labels (a file or a registered model)");
  s.Choice("split", &split, {"all", "train", "val", "test"},
           "the split(s) audited; all: every split with images");
  s.Int("imgsz", &imgsz, "network input side; 0: the size the weights were trained at", 0, 8192);
  s.Int("batch", &batch, "images per forward pass", 1, 1024);
  s.Float("conf", &conf, "predictions below this score neither support a label nor count as missing",
          Range::Open(0, 1));
  s.Float("match_iou", &match_iou, "IoU at which a label and a prediction are the same object",
          Range::Open(0, 1));
  s.Float("loose_iou", &loose_iou, "IoU at which a prediction is the same object misplaced",
          Range::Open(0, 1));
  s.Int("top", &top, "items printed (audit.json and audit.csv hold every item)", 0, 1000000);
  s.String("device", &device, "cpu, cuda, cuda:N or N (LibTorch weights)");
  s.String("project", &project, "run folder parent");
  s.String("name", &name, "run folder name (default audit, audit2, ...)");
  s.String("out", &out, "the run folder itself (overrides project and name)");
  s.Bool("exist_ok", &exist_ok, "reuse an existing project/name folder");
}

Status AuditKeys::Validate() const {
  KESTREL_RETURN_IF_ERROR(CheckBoundValues(*this));
  if (data.empty())
    return Status::InvalidArgument("give the dataset version to audit (data=NAME@vN)", {"", 0, "data"});
  if (model.empty()) {
    return Status::InvalidArgument("give the model whose predictions audit the labels (model=WEIGHTS)",
                                   {"", 0, "model"});
  }
  if (loose_iou >= match_iou) {
    return Status::InvalidArgument("loose_iou must be below match_iou (" + std::to_string(match_iou) + ")",
                                   {"", 0, "loose_iou"});
  }
  return {};
}

Result<AuditReport> AuditDataset(store::MetadataStore& meta, store::ArtifactStore& blobs,
                                 const AuditKeys& keys, const DetectorLoader& load) {
  KESTREL_RETURN_IF_ERROR(keys.Validate());
  ModelRunOptions mo;
  mo.imgsz = keys.imgsz;
  mo.batch = keys.batch;
  mo.device = keys.device;
  const std::vector<std::string> wanted = keys.split == "all"
                                              ? std::vector<std::string>{"train", "val", "test"}
                                              : std::vector<std::string>{keys.split};
  AuditReport report;
  report.model = keys.model;
  std::unique_ptr<Detector> detector;
  std::vector<std::vector<eval::GroundTruth>> labels;
  std::vector<std::vector<eval::Detection>> predictions;
  for (const std::string& split : wanted) {
    Result<LoadedSplit> loaded = LoadSplit(meta, blobs, keys.data, split);
    if (!loaded.IsOk()) {
      // An empty split is skipped under split=all; any other error is the user's.
      if (keys.split == "all" && loaded.GetStatus().Code() == StatusCode::kFailedPrecondition) continue;
      return loaded.GetStatus();
    }
    const auto& rec = loaded->version.record;
    report.data = rec.dataset + "@v" + std::to_string(rec.seq);
    report.names = loaded->split.names;
    if (detector == nullptr) {
      KESTREL_ASSIGN_OR_RETURN(
          detector, load(keys.model, ModelRunInference(mo), DetectorPlacement{mo.device, mo.runtime}));
      report.imgsz = detector->Options().imgsz;
    }
    KESTREL_ASSIGN_OR_RETURN(ScoredSplit scored,
                             ScoreLoadedModelOnSplit(*detector, blobs, keys.model, loaded->split, mo));
    for (size_t i = 0; i < loaded->split.images.size(); ++i) {
      const eval::SplitImage& img = loaded->split.images[i];
      report.images.push_back({split, img.path, img.width, img.height});
      report.labels += img.labels.size();
      labels.push_back(img.labels);
      predictions.push_back(i < scored.per_image.size() ? scored.per_image[i]
                                                        : std::vector<eval::Detection>{});
    }
  }
  if (report.images.empty()) {
    return Status::InvalidArgument(
        keys.data + " has no images in " +
            (keys.split == "all" ? std::string("any split") : "split " + keys.split),
        {"", 0, "split"});
  }
  eval::AuditOptions ao;
  ao.conf = keys.conf;
  ao.match_iou = keys.match_iou;
  ao.loose_iou = keys.loose_iou;
  report.items = eval::AuditLabels(labels, predictions, ao);
  return report;
}

Result<AuditReport> AuditDatasetAndWrite(Env& env, store::MetadataStore& meta, store::ArtifactStore& blobs,
                                         const AuditKeys& keys, const DetectorLoader& load) {
  // The folder is chosen first so that a bad name fails before the model runs.
  const std::string dir =
      keys.out.empty() ? eval::NextRunDir(env, keys.project, keys.name, "audit", keys.exist_ok) : keys.out;
  if (!keys.out.empty() && !keys.exist_ok) KESTREL_RETURN_IF_ERROR(RequireEmptyOrAbsent(env, dir));
  KESTREL_ASSIGN_OR_RETURN(AuditReport report, AuditDataset(meta, blobs, keys, load));
  KESTREL_ASSIGN_OR_RETURN(StagedDir staged, StagedDir::Create(env, dir));
  KESTREL_RETURN_IF_ERROR(env.WriteFileAtomic(staged.Path() + "/audit.csv", AuditReportCsv(report)));
  const nlohmann::json doc = AuditReportJson(report, 0);
  KESTREL_RETURN_IF_ERROR(env.WriteFileAtomic(staged.Path() + "/audit.json", doc.dump(1) + "\n"));
  KESTREL_RETURN_IF_ERROR(staged.Commit({"audit.json"}));
  report.dir = dir;
  // Kept on the version for `kestrel serve` (the run folder may be on another host).
  std::string name, ref;
  store::SplitDatasetRef(report.data, &name, &ref);
  KESTREL_ASSIGN_OR_RETURN(store::DatasetVersionRecord version, meta.GetVersion(name, ref));
  KESTREL_ASSIGN_OR_RETURN(StoredAudit stored,
                           RecordAudit(meta, blobs, version, doc, keys.split, env.UnixMillis()));
  report.stored = stored.number;
  return report;
}

namespace {

std::string ClassName(const AuditReport& r, int c) {
  if (c < 0) return "";
  return size_t(c) < r.names.size() ? r.names[size_t(c)] : std::to_string(c);
}

std::vector<size_t> KindCounts(const AuditReport& r) {
  std::vector<size_t> n(5, 0);
  for (const auto& it : r.items) ++n[size_t(it.kind)];
  return n;
}

// CSV field: quoted when it holds a comma, quote or line break.
std::string Csv(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string Num(double v, const char* fmt = "%.4f") {
  char b[64];
  std::snprintf(b, sizeof b, fmt, v);
  return b;
}

std::string BoxText(const eval::Box& b) {
  return Num(b.x1, "%.1f") + " " + Num(b.y1, "%.1f") + " " + Num(b.x2, "%.1f") + " " + Num(b.y2, "%.1f");
}

}  // namespace

nlohmann::json AuditReportJson(const AuditReport& r, size_t top) {
  nlohmann::json j = {{"data", r.data},     {"model", r.model},
                      {"imgsz", r.imgsz},   {"images", r.images.size()},
                      {"labels", r.labels}, {"classes", r.names}};
  if (!r.dir.empty()) j["dir"] = r.dir;
  const std::vector<size_t> n = KindCounts(r);
  nlohmann::json counts = nlohmann::json::object();
  for (size_t k = 0; k < n.size(); ++k) counts[eval::AuditKindName(eval::AuditKind(k))] = n[k];
  j["counts"] = counts;
  nlohmann::json items = nlohmann::json::array();
  const size_t shown = top == 0 ? r.items.size() : std::min(top, r.items.size());
  for (size_t i = 0; i < shown; ++i) {
    const eval::AuditItem& it = r.items[i];
    nlohmann::json e = eval::AuditItemJson(it);
    const AuditImage& img = r.images[it.image];
    e["rank"] = i + 1;
    e["image"] = img.path;
    e["split"] = img.split;
    e["width"] = img.width;
    e["height"] = img.height;
    if (e.contains("label")) e["label"]["name"] = ClassName(r, it.label_class);
    if (e.contains("prediction")) e["prediction"]["name"] = ClassName(r, it.predicted_class);
    items.push_back(std::move(e));
  }
  j["items"] = std::move(items);
  j["items_total"] = r.items.size();
  return j;
}

std::string AuditReportCsv(const AuditReport& r) {
  std::string out =
      "rank,kind,score,split,image,label_class,label_x1,label_y1,label_x2,label_y2,"
      "predicted_class,predicted_score,predicted_x1,predicted_y1,predicted_x2,predicted_y2,iou\n";
  for (size_t i = 0; i < r.items.size(); ++i) {
    const eval::AuditItem& it = r.items[i];
    const AuditImage& img = r.images[it.image];
    std::string row = std::to_string(i + 1) + "," + eval::AuditKindName(it.kind) + "," + Num(it.score) + "," +
                      img.split + "," + Csv(img.path) + ",";
    if (it.label >= 0) {
      row += Csv(ClassName(r, it.label_class)) + "," + Num(it.label_box.x1, "%.1f") + "," +
             Num(it.label_box.y1, "%.1f") + "," + Num(it.label_box.x2, "%.1f") + "," +
             Num(it.label_box.y2, "%.1f");
    } else {
      row += ",,,,";
    }
    row += ",";
    if (it.prediction >= 0) {
      row += Csv(ClassName(r, it.predicted_class)) + "," + Num(it.predicted_score) + "," +
             Num(it.predicted_box.x1, "%.1f") + "," + Num(it.predicted_box.y1, "%.1f") + "," +
             Num(it.predicted_box.x2, "%.1f") + "," + Num(it.predicted_box.y2, "%.1f");
    } else {
      row += ",,,,,";
    }
    row += "," + (it.label >= 0 && it.prediction >= 0 ? Num(it.iou, "%.3f") : std::string());
    out += row + "\n";
  }
  return out;
}

std::string AuditReportText(const AuditReport& r, size_t top) {
  std::ostringstream s;
  const std::vector<size_t> n = KindCounts(r);
  s << "audit of " << r.data << " with " << r.model << " (imgsz=" << r.imgsz << "): " << r.images.size()
    << " images, " << r.labels << " labels\n";
  s << "suspected: " << n[size_t(eval::AuditKind::kMissing)] << " missing, "
    << n[size_t(eval::AuditKind::kSpurious)] << " spurious, " << n[size_t(eval::AuditKind::kWrongClass)]
    << " wrong class, " << n[size_t(eval::AuditKind::kLocalisation)] << " localisation; "
    << n[size_t(eval::AuditKind::kOk)] << " labels confirmed\n";
  const size_t shown = std::min(top, r.items.size());
  if (shown > 0) s << "\n rank  score  kind          image  (label -> prediction, x1 y1 x2 y2 px)\n";
  for (size_t i = 0; i < shown; ++i) {
    const eval::AuditItem& it = r.items[i];
    char head[64];
    std::snprintf(head, sizeof head, "%5zu  %.3f  %-12s  ", i + 1, it.score, eval::AuditKindName(it.kind));
    s << head << r.images[it.image].path;
    if (it.label >= 0)
      s << "  label " << ClassName(r, it.label_class) << " [" << BoxText(it.label_box) << "]";
    if (it.prediction >= 0) {
      s << (it.label >= 0 ? " ->" : " ") << " predicted " << ClassName(r, it.predicted_class) << " ["
        << BoxText(it.predicted_box) << "]";
    }
    s << "\n";
  }
  if (!r.dir.empty()) s << "\nevery item: " << r.dir << "/audit.csv, " << r.dir << "/audit.json\n";
  return s.str();
}

}  // namespace kestrel::app
