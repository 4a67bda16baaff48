#include "data/output_dir.h"

#include <cstdio>
#include <random>

namespace kestrel::data {
namespace {

std::string Trimmed(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

}  // namespace

Status RequireEmptyOrAbsent(Env& env, const std::string& out_arg, StatusCode code) {
  const std::string out = Trimmed(out_arg);
  const FileInfo info = env.Stat(out);
  if (!info.exists) return {};
  if (!info.is_dir) return Status(code, "output path exists and is not a folder", {out});
  KESTREL_ASSIGN_OR_RETURN(auto names, env.ListDir(out));
  if (!names.empty()) return Status(code, "output folder is not empty; refusing to overwrite", {out});
  return {};
}

Result<std::string> MakeStagingDir(Env& env, const std::string& out_arg) {
  const std::string out = Trimmed(out_arg);
  std::string parent = DirName(out);
  if (parent.empty()) parent = ".";
  KESTREL_RETURN_IF_ERROR(env.CreateDirs(parent));
  std::random_device rd;
  for (int attempt = 0; attempt < 16; ++attempt) {
    char suffix[24];
    std::snprintf(suffix, sizeof(suffix), "%08x%08x", rd(), rd());
    std::string cand = out + ".kestrel-tmp-" + suffix;
    if (env.Stat(cand).exists) continue;
    KESTREL_RETURN_IF_ERROR(env.CreateDirs(cand));
    return cand;
  }
  return Status::Internal("cannot pick a temporary folder name", {out});
}

Status PublishStagingDir(Env& env, const std::string& staging, const std::string& out_arg, Status s) {
  const std::string out = Trimmed(out_arg);
  std::string parent = DirName(out);
  if (parent.empty()) parent = ".";
  if (s.IsOk()) s = env.SyncFilesystem(staging);
  // rename(2) replaces an empty folder; refuse if it filled up meanwhile.
  if (s.IsOk()) s = RequireEmptyOrAbsent(env, out);
  if (s.IsOk()) s = env.Rename(staging, out);
  if (s.IsOk()) s = env.SyncDir(parent);
  if (!s.IsOk()) (void)env.RemoveAll(staging);
  return s;
}

}  // namespace kestrel::data
