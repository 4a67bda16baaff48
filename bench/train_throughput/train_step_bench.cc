// train_step_bench [models=n,s,m] [precisions=fp32,amp] [device=cpu] [imgsz=128] [batch=4]
//                  [iterations=3] [warmup=1] [nc=80] [threads=2] [boxes=3] [params_only=false]
//
// Images/s of Kestrel's training step alone — forward (under bf16 autocast
// for amp) -> DetectionLoss -> backward -> ClipGradNorm(10) -> SGD step ->
// zero_grad -> EMA update — on one random batch made once on the device,
// for each model x precision, on `device=` (cpu, 0, cuda, cuda:N: core/
// device_spec.h). The figure tools/gpu/reference_throughput.py measures for
// the same architecture in PyTorch eager; tools/gpu-check.sh prints the two
// side by side (docs/gpu.md). The device run's flags are models=n,s,m
// imgsz=640 batch=64; the defaults are small so that the CPU run takes
// seconds.
//
// Output: one JSON object per line on stdout, one per model x precision
// ({"bench":"train_step","impl":"kestrel",...,"images_per_s":...}, or
// "skipped"/"error" instead of the figures); a readable line per result
// on stderr. Each model x precision runs in a child process (fork), so a
// crash or an out-of-memory is that line's "error", and a CUDA run's
// "device_mem_used_bytes" (the device's free memory after the CUDA context
// was made minus after the timed steps: what the caching allocator kept,
// cuDNN/cuBLAS workspaces included) is that configuration's alone.
// amp on the CPU is "skipped": the trainer's autocast is CUDA-only
// (model/torch_compat.h). params_only=true prints each model's parameter
// count and nothing else (the reference script's parameter check).
//
// The optimizer is SGD (lr0 0.01, momentum 0.937, weight decay 5e-4) with
// nbs = batch, so every iteration steps, as the reference script does; the
// LR schedule advances as in the trainer (train::Schedule, warmup included).
#include <ATen/Parallel.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/device_spec.h"
#include "model/torch_compat.h"
#include "model/yolo.h"
#include "train/loss.h"
#include "train/optimizer.h"
#include "train/schedule.h"

using namespace kestrel;

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::vector<std::string> models = {"n", "s", "m"};
  std::vector<std::string> precisions = {"fp32", "amp"};
  std::string device = "cpu";
  int imgsz = 128;
  int batch = 4;
  int iterations = 3;
  int warmup = 1;
  int nc = 80;
  int threads = 2;
  int boxes = 3;
  bool params_only = false;
};

constexpr const char* kUsage =
    "usage: train_step_bench [models=n,s,m] [precisions=fp32,amp] [device=cpu|0|cuda|cuda:N] [imgsz=128] "
    "[batch=4] [iterations=3] [warmup=1] [nc=80] [threads=2] [boxes=3] [params_only=false]\n";

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr, "train_step_bench: %s\n%s", why.c_str(), kUsage);
  std::exit(2);
}

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.empty()) Usage("empty item in list '" + text + "'");
    out.push_back(item);
  }
  if (out.empty()) Usage("empty list");
  return out;
}

int ParseInt(const std::string& key, const std::string& text, int min) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < min || v > 1000000) {
    Usage(key + "=" + text + ": expected an integer in [" + std::to_string(min) + ", 1000000]");
  }
  return static_cast<int>(v);
}

Args Parse(int argc, char** argv) {
  Args a;
  std::map<std::string, std::pair<int*, int>> ints = {
      {"imgsz", {&a.imgsz, 32}},  {"batch", {&a.batch, 1}}, {"iterations", {&a.iterations, 1}},
      {"warmup", {&a.warmup, 0}}, {"nc", {&a.nc, 1}},       {"threads", {&a.threads, 1}},
      {"boxes", {&a.boxes, 1}}};
  for (int i = 1; i < argc; ++i) {
    const std::string kv = argv[i];
    const auto eq = kv.find('=');
    if (eq == std::string::npos) Usage("expected key=value, got '" + kv + "'");
    const std::string k = kv.substr(0, eq);
    const std::string v = kv.substr(eq + 1);
    if (k == "models") {
      a.models = SplitList(v);
    } else if (k == "precisions") {
      a.precisions = SplitList(v);
      for (const auto& p : a.precisions) {
        if (p != "fp32" && p != "amp") Usage("precisions: '" + p + "' is not fp32 or amp");
      }
    } else if (k == "device") {
      auto spec = ParseDeviceSpec(v);
      if (!spec.IsOk()) Usage(spec.GetStatus().Message());
      a.device = v;
    } else if (k == "params_only") {
      if (v != "true" && v != "false") Usage("params_only=" + v + ": expected true or false");
      a.params_only = v == "true";
    } else if (auto it = ints.find(k); it != ints.end()) {
      *it->second.first = ParseInt(k, v, it->second.second);
    } else {
      Usage("unknown key '" + k + "'");
    }
  }
  if (a.imgsz % 32 != 0) Usage("imgsz=" + std::to_string(a.imgsz) + ": not a multiple of 32");
  return a;
}

// `torch`: LibTorch's version text, which asks CUDA for its devices: only in
// a child, never in the parent (a CUDA context does not survive fork).
nlohmann::json BaseLine(const Args& a, const std::string& model, const std::string& precision, bool torch) {
  nlohmann::json j = {
      {"bench", "train_step"}, {"impl", "kestrel"}, {"model", model},      {"precision", precision},
      {"device", a.device},    {"imgsz", a.imgsz},  {"batch", a.batch},    {"iterations", a.iterations},
      {"warmup", a.warmup},    {"nc", a.nc},        {"threads", a.threads}};
  if (torch) j["torch"] = model::TorchBuildText();
  return j;
}

// One line of JSON; invalid UTF-8 in an error text becomes U+FFFD instead of throwing.
std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int64_t CountParameters(const torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

// One model x precision; throws c10::Error / returns an error text.
nlohmann::json RunOne(const Args& a, const std::string& model_name, const std::string& precision) {
  nlohmann::json line = BaseLine(a, model_name, precision, true);
  auto spec = ParseDeviceSpec(a.device);
  auto device = model::ToTorchDevice(*spec);
  if (!device.IsOk()) {
    line["error"] = device.GetStatus().Message();
    return line;
  }
  const bool amp = precision == "amp";
  if (amp && !device->is_cuda()) {
    line["skipped"] = "amp is CUDA-only (bf16 autocast, model/torch_compat.h)";
    return line;
  }
  std::optional<model::DeviceMemory> mem0;
  if (device->is_cuda()) {
    (void)torch::zeros({1}, torch::TensorOptions().device(*device));  // the CUDA context
    model::SynchronizeDevice(*device);
    mem0 = model::QueryDeviceMemory(*device);
  }
  torch::manual_seed(0);
  auto created = model::CreateModel(model_name, a.nc);
  if (!created.IsOk()) {
    line["error"] = created.GetStatus().Message();
    return line;
  }
  model::Yolo net = *created;
  net->to(*device);
  net->train();
  line["params"] = CountParameters(*net);

  train::LossOptions lo;
  lo.num_classes = a.nc;
  lo.strides = net->Strides();
  auto loss = train::DetectionLoss::Create(lo);
  if (!loss.IsOk()) {
    line["error"] = loss.GetStatus().Message();
    return line;
  }
  const int64_t n = a.warmup + a.iterations;
  train::OptimizerOptions oo;
  oo.optimizer = "SGD";
  oo.nbs = a.batch;  // accumulate = 1: every iteration steps
  const train::RunShape shape{1, n, a.batch * n, a.batch, a.nc};
  auto sched = train::Schedule::Create(oo, shape);
  if (!sched.IsOk()) {
    line["error"] = sched.GetStatus().Message();
    return line;
  }
  auto opt = train::BuildOptimizer(train::SplitParameterGroups(*net), sched->Optimizer());
  if (!opt.IsOk()) {
    line["error"] = opt.GetStatus().Message();
    return line;
  }
  train::ModelEma ema(*net);

  // One batch made once on the device; `boxes` fixed boxes per image.
  const auto on = torch::TensorOptions().device(*device);
  const torch::Tensor images = torch::rand({a.batch, 3, a.imgsz, a.imgsz}, on);
  const int64_t per = a.boxes;
  train::DetectionTargets targets;
  targets.batch_idx = torch::arange(a.batch, on.dtype(torch::kFloat)).repeat_interleave(per);
  targets.cls = torch::randint(0, a.nc, {a.batch * per, 1}, on).to(torch::kFloat);
  targets.bboxes = torch::cat(
      {torch::rand({a.batch * per, 2}, on) * 0.6 + 0.2, torch::rand({a.batch * per, 2}, on) * 0.25 + 0.05},
      1);
  const train::ImageSize size{a.imgsz, a.imgsz};

  double last_loss = 0;
  Clock::time_point t_start = Clock::now();
  for (int64_t i = 0; i < n; ++i) {
    if (i == a.warmup) {
      model::SynchronizeDevice(*device);
      t_start = Clock::now();
    }
    const train::IterationPlan plan = sched->Next();
    if (Status s = train::ApplyIterationPlan(**opt, plan); !s.IsOk()) {
      line["error"] = s.Message();
      return line;
    }
    model::YoloOutput out;
    {
      model::AutocastScope autocast(amp);
      out = net->forward(images);
    }
    // The loss in float32 outside autocast, as the trainer computes it.
    std::vector<torch::Tensor> maps;
    for (const auto& m : out.maps) maps.push_back(m.to(torch::kFloat));
    auto l = loss->Compute(maps, targets, size);
    if (!l.IsOk()) {
      line["error"] = l.GetStatus().Message();
      return line;
    }
    // The trainer reads the loss items every iteration (a device sync).
    last_loss = l->items.to(torch::kCPU, torch::kDouble).sum().item<double>();
    l->total.backward();
    train::ClipGradNorm(*net, 10.0);
    (*opt)->step();
    (*opt)->zero_grad();
    if (Status s = ema.Update(*net); !s.IsOk()) {
      line["error"] = s.Message();
      return line;
    }
  }
  model::SynchronizeDevice(*device);
  const double seconds = std::chrono::duration<double>(Clock::now() - t_start).count();
  line["images_per_s"] = a.batch * a.iterations / seconds;
  line["ms_per_iter"] = 1e3 * seconds / a.iterations;
  line["loss"] = last_loss;
  if (mem0) {
    if (auto mem1 = model::QueryDeviceMemory(*device)) {
      line["device_mem_used_bytes"] = mem0->free_bytes - mem1->free_bytes;
      line["device_mem_total_bytes"] = mem1->total_bytes;
    }
  }
  return line;
}

void PrintHuman(const nlohmann::json& j) {
  const std::string what = j["model"].get<std::string>() + " " + j["precision"].get<std::string>();
  if (j.contains("error")) {
    std::fprintf(stderr, "%-10s error: %s\n", what.c_str(), j["error"].get<std::string>().c_str());
  } else if (j.contains("skipped")) {
    std::fprintf(stderr, "%-10s skipped: %s\n", what.c_str(), j["skipped"].get<std::string>().c_str());
  } else if (j.contains("images_per_s")) {
    std::fprintf(stderr, "%-10s %9.2f images/s  %8.1f ms/iter", what.c_str(), j["images_per_s"].get<double>(),
                 j["ms_per_iter"].get<double>());
    if (j.contains("device_mem_used_bytes")) {
      std::fprintf(stderr, "  %.2f GiB on the device",
                   static_cast<double>(j["device_mem_used_bytes"].get<int64_t>()) / (1 << 30));
    }
    std::fprintf(stderr, "\n");
  }
}

// Runs RunOne in a child process that writes one JSON line to a pipe; the
// parent prints it, or an error line if the child died without one.
nlohmann::json InChild(const Args& a, const std::string& model_name, const std::string& precision) {
  int fds[2];
  if (pipe(fds) != 0) {
    std::perror("train_step_bench: pipe");
    std::exit(1);
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("train_step_bench: fork");
    std::exit(1);
  }
  if (pid == 0) {
    close(fds[0]);
    at::set_num_threads(a.threads);
    nlohmann::json j;
    try {
      j = RunOne(a, model_name, precision);
    } catch (const c10::Error& e) {
      j = BaseLine(a, model_name, precision, true);
      j["error"] = std::string(model::IsOutOfMemory(e) ? "out of memory: " : "") + e.what_without_backtrace();
    }
    const std::string text = Dump(j) + "\n";
    size_t off = 0;
    while (off < text.size()) {
      const ssize_t w = write(fds[1], text.data() + off, text.size() - off);
      if (w <= 0) _exit(1);
      off += static_cast<size_t>(w);
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t r; (r = read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(r));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  auto parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object()) return parsed;
  nlohmann::json j = BaseLine(a, model_name, precision, false);
  j["error"] = WIFSIGNALED(status)
                   ? "child killed by signal " + std::to_string(WTERMSIG(status))
                   : "child exited " + std::to_string(WEXITSTATUS(status)) + " without a result";
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = Parse(argc, argv);
  if (a.params_only) {
    for (const auto& m : a.models) {
      auto net = model::CreateModel(m, a.nc);
      if (!net.IsOk()) {
        std::fprintf(stderr, "train_step_bench: model=%s: %s\n", m.c_str(),
                     net.GetStatus().Message().c_str());
        return 1;
      }
      const nlohmann::json j = {{"bench", "train_step"},
                                {"impl", "kestrel"},
                                {"model", m},
                                {"nc", a.nc},
                                {"params", CountParameters(**net)}};
      std::printf("%s\n", Dump(j).c_str());
    }
    return 0;
  }
  // The parent never touches CUDA or torch's thread pools: each child starts clean.
  std::fprintf(stderr, "train_step_bench: device %s, imgsz %d, batch %d, %d iterations after %d warm-up\n",
               a.device.c_str(), a.imgsz, a.batch, a.iterations, a.warmup);
  int failures = 0;
  for (const auto& m : a.models) {
    for (const auto& p : a.precisions) {
      const nlohmann::json j = InChild(a, m, p);
      std::printf("%s\n", Dump(j).c_str());
      std::fflush(stdout);
      PrintHuman(j);
      if (j.contains("error")) ++failures;
    }
  }
  return failures == 0 ? 0 : 1;
}
