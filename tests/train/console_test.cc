// The training console (issue 28 item 9): on a terminal the progress line is
// a bar with percent, elapsed and remaining time and the rate
// (FormatProgressBar, redrawn with '\r' by the trainer when TrainHooks::tty);
// piped, FormatProgress's one line per epoch as before. After each epoch the
// validation table's "all" row only; the per-class rows once at the end, as
// the reference trainer prints them.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "eval/metrics.h"
#include "train/progress.h"
#include "train/validator.h"

namespace kestrel::train {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(TrainConsoleTest, TerminalBarShowsPercentElapsedRemainingAndRate) {
  ProgressLine p{3, 10, 9, 30, 1.23456, 2.34567, 1.11111, 45, 2.1, 100};
  EXPECT_EQ(
      FormatProgressBar(p, 4.3),
      "epoch 3/10 [######--------------]  30% 9/30 0:04<0:10 2.10 it/s  box 1.2346  cls 2.3457  dfl 1.1111  "
      "inst 45");
  p.batch = 30;
  EXPECT_NE(FormatProgressBar(p, 3725).find("[####################] 100% 30/30 1:02:05<0:00"),
            std::string::npos)
      << FormatProgressBar(p, 3725);
  p.batch = 0;
  p.it_per_s = 0;  // before the first batch: no rate, no estimate
  EXPECT_NE(FormatProgressBar(p, 0).find("[--------------------]   0% 0/30 0:00<0:00 0.00 it/s"),
            std::string::npos)
      << FormatProgressBar(p, 0);
  // The piped line stays the one-line-per-epoch format.
  EXPECT_EQ(FormatProgress(p).rfind("epoch 3/10  batch 0/30", 0), 0u) << FormatProgress(p);
}

TEST(TrainConsoleTest, EpochTableHasTheAllRowOnlyThePerClassRowsComeAtTheEnd) {
  eval::EvalResult r;
  r.images = 8;
  r.instances = 32;
  r.map50 = 0.5;
  for (int c = 0; c < 3; ++c) {
    eval::ClassMetrics m;
    m.class_id = c;
    m.name = "class" + std::to_string(c);
    m.instances = 10 + c;
    r.classes.push_back(m);
  }
  const std::vector<std::string> epoch = Lines(FormatValidationTable(r, /*per_class=*/false));
  ASSERT_EQ(epoch.size(), 2u);
  EXPECT_NE(epoch[0].find("mAP50-95"), std::string::npos);
  EXPECT_NE(epoch[1].find("all"), std::string::npos);
  const std::vector<std::string> end = Lines(FormatValidationTable(r));
  ASSERT_EQ(end.size(), 5u);
  EXPECT_EQ(end[0], epoch[0]);
  EXPECT_EQ(end[1], epoch[1]);
  EXPECT_NE(end[4].find("class2"), std::string::npos);
}

}  // namespace
}  // namespace kestrel::train
