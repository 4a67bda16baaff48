// The built-in rows of the job-kind table (app/job_kinds.h): train, val and
// export (and tune, app/tune_study.cc) — each kind's key schema and submit checks, its quality gate and
// what a succeeded job registers. Their runners (app/job_runners.h) train
// and verify through the program's backends, so the LibTorch backend lends
// them: kestrel-torch's main() installs it (app/backends.h InstallBackends).
#include <filesystem>

#include "app/export_keys.h"
#include "app/job_kinds.h"
#include "app/jobs.h"
#include "app/models.h"
#include "app/tune_study.h"
#include "app/val_keys.h"
#include "core/safetensors.h"
#include "core/utf8.h"
#include "model/pt_checkpoint.h"
#include "model/spec.h"
#include "store/artifact_store.h"
#include "train/train_config.h"

namespace kestrel::app {
namespace {

Status Bad(const std::string& field, const std::string& msg) {
  return Status::InvalidArgument(msg, {kRequestFile, 0, field});
}

// An error of a key's value, located in the request under its field.
Status InRequest(const Status& s) {
  if (s.IsOk() || (s.Code() == StatusCode::kInvalidArgument && s.Where().file == kRequestFile)) return s;
  return Status::InvalidArgument(s.Message(), {kRequestFile, 0, s.Where().field});
}

// What `kestrel val model=` and `kestrel export` need before they start: a
// readable weights file (safetensors, or a .pt checkpoint), checked without
// LibTorch.
Status CheckWeightsFile(const std::string& model) {
  Status h = model::FileLooksLikeZip(model) ? model::ReadWeightsInfo(model).GetStatus()
                                            : ReadSafeTensorsHeader(model).GetStatus();
  if (h.IsOk()) return h;
  const std::string why = h.Code() == StatusCode::kCorruption && !model::FileLooksLikeZip(model)
                              ? "not a safetensors weights file (" + h.Message() + ")"
                              : h.Message();
  return Bad("model", "model=" + EscapeInvalidUtf8(model) + ": " + why);
}

// The gate of the kinds judged by mAP50: the result's map50 reaches the job's min_map50.
Status GateMap50(const AttemptResult& r, double min_map50) {
  if (!r.map50) return Status::FailedPrecondition("the result has no map50");
  if (!(*r.map50 >= min_map50)) {
    return Status::FailedPrecondition("mAP50 " + std::to_string(*r.map50) + " is below the job's min_map50 " +
                                      std::to_string(min_map50));
  }
  return {};
}

// ---- train

class TrainKeys final : public JobKeySchema {
 public:
  void Bind(OptionSet& set) override { cfg_.Bind(set); }
  std::string Refused(const std::string& k) const override {
    if (!jobs::IsJobOwnedTrainKey(k)) return "";
    return "'" + k +
           "' is decided by the job system (each attempt runs in $KESTREL_HOME/jobs/<id>/attempt-<n> and "
           "resumes from the previous attempt's checkpoint)";
  }
  Result<KindSubmission> Check(const jobs::JobKeys& jk, OptionSet& set,
                               const WeightsResolver& resolve_weights,
                               const ModelResolver& /*model*/) override {
    cfg_.device = jk.TrainerDevice();
    const std::string typed_pretrained = cfg_.pretrained;
    // pretrained= may name a registered model: the job stores its blob's path.
    // pretrained=true|false are the reference's flags, not files.
    const bool file = !cfg_.pretrained.empty() && !train::IsBoolText(cfg_.pretrained);
    if (resolve_weights && file) KESTREL_RETURN_IF_ERROR(resolve_weights("pretrained", &cfg_.pretrained));
    if (file) cfg_.pretrained = std::filesystem::absolute(cfg_.pretrained).string();
    // model=yolov8n.pt names a weights file too (a scale or yaml names none).
    if (model::IsWeightsPath(cfg_.model)) {
      const bool same = cfg_.model == typed_pretrained;
      if (resolve_weights) KESTREL_RETURN_IF_ERROR(resolve_weights("model", &cfg_.model));
      cfg_.model = std::filesystem::absolute(cfg_.model).string();
      if (same) cfg_.pretrained = cfg_.model;  // model=X pretrained=X: one file, as Validate allows
    }
    // What `kestrel train` checks before it starts, with the same messages.
    KESTREL_RETURN_IF_ERROR(InRequest(cfg_.Validate()));
    KESTREL_RETURN_IF_ERROR(InRequest(cfg_.ValidateFiles()));
    KindSubmission s;
    s.data = cfg_.data;
    s.config = set.ToJson();
    return s;
  }

 private:
  train::TrainConfig cfg_;
};

// A training attempt's result names a `best` weights file that exists and
// parses as safetensors with tensors, and has a map50 reaching min_map50.
// val=false (or no val split): no mAP was measured. Without a gate the job
// succeeds as not validated; a gate it cannot check fails it, never reading
// the missing mAP as 0 or as a pass.
Status TrainGate(const AttemptResult& r, const store::JobRecord& job, Env& env) {
  auto fail = [](const std::string& why) { return Status::FailedPrecondition(why); };
  if (r.best.empty()) return fail("the result names no best weights file");
  if (!env.Stat(r.best).is_regular) return fail("best weights " + r.best + " do not exist");
  auto bytes = env.ReadFile(r.best);
  if (!bytes.IsOk())
    return fail("best weights " + r.best + " cannot be read: " + bytes.GetStatus().Message());
  auto parsed = ParseSafeTensors(*bytes, r.best);
  if (!parsed.IsOk()) return fail("best weights do not load: " + parsed.GetStatus().ToString());
  if (parsed->tensors.empty()) return fail("best weights " + r.best + " hold no tensors");
  const double min_map50 = job.spec.min_map50;
  if (r.validated == false) {
    if (min_map50 <= 0) return {};
    const std::string why = r.not_validated.empty() ? "val=false" : r.not_validated;
    return fail("the model was not validated (" + why + "): min_map50 " + std::to_string(min_map50) +
                " cannot be checked; train with val=true and a val split, or submit without min_map50");
  }
  return GateMap50(r, min_map50);
}

// A succeeded training job registers its model (docs/models.md).
Result<std::string> RegisterTrainModel(const SucceededJob& s) {
  KESTREL_ASSIGN_OR_RETURN(auto blobs, store::OpenArtifactStore(s.home));
  ModelRegistry reg(s.meta, *blobs, Env::Default());
  bool created = false;
  KESTREL_ASSIGN_OR_RETURN(store::ModelRecord m, reg.RegisterJobModel(s.job.id, s.now_ms, &created));
  if (!created) return std::string();
  return "registered model " + m.name + "@v" + std::to_string(m.seq) + " (" + m.id.substr(0, 12) + ")";
}

JobKindSpec TrainKind() {
  JobKindSpec k;
  k.name = "train";
  k.summary = "train a detector on data= (the train keys; the model is registered when it passes the gate)";
  k.config_names_kind = false;
  k.keys = [] { return std::make_unique<TrainKeys>(); };
  k.gate = TrainGate;
  k.on_succeeded = RegisterTrainModel;
  return k;
}

// ---- val

class ValJobKeys final : public JobKeySchema {
 public:
  void Bind(OptionSet& set) override { vk_.Bind(set); }
  std::string Refused(const std::string& k) const override {
    if (!IsJobOwnedValKey(k)) return "";
    return "'" + k +
           "' is not a val job key (a val job runs model= on data=, in $KESTREL_HOME/jobs/<id>/attempt-<n>)";
  }
  Result<KindSubmission> Check(const jobs::JobKeys& jk, OptionSet& set,
                               const WeightsResolver& resolve_weights,
                               const ModelResolver& /*model*/) override {
    if (jk.device != "cpu") return Bad("device", "a val job runs on the CPU (device=cpu)");
    if (vk_.data.empty()) return Bad("data", "data=NAME[@VERSION] is required");
    if (vk_.model.empty()) return Bad("model", "model=WEIGHTS is required (the weights the val job scores)");
    if (resolve_weights) KESTREL_RETURN_IF_ERROR(resolve_weights("model", &vk_.model));
    vk_.model = std::filesystem::absolute(vk_.model).string();
    KESTREL_RETURN_IF_ERROR(InRequest(CheckBoundValues(vk_)));
    KESTREL_RETURN_IF_ERROR(CheckWeightsFile(vk_.model));
    KindSubmission s;
    s.data = vk_.data;
    s.config = set.ToJson();
    return s;
  }

 private:
  ValKeys vk_;
};

JobKindSpec ValKind() {
  JobKindSpec k;
  k.name = "val";
  k.summary = "score model= on a split of data= (the val keys; the evaluation is the job's result)";
  k.keys = [] { return std::make_unique<ValJobKeys>(); };
  k.gate = [](const AttemptResult& r, const store::JobRecord& job, Env&) {
    return GateMap50(r, job.spec.min_map50);
  };
  return k;
}

// ---- export

class ExportJobKeys final : public JobKeySchema {
 public:
  void Bind(OptionSet& set) override { ek_.Bind(set); }
  std::string Refused(const std::string& k) const override {
    if (k != "output") return "";
    return "'output' is decided by the job system (an export job writes "
           "$KESTREL_HOME/jobs/<id>/<model>.onnx)";
  }
  Result<KindSubmission> Check(const jobs::JobKeys& jk, OptionSet& set,
                               const WeightsResolver& resolve_weights,
                               const ModelResolver& resolve_model) override {
    if (jk.device != "cpu") return Bad("device", "an export job runs on the CPU (device=cpu)");
    if (jk.min_map50 != 0) {
      return Bad("min_map50",
                 "an export job is judged by its verification against LibTorch, not by a min_map50");
    }
    // What `kestrel export` checks before it opens the weights, with its messages.
    KESTREL_RETURN_IF_ERROR(InRequest(ek_.Request().GetStatus()));
    KindSubmission s;
    KESTREL_RETURN_IF_ERROR(ResolveModel(&s, resolve_weights, resolve_model));
    {
      // int8=true without data= calibrates on the registered model's dataset version.
      ExportRequest pinned = ek_.r;
      pinned.model_data = s.model_dataset_version;
      KESTREL_RETURN_IF_ERROR(InRequest(CheckExportCalibrationData(pinned)));
    }
    s.config = set.ToJson();
    // data= (optional: int8 calibration, the mAP check) resolves like any job's.
    s.data = s.config.value("data", std::string());
    return s;
  }

 private:
  // model=: pinned to NAME@vN when it names a registered model (the child
  // resolves that again and records the export on it), else the weights
  // file made absolute; the file must be readable weights.
  Status ResolveModel(KindSubmission* s, const WeightsResolver& resolve_weights,
                      const ModelResolver& resolve_model) {
    std::string weights = ek_.r.model;
    bool pinned = false;
    if (resolve_model) {
      KESTREL_ASSIGN_OR_RETURN(ResolvedWeights w, resolve_model(ek_.r.model));
      weights = w.path;
      if (w.model) {
        ek_.r.model = w.model->name + "@v" + std::to_string(w.model->seq);
        s->model_dataset_version = w.model->dataset_version;
        pinned = true;
      }
    } else if (resolve_weights) {
      KESTREL_RETURN_IF_ERROR(resolve_weights("model", &weights));
    }
    // A file (not a reference the child resolves): the resolved path, absolute, as val's model=.
    if (!pinned) ek_.r.model = weights = std::filesystem::absolute(weights).string();
    return CheckWeightsFile(weights);
  }

  ExportKeys ek_;
};

// An export is judged by its verification (the child fails an unverified
// one unless force=true, which the result says): the written file must be
// there. It has no map50 (submit refuses min_map50 for it).
Status ExportGate(const AttemptResult& r, const store::JobRecord& /*job*/, Env& env) {
  if (r.path.empty()) return Status::FailedPrecondition("the result names no exported file");
  if (!env.Stat(r.path).is_regular)
    return Status::FailedPrecondition("exported file " + r.path + " does not exist");
  if (!r.verified) return Status::FailedPrecondition("the result has no verified flag");
  return {};
}

JobKindSpec ExportKind() {
  JobKindSpec k;
  k.name = "export";
  k.summary = "write model= as ONNX, verified against LibTorch, recorded on the registered model";
  k.keys = [] { return std::make_unique<ExportJobKeys>(); };
  k.gate = ExportGate;
  return k;
}

}  // namespace

JobKindTable BuiltinJobKinds() {
  JobKindTable t;
  for (JobKindSpec (*row)() : {TrainKind, ValKind, ExportKind, TuneKind}) {
    Status s = t.Add(row());
    (void)s;  // the built-in names are valid and distinct (tests/app/job_kinds_test.cc)
  }
  return t;
}

}  // namespace kestrel::app
