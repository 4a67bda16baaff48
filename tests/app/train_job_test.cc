// The train kind's runner (app/train_job.h) against the CLI: `kestrel train
// --job --json` must print exactly the application layer's JSON view of the
// same attempt (the CLI is parse -> call -> print; a server calling the
// same functions cannot drift from it). predict's: tests/app/predict_test.cc.
#include "app/train_job.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../cli/cli_fixture.h"
#include "core/env.h"

namespace kestrel::app {
namespace {

namespace fs = std::filesystem;

class TrainJobTest : public testing::KestrelCliTest {};

TEST_F(TrainJobTest, JobAttemptOutcomeIsWhatTheCliPrints) {
  // No such job: bad_config (exit 2), reported on the progress channel first.
  std::vector<std::string> progress;
  std::ostringstream log;
  AttemptIo io;
  io.progress = [&](const std::string& l) { progress.push_back(l); };
  io.out = &log;
  bool armed = false;
  io.before_training = [&] { armed = true; };
  JobKindTable kinds = BuiltinJobKinds();
  ASSERT_TRUE(kinds.SetRunner("train", RunTrainAttempt).IsOk());
  const AttemptOutcome o = RunAttempt(kinds, "train", (dir_ / "home").string(), 42, 1, io);
  EXPECT_EQ(o.exit_code, kTrainExitBadConfig);
  EXPECT_EQ(o.failure, FailureReason::kBadConfig);
  EXPECT_EQ(o.error.Code(), StatusCode::kNotFound);
  EXPECT_FALSE(armed) << "signal handlers armed before any training";
  ASSERT_EQ(progress.size(), 2u);
  EXPECT_EQ(progress[0], "stage=data job=42 attempt=1");
  EXPECT_EQ(progress[1], "reason=bad_config");
  const nlohmann::json aj = AttemptOutcomeJson(42, 1, o);
  EXPECT_EQ(aj["error"]["code"], "usage");

  testing::CliRun cli = Kestrel("--json train --job 42 --attempt 1");
  EXPECT_EQ(cli.code, kTrainExitBadConfig);
  EXPECT_EQ(Json(cli), aj);

  AttemptOutcome ok;
  ok.result.best = "b";
  ok.result.map50 = 0.5;
  EXPECT_EQ(AttemptOutcomeJson(7, 2, ok),
            (nlohmann::json{{"ok", true}, {"job_id", 7}, {"result", {{"best", "b"}, {"map50", 0.5}}}}));
}

}  // namespace
}  // namespace kestrel::app
