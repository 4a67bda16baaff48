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
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "cli_fixture.h"

namespace kestrel::testing {
namespace {

namespace fs = std::filesystem;

const std::string kNotUtf8 = "\xFF\xFE";
const std::string kHugeInt = "99999999999999999999";

struct Ran {
  bool exited = false;  // false: killed by a signal (or by our timeout)
  int code = -1;        // exit status when exited
  int signal = 0;
  bool timed_out = false;
  std::string out, err;
};

class HostileArgsTest : public KestrelCliTest {
 protected:
  void SetUp() override {
    KestrelCliTest::SetUp();
    ASSERT_EQ(Kestrel("dataset synth ds --images 6 --imgsz 64 --seed 1").code, 0);
    ASSERT_EQ(Kestrel("dataset import ds --name d").code, 0);
  }

  // Runs kestrel with exactly these arguments (no shell) in the test folder.
  Ran Run(const std::vector<std::string>& args, int timeout_s = 120) {
    Ran r;
    int out_pipe[2], err_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) return r;
    const std::string home = (dir_ / "home").string();
    const std::string work = dir_.string();
    std::vector<std::string> argv_s = {KESTREL_CLI};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
      int devnull = open("/dev/null", O_RDONLY);
      dup2(devnull, 0);
      dup2(out_pipe[1], 1);
      dup2(err_pipe[1], 2);
      if (chdir(work.c_str()) != 0) _exit(125);
      setenv("KESTREL_HOME", home.c_str(), 1);
      unsetenv("KESTREL_DB");
      setpgid(0, 0);
      execv(argv[0], argv.data());
      _exit(126);
    }
    close(out_pipe[1]);
    close(err_pipe[1]);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
    std::string* sinks[2] = {&r.out, &r.err};
    int open_fds = 2;
    while (open_fds > 0) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        r.timed_out = true;
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        break;
      }
      if (poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 1000))) < 0 && errno != EINTR) break;
      for (int i = 0; i < 2; ++i) {
        if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        char buf[65536];
        ssize_t n = read(fds[i].fd, buf, sizeof buf);
        if (n > 0) {
          sinks[i]->append(buf, static_cast<size_t>(n));
        } else if (n == 0 || errno != EINTR) {
          close(fds[i].fd);
          fds[i].fd = -1;
          --open_fds;
        }
      }
    }
    for (auto& f : fds) {
      if (f.fd >= 0) close(f.fd);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (WIFEXITED(st)) {
      r.exited = true;
      r.code = WEXITSTATUS(st);
    } else if (WIFSIGNALED(st)) {
      r.signal = WTERMSIG(st);
    }
    return r;
  }

  // {work} -> the test folder, {ds} -> the synthetic dataset folder.
  std::vector<std::string> Expand(std::vector<std::string> args) const {
    for (auto& a : args) {
      for (const auto& [key, value] :
           {std::pair<std::string, std::string>{"{work}", dir_.string()}, {"{ds}", (dir_ / "ds").string()}}) {
        for (size_t p; (p = a.find(key)) != std::string::npos;) a.replace(p, key.size(), value);
      }
    }
    return args;
  }

  static std::string Shown(const std::vector<std::string>& args) {
    std::string s = "kestrel";
    for (const auto& a : args) s += " '" + EscapeForMessage(a) + "'";
    return s;
  }
  static std::string EscapeForMessage(const std::string& a) {
    std::string out;
    for (unsigned char c : a) {
      if (c >= 0x20 && c < 0x7F) {
        out += static_cast<char>(c);
      } else {
        char hex[8];
        std::snprintf(hex, sizeof hex, "\\x%02X", c);
        out += hex;
      }
    }
    return out;
  }

  // The checks every run must pass; `json` adds "exactly one JSON document".
  // Returns the parsed document (null without --json).
  nlohmann::json CheckInvariants(const std::vector<std::string>& args, const Ran& r, bool json) {
    const std::string what = Shown(args);
    EXPECT_FALSE(r.timed_out) << what << ": did not finish";
    EXPECT_TRUE(r.exited) << what << ": killed by signal " << r.signal << "\nstderr: " << r.err;
    EXPECT_LT(r.code, 128) << what;
    if (!json) return nullptr;
    auto doc = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_FALSE(doc.is_discarded()) << what << ": stdout is not exactly one JSON document:\n"
                                     << EscapeForMessage(r.out) << "\nstderr: " << r.err;
    return doc.is_discarded() ? nlohmann::json() : doc;
  }

  // A hostile command: it must fail (1 or 2) cleanly, with and without --json,
  // and with --json say so in one {"ok": false, "error": {...}} document.
  // The commands kestrel-torch runs cost ~0.5 s a start (LibTorch's static
  // initialisers), and their text and --json errors come from the same
  // front code: their text run is made for the first case of each command
  // path only (CI's time budget); every case still gets the --json run.
  void ExpectCleanFailure(const std::vector<std::string>& raw) {
    const std::vector<std::string> args = Expand(raw);
    const std::string path = CommandPath(args);
    const bool torch = !args.empty() && kTorchWords.count(args[0]) != 0;
    std::optional<Ran> text;
    if (!torch || text_checked_.insert(path).second) {
      text = Run(args);
      CheckInvariants(args, *text, false);
      EXPECT_TRUE(text->code == 1 || text->code == 2) << Shown(args) << ": exit " << text->code << "\n"
                                                      << text->err;
      EXPECT_NE(text->err.find("error"), std::string::npos) << Shown(args) << ": no error on stderr";
    }

    std::vector<std::string> with_json = {"--json"};
    with_json.insert(with_json.end(), args.begin(), args.end());
    Ran j = Run(with_json);
    nlohmann::json doc = CheckInvariants(with_json, j, true);
    EXPECT_TRUE(j.code == 1 || j.code == 2) << Shown(with_json) << ": exit " << j.code;
    if (text) {
      EXPECT_EQ(j.code, text->code) << Shown(args) << ": --json changed the exit code";
    }
    if (!doc.is_object()) return;
    EXPECT_EQ(doc.value("ok", true), false) << Shown(with_json) << ": " << doc.dump();
    ASSERT_TRUE(doc.contains("error") && doc["error"].is_object()) << Shown(with_json) << ": " << doc.dump();
    EXPECT_TRUE(doc["error"]["code"].is_string()) << doc.dump();
    EXPECT_TRUE(doc["error"]["message"].is_string() && !doc["error"]["message"].get<std::string>().empty())
        << doc.dump();
    if (j.code == 2) {
      EXPECT_EQ(doc["error"]["code"], "usage") << Shown(with_json) << ": " << doc.dump();
    }
    covered_.insert(path);
  }

  // "dataset show", "jobs list", "train": the command words of `args`.
  std::string CommandPath(const std::vector<std::string>& args) const {
    std::string path;
    for (const auto& a : args) {
      if (a.empty() || a[0] == '-') break;
      const std::string cand = path.empty() ? a : path + " " + a;
      if (!known_.count(cand)) break;
      path = cand;
    }
    return path;
  }

  // Commands from the JSON help: "Subcommands:" lines of the help text.
  static std::vector<std::string> SubcommandsInHelp(const std::string& help) {
    std::vector<std::string> out;
    std::istringstream in(help);
    std::string line;
    bool in_list = false;
    while (std::getline(in, line)) {
      if (line.rfind("Subcommands:", 0) == 0) {
        in_list = true;
        continue;
      }
      if (!in_list) continue;
      if (line.empty() || line[0] != ' ') break;
      std::istringstream words(line);
      std::string name;
      words >> name;
      if (!name.empty()) out.push_back(name);
    }
    return out;
  }

  // Every command and group, from `--json --help` recursively.
  std::set<std::string> ListCommands() {
    std::set<std::string> all;
    std::vector<std::string> todo = {""};
    while (!todo.empty()) {
      const std::string path = todo.back();
      todo.pop_back();
      std::vector<std::string> args = {"--json"};
      std::istringstream words(path);
      for (std::string w; words >> w;) args.push_back(w);
      args.push_back("--help");
      Ran r = Run(args);
      EXPECT_EQ(r.code, 0) << Shown(args);
      auto doc = CheckInvariants(args, r, true);
      if (!doc.is_object() || !doc["help"].is_string()) {
        ADD_FAILURE() << Shown(args) << ": no help text in " << EscapeForMessage(r.out);
        continue;
      }
      for (const auto& sub : SubcommandsInHelp(doc["help"].get<std::string>())) {
        const std::string full = path.empty() ? sub : path + " " + sub;
        all.insert(full);
        todo.push_back(full);
      }
    }
    return all;
  }

  // The command words main.cc hands to kestrel-torch (torch_commands.h).
  inline static const std::set<std::string> kTorchWords = {"train", "export", "val", "predict", "compare"};
  std::set<std::string> known_, covered_, text_checked_;
};

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

TEST_F(HostileArgsTest, UsageErrorsAreJsonAndNameTheWord) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--json", "frobnicate"}, {"--json", "dataset", "frobnicate"}}) {
    Ran r = Run(args);
    EXPECT_EQ(r.code, 2);
    auto doc = CheckInvariants(args, r, true);
    EXPECT_EQ(doc["error"]["code"], "usage") << doc.dump();
    EXPECT_NE(doc["error"]["message"].get<std::string>().find("unknown command 'frobnicate'"),
              std::string::npos)
        << doc.dump();
  }
  // Without --json the message goes to stderr and stdout stays empty.
  Ran text = Run({"frobnicate"});
  EXPECT_EQ(text.code, 2);
  EXPECT_TRUE(text.out.empty()) << text.out;
  EXPECT_NE(text.err.find("unknown command 'frobnicate'"), std::string::npos) << text.err;
  // A typo gets a hint; a missing command lists the choices.
  Ran typo = Run({"--json", "dataset", "lsit"});
  EXPECT_NE(typo.out.find("did you mean 'list'"), std::string::npos) << typo.out;
  Ran missing = Run({"--json", "jobs"});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(CheckInvariants({"--json", "jobs"}, missing, true)["error"]["message"].get<std::string>().find(
                "cancel"),
            std::string::npos);
  // CLI11's own errors (missing option, bad choice, extra arguments) too.
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--json", "dataset", "import", "ds"},
                                             {"--json", "dataset", "export", "d", "--format", "xml", "o"},
                                             {"--json", "dataset", "list", "extra"},
                                             {"dataset", "list", "--json", "extra"}}) {
    Ran r = Run(args);
    EXPECT_EQ(r.code, 2) << Shown(args);
    EXPECT_EQ(CheckInvariants(args, r, true)["error"]["code"], "usage") << Shown(args);
  }
  // Help and version are one document too.
  Ran help = Run({"--json", "--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(CheckInvariants({"--json", "--help"}, help, true)["help"].get<std::string>().find("dataset"),
            std::string::npos);
  Ran version = Run({"--json", "--version"});
  EXPECT_EQ(version.code, 0);
  EXPECT_TRUE(CheckInvariants({"--json", "--version"}, version, true)["version"].is_string());
}

TEST_F(HostileArgsTest, InvalidUtf8InOutputIsEscapedNotFatal) {
  // A dataset name that is not UTF-8 reaches the JSON error message.
  Ran r = Run({"--json", "dataset", "show", "d\xFF"});
  EXPECT_EQ(r.code, 1);
  auto doc = CheckInvariants({"--json", "dataset", "show", "d\xFF"}, r, true);
  EXPECT_NE(doc["error"]["message"].get<std::string>().find("d\\xFF"), std::string::npos) << doc.dump();
}

TEST_F(HostileArgsTest, SubmitValidatesEveryKeyLikeTrainAndStoresNothing) {
  Write("w.safetensors", "not a safetensors file at all");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"model=zzz", "model"},
      {"model=../../../etc/passwd", "model"},
      {"imgsz=1048576", "imgsz"},
      {"pretrained=/etc/passwd", "pretrained"},
      {"pretrained=" + (dir_ / "missing.safetensors").string(), "pretrained"},
      {"pretrained=" + (dir_ / "w.safetensors").string(), "pretrained"},
      {"device=" + kHugeInt, "device"},
  };
  for (const auto& [arg, key] : bad) {
    // submit's device key is the job's (cpu or a GPU index): give it gpu_mem.
    std::vector<std::string> submit = {"--json", "submit", "data=d", "epochs=1", arg};
    if (key == "device") submit.push_back("gpu_mem=100");
    Ran s = Run(submit);
    EXPECT_EQ(s.code, 2) << arg << ": " << s.out;
    auto doc = CheckInvariants(submit, s, true);
    EXPECT_EQ(doc["error"]["code"], "usage") << arg;
    EXPECT_EQ(doc["error"]["field"], key) << arg << ": " << doc.dump();
    const std::string msg =
        doc["error"]["message"].is_string() ? doc["error"]["message"].get<std::string>() : "";
    if (key == "pretrained") {
      EXPECT_NE(msg.find("pretrained="), std::string::npos) << msg;
    }
    // Text mode names the key on stderr.
    Ran t = Run({"submit", "data=d", "epochs=1", arg});
    EXPECT_EQ(t.code, 2) << arg;
    EXPECT_NE(t.err.find(key), std::string::npos) << arg << ": " << t.err;
#ifdef KESTREL_CLI_WITH_TORCH
    // `train` refuses the same keys with the same text (device is a train key there).
    if (key != "device") {
      std::vector<std::string> train = {"--json",   "train", "data=d",
                                        "epochs=1", arg,     "project=" + (dir_ / "runs").string()};
      Ran tr = Run(train);
      EXPECT_EQ(tr.code, 2) << arg << ": " << tr.out;
      auto tdoc = CheckInvariants(train, tr, true);
      EXPECT_EQ(tdoc["error"]["field"], key) << arg;
      EXPECT_EQ(tdoc["error"]["message"], doc["error"]["message"]) << arg << ": train and submit disagree";
    }
#endif
  }
  EXPECT_EQ(Json(Kestrel("--json jobs list"))["jobs"].size(), 0u) << "a refused job was stored";
  EXPECT_FALSE(fs::exists(dir_ / "runs")) << "train wrote a run folder for a refused config";
  // A valid job is still accepted.
  Ran ok = Run({"--json", "submit", "data=d", "epochs=1", "model=n", "imgsz=64"});
  EXPECT_EQ(ok.code, 0) << ok.out << ok.err;
  EXPECT_EQ(Json(Kestrel("--json jobs list"))["jobs"].size(), 1u);
}

#ifdef KESTREL_CLI_WITH_TORCH
// device= names a CUDA device this machine does not have: train, val model=
// and predict refuse it before reading or writing anything, exit 2, naming
// the key. Index 1023 is missing everywhere (no CUDA: "not available"; a GPU
// machine: "no such CUDA device"); on a build without CUDA, device=0 too,
// with the exact text.
TEST_F(HostileArgsTest, MissingCudaDeviceIsAUsageErrorBeforeAnythingRuns) {
  const std::string runs = (dir_ / "runs").string();
  bool no_cuda = false;
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--json", "train", "data=d", "epochs=1", "imgsz=64", "device=1023", "project=" + runs},
           {"--json", "val", "data=d", "model=" + (dir_ / "m.safetensors").string(), "device=cuda:1023"},
           {"--json", "predict", "model=m", "source=" + (dir_ / "ds").string(), "device=1023"}}) {
    Ran r = Run(args);
    EXPECT_EQ(r.code, 2) << Shown(args) << ": " << r.out << r.err;
    auto doc = CheckInvariants(args, r, true);
    if (!doc.is_object()) continue;
    EXPECT_EQ(doc["error"]["code"], "usage") << doc.dump();
    EXPECT_EQ(doc["error"]["field"], "device") << doc.dump();
    const std::string msg = doc["error"].value("message", "");
    EXPECT_NE(msg.find("1023: "), std::string::npos) << msg;
    const bool not_available = msg.find("CUDA is not available") != std::string::npos;
    EXPECT_TRUE(not_available || msg.find("no such CUDA device") != std::string::npos) << msg;
    no_cuda = no_cuda || not_available;
  }
  if (no_cuda) {
    const std::vector<std::string> zero = {"--json",   "train",    "data=d",
                                           "epochs=1", "device=0", "project=" + runs};
    Ran r = Run(zero);
    EXPECT_EQ(r.code, 2) << r.out << r.err;
    auto doc = CheckInvariants(zero, r, true);
    EXPECT_EQ(doc["error"]["message"],
              "device=0: CUDA is not available (LibTorch built without CUDA or no GPU)")
        << doc.dump();
    Ran text = Run({"train", "data=d", "epochs=1", "device=cuda:0", "project=" + runs});
    EXPECT_EQ(text.code, 2);
    EXPECT_NE(text.err.find("device=cuda:0: CUDA is not available"), std::string::npos) << text.err;
  }
  EXPECT_FALSE(fs::exists(dir_ / "runs")) << "a refused device wrote a run folder";
}
#endif

}  // namespace
}  // namespace kestrel::testing
