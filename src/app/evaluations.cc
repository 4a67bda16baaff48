#include "app/evaluations.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <set>
#include <utility>

#include "app/evaluate.h"
#include "app/job_kinds.h"
#include "app/jobs.h"
#include "app/models.h"
#include "core/hash.h"
#include "core/json.h"
#include "core/utf8.h"
#include "eval/compare_plots.h"
#include "eval/confusion.h"
#include "eval/dataset_eval.h"
#include "eval/metrics.h"
#include "eval/val_shapes.h"

namespace kestrel::app {
namespace {

using nlohmann::json;

Status Bad(const std::string& field, const std::string& msg) {
  return Status::InvalidArgument(msg, {kRequestFile, 0, field});
}

Status NoPredictions(int64_t id) {
  return Status::FailedPrecondition("evaluation " + std::to_string(id) +
                                        " has no stored predictions: submit the val job with save_json=true",
                                    {kRequestFile, 0, "id"});
}

Status NoEvaluation(int64_t id, const std::string& why) {
  return Status::NotFound("no evaluation " + std::to_string(id) + ": " + why, {kRequestFile, 0, "id"});
}

json ParsedObject(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  return j.is_object() ? j : json::object();
}

std::string Text(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

template <typename T>
T Number(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<T>() : T{};
}

json BoxJson(const eval::Box& b) { return json::array({b.x1, b.y1, b.x2, b.y2}); }

// The artifact-store SHA-256 of a blob path (objects/<aa>/<sha>), or "".
std::string BlobShaOfPath(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.size() != 64) return "";
  for (char c : name) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return "";
  }
  return name;
}

Result<ImageFilter> ParseFilter(const std::string& text) {
  if (text.empty() || text == "all") return ImageFilter::kAll;
  if (text == "right") return ImageFilter::kRight;
  if (text == "wrong") return ImageFilter::kWrong;
  return Bad("filter", "unknown filter '" + text + "' (all, right or wrong)");
}

Status CheckPage(int64_t offset, int64_t limit, int64_t max_limit) {
  if (limit < 1 || limit > max_limit)
    return Bad("limit", "limit must be 1.." + std::to_string(max_limit) + ", got " + std::to_string(limit));
  if (offset < 0) return Bad("offset", "offset must be >= 0, got " + std::to_string(offset));
  return {};
}

std::vector<std::string> ClassNames(const eval::EvalResult& r) {
  std::vector<std::string> names = r.settings.class_names;
  for (size_t c = names.size(); c < size_t(std::max(0, r.settings.num_classes)); ++c)
    names.push_back(std::to_string(c));
  return names;
}

// The stored detections of one image as the pages show them.
json DetectionsJson(const std::vector<eval::Detection>& preds) {
  std::vector<const eval::Detection*> shown;
  for (const auto& d : preds) {
    if (d.score >= kMinShownScore) shown.push_back(&d);
  }
  std::stable_sort(shown.begin(), shown.end(),
                   [](const eval::Detection* x, const eval::Detection* y) { return x->score > y->score; });
  if (shown.size() > kMaxShownDetections) shown.resize(kMaxShownDetections);
  json out = json::array();
  for (const eval::Detection* d : shown)
    out.push_back({{"class_id", d->class_id}, {"score", d->score}, {"box", BoxJson(d->box)}});
  return out;
}

json LabelsJson(const std::vector<eval::GroundTruth>& labels) {
  json out = json::array();
  for (const auto& g : labels) out.push_back({{"class_id", g.class_id}, {"box", BoxJson(g.box)}});
  return out;
}

json CurvesOf(const json& record) {
  if (record.contains("metrics") && record["metrics"].is_object() && record["metrics"].contains("curves"))
    return record["metrics"]["curves"];
  return nullptr;
}

std::string Fixed(double v, int digits = 3) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

}  // namespace

struct Evaluations::Loaded {
  EvaluationDetail detail;
  eval::EvalResult metrics;      // the record's metrics (no curves, no error counts)
  std::string predictions_path;  // "" without stored predictions
  std::string image_ids;         // how predictions.json names images
};

std::string Evaluations::AttemptDir(int64_t id, int64_t attempt) const {
  return JoinPath(JoinPath(JoinPath(home_, "jobs"), std::to_string(id)),
                  "attempt-" + std::to_string(attempt));
}

Result<EvaluationSummary> Evaluations::Summarize(const store::JobRecord& job) {
  if (JobKindText(job) != "val")
    return NoEvaluation(job.id, "job " + std::to_string(job.id) + " is not a val job");
  if (job.state != store::JobState::kSucceeded) {
    return NoEvaluation(job.id, "val job " + std::to_string(job.id) + " is " +
                                    store::JobStateName(job.state) +
                                    " (an evaluation is a succeeded val job)");
  }
  // The typed result the val attempt wrote (app/job_kinds.h); record_sha is one of its details.
  const auto result = AttemptResult::Parse(job.result_json);
  const json cfg = ParsedObject(job.spec.config_json);
  const json typed = ParsedObject(job.spec.spec_json);
  EvaluationSummary s;
  s.id = job.id;
  if (result.IsOk()) {
    s.record_sha = Text(result->details, "record_sha");
    s.attempt = result->attempt;
  }
  if (s.record_sha.empty() || s.attempt < 1)
    return Status::Corruption(
        "val job " + std::to_string(job.id) + ": its result names no record_sha/attempt",
        {kRequestFile, 0, "id"});
  s.weights = Text(cfg, "model");
  s.model_submitted = Text(typed, "model").empty() ? s.weights : Text(typed, "model");
  s.model = s.model_submitted;
  if (!models_read_) {
    store::ModelFilter all;
    KESTREL_ASSIGN_OR_RETURN(models_, meta_.ListModels(all));
    models_read_ = true;
  }
  if (const std::string sha = BlobShaOfPath(s.weights); !sha.empty()) {
    for (const auto& m : models_) {
      if (m.weights_sha == sha) {
        s.model = m.name + "@v" + std::to_string(m.seq);
        s.model_id = m.id;
        break;
      }
    }
  }
  const std::string data = Text(cfg, "data");
  s.dataset = data.substr(0, data.find('@'));
  s.version_id = job.spec.dataset_version;
  auto vit = versions_.find(s.dataset);
  if (vit == versions_.end()) {
    auto listed = meta_.ListVersions(s.dataset);
    vit = versions_
              .emplace(s.dataset,
                       listed.IsOk() ? std::move(listed).Value() : std::vector<store::DatasetVersionRecord>{})
              .first;
  }
  for (const auto& v : vit->second) {
    if (v.version_id == s.version_id) s.version = "v" + std::to_string(v.seq);
  }
  const json& details = result->details;
  s.split = Text(details, "split");
  s.images = Number<int64_t>(details, "images");
  s.instances = Number<int64_t>(details, "instances");
  s.map50 = result->map50.value_or(0.0);
  s.map50_95 = result->map50_95.value_or(0.0);
  s.precision = Number<double>(details, "precision");
  s.recall = Number<double>(details, "recall");
  s.fitness = Number<double>(details, "fitness");
  s.created_ms = job.created_ms;
  s.finished_ms = job.finished_ms;
  s.has_predictions = env_.Stat(JoinPath(AttemptDir(job.id, s.attempt), "predictions.json")).is_regular;
  return s;
}

Result<EvaluationList> Evaluations::List(const EvaluationListRequest& req) {
  KESTREL_RETURN_IF_ERROR(CheckPage(req.offset, req.limit, 1000));
  if (!req.split.empty() && req.split != "train" && req.split != "val" && req.split != "test")
    return Bad("split", "unknown split '" + req.split + "' (train, val or test)");
  // Stored configs are JSON (UTF-8) and dataset names have no '/': a filter
  // that cannot match anything stored is a mistake to report, not an empty list.
  if (!IsValidUtf8(req.model))
    return Bad("model", "model=" + EscapeForDisplay(req.model) + ": not UTF-8, so it names no model or file");
  if (const std::string name = req.dataset.substr(0, req.dataset.find('@'));
      !IsValidUtf8(name) || name.find('/') != std::string::npos) {
    return Bad("dataset", "dataset=" + EscapeForDisplay(req.dataset) +
                              ": not a dataset name (UTF-8 without '/'; NAME or NAME@VERSION)");
  }
  // --model: every version of a model name, or the model a reference names,
  // or the text as submitted.
  std::set<std::string> model_ids;
  if (!req.model.empty()) {
    store::ModelFilter by_name;
    by_name.name = req.model;
    KESTREL_ASSIGN_OR_RETURN(auto named, meta_.ListModels(by_name));
    for (const auto& m : named) model_ids.insert(m.id);
    if (named.empty()) {
      auto m = ModelRegistry(meta_, blobs_, env_).Resolve(req.model);
      if (m.IsOk()) {
        model_ids.insert(m->id);
      } else if (m.GetStatus().Code() != StatusCode::kNotFound) {
        return Bad("model", "model=" + req.model + ": " + m.GetStatus().Message());
      }
    }
  }
  std::string dataset = req.dataset, version_id;
  if (const size_t at = req.dataset.find('@'); at != std::string::npos) {
    dataset = req.dataset.substr(0, at);
    auto v = meta_.GetVersion(dataset, req.dataset.substr(at + 1));
    if (!v.IsOk()) return Bad("dataset", "dataset=" + req.dataset + ": " + v.GetStatus().Message());
    version_id = v->version_id;
  }
  store::JobFilter f;
  f.states = {store::JobState::kSucceeded};
  f.kind = "val";
  f.limit = std::numeric_limits<int64_t>::max();
  KESTREL_ASSIGN_OR_RETURN(auto jobs, meta_.ListJobs(f));
  std::sort(jobs.begin(), jobs.end(), [](const auto& x, const auto& y) { return x.id > y.id; });
  EvaluationList out;
  int64_t matched = 0;
  for (const auto& job : jobs) {
    if (JobKindText(job) != "val") continue;
    auto s = Summarize(job);
    if (!s.IsOk()) continue;  // a result this version cannot read is no evaluation
    if (!req.model.empty() && model_ids.count(s->model_id) == 0 && s->model_submitted != req.model &&
        s->weights != req.model)
      continue;
    if (!dataset.empty() && s->dataset != dataset) continue;
    if (!version_id.empty() && s->version_id != version_id) continue;
    if (!req.split.empty() && s->split != req.split) continue;
    if (matched >= req.offset && matched < req.offset + req.limit) out.evaluations.push_back(*s);
    ++matched;
  }
  if (matched > req.offset + req.limit) out.next_offset = req.offset + req.limit;
  return out;
}

Result<Evaluations::Loaded> Evaluations::Load(int64_t id, bool need_predictions) {
  auto job = meta_.GetJob(id);
  if (!job.IsOk()) {
    if (job.GetStatus().Code() == StatusCode::kNotFound) return NoEvaluation(id, "no such job");
    return job.GetStatus();
  }
  Loaded l;
  KESTREL_ASSIGN_OR_RETURN(l.detail.summary, Summarize(*job));
  const EvaluationSummary& s = l.detail.summary;
  KESTREL_ASSIGN_OR_RETURN(std::string text, blobs_.Get(s.record_sha));
  l.detail.record = json::parse(text, nullptr, false);
  if (!l.detail.record.is_object() || !l.detail.record.contains("metrics"))
    return Status::Corruption("evaluation " + std::to_string(id) + ": the result record is not a record",
                              {s.record_sha, 0, "metrics"});
  KESTREL_ASSIGN_OR_RETURN(l.metrics, eval::EvalResultFromJson(l.detail.record["metrics"]));
  if (s.has_predictions) {
    l.predictions_path = JoinPath(AttemptDir(id, s.attempt), "predictions.json");
    const json& pj = l.detail.record.value("predictions_json", json::object());
    l.image_ids = pj.is_object() ? Text(pj, "image_ids") : std::string();
    if (l.image_ids.empty()) l.image_ids = "auto";
  }
  if (need_predictions && l.predictions_path.empty()) return NoPredictions(id);
  return l;
}

namespace {

// The split of an evaluation and its stored predictions, parallel.
struct SplitWithPredictions {  // NOLINT(bugprone-exception-escape): an aggregate; the check misreads
                               // its implicit members (as LoadedSplit's)
  LoadedSplit loaded;
  std::vector<std::vector<eval::Detection>> per_image;
};

Result<SplitWithPredictions> ReadPredictions(store::MetadataStore& meta, store::ArtifactStore& blobs,
                                             Env& env, const EvaluationSummary& s, const std::string& path,
                                             const std::string& image_ids) {
  SplitWithPredictions out;
  KESTREL_ASSIGN_OR_RETURN(out.loaded, LoadSplit(meta, blobs, s.dataset + "@" + s.version_id, s.split));
  eval::PredictionReadOptions ro;
  ro.image_ids = image_ids;
  auto preds = eval::ReadSplitPredictions(env, path, out.loaded.split, ro);
  if (!preds.IsOk()) return preds.GetStatus().WithContext("evaluation " + std::to_string(s.id));
  out.per_image = std::move(preds->per_image);
  return out;
}

}  // namespace

Result<EvaluationDetail> Evaluations::Show(int64_t id) {
  KESTREL_ASSIGN_OR_RETURN(Loaded l, Load(id, false));
  return std::move(l.detail);
}

Result<EvaluationImages> Evaluations::Images(int64_t id, const EvaluationImagesRequest& req) {
  KESTREL_ASSIGN_OR_RETURN(ImageFilter filter, ParseFilter(req.filter));
  KESTREL_RETURN_IF_ERROR(CheckPage(req.offset, req.limit, 500));
  if (!req.sha.empty() && !IsSha256Hex(req.sha)) {
    return Bad("sha", "sha must be an image's SHA-256 (64 lowercase hex digits), got '" +
                          EscapeForDisplay(req.sha) + "'");
  }
  KESTREL_ASSIGN_OR_RETURN(Loaded l, Load(id, true));
  KESTREL_ASSIGN_OR_RETURN(
      auto sp, ReadPredictions(meta_, blobs_, env_, l.detail.summary, l.predictions_path, l.image_ids));
  const eval::EvalSplit& split = sp.loaded.split;
  EvaluationImages out;
  out.summary = l.detail.summary;
  out.names = split.names;
  out.filter = req.filter.empty() ? "all" : req.filter;
  out.sha = req.sha;
  bool sha_seen = false;
  for (size_t i = 0; i < split.images.size(); ++i) {
    const eval::SplitImage& im = split.images[i];
    const bool right = eval::ImageIsRight(im.labels, sp.per_image[i]);
    ++(right ? out.right : out.wrong);
    if (!req.sha.empty()) {
      if (im.image_sha != req.sha) continue;
      sha_seen = true;
    }
    if ((filter == ImageFilter::kRight && !right) || (filter == ImageFilter::kWrong && right)) continue;
    if (out.total >= req.offset && out.total < req.offset + req.limit) {
      out.images.push_back({{"sha", im.image_sha},
                            {"path", im.path},
                            {"width", im.width},
                            {"height", im.height},
                            {"labels", LabelsJson(im.labels)},
                            {"detections", DetectionsJson(sp.per_image[i])},
                            {"right", right}});
    }
    ++out.total;
  }
  if (!req.sha.empty() && !sha_seen) {
    return Status::NotFound("evaluation " + std::to_string(id) + ": the " + out.summary.split + " split of " +
                                out.summary.dataset + "@" + out.summary.version +
                                " has no image with SHA-256 " + req.sha,
                            {kRequestFile, 0, "sha"});
  }
  if (out.total > req.offset + req.limit) out.next_offset = req.offset + req.limit;
  return out;
}

Result<ConfusionCell> Evaluations::Confusion(int64_t id, const ConfusionCellRequest& req) {
  KESTREL_RETURN_IF_ERROR(CheckPage(req.offset, req.limit, 1000));
  KESTREL_ASSIGN_OR_RETURN(Loaded l, Load(id, false));
  const eval::EvalResult& m = l.metrics;
  const int64_t nc = m.confusion.NumClasses();
  for (const auto& [field, v] : {std::pair{"gt", req.gt}, std::pair{"pred", req.pred}}) {
    if (v < 0 || v > nc)
      return Bad(field, std::string(field) + " must be a class id 0.." + std::to_string(nc) + " (" +
                            std::to_string(nc) + " = background), got " + std::to_string(v));
  }
  if (l.predictions_path.empty()) return NoPredictions(id);
  KESTREL_ASSIGN_OR_RETURN(
      auto sp, ReadPredictions(meta_, blobs_, env_, l.detail.summary, l.predictions_path, l.image_ids));
  const eval::EvalSplit& split = sp.loaded.split;
  // The labels the record was scored with: a model's run letterboxes them as
  // the validator does (eval::ValScoredSplit with the run's shapes).
  eval::EvalSplit scored_split = split;
  const json prov = l.detail.record.value("provenance", json::object());
  if (prov.is_object() && Text(prov, "source_kind") == "model") {
    const json extra = prov.value("extra", json::object());
    eval::ValShapeOptions shapes;
    shapes.imgsz = extra.value("imgsz", shapes.imgsz);
    shapes.batch = extra.value("batch", shapes.batch);
    shapes.rect = extra.value("rect", shapes.rect);
    shapes.pad = extra.value("pad", shapes.pad);
    if (shapes.Validate().IsOk()) scored_split = eval::ValScoredSplit(split, shapes);
  }
  ConfusionCell out;
  out.summary = l.detail.summary;
  out.gt = req.gt;
  out.pred = req.pred;
  out.nc = nc;
  out.names = ClassNames(m);
  out.conf = m.settings.confusion_conf;
  out.iou = m.settings.confusion_iou;
  out.matrix_value = m.confusion.At(int(req.pred), int(req.gt));
  const eval::ConfusionMatrix matcher(int(nc), m.settings.confusion_conf, m.settings.confusion_iou);
  std::vector<int64_t> recomputed(size_t((nc + 1) * (nc + 1)), 0);
  for (size_t i = 0; i < split.images.size(); ++i) {
    const eval::SplitImage& im = split.images[i];
    const std::vector<eval::Detection> kept =
        eval::ScoredPredictions(sp.per_image[i], m.settings.conf, m.settings.max_det);
    for (const eval::ConfusionMatch& c : matcher.MatchImage(scored_split.images[i].labels, kept)) {
      ++recomputed[size_t(c.row) * size_t(nc + 1) + size_t(c.col)];
      if (c.row != req.pred || c.col != req.gt) continue;
      if (out.count >= req.offset && out.count < req.offset + req.limit) {
        json box = {{"sha", im.image_sha}, {"path", im.path}, {"width", im.width}, {"height", im.height}};
        box["gt_box"] = c.gt >= 0 ? BoxJson(im.labels[size_t(c.gt)].box) : json(nullptr);
        box["pred_box"] = c.pred >= 0 ? BoxJson(kept[size_t(c.pred)].box) : json(nullptr);
        box["score"] = c.pred >= 0 ? json(kept[size_t(c.pred)].score) : json(nullptr);
        out.boxes.push_back(std::move(box));
      }
      ++out.count;
    }
  }
  out.consistent = recomputed == m.confusion.Counts();
  if (out.count > req.offset + req.limit) out.next_offset = req.offset + req.limit;
  return out;
}

Result<Comparison> Evaluations::Compare(int64_t a, int64_t b) {
  KESTREL_ASSIGN_OR_RETURN(Loaded la, Load(a, false));
  KESTREL_ASSIGN_OR_RETURN(Loaded lb, Load(b, false));
  const EvaluationSummary& sa = la.detail.summary;
  const EvaluationSummary& sb = lb.detail.summary;
  if (sa.version_id != sb.version_id || sa.split != sb.split) {
    auto where = [](const EvaluationSummary& s) {
      return s.dataset + "@" + (s.version.empty() ? s.version_id.substr(0, 12) : s.version) + " " + s.split;
    };
    return Bad("b", "evaluations " + std::to_string(a) + " and " + std::to_string(b) +
                        " scored different data (" + std::to_string(a) + ": " + where(sa) + ", " +
                        std::to_string(b) + ": " + where(sb) +
                        "); a comparison needs the same dataset version and split");
  }
  Comparison c;
  c.a = sa;
  c.b = sb;
  c.metrics_text = eval::CompareMetricsText(la.metrics, lb.metrics);
  json images = nullptr;
  std::string note;
  if (!la.predictions_path.empty() && !lb.predictions_path.empty()) {
    KESTREL_ASSIGN_OR_RETURN(auto pa,
                             ReadPredictions(meta_, blobs_, env_, sa, la.predictions_path, la.image_ids));
    KESTREL_ASSIGN_OR_RETURN(auto pb,
                             ReadPredictions(meta_, blobs_, env_, sb, lb.predictions_path, lb.image_ids));
    json a_only = json::array(), b_only = json::array();
    const eval::EvalSplit& split = pa.loaded.split;
    for (size_t i = 0; i < split.images.size(); ++i) {
      const bool ra = eval::ImageIsRight(split.images[i].labels, pa.per_image[i]);
      const bool rb = eval::ImageIsRight(split.images[i].labels, pb.per_image[i]);
      const json item = {{"sha", split.images[i].image_sha}, {"path", split.images[i].path}};
      if (ra && !rb) a_only.push_back(item);
      if (rb && !ra) b_only.push_back(item);
    }
    c.a_right_b_wrong = int64_t(a_only.size());
    c.b_right_a_wrong = int64_t(b_only.size());
    images = {{"a_right_b_wrong", a_only}, {"b_right_a_wrong", b_only}};
  } else {
    for (const auto* s : {&sa, &sb}) {
      if (!s->has_predictions)
        note += (note.empty() ? "" : "; ") + std::string("evaluation ") + std::to_string(s->id) +
                " has no stored predictions (save_json=true)";
    }
  }
  std::vector<std::string> names = ClassNames(la.metrics);
  names.push_back("background");
  auto matrix = [](const Loaded& l) {
    const json& cm = l.detail.record["metrics"].value("confusion", json::object());
    return cm.is_object() ? cm.value("matrix", json::array()) : json::array();
  };
  c.view = {{"a", EvaluationSummaryJson(sa)},
            {"b", EvaluationSummaryJson(sb)},
            {"dataset", sa.dataset},
            {"version", sa.version},
            {"version_id", sa.version_id},
            {"split", sa.split},
            {"delta", eval::CompareMetricsJson(la.metrics, lb.metrics)},
            {"right_rule", eval::kRightRule},
            {"images", images},
            {"curves", {{"a", CurvesOf(la.detail.record)}, {"b", CurvesOf(lb.detail.record)}}},
            {"confusion", {{"names", names}, {"a", matrix(la)}, {"b", matrix(lb)}}}};
  if (!note.empty()) c.view["images_note"] = note;
  return c;
}

json EvaluationSummaryJson(const EvaluationSummary& s) {
  return {{"id", s.id},
          {"model", s.model},
          {"model_submitted", s.model_submitted},
          {"model_id", s.model_id.empty() ? json(nullptr) : json(s.model_id)},
          {"weights", s.weights},
          {"dataset", s.dataset},
          {"version", s.version},
          {"version_id", s.version_id},
          {"split", s.split},
          {"images", s.images},
          {"instances", s.instances},
          {"map50", s.map50},
          {"map50_95", s.map50_95},
          {"precision", s.precision},
          {"recall", s.recall},
          {"fitness", s.fitness},
          {"created_ms", s.created_ms},
          {"finished_ms", s.finished_ms},
          {"attempt", s.attempt},
          {"record_sha", s.record_sha},
          {"has_predictions", s.has_predictions}};
}

json EvaluationListJson(const EvaluationList& l) {
  json arr = json::array();
  for (const auto& s : l.evaluations) arr.push_back(EvaluationSummaryJson(s));
  return {{"ok", true},
          {"evaluations", arr},
          {"next_offset", l.next_offset ? json(*l.next_offset) : json(nullptr)}};
}

json EvaluationDetailJson(const EvaluationDetail& d) {
  return {{"ok", true},
          {"evaluation", EvaluationSummaryJson(d.summary)},
          {"record", d.record},
          {"curves", CurvesOf(d.record)}};
}

json EvaluationImagesJson(const EvaluationImages& p) {
  const EvaluationSummary& s = p.summary;
  return {{"ok", true},
          {"id", s.id},
          {"dataset", s.dataset},
          {"version", s.version},
          {"split", s.split},
          {"names", p.names},
          {"filter", p.filter},
          {"sha", p.sha.empty() ? json(nullptr) : json(p.sha)},
          {"right_rule", eval::kRightRule},
          {"total", p.total},
          {"right", p.right},
          {"wrong", p.wrong},
          {"images", p.images},
          {"next_offset", p.next_offset ? json(*p.next_offset) : json(nullptr)}};
}

json ConfusionCellJson(const ConfusionCell& c) {
  auto name = [&](int64_t k) { return k == c.nc ? std::string("background") : c.names[size_t(k)]; };
  return {{"ok", true},
          {"id", c.summary.id},
          {"gt", c.gt},
          {"pred", c.pred},
          {"nc", c.nc},
          {"names", c.names},
          {"gt_name", name(c.gt)},
          {"pred_name", name(c.pred)},
          {"conf", c.conf},
          {"iou", c.iou},
          {"count", c.count},
          {"matrix_value", c.matrix_value},
          {"consistent", c.consistent},
          {"boxes", c.boxes},
          {"next_offset", c.next_offset ? json(*c.next_offset) : json(nullptr)}};
}

json ComparisonJson(const Comparison& c) {
  json doc = c.view;
  doc["ok"] = true;
  return doc;
}

std::string EvaluationListText(const EvaluationList& l) {
  if (l.evaluations.empty()) return "no evaluations (a succeeded `kestrel submit kind=val` job is one)\n";
  char line[512];
  std::snprintf(line, sizeof(line), "%-6s %-24s %-20s %-5s %6s %7s %8s %6s %6s %s\n", "ID", "MODEL", "DATA",
                "SPLIT", "IMAGES", "mAP50", "mAP50-95", "P", "R", "PREDICTIONS");
  std::string out = line;
  for (const auto& s : l.evaluations) {
    const std::string data = s.dataset + "@" + (s.version.empty() ? s.version_id.substr(0, 12) : s.version);
    std::snprintf(line, sizeof(line), "%-6lld %-24s %-20s %-5s %6lld %7s %8s %6s %6s %s\n",
                  static_cast<long long>(s.id), s.model.c_str(), data.c_str(), s.split.c_str(),
                  static_cast<long long>(s.images), Fixed(s.map50).c_str(), Fixed(s.map50_95).c_str(),
                  Fixed(s.precision).c_str(), Fixed(s.recall).c_str(), s.has_predictions ? "yes" : "no");
    out += line;
  }
  if (l.next_offset) out += "more: --offset " + std::to_string(*l.next_offset) + "\n";
  return out;
}

std::string EvaluationDetailText(const EvaluationDetail& d) {
  const EvaluationSummary& s = d.summary;
  std::string out = "evaluation " + std::to_string(s.id) + ": " + s.model +
                    (s.model_id.empty() ? "" : " (model " + s.model_id.substr(0, 12) + ")") + " on " +
                    s.dataset + "@" + s.version + " " + s.split + "\n";
  out += "images " + std::to_string(s.images) + ", instances " + std::to_string(s.instances) + ", mAP50 " +
         Fixed(s.map50) + ", mAP50-95 " + Fixed(s.map50_95) + ", P " + Fixed(s.precision) + ", R " +
         Fixed(s.recall) + "\n";
  const json& classes = d.record["metrics"].value("classes", json::array());
  char line[256];
  std::snprintf(line, sizeof(line), "%-20s %9s %6s %6s %7s %8s\n", "Class", "Instances", "P", "R", "mAP50",
                "mAP50-95");
  out += line;
  for (const auto& c : classes) {
    std::snprintf(line, sizeof(line), "%-20s %9lld %6s %6s %7s %8s\n", c.value("name", std::string()).c_str(),
                  static_cast<long long>(c.value("instances", int64_t{0})),
                  Fixed(c.value("precision", 0.0)).c_str(), Fixed(c.value("recall", 0.0)).c_str(),
                  Fixed(c.value("map50", 0.0)).c_str(), Fixed(c.value("map5095", 0.0)).c_str());
    out += line;
  }
  out += "stored predictions: " +
         std::string(s.has_predictions ? "yes" : "no (submit the val job with save_json=true)") + "\n";
  out += "result record " + s.record_sha + "\n";
  return out;
}

std::string ComparisonText(const Comparison& c) {
  std::string out = "A: evaluation " + std::to_string(c.a.id) + " " + c.a.model + "\nB: evaluation " +
                    std::to_string(c.b.id) + " " + c.b.model + "\non " + c.a.dataset + "@" + c.a.version +
                    " " + c.a.split + "\n" + c.metrics_text;
  if (c.a_right_b_wrong >= 0) {
    out += "A right, B wrong: " + std::to_string(c.a_right_b_wrong) +
           " images; B right, A wrong: " + std::to_string(c.b_right_a_wrong) + " images\n";
  } else {
    out += c.view.value("images_note", std::string()) + "\n";
  }
  return out;
}

}  // namespace kestrel::app
