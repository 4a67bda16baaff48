#include "core/staged_dir.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>

namespace kestrel {
namespace {

// Moves every entry of `from` into `to` (an existing folder): files and
// links by rename (replacing), folders merged recursively. `last` names
// (top level only) go after the others.
Status MergeInto(Env& env, const std::string& from, const std::string& to,
                 const std::vector<std::string>& last) {
  KESTREL_ASSIGN_OR_RETURN(std::vector<std::string> names, env.ListDir(from));
  std::stable_partition(names.begin(), names.end(), [&](const std::string& n) {
    return std::find(last.begin(), last.end(), n) == last.end();
  });
  for (const auto& n : names) {
    const std::string src = JoinPath(from, n), dst = JoinPath(to, n);
    const FileInfo s = env.Stat(src), d = env.Stat(dst);
    if (s.is_dir && !s.is_symlink && d.is_dir && !d.is_symlink) {
      KESTREL_RETURN_IF_ERROR(MergeInto(env, src, dst, {}));
      continue;
    }
    if (d.is_dir && !d.is_symlink) KESTREL_RETURN_IF_ERROR(env.RemoveAll(dst));
    KESTREL_RETURN_IF_ERROR(env.Rename(src, dst));
  }
  return env.SyncDir(to);
}

std::string Trimmed(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

std::string ParentOf(const std::string& path) {
  std::string parent = DirName(path);
  return parent.empty() ? "." : parent;
}

}  // namespace

Status RequireEmptyOrAbsent(Env& env, const std::string& path_arg, StatusCode code) {
  const std::string path = Trimmed(path_arg);
  const FileInfo info = env.Stat(path);
  if (!info.exists) return {};
  if (!info.is_dir) return Status(code, "output path exists and is not a folder", {path});
  KESTREL_ASSIGN_OR_RETURN(auto names, env.ListDir(path));
  if (!names.empty()) return Status(code, "output folder is not empty; refusing to overwrite", {path});
  return {};
}

StagedDir::StagedDir(Env& env, std::string final_path, std::string staging)
    : env_(&env), final_(std::move(final_path)), staging_(std::move(staging)), open_(true) {}

StagedDir::StagedDir(StagedDir&& other) noexcept
    : env_(other.env_),
      final_(std::move(other.final_)),
      staging_(std::move(other.staging_)),
      open_(other.open_) {
  other.open_ = false;
}

StagedDir& StagedDir::operator=(StagedDir&& other) noexcept {
  if (this != &other) {
    if (open_) (void)env_->RemoveAll(staging_);
    env_ = other.env_;
    final_ = std::move(other.final_);
    staging_ = std::move(other.staging_);
    open_ = other.open_;
    other.open_ = false;
  }
  return *this;
}

StagedDir::~StagedDir() {
  if (open_) (void)env_->RemoveAll(staging_);
}

Result<StagedDir> StagedDir::Create(Env& env, const std::string& final_path) {
  if (final_path.empty()) return Status::InvalidArgument("empty output folder path");
  const std::string clean = Trimmed(final_path);
  static std::atomic<uint64_t> counter{0};
  const std::string staging =
      clean + ".kestrel-tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
  if (env.Stat(staging).exists) KESTREL_RETURN_IF_ERROR(env.RemoveAll(staging));
  KESTREL_RETURN_IF_ERROR(env.CreateDirs(staging));
  return StagedDir(env, clean, staging);
}

Status StagedDir::Commit(const std::vector<std::string>& last) {
  if (!open_) return Status::FailedPrecondition("staged folder already committed or abandoned", {final_});
  const FileInfo f = env_->Stat(final_);
  if (f.exists && !f.is_dir) return Status::AlreadyExists("exists and is not a folder", {final_});
  if (!f.exists) {
    KESTREL_RETURN_IF_ERROR(env_->Rename(staging_, final_));
    open_ = false;
    return env_->SyncDir(ParentOf(final_));
  }
  KESTREL_RETURN_IF_ERROR(MergeInto(*env_, staging_, final_, last));
  open_ = false;
  return env_->RemoveAll(staging_);
}

Status StagedDir::CommitFresh() {
  if (!open_) return Status::FailedPrecondition("staged folder already committed or abandoned", {final_});
  Status s = env_->SyncFilesystem(staging_);
  // rename(2) replaces an empty folder; refuse if it filled up meanwhile.
  if (s.IsOk()) s = RequireEmptyOrAbsent(*env_, final_);
  if (s.IsOk()) s = env_->Rename(staging_, final_);
  if (!s.IsOk()) return s;  // the destructor removes the staging folder
  open_ = false;
  return env_->SyncDir(ParentOf(final_));
}

}  // namespace kestrel
