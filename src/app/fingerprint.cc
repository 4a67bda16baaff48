#include "app/fingerprint.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <opencv2/core/version.hpp>
#include <set>
#include <sstream>

#include "app/models.h"
#include "core/hash.h"
#include "core/parse.h"

namespace kestrel::app {
namespace {

using nlohmann::json;

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

// "key: value" / "key=value" lines of a /proc or /etc file: the first value of `key`.
std::string FileValue(const std::string& path, const std::string& key, char sep) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t at = line.find(sep);
    if (at == std::string::npos || Trim(line.substr(0, at)) != key) continue;
    std::string v = Trim(line.substr(at + 1));
    if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
    return v;
  }
  return "";
}

json EnvOrNull(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? json(v) : json(nullptr);
}

std::string BuildText() {
  std::string s;
#if defined(__clang__)
  s = "clang " __clang_version__;
#elif defined(__GNUC__)
  s = "gcc " __VERSION__;
#endif
#ifdef NDEBUG
  s += ", NDEBUG";
#else
  s += ", assertions";
#endif
#ifdef __OPTIMIZE__
  s += ", optimised";
#endif
#ifdef __AVX2__
  s += ", built for AVX2";
#endif
  return s;
}

}  // namespace

json HostFingerprint() {
  json f;
  f["kestrel_version"] = KestrelVersion();
  f["kestrel_build"] = BuildText();
  f["opencv"] = CV_VERSION;
  std::array<char, 64> libc{};
  const size_t libc_len = ::confstr(_CS_GNU_LIBC_VERSION, libc.data(), libc.size());
  f["glibc"] = libc_len > 0 ? json(std::string(libc.data())) : json(nullptr);  // "glibc 2.36"
  struct utsname u {};
  if (::uname(&u) == 0) {
    f["kernel"] = std::string(u.sysname) + " " + u.release;
    f["arch"] = u.machine;
  } else {
    f["kernel"] = nullptr;
    f["arch"] = nullptr;
  }
  const std::string os = FileValue("/etc/os-release", "PRETTY_NAME", '=');
  f["os"] = os.empty() ? json(nullptr) : json(os);
  const std::string cpu = FileValue("/proc/cpuinfo", "model name", ':');
  f["cpu_model"] = cpu.empty() ? json(nullptr) : json(cpu);
  f["cpu_count"] = static_cast<int64_t>(::sysconf(_SC_NPROCESSORS_ONLN));
  std::set<std::string> flags;
  {
    std::istringstream words(FileValue("/proc/cpuinfo", "flags", ':'));
    std::string w;
    while (words >> w) flags.insert(w);
  }
  f["avx2"] = flags.count("avx2") > 0;
  f["avx512f"] = flags.count("avx512f") > 0;
  f["avx512_bf16"] = flags.count("avx512_bf16") > 0;
  f["amx"] = flags.count("amx_tile") > 0;
  f["omp_num_threads"] = EnvOrNull("OMP_NUM_THREADS");
  f["mkl_num_threads"] = EnvOrNull("MKL_NUM_THREADS");
  // The NVIDIA driver publishes its version and each GPU under /proc.
  std::ifstream drv("/proc/driver/nvidia/version");
  std::string first;
  if (drv && std::getline(drv, first)) {
    f["cuda_driver"] = Trim(first);
  } else {
    f["cuda_driver"] = nullptr;
  }
  std::vector<std::string> gpus;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", ec)) {
    const std::string info = (e.path() / "information").string();
    gpus.push_back(FileValue(info, "Model", ':') + " " + FileValue(info, "GPU UUID", ':'));
  }
  std::sort(gpus.begin(), gpus.end());
  std::string g;
  for (const auto& s : gpus) g += (g.empty() ? "" : "; ") + s;
  f["gpus"] = g;
  return f;
}

json MergeFingerprint(json host, const json& torch, const std::string& torch_error) {
  if (!torch.is_object()) {
    host["libtorch"] = nullptr;
    host["torch_error"] = torch_error.empty() ? "kestrel-torch printed no fingerprint" : torch_error;
    return host;
  }
  for (const auto& [k, v] : torch.items()) {
    if (k == "ok") continue;
    host[k] = v;
  }
  return host;
}

std::string FingerprintHash(const json& fingerprint) {
  // nlohmann::json keeps object keys sorted: dump() is canonical.
  return Sha256Hex(fingerprint.dump()).substr(0, 16);
}

json DiffFingerprints(const json& a, const json& b) {
  std::set<std::string> keys;
  if (a.is_object())
    for (const auto& [k, v] : a.items()) keys.insert(k);
  if (b.is_object())
    for (const auto& [k, v] : b.items()) keys.insert(k);
  json out = json::array();
  for (const auto& k : keys) {
    const json va = a.is_object() && a.contains(k) ? a[k] : json(nullptr);
    const json vb = b.is_object() && b.contains(k) ? b[k] : json(nullptr);
    if (va != vb) out.push_back({{"field", k}, {"a", va}, {"b", vb}});
  }
  return out;
}

json AttemptFingerprint(store::MetadataStore& meta, const std::string& hash) {
  if (hash.empty()) return json::object();
  auto text = meta.GetFingerprint(hash);
  if (!text.IsOk()) return json::object();
  json f = json::parse(*text, nullptr, false);
  return f.is_object() ? f : json::object();
}

namespace {

struct AttemptRef {
  store::AttemptRecord attempt;
  json fields;
};

Result<AttemptRef> FindAttempt(store::MetadataStore& meta, const std::string& ref, const char* field) {
  const size_t colon = ref.find(':');
  KESTREL_ASSIGN_OR_RETURN(int64_t job,
                           ParseInt64(ref.substr(0, colon), {"command line", 0, field}, 1, INT64_MAX));
  int64_t attempt = 0;
  if (colon != std::string::npos) {
    KESTREL_ASSIGN_OR_RETURN(attempt,
                             ParseInt64(ref.substr(colon + 1), {"command line", 0, field}, 1, INT64_MAX));
  }
  KESTREL_RETURN_IF_ERROR(meta.GetJob(job).GetStatus());
  KESTREL_ASSIGN_OR_RETURN(auto attempts, meta.ListAttempts(job));
  if (attempts.empty())
    return Status::NotFound("job " + std::to_string(job) + " has no attempt yet", {"command line", 0, field});
  const store::AttemptRecord* found = attempt == 0 ? &attempts.back() : nullptr;
  for (const auto& a : attempts)
    if (a.attempt == attempt) found = &a;
  if (found == nullptr) {
    return Status::NotFound("job " + std::to_string(job) + " has no attempt " + std::to_string(attempt),
                            {"command line", 0, field});
  }
  if (found->fingerprint.empty()) {
    return Status::FailedPrecondition("job " + std::to_string(job) + " attempt " +
                                          std::to_string(found->attempt) +
                                          " recorded no environment fingerprint (a worker older than "
                                          "migration 15 ran it)",
                                      {"command line", 0, field});
  }
  return AttemptRef{*found, AttemptFingerprint(meta, found->fingerprint)};
}

json Side(const AttemptRef& r) {
  return {{"job", r.attempt.job_id},
          {"attempt", r.attempt.attempt},
          {"host", r.attempt.host},
          {"worker", r.attempt.worker},
          {"fingerprint", r.attempt.fingerprint}};
}

}  // namespace

Result<json> DiffAttemptEnvironments(store::MetadataStore& meta, const std::string& a, const std::string& b) {
  KESTREL_ASSIGN_OR_RETURN(AttemptRef ra, FindAttempt(meta, a, "A"));
  KESTREL_ASSIGN_OR_RETURN(AttemptRef rb, FindAttempt(meta, b, "B"));
  json diff = DiffFingerprints(ra.fields, rb.fields);
  return json{{"ok", true},
              {"a", Side(ra)},
              {"b", Side(rb)},
              {"same", ra.attempt.fingerprint == rb.attempt.fingerprint},
              {"differences", diff}};
}

}  // namespace kestrel::app
