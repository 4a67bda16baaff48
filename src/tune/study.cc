#include "tune/study.h"

#include <algorithm>
#include <cassert>

namespace kestrel::tune {

Status StudySettings::Validate() const {
  auto bad = [](const char* key, const std::string& why) {
    return Status::InvalidArgument(std::string(key) + ": " + why, {"", 0, key});
  };
  if (trials < 1) return bad("trials", "must be >= 1, got " + std::to_string(trials));
  if (parallel < 1) return bad("parallel", "must be >= 1, got " + std::to_string(parallel));
  if (epochs < 1) return bad("epochs", "must be >= 1, got " + std::to_string(epochs));
  if (min_epochs < 1 || min_epochs > epochs) {
    return bad("min_epochs",
               "must be in [1, epochs=" + std::to_string(epochs) + "], got " + std::to_string(min_epochs));
  }
  if (eta < 2) return bad("eta", "must be >= 2, got " + std::to_string(eta));
  if (sampler != "tpe" && sampler != "random")
    return bad("sampler", "expected tpe or random, got '" + sampler + "'");
  if (pruner != "asha" && pruner != "median" && pruner != "none") {
    return bad("pruner", "expected asha, median or none, got '" + pruner + "'");
  }
  return {};
}

AshaOptions StudyPlanner::Asha() const {
  AshaOptions a;
  a.direction = settings_.direction;
  a.min_epochs = settings_.min_epochs;
  a.eta = settings_.eta;
  a.max_epochs = settings_.epochs;
  return a;
}

StudyPlanner::StudyPlanner(SearchSpace space, StudySettings settings)
    : space_(std::move(space)), settings_(std::move(settings)) {
  assert(settings_.Validate().IsOk());
  TpeOptions tpe;
  tpe.seed = settings_.seed;
  tpe.direction = settings_.direction;
  tpe.multivariate = settings_.multivariate;
  auto sampler = MakeSampler(settings_.sampler, tpe);
  sampler_ = std::move(sampler.Value());
  MedianOptions median;
  median.direction = settings_.direction;
  auto pruner = MakePruner(settings_.pruner, Asha(), median);
  pruner_ = std::move(pruner.Value());
}

int StudyPlanner::Spent(const std::vector<Trial>& trials) {
  return static_cast<int>(std::count_if(trials.begin(), trials.end(),
                                        [](const Trial& t) { return t.state != TrialState::kInfraFailed; }));
}

std::vector<StudyAction> StudyPlanner::Plan(const std::vector<Trial>& trials) const {
  std::vector<Trial> view = trials;
  int active = static_cast<int>(std::count_if(view.begin(), view.end(), [](const Trial& t) {
    return t.state == TrialState::kQueued || t.state == TrialState::kRunning;
  }));
  int64_t next = 0;
  for (const auto& t : view) next = std::max(next, t.number + 1);
  std::vector<StudyAction> actions;
  while (active < settings_.parallel) {
    if (settings_.pruner == "asha") {
      if (auto promote = AshaPromotion(view, Asha())) {
        for (auto& t : view) {
          if (t.number == *promote) t.state = TrialState::kRunning;
        }
        actions.push_back({StudyAction::Kind::kResume, *promote, {}});
        ++active;
        continue;
      }
    }
    if (Spent(view) >= settings_.trials) break;
    Trial t;
    t.number = next++;
    t.state = TrialState::kQueued;
    t.params = sampler_->Suggest(space_, view, t.number);
    actions.push_back({StudyAction::Kind::kSubmit, t.number, t.params});
    view.push_back(std::move(t));
    ++active;
  }
  return actions;
}

PruneDecision StudyPlanner::OnEpoch(const std::vector<Trial>& trials, const Trial& trial) const {
  if (pruner_ == nullptr) return PruneDecision::kContinue;
  return pruner_->Decide(trials, trial);
}

bool StudyPlanner::Finished(const std::vector<Trial>& trials) const {
  for (const auto& t : trials) {
    if (t.state == TrialState::kQueued || t.state == TrialState::kRunning) return false;
  }
  if (Spent(trials) < settings_.trials) return false;
  return settings_.pruner != "asha" || !AshaPromotion(trials, Asha()).has_value();
}

}  // namespace kestrel::tune
