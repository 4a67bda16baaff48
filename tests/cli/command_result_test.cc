// cli::CommandResult and cli::Callback (cli.h "Command bodies"): a callback
// body's result becomes the exit code and output Fail() and Emit() give, in
// a real CLI::App parse. In-process (unit tier): stdout and stderr are
// captured by swapping std::cout's and std::cerr's buffers.
#include <gtest/gtest.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.h"

namespace kestrel::cli {
namespace {

struct Captured {
  int exit_code = -1;
  std::string out, err;
};

// Parses `args` (after the program name) against an app whose one command
// `run` has `body` as its callback (through Callback); `json`: the --json mode.
Captured RunCommand(bool json, std::function<CommandResult()> body) {
  Context ctx;
  ctx.json = json;
  int exit_code = kExitOk;
  CLI::App app{"test"};
  CLI::App* cmd = app.add_subcommand("run", "the command under test");
  cmd->callback(Callback(ctx, &exit_code, std::move(body)));
  std::ostringstream out, err;
  std::streambuf* old_out = std::cout.rdbuf(out.rdbuf());
  std::streambuf* old_err = std::cerr.rdbuf(err.rdbuf());
  std::vector<std::string> argv = {"run"};
  app.parse(argv);  // CLI11 takes the reversed list; one word is the same
  std::cout.rdbuf(old_out);
  std::cerr.rdbuf(old_err);
  return {exit_code, out.str(), err.str()};
}

TEST(CommandResult, OutputPrintsTextOrTheJsonDocumentAndExitsZero) {
  auto body = []() -> CommandResult { return Output{"3 jobs", {{"ok", true}, {"jobs", 3}}}; };
  Captured text = RunCommand(false, body);
  EXPECT_EQ(text.exit_code, kExitOk);
  EXPECT_EQ(text.out, "3 jobs\n");
  EXPECT_EQ(text.err, "");
  Captured json = RunCommand(true, body);
  EXPECT_EQ(json.exit_code, kExitOk);
  EXPECT_EQ(nlohmann::json::parse(json.out), (nlohmann::json{{"ok", true}, {"jobs", 3}}));
}

TEST(CommandResult, OutputCarriesItsOwnExitCode) {
  Captured c = RunCommand(false, [] { return CommandResult(Output{"1 file skipped", {}, kExitFailure}); });
  EXPECT_EQ(c.exit_code, kExitFailure);
  EXPECT_EQ(c.out, "1 file skipped\n");
}

TEST(CommandResult, CommandLineInvalidArgumentIsAUsageErrorExit2) {
  const Status bad = Status::InvalidArgument("--limit must be > 0", {"command line", 0, "limit"});
  Captured text = RunCommand(false, [bad]() -> CommandResult { return bad; });
  EXPECT_EQ(text.exit_code, kExitUsage);
  EXPECT_EQ(text.out, "");
  EXPECT_EQ(text.err, "error: " + bad.ToString() + "\n");
  Captured json = RunCommand(true, [bad]() -> CommandResult { return bad; });
  EXPECT_EQ(json.exit_code, kExitUsage);
  const auto doc = nlohmann::json::parse(json.out);
  EXPECT_EQ(doc["ok"], false);
  EXPECT_EQ(doc["error"]["code"], "usage");
  EXPECT_EQ(doc["error"]["message"], "--limit must be > 0");
  EXPECT_EQ(doc["error"]["file"], "command line");
  EXPECT_EQ(doc["error"]["field"], "limit");
}

TEST(CommandResult, OtherErrorsExit1WithTheirCodeName) {
  // An InvalidArgument located in a file is the data's fault, not the command line's.
  for (const Status& s :
       {Status::NotFound("no job 7"), Status::InvalidArgument("bad", {"data.yaml", 3, "nc"})}) {
    Captured c = RunCommand(true, [s]() -> CommandResult { return s; });
    EXPECT_EQ(c.exit_code, kExitFailure) << s.ToString();
    EXPECT_EQ(c.err, "error: " + s.ToString() + "\n");
    EXPECT_EQ(nlohmann::json::parse(c.out)["error"]["code"], StatusCodeName(s.Code()));
  }
}

TEST(CommandResult, ErrorsReturnedThroughTheStatusMacrosAreReported) {
  auto body = []() -> CommandResult {
    Result<int> missing = Status::NotFound("no model 'm'");
    KESTREL_ASSIGN_OR_RETURN(int v, missing);
    return Output{std::to_string(v), {}};
  };
  Captured c = RunCommand(false, body);
  EXPECT_EQ(c.exit_code, kExitFailure);
  EXPECT_EQ(c.out, "");
  EXPECT_EQ(c.err, "error: no model 'm'\n");
}

TEST(CommandResult, ResultOfOutputIsItsErrorOrItsOutput) {
  Captured ok = RunCommand(false, [] { return CommandResult(Result<Output>(Output{"fine", {}})); });
  EXPECT_EQ(ok.exit_code, kExitOk);
  EXPECT_EQ(ok.out, "fine\n");
  Captured bad = RunCommand(false, [] { return CommandResult(Result<Output>(Status::IoError("disk"))); });
  EXPECT_EQ(bad.exit_code, kExitFailure);
  EXPECT_EQ(bad.err, "error: disk\n");
}

TEST(CommandResult, FailedKeepsAnExplicitExitCode) {
  // A bad key=value in a file-less option set: a usage error without the command-line location.
  Captured c =
      RunCommand(true, [] { return CommandResult::Failed(Status::InvalidArgument("bad key"), kExitUsage); });
  EXPECT_EQ(c.exit_code, kExitUsage);
  EXPECT_EQ(nlohmann::json::parse(c.out)["error"]["code"], "usage");
  // An OK status stays a success whatever the code.
  Captured ok = RunCommand(false, [] { return CommandResult::Failed(Status(), kExitUsage); });
  EXPECT_EQ(ok.exit_code, kExitOk);
}

TEST(CommandResult, ReportedPrintsNothingMore) {
  Captured c = RunCommand(true, [] {
    std::cerr << "error: reported by the body\n";
    return CommandResult::Reported(kExitFailure);
  });
  EXPECT_EQ(c.exit_code, kExitFailure);
  EXPECT_EQ(c.out, "");
  EXPECT_EQ(c.err, "error: reported by the body\n");
}

TEST(CommandResult, DefaultAndOkStatusAreSilentSuccess) {
  Captured a = RunCommand(true, [] { return CommandResult(); });
  EXPECT_EQ(a.exit_code, kExitOk);
  EXPECT_EQ(a.out, "");
  Captured b = RunCommand(true, []() -> CommandResult { return Status(); });
  EXPECT_EQ(b.exit_code, kExitOk);
  EXPECT_EQ(b.out + b.err, "");
}

}  // namespace
}  // namespace kestrel::cli
