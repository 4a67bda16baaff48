// `kestrel doctor` (app/doctor.h): this host's probes, the LibTorch half
// asked through `kestrel-torch --json fingerprint --selftest DEVICES` (so
// `kestrel` stays torch-free and a library that does not load is a finding,
// not a crash), the report printed.
#include "cli/doctor_cmd.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/env.h"
#include "jobs/disk_space.h"
#include "store/artifact_store.h"
#include "store/postgres_store.h"

namespace kestrel::cli {
namespace {

std::string ThisHost() {
  std::array<char, 256> buf{};
  if (gethostname(buf.data(), buf.size() - 1) != 0) return "localhost";
  return buf.data();
}

// "SIGILL" for the signals a broken environment ends a process with.
std::string SignalName(int sig) {
  switch (sig) {
    case SIGILL:
      return "SIGILL";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGKILL:
      return "SIGKILL";
    default:
      return "signal " + std::to_string(sig);
  }
}

// Shell-quotes `s` for popen.
std::string Quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// `--devices`: auto, or a comma-separated list of cpu, cpu:N, cuda:N,
// gpu:N, gpu:N:MB (N, MB small decimal numbers).
Status CheckDeviceList(const std::string& list) {
  auto bad = [&list](const std::string& why) {
    return Status::InvalidArgument("--devices '" + list.substr(0, 60) + "': " + why +
                                       " (auto, or a comma-separated list of cpu, cuda:N, gpu:N:MB)",
                                   {"command line", 0, "devices"});
  };
  if (list == "auto") return {};
  if (list.empty()) return bad("empty");
  auto number = [](const std::string& t) {
    return !t.empty() && t.size() <= 6 && t.find_first_not_of("0123456789") == std::string::npos;
  };
  size_t from = 0;
  while (from <= list.size()) {
    const size_t comma = std::min(list.find(',', from), list.size());
    const std::string word = list.substr(from, comma - from);
    from = comma + 1;
    if (word == "cpu") continue;
    const size_t colon = word.find(':');
    const std::string kind = word.substr(0, colon);
    std::string rest = colon == std::string::npos ? "" : word.substr(colon + 1);
    const size_t second = rest.find(':');
    const std::string index = rest.substr(0, second);
    const std::string mb = second == std::string::npos ? "" : rest.substr(second + 1);
    const bool ok = (kind == "cpu" || kind == "cuda" || kind == "gpu") && number(index) &&
                    (second == std::string::npos || (kind == "gpu" && number(mb)));
    if (!ok) return bad("'" + word.substr(0, 40) + "' is not a device");
  }
  return {};
}

}  // namespace

// kestrel-torch's fingerprint and device pass take ~1 s here; a first CUDA
// initialisation can take tens of seconds. KESTREL_DOCTOR_TIMEOUT_S overrides.
constexpr double kTorchFingerprintTimeoutS = 120;

nlohmann::json RunTorchFingerprint(const std::string& program, const std::string& selftest,
                                   std::string* error) {
  // Bounded: a device whose initialisation hangs (a wedged GPU driver) must
  // fail the check, not hang the doctor and the worker's start with it.
  // coreutils' timeout sends TERM, then KILL 5 s later, and exits 124.
  const char* limit_env = std::getenv("KESTREL_DOCTOR_TIMEOUT_S");
  double limit_s = kTorchFingerprintTimeoutS;
  if (limit_env != nullptr && *limit_env != '\0') {
    char* end = nullptr;
    const double v = std::strtod(limit_env, &end);
    if (end != nullptr && *end == '\0' && v > 0 && v <= 86400) limit_s = v;
  }
  char limit[32];
  std::snprintf(limit, sizeof limit, "%g", limit_s);
  std::string cmd = std::string("timeout -k 5 ") + limit + " " + Quoted(program) + " --json fingerprint";
  if (!selftest.empty()) cmd += " --selftest " + Quoted(selftest);
  cmd += " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *error = program + ": cannot start: " + std::strerror(errno);
    return nullptr;
  }
  std::string out;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int st = ::pclose(p);
  // The document starts at the first line that opens an object (stderr, e.g.
  // a loader error, comes before it or alone).
  size_t from = 0;
  if (out.empty() || out[0] != '{') {
    const size_t nl = out.find("\n{");
    from = nl == std::string::npos ? out.size() : nl + 1;
  }
  auto doc = nlohmann::json::parse(out.substr(from), nullptr, false);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && doc.is_object() && doc.contains("fingerprint") &&
      doc["fingerprint"].is_object()) {
    return doc;
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();
  // The shell reports a child killed by a signal as exit 128 + N.
  std::string how;
  if (WIFSIGNALED(st)) {
    how = "killed by " + SignalName(WTERMSIG(st));
  } else if (WIFEXITED(st) && WEXITSTATUS(st) == 124) {
    how = std::string("no answer within ") + limit +
          " s (a hung library or device initialisation?); KESTREL_DOCTOR_TIMEOUT_S sets the limit";
  } else if (WIFEXITED(st) && WEXITSTATUS(st) > 128) {
    how = "killed by " + SignalName(WEXITSTATUS(st) - 128);
  } else {
    how = WIFEXITED(st) ? "exit " + std::to_string(WEXITSTATUS(st)) : std::string("ended");
  }
  *error = program + " fingerprint failed (" + how + ")" + (out.empty() ? "" : ": " + out.substr(0, 500));
  return nullptr;
}

app::DoctorProbes HostDoctorProbes(const std::string& home) {
  app::DoctorProbes p;
  const std::string url = store::MetadataUrl(home);
  const bool postgres = url.rfind("postgres", 0) == 0;
  p.meta_location = postgres ? store::RedactPostgresUrl(url) : url;
  p.open_meta = [url] { return store::MetadataStore::Open(url); };
  p.open_artifacts = [home] { return store::OpenArtifactStore(home); };
  p.disk_space = [](const std::string& path) { return jobs::StatDiskSpace(path); };
  if (postgres) p.database_clock_ms = [url] { return store::PostgresClockMs(url); };
  return p;
}

void AddDoctorCommand(CLI::App& app, Context& ctx, int* exit_code) {
  struct Args {
    std::string devices = "auto";
    std::string min_free_gb;  // "" = KESTREL_MIN_FREE_GB or the default
    double max_skew_s = 2;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("doctor",
                                     "Check that this host can run jobs: libraries, a forward and backward "
                                     "pass per device, the stores, free "
                                     "disk, clock skew (docs/jobs.md \"Doctor\")");
  cmd->add_option("--devices", a->devices,
                  "devices to run the forward and backward pass on: auto (cpu and every CUDA device) or a "
                  "list of cpu, cuda:N, gpu:N:MB as the worker's --devices")
      ->capture_default_str();
  cmd->add_option("--min-free-gb", a->min_free_gb,
                  "fail below this much free space on the home's filesystem, GB (0 = report only; default: "
                  "KESTREL_MIN_FREE_GB, else 1, as a worker)");
  cmd->add_option("--max-skew-s", a->max_skew_s,
                  "fail when this host's clock differs from the database's by more, seconds (PostgreSQL)")
      ->capture_default_str()
      ->check(NumberArg(0.001, 86400));
  cmd->callback(Callback(ctx, exit_code, [&ctx, a]() -> CommandResult {
    KESTREL_RETURN_IF_ERROR(CheckDeviceList(a->devices));
    app::DoctorOptions o;
    o.host = ThisHost();
    o.home = ctx.home;
    o.max_clock_skew_ms = static_cast<int64_t>(std::llround(a->max_skew_s * 1000.0));
    KESTREL_ASSIGN_OR_RETURN(o.min_free_bytes, a->min_free_gb.empty()
                                                   ? jobs::MinFreeBytesFromEnv()
                                                   : jobs::ParseMinFreeGb(a->min_free_gb, "command line"));
    // The disk check reads the home's filesystem: a fresh home is made as
    // opening its store would make it.
    (void)Env::Default().CreateDirs(ctx.home);  // a failure shows in the disk and store checks
    app::DoctorProbes p = HostDoctorProbes(ctx.home);
#ifdef KESTREL_WITH_TORCH
    KESTREL_ASSIGN_OR_RETURN(ProgramPaths programs, ThisProgramAndTorch());
    p.torch_program = programs.torch;
    const int64_t t0 = Env::Default().UnixMillis();
    p.torch = RunTorchFingerprint(p.torch_program, a->devices, &p.torch_error);
    p.torch_ms = Env::Default().UnixMillis() - t0;
#endif
    const app::DoctorReport r = app::RunDoctor(o, p, Env::Default());
    return Output{app::DoctorText(r), app::DoctorJson(r), r.Ok() ? kExitOk : kExitFailure};
  }));
}

}  // namespace kestrel::cli
