// The training loop. Parts: TrainOptions (trainer_types.cc), the loader, the model,
// the loss, the schedule + optimizer + EMA, the checkpointer and the end of an
// epoch (epoch_end.cc, on top of checkpoint.h), the Validator and the
// progress/report writers. Run (internal/run.h) holds them for one call of
// Train(); each phase is a small function.
#include "train/trainer.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <thread>

#include "core/cpu_budget.h"
#include "core/json.h"
#include "core/parse.h"
#include "core/thread_policy.h"
#include "data/version.h"
#include "data/version_files.h"
#include "eval/plots.h"
#include "model/pt_checkpoint.h"
#include "model/torch_compat.h"
#include "model/weights.h"
#include "store/metadata_store.h"
#include "train/autobatch.h"
#include "train/checkpoint.h"
#include "train/internal/run.h"
#include "train/optimizer.h"
#include "train/progress.h"
#include "train/validator.h"

namespace kestrel::train {

namespace {

using internal::EndEpoch;
using internal::kMaxRollbacks;
using internal::kNonFiniteInARow;
using internal::Print;
using internal::ReportPhase;
using internal::Restore;
using internal::Rollback;
using internal::Run;
using internal::WriteCheckpoint;

constexpr double kClipNorm = 10.0;

nlohmann::json ConfigJson(TrainOptions o) {
  OptionSet s;
  o.Bind(s);
  return s.ToJson();
}

// Setup step `step` begins (after r.setup_done finished ones); "" ends setup.
// A step is one blocking call or a few (read a checkpoint, build the model
// and move it to the device): reporting between them is what keeps a slow
// but moving setup from looking hung.
void SetupStep(Run& r, std::string_view step) {
  const int64_t now = r.env->NowMicros();
  if (!r.setup_step.empty()) {
    spdlog::debug("train setup: {} {:.3f} s", r.setup_step,
                  static_cast<double>(now - r.setup_step_us) * 1e-6);
  }
  r.setup_step = std::string(step);
  r.setup_step_us = now;
  if (step.empty()) r.setup_done = r.setup_steps;
  ReportPhase(r, Phase::kSetup, 0, r.setup_done, r.setup_steps, step);
  if (!step.empty()) ++r.setup_done;
}

// batch=-1 on CUDA (autobatch.h): one forward+backward of a copy of the
// model (so the real one's BatchNorm statistics stay untouched) at each
// probe size on a zero input, the device memory in use after each, then
// ChooseAutoBatch's fit at kAutoBatchFraction of the device.
int AutoBatchOnDevice(Run& r, model::YoloImpl& m) {
  const int imgsz = r.opt.loader.imgsz;
  const auto before = model::QueryDeviceMemory(r.device);
  if (!before) {
    Print(r, "batch=-1: cannot read the memory of " + r.device.str() +
                 " (the CUDA runtime's cudaMemGetInfo is not in the process); using batch=" +
                 std::to_string(kAutoBatchCpu) + "\n");
    return kAutoBatchCpu;
  }
  std::vector<AutoBatchProbe> probes;
  {
    model::Yolo probe = model::CloneModel(m);
    probe->train();
    for (int b : AutoBatchSizes(before->total_bytes)) {
      AutoBatchProbe p;
      p.batch = b;
      try {
        auto x = torch::zeros({b, 3, imgsz, imgsz}, torch::TensorOptions().device(r.device));
        model::YoloOutput out;
        {
          model::AutocastScope autocast(r.amp);
          out = probe->forward(x);
        }
        torch::Tensor sum = torch::zeros({}, torch::TensorOptions().device(r.device));
        for (const auto& map : out.maps) sum = sum + map.to(torch::kFloat).sum();
        sum.backward();
        model::SynchronizeDevice(r.device);
        if (auto now = model::QueryDeviceMemory(r.device)) p.used_bytes = now->total_bytes - now->free_bytes;
      } catch (const c10::Error& e) {
        if (!model::IsOutOfMemory(e)) throw;
        p.out_of_memory = true;
      }
      probe->zero_grad();
      probes.push_back(p);
      if (p.out_of_memory) break;
    }
  }
  const AutoBatchChoice c = ChooseAutoBatch(probes, before->total_bytes, kAutoBatchFraction, kAutoBatchCpu);
  Print(r, "batch=-1 on " + r.device.str() + ": " + c.why + "\n");
  return c.batch;
}

// *created_run_dir: whether this call made the run folder (it did not exist).
Status Setup(Run& r, const std::optional<ParsedCheckpoint>& ckpt, bool* created_run_dir) {
  TrainOptions& o = r.opt;
  Env& env = *r.env;
  SetupStep(r, "dataset");
  // threads=0: the cores this process may use (its affinity — a worker
  // slot's share — and its cgroup quota), not the machine's count: threads
  // beyond them only wait at every parallel region's barrier (issue 30).
  // The loader's threads count in the budget (SplitThreadBudget); on the
  // CPU the intra-op count then follows what other processes leave free
  // (AdaptiveThreads, re-checked in Loop), unless threads=N fixed it.
  const CpuBudget budget = ProcessCpuBudget();
  const ThreadSplit split = SplitThreadBudget(budget.usable, o.threads, o.loader.workers);
  r.threads_why = (o.threads > 0 ? "threads=" + std::to_string(o.threads) : "threads=0: " + budget.why) +
                  "; " + split.why;
  r.loader_workers = split.loader;
  r.budget_cpus = budget.affinity;
  r.thread_policy.emplace(AdaptiveThreads::Options{budget.usable, split.torch, o.threads > 0});
  at::set_num_threads(split.torch);
  at::globalContext().setDeterministicAlgorithms(o.deterministic, /*warn_only=*/true);
  {
    // TrainConfig::Validate admitted its form; whether this machine has it
    // is an environment failure here (the CLI refused it earlier, exit 2).
    KESTREL_ASSIGN_OR_RETURN(DeviceSpec spec, ParseDeviceSpec(o.device));
    auto device = model::ToTorchDevice(spec);
    if (!device.IsOk()) {
      return Status::FailedPrecondition(device.GetStatus().Message()).WithReason(FailureReason::kEnvironment);
    }
    r.device = *device;
  }
  r.amp = o.amp && r.device.is_cuda();
  if (!r.device.is_cpu()) r.thread_policy.reset();  // the step runs on the GPU: the count stays

  const std::string home = o.home.empty() ? store::KestrelHome() : o.home;
  KESTREL_ASSIGN_OR_RETURN(r.meta, store::MetadataStore::Open(store::MetadataUrl(home)));
  KESTREL_ASSIGN_OR_RETURN(r.blobs, store::OpenArtifactStore(home, env));
  std::string spec = o.data;
  if (ckpt) spec = o.data.substr(0, o.data.find('@')) + "@" + ckpt->state.dataset_version;
  KESTREL_ASSIGN_OR_RETURN(r.dataset, data::LoadVersion(*r.meta, *r.blobs, spec, env));
  // data_mode=reference: every image file as imported (size + mtime, else
  // its hash) before the first step; a moved or changed file fails the run
  // here, naming it, instead of becoming a skipped sample.
  KESTREL_RETURN_IF_ERROR(data::CheckVersionFiles(r.dataset, data::FileCheck::kFast, env)
                              .ToStatus(data::VersionName(r.dataset.record)));
  {
    // classes=, single_cls, fraction: the labels and images this run sees.
    std::string what;
    KESTREL_ASSIGN_OR_RETURN(r.dataset.manifest, o.subset.Apply(r.dataset.manifest, &what));
    if (!what.empty()) Print(r, "data: " + what + "\n");
  }
  r.nc = static_cast<int>(r.dataset.manifest.names.size());
  if (r.nc < 1) {
    return Status::FailedPrecondition("dataset " + spec + " has no classes")
        .WithReason(FailureReason::kDatasetErrors);
  }

  // The folder is only named here; it is made at the end of Setup, once
  // every check passed, so a start that fails leaves no empty run folder.
  r.run_dir = ckpt ? o.run_dir : ResolveRunDir(env, o);
  o.run_dir = r.run_dir;
  r.weights_dir = JoinPath(r.run_dir, "weights");
  r.summary.run_dir = r.run_dir;

  // Model (seeded init), EMA copy, loss.
  SetupStep(r, "model");
  for (std::string& w : o.Warnings()) {
    Print(r, "warning: " + w + "\n");
    r.summary.warnings.push_back(std::move(w));
  }
  torch::manual_seed(static_cast<uint64_t>(o.seed));
  // model=yolov8n.pt (Ultralytics style): the file's architecture, and its
  // weights as pretrained= (TrainConfig::Validate refuses a second file).
  // pretrained=false: that file's architecture only, from scratch.
  // A custom graph travels in the spec: from the weights, or on resume the
  // checkpoint's (the model yaml may have moved or changed since).
  std::string pretrained = o.PretrainedWeights("");
  std::optional<model::ModelSpec> model_spec;
  if (ckpt) {
    KESTREL_ASSIGN_OR_RETURN(model_spec, CheckpointGraph(*ckpt, r.nc, o.resume));
  }
  if (model::IsWeightsPath(o.model)) {
    KESTREL_ASSIGN_OR_RETURN(model::WeightsInfo wi, model::ReadWeightsInfo(o.model));
    if (!model_spec) model_spec = wi.spec;
    pretrained = o.PretrainedWeights(o.model);
    if (pretrained.empty())
      Print(r, "pretrained=false: " + wi.spec.Name() + " from " + o.model + ", weights from scratch\n");
  } else if (!model_spec) {
    KESTREL_ASSIGN_OR_RETURN(model_spec, model::ParseModelSpec(o.model, r.nc));
  }
  model_spec->nc = r.nc;
  KESTREL_ASSIGN_OR_RETURN(model::Yolo m, model::CreateModel(*model_spec));
  if (!pretrained.empty() && !ckpt) {
    model::LoadReport rep;
    KESTREL_RETURN_IF_ERROR(model::LoadWeights(*m, pretrained, model::LoadMode::kFineTune, &rep));
    Print(r, "pretrained: " + std::to_string(rep.loaded) + " tensors loaded, " + std::to_string(rep.skipped) +
                 " re-initialized from " + pretrained + "\n");
  }
  KESTREL_ASSIGN_OR_RETURN(const std::vector<int> frozen, o.FrozenLayers());
  for (auto& p : m->named_parameters()) {
    for (int i : frozen) {
      if (p.key().rfind("model." + std::to_string(i) + ".", 0) == 0) p.value().set_requires_grad(false);
    }
  }
  m->to(r.device);
  m->train();
  r.model = m;
  r.ema_model = model::CloneModel(*m);
  LossOptions lo = o.EffectiveLoss();
  lo.num_classes = r.nc;
  lo.strides = m->Strides();
  KESTREL_ASSIGN_OR_RETURN(r.loss, DetectionLoss::Create(lo));
  Print(r, model::FormatSummary(model::SummarizeModel(m->Spec(), o.loader.imgsz, o.loader.imgsz)) + "\n");
  Print(r, "torch threads: " + std::to_string(at::get_num_threads()) + " (" + r.threads_why +
               "), device: " + r.device.str() + " (" + model::TorchBuildText() + ")\n");
  if (r.thread_policy) Print(r, "threads policy: " + r.thread_policy->Describe() + "\n");
  if (o.amp && !r.amp) Print(r, "amp=true: autocast runs on CUDA only; training in float32 on the CPU\n");
  if (r.amp) Print(r, "amp=true: CUDA autocast with bfloat16 (weights, loss and optimizer in float32)\n");
  if (o.loader.batch == kAutoBatch) {
    if (!r.device.is_cuda()) {
      o.loader.batch = kAutoBatchCpu;
      Print(r, "batch=-1: the automatic batch size needs CUDA; using batch=" + std::to_string(kAutoBatchCpu) +
                   " on the CPU\n");
    } else {
      o.loader.batch = AutoBatchOnDevice(r, *m);
    }
  }

  // Data.
  SetupStep(r, "loaders");
  data::LoaderOptions tl = o.loader;
  // rect=true: batches in aspect-ratio order (so never shuffled) at their
  // own shapes with no border, as the reference's train loader (pad 0.0);
  // the loader leaves mosaic and mixup out.
  tl.shuffle = !o.loader.rect;
  tl.rect_pad = 0.0;
  if (o.loader.rect)
    Print(r,
          "rect=true: batches ordered by aspect ratio, so not shuffled (the reference's \"'rect=True' is "
          "incompatible with DataLoader shuffle, setting shuffle=False\"), and no mosaic or mixup\n");
  tl.augment = true;
  tl.seed = static_cast<uint64_t>(o.seed);
  tl.epochs = o.epochs;
  tl.stride = model::kMaxStride;
  tl.drop_last = false;
  tl.workers = r.loader_workers;
  // cache=disk: shared by every run of this home (keyed by image content and
  // imgsz); deleting the folder only costs decodes.
  tl.cache_dir = JoinPath(JoinPath(home, "cache"), "decoded");
  KESTREL_ASSIGN_OR_RETURN(
      r.loader, data::Loader::Create(r.dataset.manifest, data::Split::kTrain,
                                     data::VersionImageSource(r.dataset, *r.blobs, env), tl, o.augment));
  if (o.val) {
    ValidatorOptions vo;
    vo.samples = o.val_samples;
    vo.grid_batches = o.plots ? 3 : 0;
    auto v = Validator::Create(r.dataset.manifest, data::VersionImageSource(r.dataset, *r.blobs, env), tl,
                               r.dataset.manifest.names, r.device, vo);
    if (v.IsOk()) {
      r.validator = std::move(v).Value();
    } else {
      Print(r, "validation disabled: " + v.GetStatus().ToString() + "\n");
      r.summary.not_validated = "no usable val split: " + v.GetStatus().Message();
    }
  } else {
    r.summary.not_validated = "val=false";
  }
  r.summary.validated = r.validator != nullptr;
  r.shape = RunShape{o.epochs, r.loader->BatchesPerEpoch(), r.loader->NumSamples(), tl.batch, r.nc};

  // Optimizer + schedule.
  KESTREL_ASSIGN_OR_RETURN(Schedule sched, Schedule::Create(o.optimizer, r.shape));
  KESTREL_ASSIGN_OR_RETURN(r.optimizer, BuildOptimizer(SplitParameterGroups(*m), sched.Optimizer()));
  r.schedule = std::move(sched);
  r.ema = std::make_unique<ModelEma>(*m);

  r.state.batches_per_epoch = r.shape.batches_per_epoch;
  r.state.epochs = o.epochs;
  r.state.loader_seed = tl.seed;
  r.state.dataset_version = r.dataset.record.version_id;
  TrainOptions stored = o;
  stored.resume.clear();
  stored.data = r.dataset.record.dataset;
  r.state.config_json = DumpJson(ConfigJson(stored));
  *created_run_dir = !env.Stat(r.run_dir).exists;
  KESTREL_RETURN_IF_ERROR(env.CreateDirs(r.weights_dir));
  if (!ckpt)
    KESTREL_RETURN_IF_ERROR(WriteArgsYaml(env, JoinPath(r.run_dir, "args.yaml"), ConfigJson(stored)));
  return {};
}

struct StepResult {
  bool finite = true;
  std::array<double, 3> items{};
};

// Forward, loss and backward of rows [begin, begin + count) of a batch
// already on the device (the whole batch, or one micro-batch after a CUDA
// out-of-memory). Adds count/size of the loss items to `res`; false when the
// loss is not finite (then nothing was backpropagated).
Result<bool> ForwardBackward(Run& r, const torch::Tensor& images, const torch::Tensor& targets,
                             const data::Batch& batch, const IterationPlan& plan, int64_t begin,
                             int64_t count, StepResult& res) {
  torch::Tensor x = images, rows = targets;
  if (count < batch.size) {
    x = images.narrow(0, begin, count);
    auto idx = targets.select(1, 0);
    const auto keep =
        (idx.ge(static_cast<double>(begin)) & idx.lt(static_cast<double>(begin + count))).nonzero();
    rows = targets.index_select(0, keep.select(1, 0));  // a copy: the shift below stays local
    rows.select(1, 0).sub_(static_cast<double>(begin));
  }
  if (r.hooks->before_forward) r.hooks->before_forward(plan.iteration, static_cast<int>(count));
  DetectionTargets t{rows.select(1, 0), rows.select(1, 1), rows.slice(1, 2, 6)};
  model::YoloOutput out;
  {
    model::AutocastScope autocast(r.amp);  // the forward only: the loss runs in float32
    out = (*r.model)->forward(x);
  }
  if (r.amp) {
    for (auto& map : out.maps) map = map.to(torch::kFloat);
  }
  KESTREL_ASSIGN_OR_RETURN(LossOutput loss,
                           r.loss->Compute(out.maps, t, ImageSize{batch.height, batch.width}));
  if (r.hooks->nan_from_iteration >= 0 && plan.iteration >= r.hooks->nan_from_iteration) {
    loss.total = loss.total * std::nan("");
  }
  auto items = loss.items.to(torch::kCPU, torch::kDouble);
  const bool finite = std::isfinite(loss.total.item<double>()) && torch::isfinite(items).all().item<bool>();
  if (!finite) return false;
  const double share = static_cast<double>(count) / static_cast<double>(batch.size);
  for (int k = 0; k < 3; ++k)
    res.items[k] += count == batch.size ? items[k].item<double>() : share * items[k].item<double>();
  loss.total.backward();
  return true;
}

// One iteration: forward, loss, backward (in micro-batches after a CUDA
// out-of-memory) and (per plan) clip/step/zero/EMA. A CUDA out-of-memory in
// the forward or backward drops this accumulation window's gradients (as a
// non-finite skip does), halves the micro-batch and runs the same batch
// again; at a micro-batch of 1 it ends the run as kOom.
Result<StepResult> TrainStep(Run& r, data::Batch& batch, const IterationPlan& plan) {
  IterationPlan scaled = plan;
  for (double& lr : scaled.lr) lr *= r.state.lr_scale;
  KESTREL_RETURN_IF_ERROR(ApplyIterationPlan(*r.optimizer, scaled));
  auto images = model::HostToDevice(
      torch::from_blob(batch.images.data(), {batch.size, 3, batch.height, batch.width}, torch::kFloat),
      r.device);
  const int64_t n = batch.NumTargets();
  auto targets =
      n > 0 ? model::HostToDevice(torch::from_blob(batch.targets.data(), {n, 6}, torch::kFloat), r.device)
            : torch::zeros({0, 6}, torch::TensorOptions().device(r.device));
  StepResult res;
  for (;;) {
    res = StepResult{};
    const int64_t micro = r.micro_batch > 0 ? std::min<int64_t>(r.micro_batch, batch.size) : batch.size;
    try {
      for (int64_t begin = 0; begin < batch.size && res.finite; begin += micro) {
        const int64_t count = std::min<int64_t>(micro, batch.size - begin);
        KESTREL_ASSIGN_OR_RETURN(res.finite,
                                 ForwardBackward(r, images, targets, batch, plan, begin, count, res));
      }
      break;
    } catch (const c10::Error& e) {
      if (!model::IsOutOfMemory(e)) throw;
      r.optimizer->zero_grad();  // the partial step, and this window's earlier gradients, are dropped
      const std::string what = e.what_without_backtrace();
      if (micro <= 1) {
        return Status::ResourceExhausted("train: out of memory at iteration " +
                                         std::to_string(plan.iteration) +
                                         " even with micro-batches of 1 image: " + what)
            .WithReason(FailureReason::kOom);
      }
      OomReport rep;
      rep.epoch = plan.epoch + 1;
      rep.iteration = plan.iteration;
      rep.batch = batch.size;
      rep.from = static_cast<int>(micro);
      rep.to = HalveBatch(static_cast<int>(micro));
      rep.message = what.substr(0, what.find('\n'));
      r.micro_batch = rep.to;
      ++r.summary.oom_retries;
      Print(r, "\nout of memory at iteration " + std::to_string(plan.iteration) + " (epoch " +
                   std::to_string(rep.epoch) + ", " + std::to_string(rep.from) +
                   " images per forward): running batches of " + std::to_string(batch.size) +
                   " in micro-batches of " + std::to_string(rep.to) +
                   " from now on (the step's gradients were dropped)\n");
      if (r.hooks->on_oom) r.hooks->on_oom(rep);
    }
  }
  if (!res.finite) res.items = {};
  if (res.finite && plan.optimizer_step) {
    const double norm = ClipGradNorm(**r.model, kClipNorm);
    if (!std::isfinite(norm)) {
      res.finite = false;
    } else {
      r.optimizer->step();
      r.optimizer->zero_grad();
      KESTREL_RETURN_IF_ERROR(r.ema->Update(**r.model));
    }
  }
  if (!res.finite) r.optimizer->zero_grad();  // skip: nothing of this window reaches the weights
  return res;
}

// "0.5", "12.3": a number in a console line.
std::string Short(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

// time=H after an epoch (the reference's): epochs becomes
// ceil(H / the mean epoch time of this start), never below the epochs done,
// and the schedule is rebuilt over it from where it is (the optimizer kept
// as first resolved: optimizer=auto must not pick again). The stored config
// and the checkpoint's shape follow, so a resume continues the same plan.
Status AdaptEpochsToTime(Run& r, int epochs_done, int64_t start_epoch, double seconds) {
  const double mean = seconds / std::max<double>(1, epochs_done - start_epoch);
  const int epochs = std::max(epochs_done, static_cast<int>(std::ceil(r.opt.time * 3600.0 / mean)));
  if (epochs == r.shape.epochs) return {};
  const ResolvedOptimizer& ro = r.schedule->Optimizer();
  OptimizerOptions pinned = r.opt.optimizer;
  pinned.optimizer = OptimizerKindName(ro.kind);
  pinned.lr0 = ro.lr;
  pinned.momentum = ro.momentum;
  pinned.warmup_bias_lr = ro.warmup_bias_lr;
  RunShape shape = r.shape;
  shape.epochs = epochs;
  KESTREL_ASSIGN_OR_RETURN(Schedule sched, Schedule::Create(pinned, shape, r.schedule->State()));
  Print(r, "time=" + Short(r.opt.time) + " h: " + Short(mean) + " s per epoch, epochs " +
               std::to_string(r.shape.epochs) + " -> " + std::to_string(epochs) + "\n");
  r.schedule = std::move(sched);
  r.shape.epochs = epochs;
  r.state.epochs = epochs;
  // close_mosaic counts from the new end (the reference's trainer
  // compares its epoch with the re-planned epochs - close_mosaic).
  KESTREL_RETURN_IF_ERROR(r.loader->SetEpochs(epochs));
  r.opt.epochs = epochs;
  r.opt.optimizer = pinned;
  nlohmann::json stored = nlohmann::json::parse(r.state.config_json);
  stored["epochs"] = epochs;
  const nlohmann::json now = ConfigJson(r.opt);  // named: items() of a temporary would dangle
  for (const auto& [k, v] : now.items()) {
    if (k == "optimizer" || k == "lr0" || k == "momentum" || k == "warmup_bias_lr") stored[k] = v;
  }
  r.state.config_json = DumpJson(stored);
  return {};
}

Status Loop(Run& r) {
  Env& env = *r.env;
  const TrainHooks& hooks = *r.hooks;
  const int64_t nb = r.shape.batches_per_epoch;
  const int64_t t_start = env.NowMicros();
  int64_t last_ckpt_us = t_start, epoch_start_us = t_start, epoch_iters = 0, images = 0;
  bool need_seek = true;
  // time=H: the budget counts from this start (as the reference's).
  const int64_t budget_us = static_cast<int64_t>(r.opt.time * 3600e6);
  const int64_t start_epoch = r.schedule->State().next_iteration / nb;
  bool time_up = false;
  // train_batch0..2.jpg: the first three batches of the run (the
  // reference's plot_idx), not again after a resume.
  constexpr int64_t kPreviews = 3;
  while (!r.schedule->Done()) {
    const int64_t ni = r.schedule->State().next_iteration;
    const int epoch = static_cast<int>(ni / nb);
    if (need_seek) {
      KESTREL_RETURN_IF_ERROR(r.loader->SkipTo(epoch, ni % nb));
      need_seek = false;
      // As the reference's "Closing dataloader mosaic": once, from the
      // loader's own decision (close_mosaic counts from the planned end,
      // re-planned by time=).
      const bool mosaic = r.loader->MosaicOn();
      if (r.mosaic_open && !mosaic && !r.opt.loader.rect && r.opt.augment.mosaic > 0) {
        Print(r, "closing mosaic: epochs " + std::to_string(epoch + 1) + "-" +
                     std::to_string(r.shape.epochs) + " of " + std::to_string(r.shape.epochs) +
                     " without it (close_mosaic=" + std::to_string(r.opt.augment.close_mosaic) + ")\n");
      }
      r.mosaic_open = mosaic;
      epoch_start_us = env.NowMicros();
      epoch_iters = 0;
    }
    const int64_t wait_from_us = env.NowMicros();
    KESTREL_ASSIGN_OR_RETURN(std::optional<data::Batch> next, r.loader->Next());
    if (!next) return Status::Internal("loader ended the epoch before the schedule did");
    const int64_t got_us = env.NowMicros();
    data::Batch batch = std::move(*next);
    const IterationPlan plan = r.schedule->Next();
    if (r.opt.plots && ni < kPreviews) {
      KESTREL_RETURN_IF_ERROR(
          WriteBatchPreview(env, JoinPath(r.run_dir, "train_batch" + std::to_string(ni) + ".jpg"), batch,
                            r.dataset.manifest.names));
    }
    const int64_t step_from_us = env.NowMicros();
    KESTREL_ASSIGN_OR_RETURN(StepResult step, TrainStep(r, batch, plan));
    if (r.summary.iterations < 3) {
      // Where a short run's first seconds go: the loader's wait (workers
      // starting, the first mosaics) and the step (the first forward and
      // backward pay LibTorch's and oneDNN's one-time kernel setup).
      spdlog::debug("train iteration {}: loader wait {:.3f} s, preview {:.3f} s, step {:.3f} s",
                    r.summary.iterations + 1, static_cast<double>(got_us - wait_from_us) * 1e-6,
                    static_cast<double>(step_from_us - got_us) * 1e-6,
                    static_cast<double>(env.NowMicros() - step_from_us) * 1e-6);
    }
    if (r.thread_policy && r.thread_policy->Due(static_cast<double>(env.NowMicros()) * 1e-6)) {
      const int before = r.thread_policy->Threads();
      if (auto sample = ReadLoadSample(static_cast<double>(env.NowMicros()) * 1e-6, r.budget_cpus)) {
        if (auto d = r.thread_policy->Observe(*sample)) {
          at::set_num_threads(d->threads);
          Print(r, "threads policy: " + std::to_string(before) + " -> " + std::to_string(d->threads) +
                       " intra-op threads (" + d->why + ")\n");
        }
      }
    }
    ++r.summary.iterations;
    ++epoch_iters;
    images += batch.size;
    auto& a = r.state.accum;
    a.instances += batch.NumTargets();
    if (step.finite) {
      r.consecutive_nonfinite = 0;
      a.box += step.items[0];
      a.cls += step.items[1];
      a.dfl += step.items[2];
      ++a.batches;
    } else {
      ++r.consecutive_nonfinite;
      ++a.nonfinite;
      ++r.summary.nonfinite_iterations;
      if (r.consecutive_nonfinite >= kNonFiniteInARow || a.nonfinite > std::max<int64_t>(3, nb / 10)) {
        r.loader->Recycle(std::move(batch));
        KESTREL_ASSIGN_OR_RETURN(bool rolled, Rollback(r));
        if (!rolled) {
          r.summary.reason = ExitReason::kDiverged;
          r.summary.message = "diverged: non-finite loss or gradients persisted after " +
                              std::to_string(kMaxRollbacks) + " rollbacks with halved learning rate (" +
                              std::to_string(r.summary.nonfinite_iterations) + " non-finite iterations)";
          return {};
        }
        need_seek = true;
        continue;
      }
    }
    const int64_t batch_in_epoch = plan.batch_in_epoch;
    r.loader->Recycle(std::move(batch));
    if (hooks.on_iteration) hooks.on_iteration(epoch + 1, plan.iteration, r.schedule->TotalIterations());

    const int64_t now = env.NowMicros();
    const double elapsed = std::max(1e-9, (now - epoch_start_us) * 1e-6);
    ProgressLine pl{epoch + 1, r.shape.epochs, batch_in_epoch + 1, nb, 0, 0, 0, 0, epoch_iters / elapsed, 0};
    if (a.batches > 0) {
      pl.box = a.box / a.batches;
      pl.cls = a.cls / a.batches;
      pl.dfl = a.dfl / a.batches;
    }
    pl.instances = a.instances;
    pl.eta_s =
        (r.schedule->TotalIterations() - r.schedule->State().next_iteration) / std::max(pl.it_per_s, 1e-9);
    if (hooks.on_iteration_report) {
      IterationReport rep;
      rep.epoch = epoch + 1;
      rep.epochs = r.shape.epochs;
      rep.batch = batch_in_epoch + 1;
      rep.batches = nb;
      rep.iteration = plan.iteration;
      rep.total_iterations = r.schedule->TotalIterations();
      rep.finite = step.finite;
      rep.loss = step.items;
      rep.it_per_s = pl.it_per_s;
      rep.eta_s = pl.eta_s;
      hooks.on_iteration_report(rep);
    }
    // time=H spent: this iteration ends the epoch early (validated and
    // checkpointed as any epoch end) and the run.
    time_up = budget_us > 0 && now - t_start >= budget_us;
    const bool epoch_end = batch_in_epoch == nb - 1 || time_up;
    if (hooks.tty && r.out) {
      (*r.out) << "\r" << FormatProgressBar(pl, elapsed) << "\033[K" << (epoch_end ? "\n" : "") << std::flush;
    }
    if (!hooks.tty && epoch_end) Print(r, FormatProgress(pl) + "\n");

    if (epoch_end) {
      KESTREL_ASSIGN_OR_RETURN(bool stop_early, EndEpoch(r, epoch, plan, elapsed));
      r.summary.epochs_completed = epoch + 1;
      last_ckpt_us = env.NowMicros();
      need_seek = true;
      if (time_up) {
        r.summary.message = "time=" + Short(r.opt.time) + " h spent: stopped after iteration " +
                            std::to_string(ni) + " in epoch " + std::to_string(epoch + 1) +
                            " with a checkpoint (resume=" + JoinPath(r.weights_dir, "last.ckpt") + ")";
        break;
      }
      if (budget_us > 0 && !stop_early) {
        KESTREL_RETURN_IF_ERROR(AdaptEpochsToTime(r, epoch + 1, start_epoch,
                                                  static_cast<double>(env.NowMicros() - t_start) * 1e-6));
      }
      if (stop_early) {
        r.summary.reason = ExitReason::kEarlyStopped;
        r.summary.message = "early stopping: no improvement for " + std::to_string(r.opt.patience) +
                            " epochs (best epoch " + std::to_string(r.state.best_epoch) + ")";
        break;
      }
    } else {
      const bool by_time = r.opt.save_period_min > 0 && (now - last_ckpt_us) >= r.opt.save_period_min * 60e6;
      const bool by_count = hooks.checkpoint_every_iterations > 0 &&
                            r.summary.iterations % hooks.checkpoint_every_iterations == 0;
      if (by_time || by_count) {
        KESTREL_RETURN_IF_ERROR(WriteCheckpoint(r, false));
        last_ckpt_us = env.NowMicros();
      }
    }
    if (hooks.halt_after_iterations >= 0 && r.summary.iterations >= hooks.halt_after_iterations) {
      r.summary.reason = ExitReason::kHalted;
      r.summary.message = "halted by test hook (no checkpoint written)";
      return {};
    }
    if (hooks.stop != nullptr && hooks.stop->load()) {
      if (!epoch_end) KESTREL_RETURN_IF_ERROR(WriteCheckpoint(r, false));
      r.summary.reason = ExitReason::kStopped;
      r.summary.message = "stopped on request after iteration " + std::to_string(ni) +
                          "; resume with resume=" + JoinPath(r.weights_dir, "last.ckpt");
      return {};
    }
  }
  const double secs = std::max(1e-9, (env.NowMicros() - t_start) * 1e-6);
  r.summary.images_per_second = images / secs;
  if (r.summary.reason == ExitReason::kCompleted && !time_up)
    r.summary.message = "completed " + std::to_string(r.shape.epochs) + " epochs";
  return {};
}

// The reference trainer's final validation: the best weights as written
// (weights/best.safetensors, the EMA of the best epoch) scored once more on
// the val split, their per-class rows printed; the validator's grids are
// then theirs, and the caller draws the run folder's plots from the result.
// When the best epoch is the last one its validation already scored exactly
// those weights, so that result (and its grids) is reused.
Result<eval::EvalResult> FinalValidation(Run& r) {
  const int best = r.state.best_epoch;
  const std::string path = JoinPath(r.weights_dir, "best.safetensors");
  if (best == r.history.back().epoch) {
    Print(r, "per class, best epoch " + std::to_string(best) + " (" + path + "):\n" +
                 FormatValidationTable(*r.last_eval, /*per_class=*/true));
    return *r.last_eval;
  }
  KESTREL_RETURN_IF_ERROR(model::LoadWeights(**r.ema_model, path, model::LoadMode::kStrict));
  std::function<void(int64_t, int64_t)> on_val;
  if (r.hooks->on_phase_progress)
    on_val = [&r, best](int64_t done, int64_t total) { ReportPhase(r, Phase::kVal, best, done, total); };
  KESTREL_ASSIGN_OR_RETURN(eval::EvalResult ev, r.validator->Run(**r.ema_model, nullptr, on_val));
  Print(r, "final validation of " + path + " (best epoch " + std::to_string(best) + "), per class:\n" +
               FormatValidationTable(ev, /*per_class=*/true));
  return ev;
}

Result<TrainSummary> TrainImpl(const TrainOptions& options, const TrainHooks& hooks, Env& env) {
  Run r;
  r.env = &env;
  r.hooks = &hooks;
  r.out = hooks.out;
  r.opt = options;
  r.setup_steps = options.resume.empty() ? 3 : 5;  // [checkpoint], dataset, model, loaders, [restore]
  std::optional<ParsedCheckpoint> ckpt;
  if (!options.resume.empty()) {
    SetupStep(r, "checkpoint");
    KESTREL_ASSIGN_OR_RETURN(ParsedCheckpoint c, ReadCheckpoint(env, options.resume));
    // The stored effective config wins; only where to find the data may change.
    TrainOptions stored;
    OptionSet s;
    stored.Bind(s);
    KESTREL_RETURN_IF_ERROR(s.ApplyJson(nlohmann::json::parse(c.state.config_json), options.resume));
    stored.home = options.home;
    r.opt = stored;
    ckpt = std::move(c);
  }
  KESTREL_RETURN_IF_ERROR(r.opt.Validate());
  // A run that fails before its first checkpoint (a data or torch error in
  // the first iterations, a failed write at the end of setup) removes the
  // run folder this start made: it holds nothing but what it wrote itself
  // (args.yaml, train_batch0.jpg). A folder that existed (exist_ok=true, a
  // job attempt's) is never touched, nor one with a checkpoint in it.
  struct RemoveMadeFolderOnFailure {
    Env& env;
    std::string dir;  // "" = nothing to remove
    ~RemoveMadeFolderOnFailure() {
      if (!dir.empty() && !env.Stat(JoinPath(dir, "weights/last.ckpt")).exists) (void)env.RemoveAll(dir);
    }
  } cleanup{env, ""};
  bool created_run_dir = false;
  const Status setup = Setup(r, ckpt, &created_run_dir);
  if (created_run_dir) cleanup.dir = r.run_dir;
  KESTREL_RETURN_IF_ERROR(setup);
  if (ckpt) {
    SetupStep(r, "restore");
    KESTREL_RETURN_IF_ERROR(Restore(r, *ckpt, options.resume));
    r.good_checkpoint.clear();
    KESTREL_ASSIGN_OR_RETURN(r.good_checkpoint, r.env->ReadFile(options.resume));
    Print(r, "resumed from " + options.resume + " at iteration " +
                 std::to_string(r.schedule->State().next_iteration) + "\n");
    if (hooks.on_resumed) hooks.on_resumed(r.history);
  } else {
    r.state.schedule = r.schedule->State();
    r.state.history_json = "[]";
    KESTREL_ASSIGN_OR_RETURN(r.good_checkpoint,
                             SerializeCheckpoint(r.state, **r.model, *r.ema, *r.optimizer));
  }
  SetupStep(r, "");
  r.summary.device = r.device.str();
  r.summary.amp = r.amp;
  r.summary.batch = r.opt.loader.batch;
  KESTREL_RETURN_IF_ERROR(Loop(r));
  const bool ended_as_run =
      r.summary.reason == ExitReason::kCompleted || r.summary.reason == ExitReason::kEarlyStopped;
  std::optional<eval::EvalResult> final_eval;
  if (ended_as_run && r.last_eval && !r.history.empty() && r.state.best_epoch > 0) {
    KESTREL_ASSIGN_OR_RETURN(final_eval, FinalValidation(r));
    r.summary.final_val_epoch = r.state.best_epoch;
    // The best weights' per-class rows, which the model registry records
    // with a job's model (app/models.cc; docs/models.md "evaluation").
    KESTREL_RETURN_IF_ERROR(env.WriteFileAtomic(JoinPath(r.run_dir, "best_eval.json"),
                                                eval::EvalResultToJson(*final_eval).dump(1) + "\n"));
  } else if (r.last_eval && !r.history.empty()) {
    // Stopped or diverged: no final validation; the last epoch's rows.
    Print(r, "per class, epoch " + std::to_string(r.history.back().epoch) + ":\n" +
                 FormatValidationTable(*r.last_eval, /*per_class=*/true));
  }
  r.summary.micro_batch = r.micro_batch;
  r.summary.rollbacks = r.state.rollbacks;
  r.summary.history = r.history;
  r.summary.best_epoch = r.state.best_epoch;
  for (const auto& h : r.history) {
    if (h.epoch == r.state.best_epoch) {
      r.summary.best_fitness = h.fitness;
      r.summary.best_map50 = h.map50;
      r.summary.best_map5095 = h.map5095;
    }
  }
  if (r.opt.plots && final_eval) {
    ReportPhase(r, Phase::kPlots, 0, 0, 1);
    KESTREL_RETURN_IF_ERROR(eval::WritePlots(
        env, r.run_dir, *final_eval, eval::LabelStatsFromManifest(r.dataset.manifest, data::Split::kTrain)));
    KESTREL_RETURN_IF_ERROR(WriteValBatchGrids(env, r.run_dir, r.validator->LastGrids(),
                                               data::VersionImageSource(r.dataset, *r.blobs, env),
                                               r.dataset.manifest.names));
    ReportPhase(r, Phase::kPlots, 0, 1, 1);
  }
  cleanup.dir.clear();  // ended as a run: whatever it wrote stays
  return r.summary;
}

}  // namespace

Result<TrainSummary> Train(const TrainOptions& options, const TrainHooks& hooks, Env& env) {
  try {
    return TrainImpl(options, hooks, env);
  } catch (const c10::OutOfMemoryError& e) {
    // Where an OOM starts: the job runner retries it (exit 7), never by
    // reading the message.
    return Status::ResourceExhausted(std::string("train: out of memory: ") + e.what_without_backtrace())
        .WithReason(FailureReason::kOom);
  } catch (const c10::Error& e) {
    if (model::IsOutOfMemory(e)) {  // what older builds and cuDNN/cuBLAS throw for a CUDA OOM
      return Status::ResourceExhausted(std::string("train: out of memory: ") + e.what_without_backtrace())
          .WithReason(FailureReason::kOom);
    }
    return Status::Internal(std::string("train: torch error: ") + e.what_without_backtrace());
  } catch (const std::bad_alloc& e) {
    return Status::ResourceExhausted(std::string("train: out of memory: ") + e.what())
        .WithReason(FailureReason::kOom);
  }
}

}  // namespace kestrel::train
