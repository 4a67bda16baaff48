// predict's console output while it runs (predict_console.h).
#include "cli/predict_console.h"

#include <signal.h>
#include <unistd.h>

#include "core/json.h"

namespace kestrel::cli {

PredictConsole::PredictConsole(std::ostream& progress, bool tty, int64_t every, std::ostream& results,
                               bool stream, bool json)
    : progress_(progress),
      tty_(tty),
      every_(every < 1 ? 1 : every),
      results_(results),
      stream_(stream),
      json_(json) {}

bool PredictConsole::IsTerminal(const Context& ctx) { return !ctx.json && isatty(STDERR_FILENO) != 0; }

app::PredictSink PredictConsole::Sink() {
  return [this](const app::PredictedImage& image, const app::PredictProgress& progress,
                const std::vector<std::string>& names) { OnImage(image, progress, names); };
}

void PredictConsole::OnImage(const app::PredictedImage& image, const app::PredictProgress& p,
                             const std::vector<std::string>& names) {
  last_ = p;
  if (stream_) {
    // The line on a terminal is cleared first so results and progress do not mix.
    if (drawn_) progress_ << "\r\033[K" << std::flush;
    drawn_ = false;
    if (json_) {
      results_ << DumpJson(app::PredictedImageJson(image, names)) << '\n' << std::flush;
    } else {
      results_ << app::PredictedImageLine(image, names) << '\n' << std::flush;
    }
  }
  if (tty_) {
    if (last_draw_s_ < 0 || p.elapsed_s - last_draw_s_ >= 0.2 || p.done == p.total) {
      progress_ << '\r' << app::PredictProgressText(p) << "\033[K" << std::flush;
      last_draw_s_ = p.elapsed_s;
      drawn_ = true;
    }
  } else if (p.done - printed_at_ >= every_) {
    progress_ << app::PredictProgressText(p) << '\n' << std::flush;
    printed_at_ = p.done;
  }
}

void PredictConsole::Finish() {
  if (tty_ && last_.done > 0) {
    progress_ << '\r' << app::PredictProgressText(last_) << "\033[K\n" << std::flush;
  } else if (!tty_ && last_.done > printed_at_ && last_.done > every_) {
    // Piped: the last count, unless it was just printed or the run was
    // shorter than one line's worth.
    progress_ << app::PredictProgressText(last_) << '\n' << std::flush;
  }
  drawn_ = false;
}

namespace {

std::atomic<bool> g_predict_stop{false};

extern "C" void OnPredictStopSignal(int sig) {
  // Only async-signal-safe calls: a second signal while the run winds down
  // takes the default action (the user insists).
  if (g_predict_stop.exchange(true)) {
    signal(sig, SIG_DFL);
    raise(sig);
  }
}

}  // namespace

const std::atomic<bool>* InstallPredictStopHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnPredictStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  return &g_predict_stop;
}

}  // namespace kestrel::cli
