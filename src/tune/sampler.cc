#include "tune/sampler.h"

#include <string>

#include "tune/rng.h"
#include "tune/tpe.h"

namespace kestrel::tune {

const char* TrialStateName(TrialState s) {
  switch (s) {
    case TrialState::kQueued:
      return "queued";
    case TrialState::kRunning:
      return "running";
    case TrialState::kSucceeded:
      return "succeeded";
    case TrialState::kPruned:
      return "pruned";
    case TrialState::kFailed:
      return "failed";
    case TrialState::kInfraFailed:
      return "infra-failed";
  }
  return "?";
}

std::vector<double> RandomSampler::Suggest(const SearchSpace& space, const std::vector<Trial>& /*history*/,
                                           int64_t number) const {
  TuneRng rng(TrialSeed(seed_, number));
  std::vector<double> out;
  out.reserve(space.params.size());
  for (const auto& p : space.params) {
    if (p.kind == ParamKind::kCategorical) {
      out.push_back(static_cast<double>(rng.UniformInt(p.choices.size())));
    } else {
      const double lo = p.InternalLow(), hi = p.InternalHigh();
      out.push_back(p.Snap(lo + (hi - lo) * rng.Uniform01()));
    }
  }
  return out;
}

Result<std::unique_ptr<Sampler>> MakeSampler(const std::string& name, const TpeOptions& options) {
  if (name == "tpe") {
    if (!(options.bad_prior_share >= 0 && options.bad_prior_share < 1)) {
      return Status::InvalidArgument(
          "bad_prior_share=" + std::to_string(options.bad_prior_share) + ": expected a share in [0, 1)",
          {"", 0, "bad_prior_share"});
    }
    if (!(options.prior_weight > 0)) {
      return Status::InvalidArgument(
          "prior_weight=" + std::to_string(options.prior_weight) + ": expected > 0", {"", 0, "prior_weight"});
    }
    if (options.ei_candidates < 1 || options.startup_trials < 0) {
      return Status::InvalidArgument("ei_candidates must be >= 1 and startup_trials >= 0",
                                     {"", 0, options.ei_candidates < 1 ? "ei_candidates" : "startup_trials"});
    }
    return std::unique_ptr<Sampler>(std::make_unique<TpeSampler>(options));
  }
  if (name == "random") return std::unique_ptr<Sampler>(std::make_unique<RandomSampler>(options.seed));
  return Status::InvalidArgument("sampler=" + name + ": expected tpe or random", {"", 0, "sampler"});
}

}  // namespace kestrel::tune
