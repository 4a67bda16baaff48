// The fixture of the hostile-argument tests (hostile_args_test.cc,
// hostile_usage_test.cc): `kestrel` run with an argv vector (fork/exec, no
// shell, any byte), its status and output checked against the invariants:
// it ends by itself below 128, and with --json stdout is one JSON document.
#pragma once

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
#include <string>
#include <vector>

#include "cli_fixture.h"

namespace kestrel::testing {

namespace fs = std::filesystem;

inline const std::string kNotUtf8 = "\xFF\xFE";
inline const std::string kHugeInt = "99999999999999999999";

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

}  // namespace kestrel::testing
