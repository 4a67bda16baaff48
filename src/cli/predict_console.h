// What both predict commands (`kestrel predict`, `kestrel-deploy predict`)
// print while they run (docs/cli.md "Predict sources"): a progress line on
// stderr with frames/s — rewritten in place on a terminal, one line per
// `every` images/frames when piped — and, with stream=true, each image's or
// frame's result on stdout as it is predicted (a summary line, or one
// compact JSON object per line with --json). Torch-free.
#pragma once

#include <atomic>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "app/predict.h"
#include "cli/cli.h"

namespace kestrel::cli {

class PredictConsole {
 public:
  // `progress`: where the progress goes (stderr); `tty`: rewrite one line
  // ("\r", at most every 0.2 s) instead of printing lines; `every`: piped,
  // one line per `every` images/frames (and the last). `results`: stdout,
  // for stream=true; `json`: results as JSON lines.
  PredictConsole(std::ostream& progress, bool tty, int64_t every, std::ostream& results, bool stream,
                 bool json);

  // The app::PredictSink to pass to app::Predict (borrows *this).
  app::PredictSink Sink();
  // Ends the progress line (a newline after the last "\r" update).
  void Finish();

  // `tty` for a command: stderr is a terminal and --json is off.
  static bool IsTerminal(const Context& ctx);

 private:
  void OnImage(const app::PredictedImage& image, const app::PredictProgress& progress,
               const std::vector<std::string>& names);

  std::ostream& progress_;
  bool tty_;
  int64_t every_;
  std::ostream& results_;
  bool stream_, json_;
  double last_draw_s_ = -1;
  bool drawn_ = false;  // a "\r" line is on the terminal
  app::PredictProgress last_;
  int64_t printed_at_ = 0;  // progress.done of the last piped line
};

// The number of images/frames per piped progress line.
inline constexpr int64_t kPredictProgressEvery = 100;

// SIGINT (Ctrl-C) and SIGTERM end a running predict cleanly: the first one
// raises the returned flag (pass it as app::PredictRequest::stop), so the
// run finishes its batch, closes the annotated video and moves the run
// folder in, and the command exits app::kPredictExitStopped; a second one
// ends the process as the signal does. Process-wide, like `kestrel train`'s
// handlers; the predict commands install them right before they run.
const std::atomic<bool>* InstallPredictStopHandlers();

}  // namespace kestrel::cli
