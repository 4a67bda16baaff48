#include "tune/pruner.h"

#include <algorithm>
#include <cassert>

namespace kestrel::tune {

namespace {

// The losses reported at `epoch` (1-based) by every trial that got there,
// best first; `self` is counted once even when `trials` holds it too.
std::vector<double> LossesAt(const std::vector<Trial>& trials, const Trial* self, int epoch, Direction d) {
  std::vector<double> losses;
  for (const auto& t : trials) {
    if (self != nullptr && t.number == self->number) continue;
    if (static_cast<int>(t.intermediate.size()) >= epoch)
      losses.push_back(Loss(d, t.intermediate[epoch - 1]));
  }
  if (self != nullptr && static_cast<int>(self->intermediate.size()) >= epoch) {
    losses.push_back(Loss(d, self->intermediate[epoch - 1]));
  }
  std::sort(losses.begin(), losses.end());
  return losses;
}

// In the top max(1, floor(n / eta)) of `sorted` (ties with the last kept
// value are kept).
bool InTop(double loss, const std::vector<double>& sorted, int eta) {
  const size_t keep = std::max<size_t>(1, sorted.size() / static_cast<size_t>(eta));
  return loss <= sorted[keep - 1];
}

}  // namespace

std::vector<int> AshaRungs(const AshaOptions& options) {
  assert(options.eta >= 2 && options.min_epochs >= 1);
  std::vector<int> rungs;
  for (int64_t r = options.min_epochs; r < options.max_epochs; r *= options.eta) {
    rungs.push_back(static_cast<int>(r));
  }
  return rungs;
}

PruneDecision AshaPruner::Decide(const std::vector<Trial>& trials, const Trial& trial) const {
  const int epoch = static_cast<int>(trial.intermediate.size());
  const std::vector<int> rungs = AshaRungs(options_);
  if (std::find(rungs.begin(), rungs.end(), epoch) == rungs.end()) return PruneDecision::kContinue;
  const std::vector<double> losses = LossesAt(trials, &trial, epoch, options_.direction);
  return InTop(Loss(options_.direction, trial.intermediate.back()), losses, options_.eta)
             ? PruneDecision::kContinue
             : PruneDecision::kPrune;
}

std::optional<int64_t> AshaPromotion(const std::vector<Trial>& trials, const AshaOptions& options) {
  const std::vector<int> rungs = AshaRungs(options);
  for (auto r = rungs.rbegin(); r != rungs.rend(); ++r) {
    const std::vector<double> losses = LossesAt(trials, nullptr, *r, options.direction);
    const Trial* best = nullptr;
    for (const auto& t : trials) {
      if (t.state != TrialState::kPruned || static_cast<int>(t.intermediate.size()) != *r) continue;
      const double loss = Loss(options.direction, t.intermediate.back());
      if (!InTop(loss, losses, options.eta)) continue;
      if (best == nullptr || loss < Loss(options.direction, best->intermediate.back()) ||
          (loss == Loss(options.direction, best->intermediate.back()) && t.number < best->number)) {
        best = &t;
      }
    }
    if (best != nullptr) return best->number;
  }
  return std::nullopt;
}

PruneDecision MedianPruner::Decide(const std::vector<Trial>& trials, const Trial& trial) const {
  const int epoch = static_cast<int>(trial.intermediate.size());
  if (epoch <= options_.warmup_epochs || epoch == 0) return PruneDecision::kContinue;
  std::vector<double> done;
  int succeeded = 0;
  for (const auto& t : trials) {
    if (t.state != TrialState::kSucceeded || t.number == trial.number) continue;
    ++succeeded;
    if (static_cast<int>(t.intermediate.size()) >= epoch)
      done.push_back(Loss(options_.direction, t.intermediate[epoch - 1]));
  }
  if (succeeded < options_.startup_trials || done.empty()) return PruneDecision::kContinue;
  std::sort(done.begin(), done.end());
  const size_t n = done.size();
  const double median = n % 2 == 1 ? done[n / 2] : 0.5 * (done[n / 2 - 1] + done[n / 2]);
  double best = Loss(options_.direction, trial.intermediate[0]);
  for (double v : trial.intermediate) best = std::min(best, Loss(options_.direction, v));
  return best > median ? PruneDecision::kPrune : PruneDecision::kContinue;
}

Result<std::unique_ptr<Pruner>> MakePruner(const std::string& name, const AshaOptions& asha,
                                           const MedianOptions& median) {
  if (name == "asha") {
    if (asha.eta < 2) return Status::InvalidArgument("eta must be >= 2", {"", 0, "eta"});
    if (asha.min_epochs < 1) return Status::InvalidArgument("min_epochs must be >= 1", {"", 0, "min_epochs"});
  }
  if (name == "asha") return std::unique_ptr<Pruner>(std::make_unique<AshaPruner>(asha));
  if (name == "median") return std::unique_ptr<Pruner>(std::make_unique<MedianPruner>(median));
  if (name == "none") return std::unique_ptr<Pruner>();
  return Status::InvalidArgument("pruner=" + name + ": expected asha, median or none", {"", 0, "pruner"});
}

}  // namespace kestrel::tune
