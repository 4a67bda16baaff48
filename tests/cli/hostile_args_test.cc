// Every `kestrel` command with hostile arguments (issue 10): numbers past
// int64, negative counts, bytes that are not UTF-8, NAME@v99999999999999999999,
// missing files, /etc/passwd as weights, unknown keys and commands, empty
// strings. Whatever the input, the process must end by itself with a status
// below 128 (an error is 1 or 2, never an abort), and with --json stdout must
// be exactly one JSON document ({"ok": false, "error": {...}} for errors).
// The command list is read from `kestrel --json --help` and each group's
// help, so a new command without hostile cases fails the coverage test.
//
// The program runs with an argv vector (fork/exec, no shell), so arguments
// can hold any byte.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "hostile_args_fixture.h"

namespace kestrel::testing {
namespace {

TEST_F(HostileArgsTest, EveryCommandFailsCleanlyOnHostileArguments) {
  known_ = ListCommands();
  for (const char* must : {"dataset",
                           "dataset synth",
                           "dataset validate",
                           "dataset import",
                           "dataset list",
                           "dataset show",
                           "dataset verify",
                           "dataset diff",
                           "dataset export",
                           "dataset preview",
                           "val",
                           "submit",
                           "worker",
                           "jobs",
                           "jobs list",
                           "jobs show",
                           "jobs logs",
                           "jobs cancel",
                           "jobs retry",
                           "stats",
                           "breaker",
                           "breaker reset",
                           "breaker show",
                           "workers",
                           "workers drain",
                           "workers undrain",
                           "workers unquarantine",
                           "jobs diff-env",
                           "doctor",
                           "webhooks",
                           "webhooks add",
                           "webhooks list",
                           "webhooks remove",
                           "webhooks test"}) {
    EXPECT_TRUE(known_.count(must)) << "`kestrel --help` no longer lists '" << must << "'";
  }
  const std::string X = kNotUtf8, H = kHugeInt;
  const std::vector<std::vector<std::string>> cases = {
      // unknown or missing commands
      {"frobnicate"},
      {X},
      {"dataset", X},
      {"jobs", "frobnicate"},
      {"dataset"},
      {"jobs"},
      {"webhooks"},
      // dataset
      {"dataset", "synth", "{work}/s", "--images", H},
      {"dataset", "synth", "{work}/s", "--imgsz", "1e400"},
      {"dataset", "synth", "{work}/s", "--seed", H},
      {"dataset", "synth", "{work}/s", "--val-fraction", "nan"},
      {"dataset", "validate", "{work}/" + X},
      {"dataset", "validate", "{ds}", "--format", "xml"},
      {"dataset", "validate", "{ds}", X + "=1"},
      {"dataset", "validate", ""},
      {"dataset", "import", "{ds}"},
      {"dataset", "import", "{ds}", "--name", X},
      {"dataset", "import", "{ds}", "--name", "e", "seed=" + H},
      {"dataset", "import", "{ds}", "--name", "e", "val_ratio=nan"},
      {"dataset", "list", "extra"},
      {"dataset", "show", "d@v" + H},
      {"dataset", "show", "d@v-1"},
      {"dataset", "show", "d@" + X},
      {"dataset", "show", ""},
      {"dataset", "verify", "d@v" + H},
      {"dataset", "verify", X},
      {"dataset", "import", "{ds}", "--name", "e", "--data-mode", "symlink"},
      {"dataset", "import", "{ds}", "--name", "e", "data_mode=" + X},
      {"dataset", "diff", "d@v" + H, "d@v1"},
      {"dataset", "diff", "d", X},
      {"dataset", "export", "d@v" + H, "--format", "yolo", "{work}/o"},
      {"dataset", "export", "d", "--format", X, "{work}/o"},
      {"dataset", "preview", "d@v" + H, "out={work}/p.jpg"},
      {"dataset", "preview", "d", "images=" + H},
      {"dataset", "merge", "d@v" + H, "corrections={ds}"},
      {"dataset", "merge", "d", X + "=1"},
      {"dataset", "merge", "d"},
      {"dataset", "predict", "d@v" + H, "model=m", "format=cvat"},
      {"dataset", "predict", "d", "model=m", "format=" + X},
      // val
      {"val"},
      {"val", "data=d@v" + H, "predictions={ds}"},
      {"val", "data=d", "predictions={ds}", "conf=1e999"},
      {"val", "data=d", "model=/etc/passwd"},
      {"val", "data=" + X, "predictions={ds}"},
      {"val", "data=d", "predictions={ds}", "device=gpu"},
      // submit
      {"submit", "data=d@v" + H, "model=n", "epochs=1"},
      {"submit", "data=d", "epochs=" + H},
      {"submit", "data=d", "lr0=nan"},
      {"submit", "data=d", X + "=1"},
      {"submit", "data=d", "gpu_mem=" + H, "device=0"},
      {"submit", "data=d", "backoff=1e300"},
      {"submit", "data="},
      // submit kind=export: `kestrel export`'s checks at submit, nothing stored
      {"submit", "kind=export"},
      {"submit", "kind=export", "model=/etc/passwd"},
      {"submit", "kind=export", "model=m@v" + H},
      {"submit", "kind=export", "model=m", "format=" + X},
      {"submit", "kind=export", "model=m", "imgsz=" + H},
      {"submit", "kind=export", "model=m", "opset=" + H},
      {"submit", "kind=export", "model=m", "output={work}/o.onnx"},
      {"submit", "kind=export", "model=m", "min_map50=0.5"},
      {"submit", "kind=export", "model=m", "device=0", "gpu_mem=1"},
      {"submit", "kind=export", "model=m", "epochs=3"},
      // tune: a study's keys refused before any study or job is stored
      {"tune"},
      {"tune", "data=d@v" + H, "model=n"},
      {"tune", "data=d", "model=n", "trials=" + H},
      {"tune", "data=d", "model=n", "parallel=0"},
      {"tune", "data=d", "model=n", "sampler=" + X},
      {"tune", "data=d", "model=n", "pruner=" + X},
      {"tune", "data=d", "model=n", "space={work}/nosuch.yaml"},
      {"tune", "data=d", "model=n", "lr0=nan"},
      {"tune", "show", "nosuch"},
      {"tune", "show", X},
      {"tune", "show", "nosuch", "--plots", "{work}/p"},
      {"tune", "list", "extra"},
      {"tune", "stop", "nosuch"},
      {"tune", "best", "nosuch", "--save-template", "t"},
      // worker (every case invalid: a valid worker would run)
      {"worker", "--slots", H, "--exit-when-idle"},
      {"worker", "--devices", "gpu:" + H + ":1", "--exit-when-idle"},
      {"worker", "--devices", X, "--exit-when-idle"},
      {"worker", "--heartbeat-s", "1e300", "--exit-when-idle"},
      {"worker", "--grace-s", "nan", "--exit-when-idle"},
      {"worker", "--max-jobs", H, "--exit-when-idle"},
      {"worker", "--usage-s", "0.5", "--exit-when-idle"},
      {"worker", "--usage-s", "nan", "--exit-when-idle"},
      {"worker", "--usage-s", H, "--exit-when-idle"},
      // serve (every case invalid: a valid serve would run until SIGTERM)
      {"serve", "--port", H},
      {"serve", "--port", "70000"},
      {"serve", "--port", "-1"},
      {"serve", "--host", X, "--port", "0"},
      // token (nothing valid: no token is made, listed or revoked)
      {"token"},
      {"token", "create"},
      {"token", "create", "--name", X},
      {"token", "create", "--name", ""},
      {"token", "create", "--name", std::string(200, 'a')},
      {"token", "list", "extra"},
      {"token", "revoke", X},
      {"token", "revoke", ""},
      {"token", "revoke", "nope"},
      {"serve", "--workers", H},
      {"serve", "--workers", "-1"},
      {"serve", "--workers", "257"},
      {"serve", "--data-root", X, "--port", "0"},
      {"serve", "--data-root", "", "--port", "0"},
      {"serve", "--web-dir", X, "--port", "0"},
      {"serve", "--max-upload-mb", H, "--port", "0"},
      {"serve", "--max-upload-mb", "0", "--port", "0"},
      {"serve", "--max-upload-mb", "-5", "--port", "0"},
      {"serve", "--max-upload-mb", "1e9", "--port", "0"},
      {"serve", "--max-upload-mb", "9223372036854775807", "--port", "0"},
      // serve's Label Studio ML backend flags (refused before it listens)
      {"serve", "--ls-model", X, "--port", "0"},
      {"serve", "--ls-model", "nosuch@production", "--port", "0"},
      {"serve", "--ls-model", "", "--ls-train-template", "t", "--port", "0"},
      {"serve", "--ls-train-after", "0", "--port", "0"},
      {"serve", "--ls-train-after", H, "--port", "0"},
      {"serve", "--ls-from-name", X, "--port", "0"},
      {"serve", "--ls-to-name", "", "--port", "0"},
      // jobs
      {"jobs", "list", "--state", X},
      {"jobs", "list", "--limit", H},
      {"jobs", "list", "--state", "queued,,bogus"},
      {"jobs", "list", "--kind", X},
      {"jobs", "list", "--priority", "urgent"},
      {"jobs", "list", "--dataset", "nosuch@v" + H},
      {"jobs", "list", "--dataset", "../" + X},
      {"jobs", "list", "--sort", "id; DROP TABLE jobs"},
      {"jobs", "list", "--order", "sideways"},
      {"jobs", "list", "--before", H},
      {"jobs", "list", "--before", "-1"},
      {"jobs", "list", "--before", "424242"},
      {"jobs", "list", "--offset", "-5"},
      {"jobs", "show", H},
      {"jobs", "show", "-1"},
      {"jobs", "show", X},
      {"jobs", "logs", "1", "--attempt", H},
      {"jobs", "logs", X},
      {"jobs", "samples", X},
      {"jobs", "samples", "-1"},
      {"jobs", "samples", "424242"},
      {"jobs", "samples", "1", "--epoch", H},
      {"jobs", "samples", "1", "--epoch", "0"},
      {"jobs", "samples", "1", "--epoch", "../" + X},
      {"jobs", "cancel", H},
      {"jobs", "retry", X},
      // jobs rename|tag|note, list --search (issue 33): refused naming the field, nothing stored
      {"jobs", "rename", X, "n"},
      {"jobs", "rename", "1", ""},
      {"jobs", "rename", "1", X},
      {"jobs", "rename", "424242", "n"},
      {"jobs", "tag", "1", "has space"},
      {"jobs", "tag", "1", X},
      {"jobs", "tag", H, "t"},
      {"jobs", "note", "-1", "x"},
      {"jobs", "note", "1", std::string(9000, 'a')},
      {"jobs", "note", "1", X},
      {"jobs", "list", "--search", X},
      // stats, breaker
      {"stats", X},
      {"breaker"},
      {"breaker", "reset", "extra"},
      {"breaker", "show", X},
      {"workers", X},
      {"workers", "--limit", H},
      // drain, quarantine, environments (issue 31)
      {"workers", "drain"},
      {"workers", "drain", X},
      {"workers", "drain", ""},
      {"workers", "undrain", std::string(9000, 'h')},
      {"workers", "unquarantine", X},
      {"workers", "unquarantine", ""},
      {"worker", "--quarantine-after", "0", "--exit-when-idle"},
      {"worker", "--quarantine-after", H, "--exit-when-idle"},
      {"worker", "--host", X, "--max-jobs", "-1"},
      // doctor (issue 31): refused before any check runs
      {"doctor", "extra"},
      {"doctor", "--devices", X},
      {"doctor", "--devices", ""},
      {"doctor", "--devices", "gpu:" + H},
      {"doctor", "--max-skew-s", "nan"},
      {"doctor", "--max-skew-s", H},
      {"doctor", "--min-free-gb", X},
      {"doctor", "--min-free-gb", "-1"},
      {"worker", "--skip-doctor", X},
      {"jobs", "diff-env", "1"},
      {"jobs", "diff-env", X, "1"},
      {"jobs", "diff-env", "1:x", "1"},
      {"jobs", "diff-env", H, "1:" + H},
      // gc, du, the worker's watermark
      {"gc", X},
      {"gc", "--grace-s", H},
      {"gc", "--grace-s", "-1"},
      {"du", "extra"},
      {"worker", "--min-free-gb", "nan", "--exit-when-idle"},
      {"worker", "--min-free-gb", "-1", "--exit-when-idle"},
      // webhooks
      {"webhooks", "add", X},
      {"webhooks", "add", ""},
      {"webhooks", "list", "extra"},
      {"webhooks", "remove", X},
      {"webhooks", "test", X},
      {"webhooks", "test", "http://127.0.0.1:9/", "--secret", "s", "--timeout-ms", H},
      {"webhooks", "test", "http://127.0.0.1:9/", "--secret", "s", "--timeout-ms", "300"},
      // models (the registry is empty: every reference is unknown)
      {"models"},
      {"models", "list", "extra"},
      {"models", "show", "d@v" + H},
      {"models", "show", X},
      {"models", "show", ""},
      {"models", "tag", "x@v1", X},
      {"models", "untag", "nosuch@v1", "candidate"},
      {"models", "promote", "d@v" + H},
      {"models", "delete", X},
      {"models", "register", "/etc/passwd", "--data", "d"},
      {"models", "register", "--job", H},
      {"models", "register", "--job", "5"},
      // template (none saved: every reference is unknown; invalid keys are refused as submit refuses them)
      {"template"},
      {"template", "save", X, "epochs=1"},
      {"template", "save", "t", "epochs=" + H},
      {"template", "save", "t", X + "=1"},
      {"template", "save", "t", "lr0=nan"},
      {"template", "save", "t"},
      {"template", "show", "t@v" + H},
      {"template", "show", X},
      {"template", "show", ""},
      {"template", "list", X},
      {"template", "diff", "job:" + H, "t"},
      {"template", "diff", "t", X},
      // evaluations (no val job ran: every id is unknown)
      {"evaluations"},
      {"evaluations", "list", "--model", X},
      {"evaluations", "list", "--dataset", "d@v" + H},
      {"evaluations", "list", "--dataset", "../" + X},
      {"evaluations", "list", "--split", X},
      {"evaluations", "list", "--limit", H},
      {"evaluations", "list", "--offset", "-1"},
      {"evaluations", "show", H},
      {"evaluations", "show", "-1"},
      {"evaluations", "show", X},
      {"evaluations", "show", "7"},
      {"evaluations", "images", "1", "--filter", X},
      {"evaluations", "images", "1", "--limit", H},
      {"evaluations", "images", "1", "--sha", X},
      {"evaluations", "images", X},
      {"evaluations", "confusion", "1", "--gt", H, "--pred", "0"},
      {"evaluations", "confusion", "1", "--gt", "0"},
      {"evaluations", "confusion", "1", "--gt", "-1", "--pred", "0"},
      {"evaluations", "compare", "1", H},
      {"evaluations", "compare", "1"},
      {"evaluations", "compare", X, "2"},
  };
#ifdef KESTREL_CLI_WITH_TORCH
  const std::vector<std::vector<std::string>> torch_cases = {
      // fingerprint (the worker's environment, issue 31): takes no arguments
      {"fingerprint", "extra"},
      {"fingerprint", "--bogus"},
      {"fingerprint", X},
      {"fingerprint", "--selftest", X},  // one case: each starts kestrel-torch (~1 s)
      // dataset audit: refused before the model runs or anything is written
      {"dataset", "audit"},
      {"dataset", "audit", "d"},
      {"dataset", "audit", "d@v" + H, "model=m"},
      {"dataset", "audit", "d", "model=/etc/passwd"},
      {"dataset", "audit", "d", "model=m", "conf=" + X},
      {"dataset", "audit", "d", "model=m", "top=-1"},
      {"dataset", "audit", "d", "model=m", "split=" + X},
      {"dataset", "audit", "d", "model=m", "loose_iou=0.9"},
      {"dataset", "audit", "d", "e", "model=m"},
      // dataset select: refused before the model runs or anything is written
      {"dataset", "select"},
      {"dataset", "select", "pool={ds}/images/train", "budget=2"},
      {"dataset", "select", "pool={ds}/images/train", "model=m"},
      {"dataset", "select", "pool={work}/" + X, "model=m", "budget=2"},
      {"dataset", "select", "pool=/etc/passwd", "model=m", "budget=2"},
      {"dataset", "select", "pool={ds}/images/train", "model=/etc/passwd", "budget=2"},
      {"dataset", "select", "pool={ds}/images/train", "model=m", "budget=" + H},
      {"dataset", "select", "pool={ds}/images/train", "model=m", "budget=2", "strategy=" + X},
      {"dataset", "select", "pool={ds}/images/train", "model=m", "budget=2", "format=" + X},
      {"dataset", "select", "pool={ds}/images/train", "model=m", "budget=2", "embedding=" + X},
      {"dataset", "select", "pool={ds}/images/train", "model=m", "budget=2", "strategy=diversity",
       "labelled=/etc/passwd"},
      {"dataset", "select", "pool={ds}/images/train", "model=m", "budget=2", "pre_conf=0.01"},
      {"dataset", "select", "pool={ds}/images/train", "model=m", "budget=2", "seed=-1"},
      // train: every case is refused before anything trains
      {"train"},
      {"train", "data=d@v" + H, "model=n", "epochs=1", "imgsz=64", "project={work}/runs"},
      {"train", "resume=/etc/passwd"},
      {"train", "data=d", "epochs=" + X},
      {"train", "data=d", "device=" + H},
      {"train", "data=d", "device=gpu"},
      {"train", "data=d", "device=cuda:" + X},
      {"train", "data=d", "device=0,1"},
      {"train", "data=d", "batch=0"},
      {"train", "data=d", "batch=-2"},
      {"train", "data=d", "amp=" + X},
      {"train", "--job", H, "--attempt", "1"},
      {"train", "--job", "12", "--attempt", "1"},
      // predict, compare
      {"predict"},
      {"predict", "model=/etc/passwd", "source={ds}/images/train"},
      {"predict", "model=m", "source={work}/" + X},
      {"predict", "model=m", "source={ds}", "imgsz=" + H},
      {"predict", "model=m", "source={ds}", "device=cuda:-1"},
      {"predict", "model=m", "source={ds}", "device=" + H},
      {"compare", "/etc/passwd", "/etc/passwd", "data=d"},
      {"compare", "a", "b", "data=d@v" + H},
      {"compare", "only-one", "data=d"},
      // export: refused before anything is written
      {"export"},
      {"export", "model=/etc/passwd", "format=onnx"},
      {"export", "model=m", "format=" + X},
      {"export", "model=m", "format=onnx", "opset=" + H},
      {"export", "model=m", "format=onnx", "imgsz=" + H},
      {"export", "model=m", "format=onnx", "half=" + X},
      {"export", "model=m", "format=onnx", "simplify=" + X},
      {"export", "model=m", "simplify=maybe"},
      // export int8=true: its keys refused before anything is calibrated or written
      {"export", "model=m", "int8=" + X},
      {"export", "model=m", "int8=true"},
      {"export", "model=m", "int8=true", "half=true", "data=d"},
      {"export", "model=m", "int8=true", "data=d", "calib=" + H},
      {"export", "model=m", "int8=true", "data=d", "calib=0"},
      {"export", "model=m", "int8=true", "data=d", "fraction=0"},
      {"export", "model=m", "int8=true", "data=d", "fraction=" + X},
      {"export", "model=m", "int8=true", "data=d", "fraction=nan"},
      {"export", "model=m", "int8=true", "data=d", "calib_method=" + X},
      {"export", "model=/etc/passwd", "int8=true", "data=d"},
      // export --job: an export job's attempt (what the worker runs)
      {"export", "--job", H, "--attempt", "1"},
      {"export", "--job", "12", "--attempt", "1"},
      {"export", "--job", "12"},
      {"export", "--job", "12", "--attempt", "1", "model=m"},
      // export data= (the mAP check's dataset): refused before anything is imported or written
      {"export", "model=m", "data=d@v" + H},
      {"export", "model=m", "data=" + X},
      {"export", "model=/etc/passwd", "data=d"},
      {"export", "model=m", "data={work}/nosuch/data.yaml"},
      {"export", "model=m", "imgsz=64,96", "data=d"},
      // export nms=true: its keys refused before anything is written
      {"export", "model=m", "nms=" + X},
      {"export", "model=m", "nms=true", "conf=" + X},
      {"export", "model=m", "nms=true", "conf=1"},
      {"export", "model=m", "nms=true", "conf=-0.1"},
      {"export", "model=m", "nms=true", "conf=nan"},
      {"export", "model=m", "nms=true", "iou=1.5"},
      {"export", "model=m", "nms=true", "iou=" + H},
      {"export", "model=m", "nms=true", "max_det=0"},
      {"export", "model=m", "nms=true", "max_det=" + H},
      {"export", "model=m", "nms=true", "int8=true", "data=d"},
      {"export", "model=/etc/passwd", "nms=true"},
  };
#endif
  for (const auto& c : cases) ExpectCleanFailure(c);
#ifdef KESTREL_CLI_WITH_TORCH
  for (const auto& c : torch_cases) ExpectCleanFailure(c);
#endif
  // Nothing hostile was stored or written.
  auto jobs = Json(Kestrel("--json jobs list"));
  EXPECT_EQ(jobs["jobs"].size(), 0u) << jobs.dump();
  EXPECT_EQ(Json(Kestrel("--json dataset list"))["datasets"].size(), 1u);
  EXPECT_EQ(Json(Kestrel("--json models list"))["models"].size(), 0u);
  EXPECT_EQ(Json(Kestrel("--json template list"))["templates"].size(), 0u);
  EXPECT_EQ(Json(Kestrel("--json token list"))["tokens"].size(), 0u);
  for (const char* p : {"s", "o", "p.jpg", "runs", "runs/detect"}) {
    EXPECT_FALSE(fs::exists(dir_ / p)) << p << " was written by a failing command";
  }
  for (const auto& e : fs::recursive_directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename().string().find(".kestrel-tmp"), std::string::npos) << e.path();
  }
  // Every command in the help got hostile arguments.
  for (const auto& cmd : known_) {
    EXPECT_TRUE(covered_.count(cmd)) << "no hostile case for `kestrel " << cmd << "`";
  }
}

}  // namespace
}  // namespace kestrel::testing
