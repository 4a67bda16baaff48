#include "tune/sampler.h"

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
  if (name == "tpe") return std::unique_ptr<Sampler>(std::make_unique<TpeSampler>(options));
  if (name == "random") return std::unique_ptr<Sampler>(std::make_unique<RandomSampler>(options.seed));
  return Status::InvalidArgument("sampler=" + name + ": expected tpe or random", {"", 0, "sampler"});
}

}  // namespace kestrel::tune
