#include "app/models.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>

#include "app/job_kinds.h"
#include "app/jobs.h"
#include "core/hash.h"
#include "core/json.h"
#include "core/names.h"
#include "core/safetensors.h"
#include "jobs/job_keys.h"
#include "model/spec.h"

namespace kestrel::app {
namespace {

using nlohmann::json;

// Files of a run folder (docs/training.md "Run directory") kept with the
// evaluation record, as blobs: they outlive the job folder.
constexpr const char* kPlotFiles[] = {"results.png",
                                      "PR_curve.png",
                                      "F1_curve.png",
                                      "P_curve.png",
                                      "R_curve.png",
                                      "confusion_matrix.png",
                                      "confusion_matrix_normalized.png",
                                      "labels.jpg",  // a training run's since issue 28 (the reference's name)
                                      "labels.png",  // runs before issue 28
                                      "train_batch0.jpg",
                                      "val_batch0_labels.jpg",
                                      "val_batch0_pred.jpg"};

// Per-class table written by the trainer for its best epoch (optional: older
// runs have none), in eval::EvalResultToJson's shape.
constexpr const char* kBestEvalFile = "best_eval.json";

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

bool IsHex(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [](unsigned char c) { return std::isdigit(c) || (c >= 'a' && c <= 'f'); });
}

std::string VersionRef(const store::ModelRecord& m) { return m.name + "@v" + std::to_string(m.seq); }

double Num(const json& j, const char* key) {
  auto it = j.find(key);
  return (it != j.end() && it->is_number()) ? it->get<double>() : 0.0;
}

// A measured number, or null when there is none (never a made-up 0).
json OptionalJson(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

bool HasTag(const store::ModelRecord& m, const std::string& tag) {
  return std::find(m.tags.begin(), m.tags.end(), tag) != m.tags.end();
}

json ParseObject(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  return j.is_object() ? j : json::object();
}

// One row of results.csv (header names -> values) for `epoch`; empty when
// the file or the row is missing.
std::map<std::string, double> ResultsCsvRow(Env& env, const std::string& run_dir, int64_t epoch) {
  std::map<std::string, double> row;
  auto text = env.ReadFile(JoinPath(run_dir, "results.csv"));
  if (!text.IsOk()) return row;
  std::istringstream in(*text);
  std::string line;
  std::vector<std::string> header;
  auto split = [](const std::string& l) {
    std::vector<std::string> cells;
    std::stringstream ss(l);
    std::string c;
    while (std::getline(ss, c, ',')) {
      const auto b = c.find_first_not_of(' ');
      cells.push_back(b == std::string::npos ? "" : c.substr(b));
    }
    return cells;
  };
  if (!std::getline(in, line)) return row;
  header = split(line);
  while (std::getline(in, line)) {
    auto cells = split(line);
    if (cells.empty() || std::strtoll(cells[0].c_str(), nullptr, 10) != epoch) continue;
    for (size_t i = 0; i < cells.size() && i < header.size(); ++i) {
      char* end = nullptr;
      double v = std::strtod(cells[i].c_str(), &end);
      if (end != cells[i].c_str() && std::isfinite(v)) row[header[i]] = v;
    }
  }
  return row;
}

// {"new", "baseline", "delta"} for a metric both records have.
json Delta(double now, double base) { return {{"new", now}, {"baseline", base}, {"delta", now - base}}; }

}  // namespace

Result<std::string> ConfigHash(const std::string& config_json) {
  json config = json::parse(config_json, nullptr, false);
  if (config.is_discarded())
    return Status::InvalidArgument("effective config is not valid JSON", {"", 0, "config"});
  // nlohmann objects keep keys sorted; compact dump = the canonical form.
  return Sha256Hex(DumpJson(config));
}

Result<store::ModelRecord> ModelRegistry::Register(const RegisterRequest& req, int64_t now_ms,
                                                   bool* created) {
  store::ModelRecord m;
  m.name = req.name.empty() ? req.dataset : req.name;
  if (m.name.empty()) {
    return Status::InvalidArgument("a model needs a name: give --name NAME (or data=DATASET to use its name)",
                                   {"command line", 0, "name"});
  }
  KESTREL_RETURN_IF_ERROR(CheckName(NameKind::kModel, m.name, {"command line", 0, "name"}));
  auto bytes = env_.ReadFile(req.weights_path);
  if (!bytes.IsOk()) return bytes.GetStatus();
  if (bytes->size() >= 2 && (*bytes)[0] == 'P' && (*bytes)[1] == 'K') {
    m.format = "ultralytics.pt";
  } else {
    auto st = ParseSafeTensors(*bytes, req.weights_path);
    if (!st.IsOk()) {
      return Status::InvalidArgument("not a weights file (safetensors or .pt): " + st.GetStatus().Message(),
                                     {req.weights_path, 0, "weights"});
    }
    m.format = "safetensors";
  }
  KESTREL_ASSIGN_OR_RETURN(m.weights_sha, blobs_.Put(*bytes));
  m.weights_bytes = static_cast<int64_t>(bytes->size());
  m.created_ms = now_ms;
  m.dataset = req.dataset;
  m.dataset_version = req.dataset_version;
  KESTREL_ASSIGN_OR_RETURN(m.config_hash, ConfigHash(req.config_json));
  m.job_id = req.job_id;
  m.attempt = req.attempt;
  m.host = req.host;
  m.kestrel_version = KestrelVersion();

  // Evaluation record: the caller's metrics plus the run's plots as blobs.
  json eval = req.eval.is_object() ? req.eval : json::object();
  if (!eval.contains("metrics") || !eval["metrics"].is_object()) eval["metrics"] = json::object();
  // A number the evaluation measured, or none (not validated; by hand).
  auto measured = [&eval](const char* key) -> std::optional<double> {
    const json& metrics = eval["metrics"];
    auto it = metrics.find(key);
    if (it == metrics.end() || !it->is_number()) return std::nullopt;
    return it->get<double>();
  };
  m.map50 = measured("map50");
  m.map50_95 = measured("map50_95");
  if (!req.run_dir.empty()) {
    json plots = json::array();
    for (const char* f : kPlotFiles) {
      const std::string p = JoinPath(req.run_dir, f);
      if (!env_.Stat(p).is_regular) continue;
      auto plot = env_.ReadFile(p);
      if (!plot.IsOk()) continue;  // a plot is a convenience; never fail a registration for it
      auto sha = blobs_.Put(*plot);
      if (!sha.IsOk()) return sha.GetStatus();
      plots.push_back(
          {{"file", f}, {"sha256", *sha}, {"bytes", plot->size()}, {"path", blobs_.PathFor(*sha)}});
    }
    eval["plots"] = std::move(plots);
  }
  m.eval_json = DumpJson(eval);

  // Lineage.
  json parent = nullptr;
  if (!req.parent_path.empty()) {
    parent = {{"kind", req.parent_kind.empty() ? "pretrained" : req.parent_kind}, {"path", req.parent_path}};
    auto pbytes = env_.ReadFile(req.parent_path);
    if (pbytes.IsOk()) {
      const std::string psha = Sha256Hex(*pbytes);
      parent["sha256"] = psha;
      store::ModelFilter pf;
      pf.weights_sha = psha;
      auto reg = meta_.ListModels(pf);
      if (reg.IsOk() && !reg->empty())
        parent["model"] = {{"id", reg->front().id}, {"ref", VersionRef(reg->front())}};
    } else {
      parent["sha256"] = nullptr;
      parent["note"] = "the file could not be read at registration: " + pbytes.GetStatus().Message();
    }
  }
  json lineage = {{"dataset", req.dataset},
                  {"dataset_version", req.dataset_version},
                  {"config", ParseObject(req.config_json)},
                  {"config_hash", m.config_hash},
                  {"kestrel_version", m.kestrel_version},
                  {"parent", parent},
                  {"job_id", req.job_id},
                  {"attempt", req.attempt},
                  {"worker", req.worker},
                  {"host", req.host},
                  {"source", req.weights_path}};
  if (!req.run_dir.empty()) lineage["run_dir"] = req.run_dir;
  // The architecture the weights carry: a custom graph by its name, layer
  // count and detection strides (model=custom.yaml; the file holds the graph).
  if (auto info = model::ReadWeightsInfo(req.weights_path); info.IsOk()) {
    const std::vector<model::LayerPlan> plan = model::BuildLayerPlan(info->spec);
    lineage["model"] = {{"name", info->spec.Name()},
                        {"graph", info->spec.graph ? "custom" : model::FamilyName(info->spec.family)},
                        {"scale", info->spec.scale.name},
                        {"layers", plan.size()},
                        {"detect_strides", plan.back().detect_strides},
                        {"nc", info->spec.nc}};
  }
  m.lineage_json = DumpJson(lineage);
  m.id = Sha256Hex("kestrel.model\n" + m.name + "\n" + m.weights_sha + "\n" + std::to_string(m.job_id) +
                   "\n" + std::to_string(now_ms) + "\n" + std::to_string(env_.NowMicros()));

  if (req.compare && !m.dataset_version.empty()) {
    store::ModelFilter same;
    same.dataset_version = m.dataset_version;
    KESTREL_ASSIGN_OR_RETURN(auto others, meta_.ListModels(same));
    if (!m.dataset.empty()) {
      store::ModelFilter prod;
      prod.dataset = m.dataset;
      prod.tag = store::kProductionTag;
      KESTREL_ASSIGN_OR_RETURN(auto holders, meta_.ListModels(prod));
      for (auto& h : holders) {
        if (h.dataset_version != m.dataset_version) others.push_back(std::move(h));
      }
    }
    m.comparison_json = DumpJson(Compare(m, others, now_ms));
  }
  return meta_.AddModel(m, created);
}

json ModelRegistry::Compare(const store::ModelRecord& model, const std::vector<store::ModelRecord>& others,
                            int64_t now_ms) {
  const store::ModelRecord* production = nullptr;
  const store::ModelRecord* best = nullptr;
  for (const auto& o : others) {
    if (o.id == model.id) continue;
    if (HasTag(o, store::kProductionTag) && o.dataset == model.dataset) production = &o;
    if (o.dataset_version != model.dataset_version) continue;
    if (!o.map50_95) continue;  // never measured: no baseline by mAP
    if (best == nullptr || *o.map50_95 > *best->map50_95) best = &o;
  }
  json notes = json::array();
  const store::ModelRecord* base = nullptr;
  std::string why;
  if (production != nullptr && production->dataset_version == model.dataset_version) {
    base = production;
    why = "production";
  } else {
    if (production != nullptr) {
      notes.push_back("the production model " + VersionRef(*production) +
                      " was trained on another dataset version; compared with the best model on this one");
    }
    base = best;
    why = "best_map50_95";
  }
  json out = {{"compared_ms", now_ms}, {"dataset_version", model.dataset_version}};
  if (base == nullptr) {
    out["baseline"] = nullptr;
    notes.push_back("no other model on this dataset version: nothing to compare with");
    out["notes"] = notes;
    return out;
  }
  out["baseline"] = {{"id", base->id}, {"ref", VersionRef(*base)}, {"chosen_as", why}, {"tags", base->tags}};
  const json me = ParseObject(model.eval_json), them = ParseObject(base->eval_json);
  const json& mm = me.contains("metrics") ? me["metrics"] : json::object();
  const json& tm = them.contains("metrics") ? them["metrics"] : json::object();
  json metrics = json::object();
  for (const char* k : {"map50", "map50_95", "precision", "recall", "fitness"}) {
    if (mm.contains(k) && tm.contains(k) && mm[k].is_number() && tm[k].is_number()) {
      metrics[k] = Delta(mm[k].get<double>(), tm[k].get<double>());
    }
  }
  out["metrics"] = metrics;
  // Per class, by class id, when both runs wrote their table.
  if (me.contains("per_class") && them.contains("per_class") && me["per_class"].is_array() &&
      them["per_class"].is_array()) {
    json rows = json::array();
    for (const auto& a : me["per_class"]) {
      for (const auto& b : them["per_class"]) {
        if (!a.is_object() || !b.is_object() || a.value("class_id", -1) != b.value("class_id", -2)) continue;
        rows.push_back({{"class_id", a.value("class_id", -1)},
                        {"name", a.value("name", "")},
                        {"map50", Delta(Num(a, "map50"), Num(b, "map50"))},
                        {"map50_95", Delta(Num(a, "map50_95"), Num(b, "map50_95"))}});
      }
    }
    out["per_class"] = rows;
  }
  // Validation settings that make the numbers less comparable.
  const json mc = ParseObject(model.lineage_json).value("config", json::object());
  const json bc = ParseObject(base->lineage_json).value("config", json::object());
  for (const char* k : {"imgsz", "rect"}) {
    if (mc.contains(k) && bc.contains(k) && mc[k] != bc[k]) {
      notes.push_back(std::string("validated with different ") + k + " (" + DumpJson(mc[k]) + " vs " +
                      DumpJson(bc[k]) + "): the numbers are not strictly comparable");
    }
  }
  // Only two measured numbers say which is better; a missing one is said.
  if (model.map50_95 && base->map50_95) {
    out["better"] = *model.map50_95 > *base->map50_95;
  } else {
    out["better"] = nullptr;
    notes.push_back(
        std::string(model.map50_95 ? "the baseline" : "this model") +
        " has no measured mAP (trained with val=false, or registered by hand): nothing to compare by "
        "mAP50-95");
  }
  out["notes"] = notes;
  return out;
}

Result<store::ModelRecord> ModelRegistry::RegisterJobModel(int64_t job_id, int64_t now_ms, bool* created) {
  KESTREL_ASSIGN_OR_RETURN(auto job, meta_.GetJob(job_id));
  if (job.state != store::JobState::kSucceeded) {
    return Status::FailedPrecondition("job " + std::to_string(job_id) + " is " +
                                      store::JobStateName(job.state) +
                                      ", not succeeded: it has no model to register");
  }
  // Only training makes weights (a val job's result names the model it scored).
  if (const std::string kind = JobKindText(job); kind != "train") {
    return Status::FailedPrecondition("job " + std::to_string(job_id) + " is a " + kind +
                                      " job: only training jobs make a model to register");
  }
  // The typed result the attempt wrote (app/job_kinds.h); its best_epoch
  // and epochs are details, shown in the record as they are.
  KESTREL_ASSIGN_OR_RETURN(AttemptResult typed, AttemptResult::Parse(job.result_json));
  const json& result = typed.details;
  RegisterRequest req;
  req.weights_path = typed.best;
  if (req.weights_path.empty()) {
    return Status::FailedPrecondition("job " + std::to_string(job_id) + " result names no best weights");
  }
  req.job_id = job.id;
  req.attempt = typed.attempt > 0 ? typed.attempt : job.attempt;
  req.run_dir = typed.run_dir;
  req.config_json = DumpJson(JobConfigJson(job));  // with min_map50, as before migration 10
  req.dataset_version = job.spec.dataset_version;
  const json config = ParseObject(job.spec.config_json);
  std::string ref;
  store::SplitDatasetRef(config.value("data", ""), &req.dataset, &ref);
  // The model is named after its dataset (the config's `name` is the run
  // folder's, which the job system sets itself).
  const std::string pretrained = config.value("pretrained", "");
  const std::string model = config.value("model", "");
  if (!pretrained.empty()) {
    req.parent_path = pretrained;
    req.parent_kind = "pretrained";
  } else if (model.find('.') != std::string::npos) {  // model=yolov8n.pt: architecture and weights
    req.parent_path = model;
    req.parent_kind = "model";
  }
  auto attempts = meta_.ListAttempts(job.id);
  if (attempts.IsOk()) {
    for (const auto& a : *attempts) {
      if (a.attempt == req.attempt) {
        req.worker = a.worker;
        req.host = a.host;
      }
    }
  }
  // A run trained with val=false (or without a val split) measured nothing:
  // its record has no mAP, precision or recall, and says so.
  if (typed.validated == false) {
    req.eval = {
        {"source", "training run, not validated (" +
                       (typed.not_validated.empty() ? std::string("val=false") : typed.not_validated) +
                       "): best = the epoch with the lowest train loss"},
        {"validated", false},
        {"metrics", {{"best_epoch", result.value("best_epoch", 0)}, {"epochs", result.value("epochs", 0)}}}};
    return Register(req, now_ms, created);
  }
  // Metrics: the result's best epoch; precision/recall from its results.csv row.
  const double map50 = typed.map50.value_or(0.0), map5095 = typed.map50_95.value_or(0.0);
  json metrics = {{"map50", map50},
                  {"map50_95", map5095},
                  {"fitness", 0.1 * map50 + 0.9 * map5095},
                  {"best_epoch", result.value("best_epoch", 0)},
                  {"epochs", result.value("epochs", 0)}};
  auto row = ResultsCsvRow(env_, req.run_dir, result.value("best_epoch", int64_t{0}));
  if (row.count("metrics/precision(B)")) metrics["precision"] = row["metrics/precision(B)"];
  if (row.count("metrics/recall(B)")) metrics["recall"] = row["metrics/recall(B)"];
  req.eval = {{"source", "training run, best epoch (EMA weights on the val split)"}, {"metrics", metrics}};
  auto best_eval = env_.ReadFile(JoinPath(req.run_dir, kBestEvalFile));
  if (best_eval.IsOk()) {
    const json be = ParseObject(*best_eval);
    if (be.contains("classes") && be["classes"].is_array()) {
      json rows = json::array();
      for (const auto& c : be["classes"]) {
        if (!c.is_object()) continue;
        rows.push_back({{"class_id", c.value("class_id", -1)},
                        {"name", c.value("name", "")},
                        {"images", c.value("images", 0)},
                        {"instances", c.value("instances", 0)},
                        {"precision", Num(c, "precision")},
                        {"recall", Num(c, "recall")},
                        {"map50", Num(c, "map50")},
                        {"map50_95", Num(c, "map5095")}});
      }
      req.eval["per_class"] = rows;
    }
    if (be.contains("precision")) req.eval["metrics"]["precision"] = Num(be, "precision");
    if (be.contains("recall")) req.eval["metrics"]["recall"] = Num(be, "recall");
  }
  return Register(req, now_ms, created);
}

Result<std::vector<store::ModelRecord>> ModelRegistry::List(const store::ModelFilter& filter) {
  KESTREL_ASSIGN_OR_RETURN(auto models, meta_.ListModels(filter));
  std::reverse(models.begin(), models.end());
  return models;
}

Result<store::ModelRecord> ModelRegistry::Resolve(const std::string& ref) {
  const ErrorLocation where{"command line", 0, "model"};
  if (ref.empty()) return Status::InvalidArgument("empty model reference", where);
  const size_t at = ref.find('@');
  if (at == std::string::npos) {
    // An id prefix (at least 6 hex chars), else a name (its newest version).
    if (ref.size() >= 6 && ref.size() <= 64 && IsHex(ref)) {
      store::ModelFilter f;
      f.id_prefix = ref;
      KESTREL_ASSIGN_OR_RETURN(auto found, meta_.ListModels(f));
      if (found.size() > 1) {
        return Status::InvalidArgument("model id prefix '" + ref + "' is ambiguous (" +
                                           std::to_string(found.size()) + " models); give more characters",
                                       where);
      }
      if (found.size() == 1) return found[0];
    }
    store::ModelFilter f;
    f.name = ref;
    KESTREL_ASSIGN_OR_RETURN(auto found, meta_.ListModels(f));
    if (found.empty())
      return Status::NotFound("no model named '" + ref + "' and no model id starting so", where);
    return *std::max_element(found.begin(), found.end(),
                             [](const auto& a, const auto& b) { return a.seq < b.seq; });
  }
  const std::string name = ref.substr(0, at), version = ref.substr(at + 1);
  if (name.empty() || version.empty()) {
    return Status::InvalidArgument(
        "model reference '" + ref + "': write NAME@vN, NAME@TAG, NAME or an id prefix", where);
  }
  store::ModelFilter f;
  f.name = name;
  if (version.size() >= 2 && (version[0] == 'v' || version[0] == 'V') &&
      std::all_of(version.begin() + 1, version.end(), [](unsigned char c) { return std::isdigit(c); })) {
    f.seq = std::strtoll(version.c_str() + 1, nullptr, 10);
    if (f.seq <= 0) return Status::InvalidArgument("model versions start at v1: '" + ref + "'", where);
  } else if (version != "latest") {
    f.tag = version;
  }
  KESTREL_ASSIGN_OR_RETURN(auto found, meta_.ListModels(f));
  if (found.empty()) {
    store::ModelFilter any;
    any.name = name;
    KESTREL_ASSIGN_OR_RETURN(auto named, meta_.ListModels(any));
    if (named.empty()) return Status::NotFound("no model named '" + name + "'", where);
    return Status::NotFound("model '" + name + "' has no version '" + version + "' (versions v1..v" +
                                std::to_string(named.back().seq) + ")",
                            where);
  }
  return *std::max_element(found.begin(), found.end(),
                           [](const auto& a, const auto& b) { return a.seq < b.seq; });
}

Result<TagResult> ModelRegistry::Tag(const std::string& ref, const std::string& tag, int64_t now_ms) {
  KESTREL_RETURN_IF_ERROR(CheckName(NameKind::kTag, tag, {"command line", 0, "tag"}));
  KESTREL_ASSIGN_OR_RETURN(auto m, Resolve(ref));
  KESTREL_ASSIGN_OR_RETURN(std::string previous, meta_.TagModel(m.id, tag, now_ms));
  TagResult r;
  r.tag = tag;
  store::ModelFilter f;
  f.id_prefix = m.id;
  KESTREL_ASSIGN_OR_RETURN(auto now, meta_.ListModels(f));
  r.model = now.empty() ? m : now[0];
  if (!previous.empty()) {
    f.id_prefix = previous;
    KESTREL_ASSIGN_OR_RETURN(auto prev, meta_.ListModels(f));
    if (!prev.empty()) r.previous = prev[0];
  }
  return r;
}

Result<store::ModelRecord> ModelRegistry::Untag(const std::string& ref, const std::string& tag) {
  KESTREL_ASSIGN_OR_RETURN(auto m, Resolve(ref));
  KESTREL_ASSIGN_OR_RETURN(bool removed, meta_.UntagModel(m.id, tag));
  if (!removed) {
    return Status::NotFound("model " + VersionRef(m) + " has no tag '" + tag + "'",
                            {"command line", 0, "tag"});
  }
  m.tags.erase(std::remove(m.tags.begin(), m.tags.end(), tag), m.tags.end());
  return m;
}

Result<store::ModelRecord> ModelRegistry::Delete(const std::string& ref, bool force) {
  KESTREL_ASSIGN_OR_RETURN(auto m, Resolve(ref));
  KESTREL_RETURN_IF_ERROR(meta_.DeleteModel(m.id, force));
  return m;
}

Result<ResolvedWeights> ModelRegistry::ResolveWeights(const std::string& text) {
  ResolvedWeights out;
  out.path = text;
  if (text.empty() || env_.Stat(text).exists) return out;  // a file that exists is a path
  auto m = Resolve(text);
  if (!m.IsOk()) {
    // Written as a reference (NAME@REF) but not one: say so. Anything else
    // stays a path, and the caller reports the missing file as before.
    if (text.find('@') != std::string::npos && text.find('/') == std::string::npos) return m.GetStatus();
    return out;
  }
  return VerifiedWeights(*m);
}

Result<ResolvedWeights> ModelRegistry::ResolveReference(const std::string& ref) {
  KESTREL_ASSIGN_OR_RETURN(store::ModelRecord m, Resolve(ref));
  return VerifiedWeights(m);
}

Result<ResolvedWeights> ModelRegistry::VerifiedWeights(const store::ModelRecord& m) {
  // Verify the whole blob before anyone loads it (LocalPath verifies; on S3
  // it is the verified download).
  auto path = blobs_.LocalPath(m.weights_sha);
  if (!path.IsOk()) {
    return Status(path.GetStatus().Code(), "model " + VersionRef(m) + " weights blob " + m.weights_sha +
                                               ": " + path.GetStatus().Message());
  }
  ResolvedWeights out;
  out.path = *path;
  out.model = m;
  return out;
}

json ModelListJson(const std::vector<store::ModelRecord>& models, const store::ArtifactStore& blobs) {
  json rows = json::array();
  for (const auto& m : models) rows.push_back(ModelJson(m, blobs, false));
  return {{"ok", true}, {"models", std::move(rows)}};
}

json ModelJson(const store::ModelRecord& m, const store::ArtifactStore& blobs, bool detail) {
  json j = {{"id", m.id},
            {"name", m.name},
            {"version", "v" + std::to_string(m.seq)},
            {"ref", VersionRef(m)},
            {"created_ms", m.created_ms},
            {"tags", m.tags},
            {"weights",
             {{"sha256", m.weights_sha},
              {"bytes", m.weights_bytes},
              {"format", m.format},
              {"path", blobs.PathFor(m.weights_sha)}}},
            {"dataset", m.dataset},
            {"dataset_version", m.dataset_version},
            {"config_hash", m.config_hash},
            {"job_id", m.job_id},
            {"attempt", m.attempt},
            {"host", m.host},
            {"kestrel_version", m.kestrel_version},
            {"metrics", {{"map50", OptionalJson(m.map50)}, {"map50_95", OptionalJson(m.map50_95)}}}};
  if (detail) {
    j["lineage"] = ParseObject(m.lineage_json);
    j["evaluation"] = ParseObject(m.eval_json);
    j["comparison"] = m.comparison_json.empty() ? json(nullptr) : ParseObject(m.comparison_json);
    json exports = json::array();
    for (const store::ModelExportRecord& e : m.exports) exports.push_back(ModelExportJson(e));
    j["exports"] = std::move(exports);
  }
  return j;
}

Result<store::ModelExportRecord> ModelRegistry::RecordExport(const store::ModelRecord& model,
                                                             const ExportRecordRequest& req, int64_t now_ms,
                                                             bool* created) {
  const FileInfo info = env_.Stat(req.path);
  if (!info.exists || !info.is_regular) {
    return Status::NotFound("exported file " + req.path + " does not exist", {req.path, 0, "path"});
  }
  KESTREL_ASSIGN_OR_RETURN(std::string sha, Sha256File(req.path));
  store::ModelExportRecord rec;
  rec.model_id = model.id;
  rec.created_ms = now_ms;
  rec.format = req.format;
  // Stored absolute: the record is read later from other working
  // directories (the server's file route, `models show`), where a relative
  // path would name another file or none.
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(req.path, ec);
  rec.path = ec ? req.path : abs.lexically_normal().string();
  rec.sha256 = sha;
  rec.bytes = static_cast<int64_t>(info.size);
  rec.options_json = req.options.dump();
  rec.verified = req.verified;
  rec.verification_json = req.verification.dump();
  rec.kestrel_version = KestrelVersion();
  rec.id = Sha256Hex(model.id + "\n" + rec.path + "\n" + sha + "\n" + std::to_string(now_ms) + "\n" +
                     rec.options_json);
  // The same file recorded before (a retried job): that record, updated.
  return meta_.AddModelExport(rec, created);
}

json ModelExportJson(const store::ModelExportRecord& e) {
  return {{"id", e.id},
          {"created_ms", e.created_ms},
          {"format", e.format},
          {"path", e.path},
          {"sha256", e.sha256},
          {"bytes", e.bytes},
          {"options", ParseObject(e.options_json)},
          {"verified", e.verified},
          {"verification", ParseObject(e.verification_json)},
          {"kestrel_version", e.kestrel_version}};
}

json TagResultJson(const TagResult& r, const store::ArtifactStore& blobs) {
  return {{"model", ModelJson(r.model, blobs, false)},
          {"tag", r.tag},
          {"previous", r.previous ? ModelJson(*r.previous, blobs, false) : json(nullptr)}};
}

}  // namespace kestrel::app
