// `kestrel val`, `kestrel predict`, `kestrel compare` (docs/evaluation.md).
// `val predictions=` is torch-free and always built; everything that runs a
// model needs KESTREL_CLI_WITH_TORCH (the cli target defines it when the
// model module is built).
#include <cstdio>
#include <iostream>

#include "app/evaluate.h"
#include "app/val_keys.h"
#ifdef KESTREL_CLI_WITH_TORCH
#include "app_run/evaluate.h"
#include "model/device.h"
#endif
#include "cli/cli.h"
#include "cli/eval_model.h"  // AddModelCommands (only with LibTorch)
#include "cli/job_child.h"
#include "cli/torch_commands.h"
#include "core/device_spec.h"
#include "core/failure_of.h"
#include "core/json.h"
#include "eval/dataset_eval.h"
#include "jobs/job_keys.h"

namespace kestrel::cli {

namespace {

// `kestrel val`'s keys: the same binding val jobs are validated with.
using ValOptions = app::ValKeys;

Status Usage(const std::string& msg, const std::string& field) {
  return Status::InvalidArgument(msg, {"command line", 0, field});
}

// `kestrel val` and `kestrel val --job` both run it: o.predictions or
// o.model (both already resolved: data= a registry reference, model= a file)
// scored on o.data's split, into `dir`, or with "" the next free
// project/name (app/evaluate.h, app_run/evaluate.h).
Result<app::ValRun> ScoreAndWrite(Stores& stores, const ValOptions& o, const std::string& dir_or_empty) {
  if (!o.predictions.empty()) {
    return app::EvaluatePredictions(Env::Default(), *stores.meta, *stores.blobs, o, dir_or_empty);
  }
#ifdef KESTREL_CLI_WITH_TORCH
  return app::EvaluateModel(Env::Default(), *stores.meta, *stores.blobs, o, dir_or_empty);
#else
  return Status::FailedPrecondition("this kestrel was built without LibTorch: val model= is unavailable",
                                    {"", 0, "model"});
#endif
}

// device= (core/device_spec.h): its form always; with model= and LibTorch
// also that this machine has it (model/device.h), so a missing GPU is a
// usage error (exit 2) before anything is read.
Status CheckValDevice(const ValOptions& o) {
  auto d = ParseDeviceSpec(o.device);
  if (!d.IsOk()) return d.GetStatus();
#ifdef KESTREL_CLI_WITH_TORCH
  if (!o.model.empty()) return model::CheckDeviceAvailable(*d);
#endif
  return {};
}

void RunVal(Context& ctx, int* exit_code, ValOptions& o) {
  if (o.data.empty()) {
    *exit_code = Fail(ctx, Usage("data=NAME[@VERSION] is required", "data"));
    return;
  }
  if (o.predictions.empty() == o.model.empty()) {
    *exit_code = Fail(ctx, Usage("give exactly one of predictions=PATH or model=WEIGHTS", "predictions"));
    return;
  }
#ifndef KESTREL_CLI_WITH_TORCH
  if (!o.model.empty()) {
    *exit_code =
        Fail(ctx, Status::FailedPrecondition("this kestrel was built without LibTorch: val model= is "
                                             "unavailable (val predictions= works)",
                                             {"", 0, "model"}));
    return;
  }
#endif
  if (Status d = CheckValDevice(o); !d.IsOk()) {
    *exit_code = Fail(ctx, Usage(d.Message(), "device"));
    return;
  }
  auto stores = OpenStores(ctx);
  if (!stores.IsOk()) {
    *exit_code = Fail(ctx, stores.GetStatus());
    return;
  }
  // data= may be a dataset path: imported (or its version reused) first.
  if (!ResolveDataOption(ctx, *stores, &o.data, nullptr, exit_code)) return;
  // model= may name a registered model (NAME@vN, NAME@TAG, id prefix).
  if (Status w = ResolveWeightsOption(ctx, &o.model); !w.IsOk()) {
    *exit_code = Fail(ctx, w);
    return;
  }
  auto run = ScoreAndWrite(*stores, o, "");
  if (!run.IsOk()) {
    *exit_code = Fail(ctx, run.GetStatus());
    return;
  }
  *exit_code = Emit(ctx, run->text, app::ValRunJson(*run));
}

// `kestrel val --job ID --attempt N`: the child a worker runs for a val job
// (docs/jobs.md "Job kinds"). It evaluates the job's model on its dataset
// version into $KESTREL_HOME/jobs/<id>/attempt-<n>/ and reports like `train
// --job`: progress lines, `reason=` and the exit code of core/failure.h on
// failure, `result {json}` at the end (the quality gate reads its map50).
int RunValJob(Context& ctx, int64_t job_id, int64_t attempt) {
  JobChild child(ctx, job_id, attempt);
  Stores stores;
  store::JobRecord job;
  int code = 0;
  if (!child.Begin(&stores, &job, &code)) return code;
  auto kind = jobs::JobKindOf(job);
  if (!kind.IsOk()) return child.Fail(FailureReason::kBadConfig, kind.GetStatus());
  if (*kind != jobs::JobKind::kVal) {
    return child.Fail(FailureReason::kBadConfig,
                      Status::InvalidArgument("job " + std::to_string(job_id) + " is a " +
                                              jobs::JobKindName(*kind) + " job, not a val job (`kestrel " +
                                              jobs::JobKindName(*kind) + " --job` runs it)"));
  }
  ValOptions o;
  {
    OptionSet set;
    o.Bind(set);
    auto cfg = nlohmann::json::parse(job.spec.config_json, nullptr, false);
    if (!cfg.is_object()) {
      return child.Fail(FailureReason::kBadConfig,
                        Status::InvalidArgument("stored config is not a JSON object"));
    }
    // The job's own keys travel in the config; the rest are the val keys.
    cfg.erase(jobs::kJobKindKey);
    Status s = set.ApplyJson(cfg, "job " + std::to_string(job_id) + " config");
    if (!s.IsOk()) return child.Fail(FailureReason::kBadConfig, s);
  }
  // Runs a model, never files of the submitting machine; the run folder is the attempt's.
  o.predictions.clear();
  if (o.model.empty())
    return child.Fail(FailureReason::kBadConfig, Status::InvalidArgument("the job names no model="));
  child.Progress().Line("stage=eval model=" + o.model);
  auto run = ScoreAndWrite(stores, o, child.AttemptDir());
  if (!run.IsOk()) return child.Fail(FailureReasonOf(run.GetStatus()), run.GetStatus());
  const eval::EvalResult& r = run->result;
  nlohmann::json result = {{"kind", jobs::JobKindName(jobs::JobKind::kVal)},
                           {"model", o.model},
                           {"data", o.data},
                           {"split", o.split},
                           {"images", r.images},
                           {"instances", r.instances},
                           {"map50", r.map50},
                           {"map50_95", r.map5095},
                           {"precision", r.precision},
                           {"recall", r.recall},
                           {"fitness", r.fitness},
                           {"run_dir", run->dir},
                           {"record_sha", run->record_sha},
                           {"record_path", run->record_path},
                           {"attempt", attempt}};
  (ctx.json ? std::cerr : std::cout) << run->text;
  return child.Succeed(result);
}

}  // namespace

void AddEvalCommands(CLI::App& app, Context& ctx, int* exit_code) {
  struct ValState {
    ValOptions opts;
    OptionSet set;
    FlagValues flags;
    std::vector<std::string> extras;
    int64_t job = 0;
    int64_t attempt = 0;
  };
  auto st = std::make_shared<ValState>();
  st->opts.Bind(st->set);
  CLI::App* val = app.add_subcommand(kValCommand.name, kValCommand.help);
  val->add_option("key=value", st->extras, "e.g. predictions=DIR data=coco128 split=val conf=0.001");
  AddOptionFlags(val, st->set, &st->flags);
  val->add_option("--job", st->job,
                  "run this queued val job's attempt (what `kestrel worker` starts; docs/jobs.md)")
      ->check(IntArg(1));
  val->add_option("--attempt", st->attempt, "the attempt number the worker claimed (with --job)")
      ->check(IntArg(1));
  val->callback([&ctx, exit_code, st] {
    if (st->job > 0 || st->attempt > 0) {
      if (st->job <= 0 || st->attempt <= 0 || !st->extras.empty() || !st->flags.empty()) {
        *exit_code =
            Fail(ctx, Status::InvalidArgument("--job ID --attempt N go together and take no other options",
                                              {"command line", 0, "job"}));
        return;
      }
      *exit_code = RunValJob(ctx, st->job, st->attempt);
      return;
    }
    Status s = ApplyOptions(st->set, st->flags, st->extras);
    if (!s.IsOk()) {
      *exit_code = Fail(ctx, s);
      return;
    }
    RunVal(ctx, exit_code, st->opts);
  });
#ifdef KESTREL_CLI_WITH_TORCH
  AddModelCommands(app, ctx, exit_code);
#endif
}

}  // namespace kestrel::cli
