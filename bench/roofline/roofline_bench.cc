// roofline_bench [model=n] [imgsz=128] [batch=16] [threads=0] [iterations=3] [warmup=1]
//                [precisions=fp32,bf16] [gemm=1024] [sections=peak,train] [levers=LIST] [rounds=3]
//                [clock=wall|cpu]
//
// How close Kestrel's CPU training step is to what this CPU does with the
// same LibTorch build (issue 30, docs/speed.md "Roofline and levers").
//
// peak: the machine's throughput for the work a training step is made of,
//   per precision (fp32; bf16 = the same ops on bfloat16 tensors):
//   - gemm: an N x N x N matmul (LibTorch's CPU matmul: the BLAS it was
//     linked with for fp32, oneDNN for bf16);
//   - the model's own convolutions: every distinct convolution a forward of
//     `model` at imgsz x batch runs (shapes captured from the forward with a
//     RecordFunction observer), each run alone with fresh tensors, forward
//     only ("conv fwd") and forward + backward of input and weight ("conv
//     train"), summed over the forward's convolutions: the step's conv
//     FLOPs divided by the time those convolutions alone take. That is the
//     ceiling for this model's shapes; the biggest shapes are printed too.
// train: the training step of train_step_bench (forward, DetectionLoss,
//   backward, ClipGradNorm, SGD, zero_grad, EMA) on one random batch, timed
//   per phase, with the step's convolution FLOPs counted exactly from the
//   ops it runs (forward aten::convolution; backward
//   aten::convolution_backward by its output mask: the first layer computes
//   no input gradient) — the usual estimate, 3 x forward FLOPs, is printed
//   beside it — and the convolutions' own time (inclusive, from the same
//   observer). Prints training GFLOP per image, achieved GFLOP/s and the
//   fraction of the peaks above, and page faults per step.
// levers: each named lever against the fp32 baseline step, interleaved
//   (base, lever, base, lever ... for `rounds` rounds, median ratio):
//   channels_last (weights and input in channels-last memory format),
//   bf16 (CPU autocast around the forward, loss in float32), fused_val
//   (validation's eval-mode forward with BatchNorm folded into the convs vs
//   as the validator runs it). Allocator settings are environment
//   variables: compare two processes (docs/speed.md).
//
// threads=0: the process's CPU budget (core/cpu_budget.h), as the trainer.
// FLOPs are 2 x multiply-adds of the convolutions only (bias, BatchNorm,
// SiLU, loss and optimizer are memory-bound and counted as time, not work).
// The machine may be shared: peaks are the best of a few runs, the lever
// ratios are measured interleaved in one process, and clock=cpu times
// everything by this process's CPU time (with threads=1: what one core
// does while it runs, much less moved by other load than wall time; the
// levers print both clocks).
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <sys/resource.h>
#include <time.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "core/cpu_budget.h"
#include "model/torch_compat.h"
#include "model/yolo.h"
#include "train/loss.h"
#include "train/optimizer.h"
#include "train/schedule.h"

using namespace kestrel;

namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// This process's CPU time, all threads: on a machine shared with other
// work it moves much less with the load than wall-clock time does.
double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Args {
  std::string model = "n";
  int imgsz = 128;
  int batch = 16;
  int threads = 0;
  int iterations = 3;
  int warmup = 1;
  int gemm = 1024;
  int rounds = 3;
  bool cpu_clock = false;
  std::vector<std::string> precisions = {"fp32", "bf16"};
  std::set<std::string> sections = {"peak", "train"};
  std::vector<std::string> levers;
};

constexpr const char* kUsage =
    "usage: roofline_bench [model=n] [imgsz=128] [batch=16] [threads=0] [iterations=3] [warmup=1]\n"
    "                      [precisions=fp32,bf16] [gemm=1024] [sections=peak,train]\n"
    "                      [levers=channels_last,bf16,fused_val] [rounds=3] [clock=wall|cpu]\n"
    "  peak:   GEMM and the model's own convolutions alone (GFLOP/s per precision)\n"
    "  train:  the training step's GFLOP/s (convolution FLOPs counted from the ops it runs),\n"
    "          its phases, and its fraction of the peaks\n"
    "  levers: each lever's step time against the fp32 baseline, interleaved, `rounds` rounds\n"
    "  threads=0: this process's CPU budget (affinity, cgroup quota), as kestrel train\n"
    "  clock=cpu: peaks and the step's GFLOP/s from this process's CPU time instead of wall time\n"
    "             (with threads=1 on a shared machine: what one core does while it runs)\n";

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr, "roofline_bench: %s\n%s", why.c_str(), kUsage);
  std::exit(2);
}

std::vector<std::string> SplitList(const std::string& key, const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.empty()) Usage(key + ": empty item in '" + text + "'");
    out.push_back(item);
  }
  return out;
}

int ParseInt(const std::string& key, const std::string& text, int min, int max) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < min || v > max) {
    Usage(key + "=" + text + ": expected an integer in [" + std::to_string(min) + ", " + std::to_string(max) +
          "]");
  }
  return static_cast<int>(v);
}

Args Parse(int argc, char** argv) {
  Args a;
  const std::map<std::string, std::tuple<int*, int, int>> ints = {
      {"imgsz", {&a.imgsz, 32, 1280}},    {"batch", {&a.batch, 1, 256}},
      {"threads", {&a.threads, 0, 1024}}, {"iterations", {&a.iterations, 1, 1000}},
      {"warmup", {&a.warmup, 0, 100}},    {"gemm", {&a.gemm, 64, 8192}},
      {"rounds", {&a.rounds, 1, 100}}};
  for (int i = 1; i < argc; ++i) {
    const std::string kv = argv[i];
    if (kv == "--help" || kv == "-h") {
      std::printf("%s", kUsage);
      std::exit(0);
    }
    const auto eq = kv.find('=');
    if (eq == std::string::npos) Usage("expected key=value, got '" + kv + "'");
    const std::string k = kv.substr(0, eq);
    const std::string v = kv.substr(eq + 1);
    if (k == "model") {
      a.model = v;
    } else if (k == "precisions") {
      a.precisions = SplitList(k, v);
      for (const auto& p : a.precisions)
        if (p != "fp32" && p != "bf16") Usage("precisions: '" + p + "' is not fp32 or bf16");
    } else if (k == "sections") {
      a.sections.clear();
      for (const auto& s : SplitList(k, v)) {
        if (s != "peak" && s != "train") Usage("sections: '" + s + "' is not peak or train");
        a.sections.insert(s);
      }
    } else if (k == "clock") {
      if (v != "wall" && v != "cpu") Usage("clock=" + v + ": expected wall or cpu");
      a.cpu_clock = v == "cpu";
    } else if (k == "levers") {
      a.levers = SplitList(k, v);
      for (const auto& l : a.levers)
        if (l != "channels_last" && l != "bf16" && l != "fused_val")
          Usage("levers: '" + l + "' is not channels_last, bf16 or fused_val");
    } else if (auto it = ints.find(k); it != ints.end()) {
      *std::get<0>(it->second) = ParseInt(k, v, std::get<1>(it->second), std::get<2>(it->second));
    } else {
      Usage("unknown key '" + k + "'");
    }
  }
  if (a.imgsz % 32 != 0) Usage("imgsz=" + std::to_string(a.imgsz) + ": not a multiple of 32");
  return a;
}

// ---- The convolution observer -------------------------------------------

struct ConvShape {
  std::vector<int64_t> input, weight, stride, padding, dilation;
  int64_t groups = 1;
  bool operator<(const ConvShape& o) const {
    return std::tie(input, weight, stride, padding, dilation, groups) <
           std::tie(o.input, o.weight, o.stride, o.padding, o.dilation, o.groups);
  }
  // 2 x multiply-adds of the forward.
  double Flops() const {
    double out = 1;
    for (size_t d = 2; d < input.size(); ++d) {
      const int64_t k = weight[d];
      out *= static_cast<double>(
          (input[d] + 2 * padding[d - 2] - dilation[d - 2] * (k - 1) - 1) / stride[d - 2] + 1);
    }
    double per_out = static_cast<double>(weight[1]);  // input channels per group
    for (size_t d = 2; d < weight.size(); ++d) per_out *= static_cast<double>(weight[d]);
    return 2.0 * static_cast<double>(input[0]) * static_cast<double>(weight[0]) * out * per_out;
  }
  std::string Text() const {
    std::ostringstream s;
    s << input[1] << "->" << weight[0] << " k" << weight[2] << " s" << stride[0] << " @" << input[2] << "x"
      << input[3];
    if (groups > 1) s << " g" << groups;
    return s.str();
  }
};

// What the observer saw while it was on; all threads (autograd's included).
struct ConvCounts {
  std::atomic<int64_t> fwd_flops{0}, bwd_flops{0}, fwd_ns{0}, bwd_ns{0};
  std::mutex mu;
  std::map<ConvShape, int> shapes;  // forward convolutions and how often each ran
  bool capture_shapes = false;
  void Reset() {
    fwd_flops = bwd_flops = fwd_ns = bwd_ns = 0;
    const std::lock_guard<std::mutex> lock(mu);
    shapes.clear();
  }
};
ConvCounts g_counts;

std::vector<int64_t> IntList(const c10::IValue& v) {
  if (v.isIntList()) return v.toIntVector();
  return {};
}

ConvShape ShapeOf(const at::RecordFunction& fn, bool backward) {
  const auto in = fn.inputs();
  // convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
  // convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
  //                      transposed, output_padding, groups, output_mask)
  const size_t o = backward ? 1 : 0;
  ConvShape s;
  s.input = in[o].toTensor().sizes().vec();
  s.weight = in[o + 1].toTensor().sizes().vec();
  s.stride = IntList(in[o + 3]);
  s.padding = IntList(in[o + 4]);
  s.dilation = IntList(in[o + 5]);
  s.groups = in[o + 8].toInt();
  return s;
}

bool IsConv(const at::RecordFunction& fn) { return std::string_view(fn.name()) == "aten::convolution"; }
bool IsConvBackward(const at::RecordFunction& fn) {
  return std::string_view(fn.name()) == "aten::convolution_backward";
}

// The inputs are read at the start (they are not kept for the end).
struct ConvCall : at::ObserverContext {
  Clock::time_point t = Clock::now();
  ConvShape shape;
  bool backward = false;
  int parts = 1;  // backward: how many of grad_input, grad_weight it computes
};

std::unique_ptr<at::ObserverContext> OnStart(const at::RecordFunction& fn) {
  const bool backward = IsConvBackward(fn);
  if (!backward && !IsConv(fn)) return nullptr;
  auto call = std::make_unique<ConvCall>();
  call->shape = ShapeOf(fn, backward);
  call->backward = backward;
  if (backward) {
    const auto mask = fn.inputs()[10].toBoolList();
    call->parts = (mask.get(0) ? 1 : 0) + (mask.get(1) ? 1 : 0);
  }
  call->t = Clock::now();
  return call;
}

void OnEnd(const at::RecordFunction& /*fn*/, at::ObserverContext* ctx) {
  if (ctx == nullptr) return;
  const auto* call = static_cast<ConvCall*>(ctx);  // NOLINT(*-static-cast-downcast)
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - call->t).count();
  const ConvShape& s = call->shape;
  if (s.input.size() != 4 || s.stride.size() != 2 || s.padding.size() != 2 || s.dilation.size() != 2) return;
  const double f = s.Flops();
  if (call->backward) {
    g_counts.bwd_flops += static_cast<int64_t>(f * call->parts);
    g_counts.bwd_ns += ns;
  } else {
    g_counts.fwd_flops += static_cast<int64_t>(f);
    g_counts.fwd_ns += ns;
    if (g_counts.capture_shapes) {
      const std::lock_guard<std::mutex> lock(g_counts.mu);
      ++g_counts.shapes[s];
    }
  }
}

class Observer {
 public:
  Observer()
      : handle_(at::addGlobalCallback(at::RecordFunctionCallback(&OnStart, &OnEnd)
                                          .needsInputs(true)
                                          .scopes({at::RecordScope::FUNCTION}))) {}
  ~Observer() { at::removeCallback(handle_); }
  Observer(const Observer&) = delete;
  Observer& operator=(const Observer&) = delete;

 private:
  at::CallbackHandle handle_;
};

// ---- Peaks ---------------------------------------------------------------

at::ScalarType DtypeOf(const std::string& precision) {
  return precision == "bf16" ? at::kBFloat16 : at::kFloat;
}

// Best time of `fn` over a few runs after one warm-up: at least 3 runs, up
// to 0.6 s of runs (at most 20).
bool g_cpu_clock = false;  // clock=cpu

template <typename Fn>
double BestSeconds(Fn&& fn) {
  fn();
  double best = 1e30, total = 0;
  for (int i = 0; i < 20 && (i < 3 || total < 0.6); ++i) {
    const auto t = Clock::now();
    const double c = CpuSeconds();
    fn();
    const double s = g_cpu_clock ? CpuSeconds() - c : Since(t);
    best = std::min(best, s);
    total += s;
  }
  return best;
}

double GemmGflops(int n, at::ScalarType dtype) {
  const auto a = torch::randn({n, n}).to(dtype);
  const auto b = torch::randn({n, n}).to(dtype);
  const double s = BestSeconds([&] { (void)torch::matmul(a, b); });
  return 2.0 * n * n * static_cast<double>(n) / s / 1e9;
}

struct ConvTimes {
  double fwd_s = 0, train_s = 0;
};

// One convolution alone: forward, and forward + backward of input and weight.
ConvTimes TimeConv(const ConvShape& s, at::ScalarType dtype) {
  const auto opts = torch::TensorOptions().dtype(dtype);
  auto x = torch::randn(s.input).to(dtype);
  auto w = (torch::randn(s.weight) * 0.1).to(dtype);
  ConvTimes t;
  {
    const torch::NoGradGuard no_grad;
    t.fwd_s = BestSeconds([&] {
      (void)at::convolution(x, w, {}, s.stride, s.padding, s.dilation, false, {0, 0}, s.groups);
    });
  }
  x.set_requires_grad(true);
  w.set_requires_grad(true);
  (void)opts;
  t.train_s = BestSeconds([&] {
    auto y = at::convolution(x, w, {}, s.stride, s.padding, s.dilation, false, {0, 0}, s.groups);
    y.backward(torch::ones_like(y));
    x.mutable_grad() = torch::Tensor();
    w.mutable_grad() = torch::Tensor();
  });
  return t;
}

struct Peaks {
  std::map<std::string, double> gemm, conv_fwd, conv_train;  // GFLOP/s by precision
};

// The distinct convolutions one training-mode forward of the model runs.
std::map<ConvShape, int> CaptureShapes(model::Yolo& net, const Args& a) {
  g_counts.Reset();
  g_counts.capture_shapes = true;
  {
    const Observer obs;
    const torch::NoGradGuard no_grad;
    (void)net->forward(torch::rand({a.batch, 3, a.imgsz, a.imgsz}));
  }
  g_counts.capture_shapes = false;
  const std::lock_guard<std::mutex> lock(g_counts.mu);
  return g_counts.shapes;
}

Peaks MeasurePeaks(const Args& a, const std::map<ConvShape, int>& shapes) {
  Peaks p;
  std::vector<std::pair<double, ConvShape>> by_flops;
  double model_flops = 0;
  for (const auto& [s, n] : shapes) {
    by_flops.emplace_back(s.Flops() * n, s);
    model_flops += s.Flops() * n;
  }
  std::sort(by_flops.begin(), by_flops.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  std::printf("peak: %zu distinct convolutions, %.3f GFLOP per forward of %d images (%.4f per image)\n",
              shapes.size(), model_flops / 1e9, a.batch, model_flops / 1e9 / a.batch);
  for (const auto& precision : a.precisions) {
    const at::ScalarType dtype = DtypeOf(precision);
    p.gemm[precision] = GemmGflops(a.gemm, dtype);
    std::printf("peak %-4s gemm %dx%dx%d          %8.1f GFLOP/s\n", precision.c_str(), a.gemm, a.gemm, a.gemm,
                p.gemm[precision]);
    double fwd_s = 0, train_s = 0;
    std::map<ConvShape, ConvTimes> times;
    for (const auto& [s, n] : shapes) {
      times[s] = TimeConv(s, dtype);
      fwd_s += times[s].fwd_s * n;
      train_s += times[s].train_s * n;
    }
    p.conv_fwd[precision] = model_flops / fwd_s / 1e9;
    p.conv_train[precision] = 3 * model_flops / train_s / 1e9;
    for (size_t i = 0; i < std::min<size_t>(4, by_flops.size()); ++i) {
      const ConvShape& s = by_flops[i].second;
      std::printf(
          "peak %-4s conv %-24s fwd %7.1f  fwd+bwd %7.1f GFLOP/s  (%4.1f%% of the model's conv FLOPs)\n",
          precision.c_str(), s.Text().c_str(), s.Flops() / times[s].fwd_s / 1e9,
          3 * s.Flops() / times[s].train_s / 1e9, 100 * by_flops[i].first / model_flops);
    }
    std::printf(
        "peak %-4s the model's convolutions alone: fwd %.1f GFLOP/s, fwd+bwd %.1f GFLOP/s (%.3f s per "
        "step)\n",
        precision.c_str(), p.conv_fwd[precision], p.conv_train[precision], train_s);
    std::fflush(stdout);
  }
  return p;
}

// ---- The training step -----------------------------------------------------

struct Step {
  model::Yolo net{nullptr};
  std::optional<train::DetectionLoss> loss;
  std::unique_ptr<torch::optim::Optimizer> opt;
  std::optional<train::Schedule> sched;
  std::unique_ptr<train::ModelEma> ema;
  torch::Tensor images;
  train::DetectionTargets targets;
  train::ImageSize size{0, 0};
  bool bf16 = false;
};

void Check(const Status& s, const char* what) {
  if (!s.IsOk()) {
    std::fprintf(stderr, "roofline_bench: %s: %s\n", what, s.Message().c_str());
    std::exit(1);
  }
}

void ToChannelsLast(torch::nn::Module& m) {
  const torch::NoGradGuard no_grad;
  for (auto& p : m.parameters()) {
    if (p.dim() == 4) p.set_data(p.data().contiguous(at::MemoryFormat::ChannelsLast));
  }
}

// A step set up as train_step_bench's: SGD, nbs = batch, 3 boxes per image.
Step MakeStep(const Args& a, bool channels_last, bool bf16) {
  Step st;
  torch::manual_seed(0);
  auto created = model::CreateModel(a.model, 80);
  Check(created.GetStatus(), "model");
  st.net = *created;
  st.net->train();
  if (channels_last) ToChannelsLast(*st.net);
  train::LossOptions lo;
  lo.num_classes = 80;
  lo.strides = st.net->Strides();
  auto loss = train::DetectionLoss::Create(lo);
  Check(loss.GetStatus(), "loss");
  st.loss.emplace(std::move(*loss));
  const int64_t n = 100000;
  train::OptimizerOptions oo;
  oo.optimizer = "SGD";
  oo.nbs = a.batch;
  auto sched = train::Schedule::Create(oo, train::RunShape{1, n, a.batch * n, a.batch, 80});
  Check(sched.GetStatus(), "schedule");
  st.sched.emplace(std::move(*sched));
  auto opt = train::BuildOptimizer(train::SplitParameterGroups(*st.net), st.sched->Optimizer());
  Check(opt.GetStatus(), "optimizer");
  st.opt = std::move(*opt);
  st.ema = std::make_unique<train::ModelEma>(*st.net);
  st.images = torch::rand({a.batch, 3, a.imgsz, a.imgsz});
  if (channels_last) st.images = st.images.contiguous(at::MemoryFormat::ChannelsLast);
  const int64_t per = 3;
  st.targets.batch_idx = torch::arange(a.batch, torch::kFloat).repeat_interleave(per);
  st.targets.cls = torch::randint(0, 80, {a.batch * per, 1}).to(torch::kFloat);
  st.targets.bboxes = torch::cat(
      {torch::rand({a.batch * per, 2}) * 0.6 + 0.2, torch::rand({a.batch * per, 2}) * 0.25 + 0.05}, 1);
  st.size = train::ImageSize{a.imgsz, a.imgsz};
  st.bf16 = bf16;
  return st;
}

struct Phases {
  double forward = 0, loss = 0, backward = 0, optimizer = 0;
  double Total() const { return forward + loss + backward + optimizer; }
};

Phases RunStep(Step& st) {
  Phases ph;
  auto t = Clock::now();
  Check(train::ApplyIterationPlan(*st.opt, st.sched->Next()), "schedule");
  model::YoloOutput out;
  {
    const model::AutocastScope autocast(st.bf16, at::kBFloat16, c10::kCPU);
    out = st.net->forward(st.images);
  }
  ph.forward = Since(t);
  t = Clock::now();
  std::vector<torch::Tensor> maps;
  for (const auto& m : out.maps) maps.push_back(m.to(torch::kFloat));
  auto l = st.loss->Compute(maps, st.targets, st.size);
  Check(l.GetStatus(), "loss");
  (void)l->items.sum().item<double>();  // the trainer reads the items every iteration
  ph.loss = Since(t);
  t = Clock::now();
  l->total.backward();
  ph.backward = Since(t);
  t = Clock::now();
  train::ClipGradNorm(*st.net, 10.0);
  st.opt->step();
  st.opt->zero_grad();
  Check(st.ema->Update(*st.net), "ema");
  ph.optimizer = Since(t);
  return ph;
}

long MinorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt + u.ru_majflt;
}

void TrainSection(const Args& a, const Peaks& peaks) {
  Step st = MakeStep(a, false, false);
  for (int i = 0; i < a.warmup; ++i) (void)RunStep(st);
  // One step under the observer: the FLOPs and the convolutions' own time.
  g_counts.Reset();
  Phases observed;
  {
    const Observer obs;
    observed = RunStep(st);
  }
  const double fwd_flops = static_cast<double>(g_counts.fwd_flops.load());
  const double bwd_flops = static_cast<double>(g_counts.bwd_flops.load());
  const double conv_s = static_cast<double>(g_counts.fwd_ns.load() + g_counts.bwd_ns.load()) / 1e9;
  // Timed steps without the observer.
  Phases sum;
  const long faults0 = MinorFaults();
  const double cpu0 = CpuSeconds();
  for (int i = 0; i < a.iterations; ++i) {
    const Phases p = RunStep(st);
    sum.forward += p.forward;
    sum.loss += p.loss;
    sum.backward += p.backward;
    sum.optimizer += p.optimizer;
  }
  const double cpu_step_s = (CpuSeconds() - cpu0) / a.iterations;
  const double faults = static_cast<double>(MinorFaults() - faults0) / a.iterations;
  const double step_s = a.cpu_clock ? cpu_step_s : sum.Total() / a.iterations;
  const double train_flops = fwd_flops + bwd_flops;
  const double gflops = train_flops / step_s / 1e9;
  std::printf(
      "train fp32: %.4f GFLOP forward + %.4f backward = %.4f GFLOP per image (estimate 3 x forward: %.4f)\n",
      fwd_flops / 1e9 / a.batch, bwd_flops / 1e9 / a.batch, train_flops / 1e9 / a.batch,
      3 * fwd_flops / 1e9 / a.batch);
  std::printf(
      "train fp32: %.3f s per step of %d images (%s) = %.2f images/s = %.1f GFLOP/s; wall %.3f s, CPU time "
      "%.3f s per step; page faults %.0f per step\n",
      step_s, a.batch, a.cpu_clock ? "CPU time" : "wall", a.batch / step_s, gflops,
      sum.Total() / a.iterations, cpu_step_s, faults);
  std::printf("train fp32: phases forward %.0f%%, loss %.0f%%, backward %.0f%%, clip+SGD+EMA %.0f%%\n",
              100 * sum.forward / sum.Total(), 100 * sum.loss / sum.Total(), 100 * sum.backward / sum.Total(),
              100 * sum.optimizer / sum.Total());
  std::printf(
      "train fp32: convolutions take %.0f%% of a step (observed step %.3f s: conv fwd %.3f s, conv bwd %.3f "
      "s)\n",
      100 * conv_s / observed.Total(), observed.Total(), static_cast<double>(g_counts.fwd_ns.load()) / 1e9,
      static_cast<double>(g_counts.bwd_ns.load()) / 1e9);
  if (peaks.conv_train.count("fp32") != 0) {
    std::printf(
        "train fp32: %.1f GFLOP/s = %.0f%% of the model's fp32 convolutions alone (fwd+bwd %.1f, fwd %.1f)\n",
        gflops, 100 * gflops / peaks.conv_train.at("fp32"), peaks.conv_train.at("fp32"),
        peaks.conv_fwd.at("fp32"));
  }
  if (peaks.conv_train.count("bf16") != 0) {
    std::printf(
        "train fp32: %.1f GFLOP/s = %.0f%% of the model's bf16 convolutions alone (fwd+bwd %.1f, fwd %.1f)\n",
        gflops, 100 * gflops / peaks.conv_train.at("bf16"), peaks.conv_train.at("bf16"),
        peaks.conv_fwd.at("bf16"));
  }
  std::fflush(stdout);
}

// ---- Levers ------------------------------------------------------------------

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Took {
  double wall = 0, cpu = 0;
};

template <typename Fn>
Took Time(int iterations, Fn&& fn) {
  const auto t = Clock::now();
  const double c = CpuSeconds();
  for (int i = 0; i < iterations; ++i) fn();
  return Took{Since(t) / iterations, (CpuSeconds() - c) / iterations};
}

Took StepSeconds(Step& st, int iterations) {
  return Time(iterations, [&] { (void)RunStep(st); });
}

Took EvalSeconds(model::Yolo& net, const torch::Tensor& images, int iterations) {
  const torch::NoGradGuard no_grad;
  return Time(iterations, [&] { (void)net->forward(images); });
}

// One lever's interleaved rounds: wall and CPU ratios base/lever.
struct Rounds {
  std::vector<double> wall, cpu;
  double base_wall = 0, lever_wall = 0, base_cpu = 0, lever_cpu = 0;
  void Add(const Took& b, const Took& l) {
    wall.push_back(b.wall / l.wall);
    cpu.push_back(b.cpu / l.cpu);
    base_wall += b.wall;
    lever_wall += l.wall;
    base_cpu += b.cpu;
    lever_cpu += l.cpu;
  }
};

void PrintLever(const std::string& what, const Rounds& r, int rounds) {
  const auto [wmin, wmax] = std::minmax_element(r.wall.begin(), r.wall.end());
  const auto [cmin, cmax] = std::minmax_element(r.cpu.begin(), r.cpu.end());
  std::printf(
      "lever %s: wall %.3f s baseline, %.3f s with it: x%.3f (median of %d interleaved rounds, %.3f-%.3f); "
      "CPU time %.3f s, %.3f s: x%.3f (%.3f-%.3f)\n",
      what.c_str(), r.base_wall / rounds, r.lever_wall / rounds, Median(r.wall), rounds, *wmin, *wmax,
      r.base_cpu / rounds, r.lever_cpu / rounds, Median(r.cpu), *cmin, *cmax);
}

void LeverSection(const Args& a) {
  for (const auto& lever : a.levers) {
    if (lever == "fused_val") {
      Step st = MakeStep(a, false, false);
      for (int i = 0; i < 2; ++i) (void)RunStep(st);  // BatchNorm statistics that are not the init's
      model::Yolo plain = model::CloneModel(*st.net);
      plain->eval();
      model::Yolo fused = model::CloneModel(*st.net);
      fused->eval();
      fused->Fuse();
      double max_diff = 0;
      {
        const torch::NoGradGuard no_grad;
        const auto x = plain->forward(st.images).maps;
        const auto y = fused->forward(st.images).maps;
        for (size_t i = 0; i < x.size(); ++i)
          max_diff = std::max(max_diff, (x[i] - y[i]).abs().max().item<double>());
      }
      (void)EvalSeconds(plain, st.images, 1);
      (void)EvalSeconds(fused, st.images, 1);
      Rounds r;
      for (int i = 0; i < a.rounds; ++i) {
        const Took b = EvalSeconds(plain, st.images, a.iterations);
        r.Add(b, EvalSeconds(fused, st.images, a.iterations));
      }
      PrintLever("fused_val (eval forward)", r, a.rounds);
      std::printf("lever fused_val: max |difference| of the head maps fused vs unfused %.2e\n", max_diff);
    } else {
      Step base = MakeStep(a, false, false);
      Step with = MakeStep(a, lever == "channels_last", lever == "bf16");
      for (int i = 0; i < a.warmup; ++i) {
        (void)RunStep(base);
        (void)RunStep(with);
      }
      Rounds r;
      for (int i = 0; i < a.rounds; ++i) {
        const Took b = StepSeconds(base, a.iterations);
        r.Add(b, StepSeconds(with, a.iterations));
      }
      PrintLever(lever + " (training step)", r, a.rounds);
    }
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = Parse(argc, argv);
  const CpuBudget budget = ProcessCpuBudget();
  const int threads = a.threads > 0 ? a.threads : budget.usable;
  at::set_num_threads(threads);
  g_cpu_clock = a.cpu_clock;
  std::printf("roofline_bench: %s, model %s, imgsz %d, batch %d, %d threads (%s), %s clock\n",
              model::TorchBuildText().c_str(), a.model.c_str(), a.imgsz, a.batch, threads,
              a.threads > 0 ? ("threads=" + std::to_string(a.threads)).c_str() : budget.why.c_str(),
              a.cpu_clock ? "CPU-time" : "wall");
  Peaks peaks;
  if (a.sections.count("peak") != 0) {
    torch::manual_seed(0);
    auto created = model::CreateModel(a.model, 80);
    Check(created.GetStatus(), "model");
    model::Yolo net = *created;
    net->train();
    peaks = MeasurePeaks(a, CaptureShapes(net, a));
  }
  if (a.sections.count("train") != 0) TrainSection(a, peaks);
  if (!a.levers.empty()) LeverSection(a);
  return 0;
}
