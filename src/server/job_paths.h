// The files a job submitted over HTTP may name (docs/server.md "Job keys
// that name files"). A client of `kestrel serve` is not the operator of its
// host, so every job key whose value the job reads as a file (the keys
// app::DraftJob hands to its resolvers: train pretrained= and model=X.pt,
// val model=, export model=) may only name
//   1. a registered model (NAME, NAME@vN, NAME@TAG, an id prefix; text
//      without '/'): its hash-verified weights blob;
//   2. a regular file under a --data-root folder ("ROOT-NAME/rest", a path
//      relative to the only root, or an absolute path inside a root) or
//      under the Kestrel home (a job's weights: HOME/jobs/<id>/...), with
//      symlinks resolved: the canonical path must still be inside.
// Anything else (a path elsewhere, one that does not exist, a folder, a
// ".." segment, a relative path that is no root's) is refused with one
// message per key (RefusedJobFile), the same text whether or not the path
// exists: the server tells a client nothing of its host's files (no
// existence, no size, no content). The job stores the canonical path.
//
// The CLI (`kestrel submit` on the operator's machine) keeps taking any
// local path. A root's or the home's contents are the operator's: a symlink
// swapped in there between submit and the job's read is not defended
// against (as for imports, data_roots.h).
//
// Thread-safety: immutable after construction; Resolve borrows `reg` (one
// MetadataStore per thread).
#pragma once

#include <string>

#include "app/models.h"
#include "core/status.h"
#include "server/data_roots.h"

namespace kestrel::server {

class JobFilePolicy {
 public:
  // `roots` is borrowed and must outlive the policy.
  JobFilePolicy(const DataRoots& roots, const std::string& home);

  // `text`: the value of job key `key` as the request gave it. Returns the
  // file the job is to read (with the model, for a registered one).
  // kInvalidArgument at {request, 0, key} with RefusedJobFile(key) when
  // it is none of the above; the registry's own error (kCorruption: a
  // damaged blob) for a registered model that cannot be read.
  Result<app::ResolvedWeights> Resolve(app::ModelRegistry& reg, const std::string& key,
                                       const std::string& text) const;

 private:
  // The canonical regular file `text` names inside a root or the home, or
  // "" when it names none.
  std::string AllowedFile(const std::string& text) const;

  const DataRoots& roots_;
  std::string home_;  // canonical
};

// The one refusal of a job file: "KEY=: names no registered model and no
// file ..." (what a client may name instead); never the path, its
// existence, size or content.
Status RefusedJobFile(const std::string& key);

}  // namespace kestrel::server
