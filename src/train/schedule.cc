#include "train/schedule.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numbers>
#include <utility>

#include "core/json.h"

// The reference rows are reproduced bit for bit only when every expression is
// evaluated in the same order with plain double rounding; this TU is built
// with -ffp-contract=off (see CMakeLists.txt) so no FMA fuses a*b+c.

namespace kestrel::train {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Python's round(x, 6) on the values it sees here (positive, far from ties).
double RoundDecimals6(double x) { return std::nearbyint(x * 1e6) / 1e6; }

Status Field(const std::string& field, const std::string& message) {
  return Status::InvalidArgument(message, ErrorLocation{"", 0, field});
}

}  // namespace

const char* OptimizerKindName(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return "SGD";
    case OptimizerKind::kAdam:
      return "Adam";
    case OptimizerKind::kAdamW:
      return "AdamW";
  }
  return "?";
}

void OptimizerOptions::Bind(OptionSet& set) {
  set.Choice("optimizer", &optimizer, {"auto", "SGD", "Adam", "AdamW"},
             "optimizer; auto picks SGD or AdamW from the run length and classes");
  set.Float("lr0", &lr0, "initial learning rate (optimizer=auto chooses its own)", Range::OpenClosed(0, 10));
  set.Float("lrf", &lrf, "final learning rate as a fraction of lr0", Range::Closed(0, 1));
  // momentum 1 would never forget a gradient (and Adam's beta1 must be < 1).
  set.Float("momentum", &momentum, "SGD momentum / Adam beta1", Range::ClosedOpen(0, 1));
  set.Float("weight_decay", &weight_decay, "weight decay before batch scaling", Range::Closed(0, 1));
  set.Float("warmup_epochs", &warmup_epochs, "warmup length in epochs (0 = none)", Range::Closed(0, 1e6));
  set.Float("warmup_momentum", &warmup_momentum, "SGD momentum at the start of warmup",
            Range::ClosedOpen(0, 1));
  set.Float("warmup_bias_lr", &warmup_bias_lr, "bias learning rate at the start of warmup",
            Range::Closed(0, 10));
  set.Int("nbs", &nbs, "nominal batch size for gradient accumulation", 1, 1 << 20);
  set.Bool("cos_lr", &cos_lr, "cosine learning-rate factor instead of linear");
}

Status OptimizerOptions::Validate() const {
  // Code may spell the optimizer in any case ("sgd"); the binding's choices
  // are the canonical spellings, so check a copy with the name canonicalized.
  OptimizerOptions canonical = *this;
  const std::string name = Lower(optimizer);
  for (const char* c : {"auto", "SGD", "Adam", "AdamW"}) {
    if (name == Lower(c)) canonical.optimizer = c;
  }
  return CheckBoundValues(canonical);
}

Result<ResolvedOptimizer> ResolveOptimizer(const OptimizerOptions& options, const RunShape& shape) {
  KESTREL_RETURN_IF_ERROR(options.Validate());
  if (shape.epochs <= 0) return Field("epochs", "must be > 0");
  if (shape.batches_per_epoch <= 0) return Field("batches_per_epoch", "must be > 0");
  if (shape.batch_size <= 0) return Field("batch", "must be > 0");
  if (shape.num_train_images < 0) return Field("num_train_images", "must be >= 0");

  ResolvedOptimizer r;
  r.base_accumulate = static_cast<int>(
      std::max<int64_t>(RoundHalfEven(static_cast<double>(options.nbs) / shape.batch_size), 1));
  r.warmup_bias_lr = options.warmup_bias_lr;
  r.lr = options.lr0;
  r.momentum = options.momentum;
  const std::string name = Lower(options.optimizer);
  if (name == "auto") {
    if (shape.num_classes <= 0) return Field("nc", "optimizer=auto needs the class count");
    const int64_t per_epoch = (shape.num_train_images + std::max(shape.batch_size, options.nbs) - 1) /
                              std::max(shape.batch_size, options.nbs);
    const int64_t iterations = per_epoch * shape.epochs;
    if (iterations > 10000) {
      r.kind = OptimizerKind::kSgd;
      r.lr = 0.01;
    } else {
      r.kind = OptimizerKind::kAdamW;
      r.lr = RoundDecimals6(0.002 * 5 / (4 + shape.num_classes));
    }
    r.momentum = 0.9;
    r.warmup_bias_lr = 0.0;  // the reference keeps Adam's bias LR low this way
  } else if (name == "sgd") {
    r.kind = OptimizerKind::kSgd;
  } else if (name == "adam") {
    r.kind = OptimizerKind::kAdam;
  } else {
    r.kind = OptimizerKind::kAdamW;
  }
  r.nesterov = r.kind == OptimizerKind::kSgd;
  r.weight_decay = options.weight_decay * shape.batch_size * r.base_accumulate / options.nbs;
  return r;
}

std::string ScheduleStateToJson(const ScheduleState& state) {
  nlohmann::json j = {{"next_iteration", state.next_iteration},
                      {"last_step_iteration", state.last_step_iteration},
                      {"steps_taken", state.steps_taken}};
  return DumpJson(j);
}

Result<ScheduleState> ScheduleStateFromJson(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::Corruption("schedule state is not a JSON object");
  }
  ScheduleState s;
  for (auto [key, dst] : {std::pair<const char*, int64_t*>{"next_iteration", &s.next_iteration},
                          {"last_step_iteration", &s.last_step_iteration},
                          {"steps_taken", &s.steps_taken}}) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer()) {
      return Status::Corruption("schedule state: missing or non-integer field", ErrorLocation{"", 0, key});
    }
    *dst = it->get<int64_t>();
  }
  return s;
}

double Interp2(double x, double x0, double x1, double y0, double y1) {
  if (x <= x0) return y0;
  if (x >= x1) return y1;
  const double slope = (y1 - y0) / (x1 - x0);
  return slope * (x - x0) + y0;
}

int64_t RoundHalfEven(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

Schedule::Schedule(OptimizerOptions options, RunShape shape, ResolvedOptimizer resolved, ScheduleState state)
    : options_(std::move(options)), shape_(shape), resolved_(resolved), state_(state) {
  warmup_iterations_ =
      options_.warmup_epochs > 0
          ? std::max<int64_t>(
                RoundHalfEven(options_.warmup_epochs * static_cast<double>(shape_.batches_per_epoch)), 100)
          : -1;
}

Result<Schedule> Schedule::Create(const OptimizerOptions& options, const RunShape& shape,
                                  const ScheduleState& state) {
  KESTREL_ASSIGN_OR_RETURN(ResolvedOptimizer resolved, ResolveOptimizer(options, shape));
  const int64_t total = shape.batches_per_epoch * shape.epochs;
  if (state.next_iteration < 0 || state.next_iteration > total) {
    return Field("next_iteration", "resume point outside the run (0.." + std::to_string(total) + ")");
  }
  if (state.last_step_iteration < -1 || state.last_step_iteration >= state.next_iteration) {
    return Field("last_step_iteration", "must be -1 or before next_iteration");
  }
  if (state.steps_taken < 0 || state.steps_taken > state.next_iteration) {
    return Field("steps_taken", "must be in [0, next_iteration]");
  }
  return Schedule(options, shape, resolved, state);
}

double Schedule::LrFactor(int epoch) const {
  const double lrf = options_.lrf;
  const double e = epoch;
  const double n = shape_.epochs;
  if (options_.cos_lr) {
    return std::max((1 - std::cos(e * std::numbers::pi / n)) / 2, 0.0) * (lrf - 1) + 1;
  }
  return std::max(1 - e / n, 0.0) * (1.0 - lrf) + lrf;
}

IterationPlan Schedule::Next() {
  IterationPlan p;
  const int64_t ni = state_.next_iteration;
  const int64_t nb = shape_.batches_per_epoch;
  const int64_t nw = warmup_iterations_;
  p.iteration = ni;
  p.epoch = static_cast<int>(ni / nb);
  p.batch_in_epoch = ni % nb;
  const bool sgd = resolved_.kind == OptimizerKind::kSgd;
  const double target_lr = resolved_.lr * LrFactor(p.epoch);

  // Outside warmup every value is what the end of warmup (or the epoch's
  // LambdaLR step) left in the optimizer: accumulate = base, lr = lr*lf(e),
  // SGD momentum = options.momentum (warmup interpolates towards the option,
  // not towards auto's 0.9 — a reference quirk kept on purpose).
  p.accumulate = resolved_.base_accumulate;
  p.lr = {target_lr, target_lr, target_lr};
  p.momentum = nw >= 0 && sgd ? options_.momentum : resolved_.momentum;
  if (nw >= 0 && ni <= nw) {
    const double x = static_cast<double>(ni);
    const double xn = static_cast<double>(nw);
    p.accumulate = static_cast<int>(std::max<int64_t>(
        1, RoundHalfEven(Interp2(x, 0, xn, 1, static_cast<double>(options_.nbs) / shape_.batch_size))));
    p.lr[0] = Interp2(x, 0, xn, resolved_.warmup_bias_lr, target_lr);
    p.lr[1] = Interp2(x, 0, xn, 0.0, target_lr);
    p.lr[2] = p.lr[1];
    if (sgd) p.momentum = Interp2(x, 0, xn, options_.warmup_momentum, options_.momentum);
  }
  // Gradients keep accumulating across epoch boundaries; a step happens once
  // `accumulate` iterations have passed since the last one.
  p.optimizer_step = ni - state_.last_step_iteration >= p.accumulate;
  if (p.optimizer_step) {
    state_.last_step_iteration = ni;
    ++state_.steps_taken;
  }
  p.steps_taken = state_.steps_taken;
  p.weight_decay = {0.0, resolved_.weight_decay, 0.0};
  ++state_.next_iteration;
  return p;
}

}  // namespace kestrel::train
