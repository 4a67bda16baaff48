#include "app/train_run.h"

#include "app/backends.h"

namespace kestrel::app {

Result<train::TrainSummary> RunTraining(const train::TrainOptions& options, const train::TrainHooks& hooks) {
  const Backends& backends = ProgramBackends();
  if (!backends.train) {
    return Status::FailedPrecondition("training runs in kestrel-torch (LibTorch); " + backends.program +
                                      " has no train backend");
  }
  return backends.train(options, hooks);
}

std::string TrainSummaryText(const train::TrainSummary& s) {
  std::string text = std::string("\n") + train::ExitReasonName(s.reason) + ": " + s.message + "\n" +
                     "run directory: " + s.run_dir + "\n";
  if (s.validated) {
    text += "best epoch " + std::to_string(s.best_epoch) + ": mAP50 " + std::to_string(s.best_map50) +
            ", mAP50-95 " + std::to_string(s.best_map5095) + "\n";
  } else {
    text += "best epoch: not validated (" + s.not_validated +
            "); best.safetensors is the epoch with the lowest train loss (" + std::to_string(s.best_epoch) +
            "), last.safetensors the final weights\n";
  }
  for (const auto& w : s.warnings) text += "warning: " + w + "\n";
  text += "weights: " + s.run_dir + "/weights/best.safetensors, " + s.run_dir +
          "/weights/last.safetensors (resume: " + s.run_dir + "/weights/last.ckpt)\n";
  return text;
}

}  // namespace kestrel::app
