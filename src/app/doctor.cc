#include "app/doctor.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "app/fingerprint.h"
#include "core/failure.h"

namespace kestrel::app {
namespace {

using nlohmann::json;

std::string Gb(int64_t bytes) {
  std::array<char, 32> buf{};
  std::snprintf(buf.data(), buf.size(), "%.2f GB", static_cast<double>(bytes) / 1e9);
  return buf.data();
}

std::string Text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "unknown";
  return v.dump();
}

// Times one check: its ms are filled in when it is added.
class Checks {
 public:
  explicit Checks(Env& env) : env_(env), start_ms_(env.UnixMillis()) {}
  void Add(std::string name, CheckState state, std::string message, std::string fix = "") {
    const int64_t now = env_.UnixMillis();
    out_.push_back({std::move(name), state, std::move(message), std::move(fix), now - last_ms_});
    last_ms_ = now;
  }
  // The last check added failed because its service did not answer.
  void MarkUnavailable(const Status& why) {
    if (!out_.empty() && why.Code() == StatusCode::kUnavailable) out_.back().unavailable = true;
  }
  void Restart() { last_ms_ = env_.UnixMillis(); }
  // Check `name` took `ms` more (work done before RunDoctor).
  void AddMs(const std::string& name, int64_t ms) {
    for (auto& c : out_)
      if (c.name == name) c.ms += ms;
  }
  std::vector<DoctorCheck> Take() { return std::move(out_); }
  int64_t Elapsed() const { return env_.UnixMillis() - start_ms_; }
  bool Failed(const std::string& name) const {
    for (const auto& c : out_)
      if (c.name == name) return c.state == CheckState::kFail;
    return false;
  }

 private:
  Env& env_;
  int64_t start_ms_;
  int64_t last_ms_ = start_ms_;
  std::vector<DoctorCheck> out_;
};

void CheckTorch(const DoctorProbes& p, const json& fingerprint, Checks& checks) {
  if (p.torch_program.empty()) {
    checks.Add("libraries", CheckState::kSkip,
               "this build has no LibTorch half (kestrel-torch): no training on this host");
    return;
  }
  if (!p.torch_error.empty() || !p.torch.is_object()) {
    std::string fix = "run `ldd " + p.torch_program +
                      " | grep 'not found'`; check LD_LIBRARY_PATH and that the LibTorch, OpenCV and ONNX "
                      "Runtime libraries of this build are installed on this host";
    if (p.torch_error.find("SIGILL") != std::string::npos)
      fix =
          "this CPU lacks an instruction set the build was compiled for (the fingerprint's avx2, avx512f, "
          "amx): use a build for this CPU";
    checks.Add("libraries", CheckState::kFail,
               p.torch_error.empty() ? p.torch_program + " printed no fingerprint document" : p.torch_error,
               fix);
    return;
  }
  checks.Add("libraries", CheckState::kOk,
             p.torch_program + " loads: LibTorch " + Text(fingerprint.value("libtorch", json())) +
                 ", OpenCV " + Text(fingerprint.value("opencv", json())));
  const json runs = p.torch.value("selftest", json());
  if (!runs.is_array() || runs.empty()) {
    checks.Add(
        "devices", CheckState::kFail, p.torch_program + " ran no forward and backward pass",
        "an older kestrel-torch without `fingerprint --selftest`: install kestrel and kestrel-torch of "
        "one build side by side");
    return;
  }
  for (const json& r : runs) {
    const std::string device = r.is_object() ? Text(r.value("device", json())) : "?";
    const bool cuda = device.rfind("cuda", 0) == 0;
    if (r.is_object() && r.value("ok", false)) {
      std::ostringstream m;
      m.precision(1);
      m << std::fixed << "forward and backward pass in " << r.value("ms", 0.0) << " ms";
      checks.Add("device " + device, CheckState::kOk, m.str());
      continue;
    }
    const std::string why = r.is_object() ? Text(r.value("error", json())) : r.dump();
    checks.Add("device " + device, CheckState::kFail, why,
               cuda ? "check the NVIDIA driver (nvidia-smi), that the GPU is not in an error state and that "
                      "LibTorch's CUDA build (torch_cuda_build " +
                          Text(fingerprint.value("torch_cuda_build", json())) + ") suits the driver (" +
                          Text(fingerprint.value("cuda_driver", json())) +
                          "); or leave the device out (--devices)"
                    : "LibTorch cannot train on this CPU: check the build (kestrel-torch fingerprint) and "
                      "OMP_NUM_THREADS / MKL_NUM_THREADS");
  }
}

// A setting written and read back: the same write path a worker's
// heartbeats and claims take, and a record of the host's last check.
void CheckMetadataStore(const DoctorOptions& o, const DoctorProbes& p, Env& env, Checks& checks,
                        const std::string& nonce) {
  const std::string where = p.meta_location.empty() ? "the metadata store" : p.meta_location;
  const std::string fix_open =
      "PostgreSQL: check that the server runs and is reachable from this host, and KESTREL_DB's host, port, "
      "user, password and database; SQLite: that the home folder exists and is writable (--home, "
      "KESTREL_HOME)";
  if (!p.open_meta) {
    checks.Add("metadata store", CheckState::kFail, "no way to open " + where, fix_open);
    return;
  }
  auto meta = p.open_meta();
  if (!meta.IsOk()) {
    checks.Add("metadata store", CheckState::kFail,
               "cannot open " + where + ": " + meta.GetStatus().Message(), fix_open);
    checks.MarkUnavailable(meta.GetStatus());
    return;
  }
  const std::string key = "doctor." + o.host;
  const json value = {{"ms", env.UnixMillis()}, {"probe", nonce}};
  if (Status s = (*meta)->PutSetting(key, value.dump(), env.UnixMillis()); !s.IsOk()) {
    checks.Add("metadata store", CheckState::kFail, where + " refused a write: " + s.Message(),
               "check the database user's write rights, the database's free disk, and that "
               "KESTREL_DB does not name a read-only replica");
    checks.MarkUnavailable(s);
    return;
  }
  auto back = (*meta)->GetSetting(key);
  if (!back.IsOk() || *back != value.dump()) {
    checks.Add("metadata store", CheckState::kFail,
               where + " did not read back what was written" +
                   (back.IsOk() ? std::string() : ": " + back.GetStatus().Message()),
               "two Kestrel stores behind one URL, or a database that loses writes: check KESTREL_DB");
    return;
  }
  checks.Add("metadata store", CheckState::kOk, where + ": reachable, a setting written and read back");
}

// A probe blob written, read back and deleted. Its text is unique to this
// run (host, time, pid), so it can never be a blob something refers to.
void CheckArtifactStore(const DoctorProbes& p, Checks& checks, const std::string& nonce) {
  const std::string fix =
      "local store: the home's blobs folder must be writable by this user and its disk not full; "
      "S3 (KESTREL_ARTIFACTS): check the endpoint, bucket, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY and "
      "that the key may put, get and delete objects";
  if (!p.open_artifacts) {
    checks.Add("artifact store", CheckState::kFail, "no way to open the artifact store", fix);
    return;
  }
  auto blobs = p.open_artifacts();
  if (!blobs.IsOk()) {
    checks.Add("artifact store", CheckState::kFail, "cannot open it: " + blobs.GetStatus().Message(), fix);
    checks.MarkUnavailable(blobs.GetStatus());
    return;
  }
  store::ArtifactStore& b = **blobs;
  const std::string where = b.Describe();
  const std::string probe = "kestrel doctor probe " + nonce + "\n";
  auto sha = b.Put(probe);
  if (!sha.IsOk()) {
    checks.Add("artifact store", CheckState::kFail,
               where + ": writing a probe object failed: " + sha.GetStatus().Message(), fix);
    checks.MarkUnavailable(sha.GetStatus());
    return;
  }
  auto got = b.Get(*sha);
  const bool read_ok = got.IsOk() && *got == probe;
  // Removed whatever the read said: a probe must not stay behind.
  auto removed = b.RemoveIfUntouchedSince(*sha, std::numeric_limits<int64_t>::max());
  if (!read_ok) {
    checks.Add("artifact store", CheckState::kFail,
               where + ": the probe object " + sha->substr(0, 12) + " did not read back" +
                   (got.IsOk() ? std::string(" (other bytes)") : ": " + got.GetStatus().Message()),
               fix);
    if (!got.IsOk()) checks.MarkUnavailable(got.GetStatus());
    return;
  }
  if (!removed.IsOk() || !*removed) {
    checks.Add(
        "artifact store", CheckState::kFail,
        where + ": deleting the probe object " + *sha + " failed" +
            (removed.IsOk() ? std::string(" (it was not removed)") : ": " + removed.GetStatus().Message()),
        fix + " (kestrel gc removes the probe once it may)");
    if (!removed.IsOk()) checks.MarkUnavailable(removed.GetStatus());
    return;
  }
  checks.Add("artifact store", CheckState::kOk, where + ": a probe object written, read back and deleted");
}

void CheckDisk(const DoctorOptions& o, const DoctorProbes& p, Checks& checks) {
  if (!p.disk_space) {
    checks.Add("disk", CheckState::kFail, "no way to read the free space of " + o.home);
    return;
  }
  auto d = p.disk_space(o.home);
  if (!d.IsOk()) {
    checks.Add("disk", CheckState::kFail,
               "cannot read the free space of " + o.home + ": " + d.GetStatus().Message(),
               "the Kestrel home must exist (--home, KESTREL_HOME)");
    return;
  }
  const std::string found =
      Gb(d->free_bytes) + " free of " + Gb(d->total_bytes) + " on " + o.home + "'s filesystem";
  if (o.min_free_bytes > 0 && d->free_bytes < o.min_free_bytes) {
    checks.Add("disk", CheckState::kFail, found + ", below the threshold of " + Gb(o.min_free_bytes),
               "free space (`kestrel du` shows what the home holds, `kestrel gc` removes what nothing refers "
               "to) or lower the threshold (--min-free-gb, KESTREL_MIN_FREE_GB; docs/disk.md)");
    return;
  }
  checks.Add("disk", CheckState::kOk,
             found + (o.min_free_bytes > 0 ? " (threshold " + Gb(o.min_free_bytes) + ")" : std::string()));
}

void CheckClock(const DoctorOptions& o, const DoctorProbes& p, Env& env, Checks& checks) {
  if (!p.database_clock_ms) {
    checks.Add("clock", CheckState::kSkip,
               "SQLite has no server clock to compare with (the workers of one SQLite store share this "
               "machine's clock)");
    return;
  }
  if (checks.Failed("metadata store")) {
    checks.Add("clock", CheckState::kSkip, "the metadata store is unreachable (above)");
    return;
  }
  const int64_t before = env.UnixMillis();
  auto db = p.database_clock_ms();
  const int64_t after = env.UnixMillis();
  if (!db.IsOk()) {
    checks.Add("clock", CheckState::kFail, "cannot read the database's clock: " + db.GetStatus().Message(),
               "check that the database answers (the metadata store check)");
    checks.MarkUnavailable(db.GetStatus());
    return;
  }
  // The database read its clock somewhere between before and after.
  const int64_t skew = *db - (before + after) / 2;
  const std::string found = "this host's clock is " + std::to_string(skew < 0 ? -skew : skew) + " ms " +
                            (skew > 0 ? "behind" : "ahead of") + " the database's (round trip " +
                            std::to_string(after - before) + " ms)";
  if (skew > o.max_clock_skew_ms || -skew > o.max_clock_skew_ms) {
    checks.Add("clock", CheckState::kFail,
               found + ", more than " + std::to_string(o.max_clock_skew_ms) + " ms",
               "synchronise this host's clock (chrony, systemd-timesyncd): leases and heartbeats compare "
               "times written by different hosts");
    return;
  }
  checks.Add("clock", CheckState::kOk, found);
}

}  // namespace

const char* CheckStateName(CheckState s) {
  switch (s) {
    case CheckState::kOk:
      return "ok";
    case CheckState::kWarn:
      return "warn";
    case CheckState::kSkip:
      return "skip";
    case CheckState::kFail:
      return "fail";
  }
  return "fail";
}

bool DoctorReport::Ok() const {
  for (const auto& c : checks)
    if (c.state == CheckState::kFail) return false;
  return true;
}

DoctorReport RunDoctor(const DoctorOptions& options, const DoctorProbes& probes, Env& env) {
  Checks checks(env);
  DoctorReport r;
  const json torch_facts = probes.torch.is_object() ? probes.torch.value("fingerprint", json()) : json();
  r.fingerprint = MergeFingerprint(HostFingerprint(), torch_facts, probes.torch_error);
  r.fingerprint_hash = FingerprintHash(r.fingerprint);
  checks.Restart();
  CheckTorch(probes, r.fingerprint, checks);
  checks.AddMs("libraries", probes.torch_ms);  // kestrel-torch ran before RunDoctor
  const std::string nonce = options.host + " " + std::to_string(env.UnixMillis()) + " " +
                            std::to_string(::getpid()) + " " + std::to_string(env.NowMicros());
  CheckMetadataStore(options, probes, env, checks, nonce);
  CheckArtifactStore(probes, checks, nonce);
  CheckDisk(options, probes, checks);
  CheckClock(options, probes, env, checks);
  const json& f = r.fingerprint;
  checks.Add("fingerprint", CheckState::kOk,
             r.fingerprint_hash + " (Kestrel " + Text(f.value("kestrel_version", json())) + ", LibTorch " +
                 Text(f.value("libtorch", json())) + ", " + Text(f.value("cpu_model", json())) + ", " +
                 std::to_string(f.value("gpus", json::array()).size()) +
                 " GPU(s); `kestrel fingerprint` lists "
                 "every field)");
  r.elapsed_ms = checks.Elapsed() + probes.torch_ms;
  r.checks = checks.Take();
  return r;
}

json DoctorJson(const DoctorReport& r) {
  json checks = json::array();
  int failed = 0;
  for (const auto& c : r.checks) {
    if (c.state == CheckState::kFail) ++failed;
    checks.push_back({{"name", c.name},
                      {"state", CheckStateName(c.state)},
                      {"message", c.message},
                      {"fix", c.fix.empty() ? json(nullptr) : json(c.fix)},
                      {"ms", c.ms},
                      {"unavailable", c.unavailable}});
  }
  return {{"ok", failed == 0},
          {"failed", failed},
          {"checks", checks},
          {"hash", r.fingerprint_hash},
          {"fingerprint", r.fingerprint},
          {"elapsed_ms", r.elapsed_ms}};
}

std::string DoctorText(const DoctorReport& r) {
  size_t width = 0;
  for (const auto& c : r.checks) width = std::max(width, c.name.size());
  std::ostringstream t;
  int failed = 0;
  for (const auto& c : r.checks) {
    std::string state = CheckStateName(c.state);
    if (c.state == CheckState::kFail) {
      state = "FAIL";
      ++failed;
    }
    state.resize(6, ' ');
    std::string name = c.name;
    name.resize(width + 2, ' ');
    t << state << name << c.message << "\n";
    if (!c.fix.empty() && c.state != CheckState::kOk)
      t << std::string(6 + width + 2, ' ') << "fix: " << c.fix << "\n";
  }
  t << "doctor: "
    << (failed == 0 ? std::string("all checks passed")
                    : std::to_string(failed) + " of " + std::to_string(r.checks.size()) + " checks failed")
    << " in " << r.elapsed_ms << " ms";
  return t.str();
}

Status DoctorStatus(const DoctorReport& r, const std::vector<std::string>& ignore, bool count_unavailable) {
  std::string failed;
  for (const auto& c : r.checks) {
    if (c.state != CheckState::kFail || (c.unavailable && !count_unavailable)) continue;
    if (std::find(ignore.begin(), ignore.end(), c.name) != ignore.end()) continue;
    failed += (failed.empty() ? "" : "; ") + c.name + ": " + c.message;
  }
  if (failed.empty()) return {};
  return Status::FailedPrecondition(failed).WithReason(FailureReason::kEnvironment);
}

}  // namespace kestrel::app
