// Between iterations (internal/run.h): restoring a checkpoint (resume and
// the NaN policy's rollback), writing one, and the end of an epoch —
// validation of the EMA, the epoch's record and samples, the checkpoint,
// results.csv / results.png. The iteration loop is trainer.cc's.
#include <functional>
#include <nlohmann/json.hpp>
#include <utility>

#include "model/pt_writer.h"
#include "model/weights.h"
#include "train/internal/run.h"
#include "train/progress.h"
#include "train/results_png.h"
#include "train/samples.h"

namespace kestrel::train::internal {

Status Restore(Run& r, const ParsedCheckpoint& ckpt, const std::string& origin) {
  if (ckpt.state.batches_per_epoch != r.shape.batches_per_epoch || ckpt.state.epochs != r.shape.epochs) {
    return Status::FailedPrecondition(
        origin + ": checkpoint was taken with a different run shape (batches per epoch " +
        std::to_string(ckpt.state.batches_per_epoch) + " vs " + std::to_string(r.shape.batches_per_epoch) +
        ")");
  }
  KESTREL_RETURN_IF_ERROR(ApplyCheckpoint(ckpt, origin, **r.model, **r.ema_model, *r.optimizer));
  r.ema = std::make_unique<ModelEma>(**r.ema_model, 0.9999, 2000.0, ckpt.state.ema_updates);
  KESTREL_ASSIGN_OR_RETURN(Schedule sched, Schedule::Create(r.opt.optimizer, r.shape, ckpt.state.schedule));
  r.schedule = std::move(sched);
  const std::string keep_config = r.state.config_json;
  r.state = ckpt.state;
  r.state.config_json = keep_config;
  KESTREL_ASSIGN_OR_RETURN(r.history, HistoryFromJson(r.state.history_json));
  r.consecutive_nonfinite = 0;
  return {};
}

namespace {

// save_pt: the weights also as the reference framework's checkpoint
// (model/pt_writer.h), `name`.pt beside `name`.safetensors, so YOLO("best.pt")
// and scripts that expect weights/best.pt work. train_args are the run's
// stored keys (those with scalar or list values: the reference's names) and
// the training imgsz, which val/predict read back as the weights' size.
Status WriteReferencePt(Run& r, const std::string& name, const model::SaveOptions& so) {
  KESTREL_ASSIGN_OR_RETURN(SafeTensorFile state, model::WeightsToSafeTensors(**r.ema_model, so));
  model::PtWriteOptions o;
  o.spec = (**r.ema_model).Spec();
  o.names = so.names;
  o.epoch = r.history.empty() ? -1 : r.history.back().epoch - 1;  // the reference's 0-based epoch
  if (r.state.best_epoch > 0) o.best_fitness = r.state.best_fitness;
  const nlohmann::json config =
      nlohmann::json::parse(r.state.config_json, nullptr, /*allow_exceptions=*/false);
  if (config.is_object()) {
    for (auto it = config.begin(); it != config.end(); ++it) {
      if (!it.value().is_object()) o.train_args[it.key()] = it.value();
    }
  }
  o.train_args["imgsz"] = r.opt.loader.imgsz;
  if (!r.history.empty() && r.validator) {
    const EpochRecord& rec = r.history.back();
    o.train_metrics = {{"metrics/precision(B)", rec.precision}, {"metrics/recall(B)", rec.recall},
                       {"metrics/mAP50(B)", rec.map50},         {"metrics/mAP50-95(B)", rec.map5095},
                       {"val/box_loss", rec.val_box},           {"val/cls_loss", rec.val_cls},
                       {"val/dfl_loss", rec.val_dfl},           {"fitness", rec.fitness}};
  }
  o.date = model::PtDate(r.env->UnixMillis());
  o.archive_name = name;
  return model::WritePtCheckpoint(*r.env, JoinPath(r.weights_dir, name + ".pt"), state, o);
}

}  // namespace

Status WriteCheckpoint(Run& r, bool is_best) {
  r.state.schedule = r.schedule->State();
  r.state.ema_updates = r.ema->Updates();
  r.state.history_json = HistoryToJson(r.history);
  KESTREL_ASSIGN_OR_RETURN(std::string bytes, SerializeCheckpoint(r.state, **r.model, *r.ema, *r.optimizer));
  Env& env = *r.env;
  KESTREL_RETURN_IF_ERROR(r.ema->CopyTo(**r.ema_model));
  model::SaveOptions so;
  so.names = r.dataset.manifest.names;
  // The training size, so val/predict/export default to it (issue 28).
  so.extra_metadata["imgsz"] = std::to_string(r.opt.loader.imgsz);
  so.env = &env;
  // best.* before last.*: a crash in between must never leave a last.ckpt
  // whose best epoch has no weights on disk (resume would trust it).
  if (is_best) {
    KESTREL_RETURN_IF_ERROR(env.WriteFileAtomic(JoinPath(r.weights_dir, "best.ckpt"), bytes));
    KESTREL_RETURN_IF_ERROR(
        model::SaveWeights(**r.ema_model, JoinPath(r.weights_dir, "best.safetensors"), so));
    if (r.opt.save_pt) KESTREL_RETURN_IF_ERROR(WriteReferencePt(r, "best", so));
  }
  KESTREL_RETURN_IF_ERROR(env.WriteFileAtomic(JoinPath(r.weights_dir, "last.ckpt"), bytes));
  KESTREL_RETURN_IF_ERROR(model::SaveWeights(**r.ema_model, JoinPath(r.weights_dir, "last.safetensors"), so));
  if (r.opt.save_pt) KESTREL_RETURN_IF_ERROR(WriteReferencePt(r, "last", so));
  r.good_checkpoint = std::move(bytes);
  return {};
}

Result<bool> EndEpoch(Run& r, int epoch, const IterationPlan& plan, double seconds) {
  const int64_t end_start_us = r.env->NowMicros();
  EpochRecord rec;
  rec.epoch = epoch + 1;
  const auto& a = r.state.accum;
  if (a.batches > 0) {
    rec.box = a.box / a.batches;
    rec.cls = a.cls / a.batches;
    rec.dfl = a.dfl / a.batches;
  }
  for (int g = 0; g < 3; ++g) rec.lr[g] = plan.lr[g] * r.state.lr_scale;
  if (r.validator) {
    KESTREL_RETURN_IF_ERROR(r.ema->CopyTo(**r.ema_model));
    std::function<void(int64_t, int64_t)> on_val;
    if (r.hooks->on_phase_progress) {
      on_val = [&r, &rec](int64_t done, int64_t total) {
        ReportPhase(r, Phase::kVal, rec.epoch, done, total);
      };
    }
    KESTREL_ASSIGN_OR_RETURN(eval::EvalResult ev, r.validator->Run(**r.ema_model, &*r.loss, on_val));
    rec.val_box = r.validator->LastLoss()[0];
    rec.val_cls = r.validator->LastLoss()[1];
    rec.val_dfl = r.validator->LastLoss()[2];
    rec.precision = ev.precision;
    rec.recall = ev.recall;
    rec.map50 = ev.map50;
    rec.map5095 = ev.map5095;
    rec.fitness = 0.1 * ev.map50 + 0.9 * ev.map5095;
    if (r.opt.val_samples > 0) {
      // Before the checkpoint: a crash in between leaves this epoch's file,
      // which the resumed run redoes and replaces (one file per epoch).
      SampleSource src{r.dataset.record.dataset, r.dataset.record.seq, r.dataset.record.version_id,
                       r.dataset.manifest.names};
      KESTREL_RETURN_IF_ERROR(
          WriteEpochSamples(*r.env, r.run_dir, rec.epoch, src, r.validator->LastSamples()));
    }
    Print(r, FormatValidationTable(ev, /*per_class=*/false));
    r.last_eval = std::move(ev);
  } else {
    rec.fitness = -(rec.box + rec.cls + rec.dfl);  // no val split: lower train loss is better
  }
  // The epoch's wall time counts its validation, as the reference's
  // results.csv `time` does (it is taken after validating).
  rec.seconds = seconds + static_cast<double>(r.env->NowMicros() - end_start_us) * 1e-6;
  const bool is_best = IsNewBest(r.state, rec.fitness);
  if (is_best) {
    r.state.best_fitness = rec.fitness;
    r.state.best_epoch = rec.epoch;
  }
  r.history.push_back(rec);
  r.state.accum = EpochAccum{};
  KESTREL_RETURN_IF_ERROR(WriteCheckpoint(r, is_best));
  if (r.opt.save_period > 0 && rec.epoch % r.opt.save_period == 0) {  // kept per keep_ckpts (docs/disk.md)
    const std::string name = "epoch" + std::to_string(rec.epoch) + ".ckpt";
    KESTREL_RETURN_IF_ERROR(r.env->WriteFileAtomic(JoinPath(r.weights_dir, name), r.good_checkpoint));
  }
  KESTREL_RETURN_IF_ERROR(WriteResultsCsv(*r.env, JoinPath(r.run_dir, "results.csv"), r.history));
  if (r.opt.plots) {
    KESTREL_RETURN_IF_ERROR(
        WriteResultsPng(*r.env, JoinPath(r.run_dir, "results.png"), r.history, r.validator != nullptr));
  }
  if (r.hooks->on_epoch) r.hooks->on_epoch(rec);
  return r.opt.patience > 0 && rec.epoch - r.state.best_epoch >= r.opt.patience;  // 0: off
}

Result<bool> Rollback(Run& r) {
  if (r.state.rollbacks >= kMaxRollbacks) return false;
  const int rollbacks = r.state.rollbacks + 1;
  const double lr_scale = r.state.lr_scale * 0.5;
  const int64_t nonfinite = r.summary.nonfinite_iterations;
  KESTREL_ASSIGN_OR_RETURN(ParsedCheckpoint ck, ParseCheckpoint(r.good_checkpoint, "last good checkpoint"));
  KESTREL_RETURN_IF_ERROR(Restore(r, ck, "last good checkpoint"));
  r.state.rollbacks = rollbacks;
  r.state.lr_scale = lr_scale;
  r.summary.nonfinite_iterations = nonfinite;
  Print(r, "non-finite loss/gradients: rolled back to iteration " +
               std::to_string(r.schedule->State().next_iteration) + " with LR x" + std::to_string(lr_scale) +
               " (rollback " + std::to_string(rollbacks) + " of " + std::to_string(kMaxRollbacks) + ")\n");
  return true;
}

}  // namespace kestrel::train::internal
