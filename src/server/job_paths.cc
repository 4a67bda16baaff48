#include "server/job_paths.h"

#include <filesystem>
#include <system_error>

#include "app/jobs.h"

namespace kestrel::server {

namespace fs = std::filesystem;

Status RefusedJobFile(const std::string& key) {
  return Status::InvalidArgument(
      key +
          " names no registered model and no file a job submitted over HTTP may read (allowed: a registered "
          "model NAME[@vN|@TAG], or a file under one of the server's --data-root folders or its Kestrel "
          "home)",
      {app::kRequestFile, 0, key});
}

JobFilePolicy::JobFilePolicy(const DataRoots& roots, const std::string& home) : roots_(roots) {
  std::error_code ec;
  const fs::path canon = fs::weakly_canonical(home, ec);
  // A home of "/" would allow every file: then only the roots count.
  if (!ec && canon != canon.root_path()) home_ = canon.string();
}

std::string JobFilePolicy::AllowedFile(const std::string& text) const {
  // Every way out returns "": the caller answers them all with one message.
  if (text.empty() || text.find('\0') != std::string::npos) return "";
  const fs::path req(text);
  for (const auto& seg : req) {
    if (seg == "..") return "";
  }
  fs::path candidate;
  if (req.is_absolute()) {
    candidate = req;
  } else {
    // As an import's path (data_roots.h): "ROOT-NAME/rest", or relative to the only root.
    const std::string first = req.begin()->string();
    for (const auto& r : roots_.Roots()) {
      if (r.name == first) {
        candidate = fs::path(r.path) / req.lexically_relative(first);
        break;
      }
    }
    if (candidate.empty() && roots_.Roots().size() == 1) candidate = fs::path(roots_.Roots()[0].path) / req;
    if (candidate.empty()) return "";
  }
  std::error_code ec;
  const fs::path canon = fs::canonical(candidate, ec);
  if (ec || !fs::is_regular_file(canon, ec) || ec) return "";
  const bool in_home = !home_.empty() && PathIsUnder(canon.string(), home_);
  if (!in_home && !roots_.Inside(canon.string())) return "";
  return canon.string();
}

Result<app::ResolvedWeights> JobFilePolicy::Resolve(app::ModelRegistry& reg, const std::string& key,
                                                    const std::string& text) const {
  if (!text.empty() && text.find('/') == std::string::npos) {
    auto m = reg.ResolveReference(text);
    if (m.IsOk()) return m;
    // Not a registered model: maybe a file under the only root. A model that
    // exists but cannot be read (a damaged blob) is the registry's to report.
    const StatusCode code = m.GetStatus().Code();
    if (code != StatusCode::kNotFound && code != StatusCode::kInvalidArgument) return m.GetStatus();
  }
  const std::string file = AllowedFile(text);
  if (file.empty()) return RefusedJobFile(key);
  app::ResolvedWeights out;
  out.path = file;
  return out;
}

}  // namespace kestrel::server
