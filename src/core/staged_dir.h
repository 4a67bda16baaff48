// StagedDir: a folder of outputs built beside its final path and moved into
// place only when complete, so a reader never mistakes a half-written folder
// (a crash, a full disk, an error halfway) for a result:
//
//   KESTREL_ASSIGN_OR_RETURN(StagedDir out, StagedDir::Create(env, "runs/val/val3"));
//   ... write files under out.Path() ...
//   KESTREL_RETURN_IF_ERROR(out.Commit({"result.json"}));
//
// The staging folder is `<final>.kestrel-tmp-<pid>-<n>` in the same parent
// (same filesystem, so the move is a rename). Destroying an uncommitted
// StagedDir removes it; after a crash it stays, named for what it is.
//
// Commit: when the final folder does not exist (the usual case: a fresh run
// folder) one rename(2) publishes the whole folder. When it exists (a run
// folder reused with exist_ok=true) the staged entries are renamed over
// their namesakes one by one (each file replaced atomically, folders merged),
// with the names in `last` moved last: a reader that waits for that file
// (result.json) sees every other file of the same run.
#pragma once

#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"

namespace kestrel {

// OK when `path` is absent or an empty folder; otherwise `code` with a
// message naming it ("exists and is not a folder" / "is not empty").
Status RequireEmptyOrAbsent(Env& env, const std::string& path, StatusCode code = StatusCode::kAlreadyExists);

class StagedDir {
 public:
  // Creates the staging folder (and the final folder's parents).
  static Result<StagedDir> Create(Env& env, const std::string& final_path);

  StagedDir(StagedDir&& other) noexcept;
  StagedDir& operator=(StagedDir&& other) noexcept;
  StagedDir(const StagedDir&) = delete;
  StagedDir& operator=(const StagedDir&) = delete;
  ~StagedDir();

  // Where to write.
  const std::string& Path() const { return staging_; }
  // Where the folder ends up.
  const std::string& FinalPath() const { return final_; }
  // Moves the staged content to FinalPath() (see the file comment). Once.
  Status Commit(const std::vector<std::string>& last = {});
  // For outputs that must never mix with what is already there (a dataset
  // tree: import would take a merged tree for one dataset). Makes every
  // write under Path() durable, checks FinalPath() is still absent or an
  // empty folder (AlreadyExists naming it otherwise) and publishes it with
  // one rename(2). On error the staging folder is removed. Once.
  Status CommitFresh();

 private:
  StagedDir(Env& env, std::string final_path, std::string staging);
  Env* env_ = nullptr;
  std::string final_, staging_;
  bool open_ = false;  // staging folder exists and is ours to remove
};

}  // namespace kestrel
