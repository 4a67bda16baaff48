// All-or-nothing output folders for dataset trees (export, synth): a reader
// (import!) must never mistake a half-written tree for a dataset.
//
//   KESTREL_ASSIGN_OR_RETURN(std::string tmp, MakeStagingDir(env, out));
//   Status s = WriteTree(tmp);                  // any writes under tmp
//   return PublishStagingDir(env, tmp, out, s);  // rename into place, or clean up
//
// The staging folder is "<out>.kestrel-tmp-<random>" in the same parent
// (same filesystem, so publishing is one rename(2)). After a crash it stays
// behind under that name, never as `out`.
#pragma once

#include <string>

#include "core/env.h"
#include "core/status.h"

namespace kestrel::data {

// OK when `out` is absent or an empty folder (FailedPrecondition /
// AlreadyExists naming it otherwise, with `what` as the subject).
Status RequireEmptyOrAbsent(Env& env, const std::string& out, StatusCode code = StatusCode::kAlreadyExists);

// Creates the parent of `out` and a fresh staging folder beside `out`.
Result<std::string> MakeStagingDir(Env& env, const std::string& out);

// When `written` is OK: syncs the filesystem (every write under `staging`,
// deferred or not, becomes durable), checks `out` is still absent or empty,
// renames `staging` to `out` and syncs the parent folder. On any error,
// including a non-OK `written`, removes `staging` and returns the error.
Status PublishStagingDir(Env& env, const std::string& staging, const std::string& out, Status written);

}  // namespace kestrel::data
