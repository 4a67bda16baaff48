// train_throughput_bench [model=n] [imgsz=128] [batch=8] [workers=2]
//                        [iterations=12] [warmup=2] [threads=2] [src_px=IMGSZ]
//
// Is the data loader hidden behind the compute? Two measurements in one run,
// same model, imgsz, batch, optimizer schedule and number of iterations:
//   full : train::Train on a synthetic dataset (data::WriteSynthDataset,
//          src_px JPEGs imported into a temp Kestrel home), val=false,
//          plots=false, default augmentation with mosaic on for the whole
//          run (close_mosaic=0; with 1 epoch the default 10 would turn it
//          off), one epoch of warmup+iterations batches.
//   raw  : the same model (model::CreateModel, same seed) on one random input
//          tensor made once with fixed targets: schedule -> forward ->
//          DetectionLoss -> backward -> (clip, step, zero_grad, EMA) — the
//          trainer's step without the loader: the compute limit.
// Both skip `warmup` iterations before timing; raw runs before and after
// full and counts their mean (both are printed: a large spread means the
// machine's load changed). Prints images/s of both and full/raw (goal >= 0.9: the loader is fully hidden).
// "full (summary)" is TrainSummary::images_per_second, which also counts the warm-up batches (loader
// start-up) and the end-of-epoch checkpoint write. "cpu" compares process CPU time per image (all threads;
// whole Train call incl. set-up vs all raw iterations): on a machine shared with other work, wall-clock
// images/s swing with the load, CPU time much less; raw/full CPU < 1 is the
// loader's (and trainer's) extra work, which on a saturated machine costs
// throughput even when it overlaps.
//
// `threads` is torch's intra-op thread count (set here in main, and by the
// trainer from the same option); the loader's `workers` come on top of it.
#include <ATen/Parallel.h>
#include <sys/resource.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "data/analyze.h"
#include "data/synth.h"
#include "data/version.h"
#include "model/yolo.h"
#include "store/artifact_store.h"
#include "store/local_artifact_store.h"
#include "store/metadata_store.h"
#include "train/loss.h"
#include "train/optimizer.h"
#include "train/schedule.h"
#include "train/trainer.h"

using namespace kestrel;

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// User + system CPU seconds of the whole process (all threads).
double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

[[noreturn]] void Die(const std::string& what, const Status& s) {
  std::fprintf(stderr, "train_throughput_bench: %s: %s\n", what.c_str(), s.ToString().c_str());
  std::exit(1);
}

struct Args {
  std::string model = "n";
  int imgsz = 128;
  int batch = 8;
  int workers = 2;
  int iterations = 12;
  int warmup = 2;
  int threads = 2;
  int src_px = 0;  // 0 = imgsz
};

Args Parse(int argc, char** argv) {
  Args a;
  std::map<std::string, int*> ints = {
      {"imgsz", &a.imgsz},   {"batch", &a.batch},     {"workers", &a.workers}, {"iterations", &a.iterations},
      {"warmup", &a.warmup}, {"threads", &a.threads}, {"src_px", &a.src_px}};
  for (int i = 1; i < argc; ++i) {
    const std::string kv = argv[i];
    const auto eq = kv.find('=');
    const std::string k = kv.substr(0, eq);
    if (eq == std::string::npos || (k != "model" && !ints.count(k))) {
      std::fprintf(
          stderr,
          "usage: train_throughput_bench [model=n] [imgsz=128] [batch=8] [workers=2] [iterations=12] "
          "[warmup=2] [threads=2] [src_px=IMGSZ]\n");
      std::exit(2);
    }
    if (k == "model") {
      a.model = kv.substr(eq + 1);
    } else {
      *ints[k] = std::atoi(kv.c_str() + eq + 1);
    }
  }
  if (a.src_px <= 0) a.src_px = a.imgsz;
  if (a.iterations < 1 || a.warmup < 0 || a.batch < 1 || a.threads < 1) {
    std::fprintf(stderr, "train_throughput_bench: iterations, batch, threads >= 1 and warmup >= 0\n");
    std::exit(2);
  }
  return a;
}

// Synthetic dataset "bench" in a fresh home: exactly batch*(warmup+iterations)
// train images (no val split), so the epoch has warmup+iterations full batches.
std::string MakeHome(const Args& a, const std::string& root, int classes) {
  const std::string src = root + "/synth";
  const std::string home = root + "/home";
  data::SynthOptions so;
  so.images = a.batch * (a.warmup + a.iterations);
  so.classes = classes;
  so.imgsz = a.src_px;
  so.seed = 1;
  so.val_fraction = 0;
  if (Status s = data::WriteSynthDataset(so, src); !s.IsOk()) Die("synth", s);
  auto meta = store::MetadataStore::Open(store::MetadataUrl(home));
  if (!meta.IsOk()) Die("metadata store", meta.GetStatus());
  store::LocalArtifactStore blobs(home);
  data::ImportOptions io;
  io.imgsz = a.imgsz;
  io.val_ratio = 0;
  // Clean synthetic data: the analysis and the commit, no import policy.
  auto analyzed = data::AnalyzeDataset(src, io);
  if (!analyzed.IsOk()) Die("analyze", analyzed.GetStatus());
  auto imp = data::CommitVersion(**meta, blobs, "bench", src, *analyzed, io);
  if (!imp.IsOk()) Die("import", imp.GetStatus());
  return home;
}

struct FullResult {
  double steady_ips = 0;     // batches warmup..end, timed between on_iteration calls
  double summary_ips = 0;    // TrainSummary::images_per_second
  double cpu_per_image = 0;  // process CPU seconds of the whole Train call / all images
};
struct RawResult {
  double ips = 0;            // timed iterations
  double cpu_per_image = 0;  // process CPU seconds of all iterations / all images
};

FullResult RunFull(const Args& a, const std::string& root, const std::string& home) {
  train::TrainOptions o;
  o.data = "bench";
  o.model = a.model;
  o.epochs = 1;
  o.threads = a.threads;
  o.home = home;
  o.run_dir = root + "/run";
  o.val = false;
  o.plots = false;
  o.loader.imgsz = a.imgsz;
  o.loader.batch = a.batch;
  o.loader.workers = a.workers;
  o.augment.close_mosaic = 0;
  Clock::time_point t_start, t_end;
  train::TrainHooks hooks;
  hooks.on_iteration = [&](int /*epoch*/, int64_t iteration, int64_t /*total*/) {
    if (iteration + 1 == a.warmup) t_start = Clock::now();
    if (iteration + 1 == a.warmup + a.iterations) t_end = Clock::now();
  };
  const auto t0 = Clock::now();
  const double cpu0 = CpuSeconds();
  auto r = train::Train(o, hooks);
  const double cpu = CpuSeconds() - cpu0;
  if (!r.IsOk()) Die("train", r.GetStatus());
  if (r->reason != train::ExitReason::kCompleted) {
    std::fprintf(stderr, "train_throughput_bench: run ended %s: %s\n", train::ExitReasonName(r->reason),
                 r->message.c_str());
    std::exit(1);
  }
  if (a.warmup == 0) t_start = t0;  // includes set-up: no warm-up requested
  return {a.batch * a.iterations / Seconds(t_start, t_end), r->images_per_second,
          cpu / (a.batch * (a.warmup + a.iterations))};
}

RawResult RunRaw(const Args& a, int nc) {
  torch::manual_seed(0);
  auto m = model::CreateModel(a.model, nc);
  if (!m.IsOk()) Die("model", m.GetStatus());
  model::Yolo net = *m;
  net->train();
  train::LossOptions lo;
  lo.num_classes = nc;
  lo.strides = net->Strides();
  auto loss = train::DetectionLoss::Create(lo);
  if (!loss.IsOk()) Die("loss", loss.GetStatus());
  const int64_t n = a.warmup + a.iterations;
  const train::RunShape shape{1, n, a.batch * n, a.batch, nc};
  auto sched = train::Schedule::Create(train::OptimizerOptions{}, shape);
  if (!sched.IsOk()) Die("schedule", sched.GetStatus());
  auto opt = train::BuildOptimizer(train::SplitParameterGroups(*net), sched->Optimizer());
  if (!opt.IsOk()) Die("optimizer", opt.GetStatus());
  train::ModelEma ema(*net);

  // One input made once; 3 boxes per image, fixed.
  const torch::Tensor images = torch::rand({a.batch, 3, a.imgsz, a.imgsz});
  const int64_t per = 3;
  train::DetectionTargets targets;
  targets.batch_idx = torch::arange(a.batch, torch::kFloat).repeat_interleave(per);
  targets.cls = torch::randint(0, nc, {a.batch * per, 1}).to(torch::kFloat);
  targets.bboxes = torch::cat(
      {torch::rand({a.batch * per, 2}) * 0.6 + 0.2, torch::rand({a.batch * per, 2}) * 0.25 + 0.05}, 1);
  const train::ImageSize size{a.imgsz, a.imgsz};

  Clock::time_point t_start = Clock::now();
  const double cpu0 = CpuSeconds();
  for (int64_t i = 0; i < n; ++i) {
    if (i == a.warmup) t_start = Clock::now();
    const train::IterationPlan plan = sched->Next();
    if (Status s = train::ApplyIterationPlan(**opt, plan); !s.IsOk()) Die("plan", s);
    auto out = net->forward(images);
    auto l = loss->Compute(out.maps, targets, size);
    if (!l.IsOk()) Die("loss", l.GetStatus());
    (void)l->items.to(torch::kCPU, torch::kDouble);  // the trainer reads the items every iteration
    l->total.backward();
    if (plan.optimizer_step) {
      train::ClipGradNorm(*net, 10.0);
      (*opt)->step();
      (*opt)->zero_grad();
      if (Status s = ema.Update(*net); !s.IsOk()) Die("ema", s);
    }
  }
  const double ips = a.batch * a.iterations / Seconds(t_start, Clock::now());
  return {ips, (CpuSeconds() - cpu0) / static_cast<double>(a.batch * n)};
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = Parse(argc, argv);
  at::set_num_threads(a.threads);
  const int classes = 3;
  const std::string root =
      (std::filesystem::temp_directory_path() / ("kestrel_train_bench_" + std::to_string(getpid()))).string();
  std::filesystem::remove_all(root);
  const std::string home = MakeHome(a, root, classes);
  std::printf(
      "model %s, imgsz %d (src %dx%d JPEG), batch %d, workers %d, torch threads %d, %d iterations after %d "
      "warm-up\n",
      a.model.c_str(), a.imgsz, a.src_px, a.src_px, a.batch, a.workers, a.threads, a.iterations, a.warmup);
  std::fflush(stdout);
  // raw before and after full, so a change of machine load during the run
  // shows up as a spread instead of skewing the ratio.
  const RawResult raw_before = RunRaw(a, classes);
  const FullResult full = RunFull(a, root, home);
  const RawResult raw_after = RunRaw(a, classes);
  const double raw = (raw_before.ips + raw_after.ips) / 2;
  const double raw_cpu = (raw_before.cpu_per_image + raw_after.cpu_per_image) / 2;
  std::filesystem::remove_all(root);
  std::printf(
      "%-16s %8.2f images/s  (forward+backward+step on fixed tensors: the compute limit; before %.2f, after "
      "%.2f)\n",
      "raw", raw, raw_before.ips, raw_after.ips);
  std::printf("%-16s %8.2f images/s  %.2fx raw  (train::Train: loader + augmentation + step)\n", "full",
              full.steady_ips, full.steady_ips / raw);
  std::printf(
      "%-16s %8.2f images/s  %.2fx raw  (TrainSummary::images_per_second, incl. warm-up and checkpoint)\n",
      "full (summary)", full.summary_ips, full.summary_ips / raw);
  std::printf(
      "%-16s raw %.0f ms, full %.0f ms per image: %.2fx raw  (CPU time of all threads; not skewed by other "
      "load)\n",
      "cpu", 1e3 * raw_cpu, 1e3 * full.cpu_per_image, raw_cpu / full.cpu_per_image);
  std::printf("ratio full/raw %.2f (goal >= 0.9: loader fully hidden)\n", full.steady_ips / raw);
  return 0;
}
