// The data roots of `kestrel serve --data-root DIR` (docs/server.md "Data
// roots"): the only folders a request may import a dataset from. One
// function turns a request's path into a folder or file inside a root;
// another checks that nothing reachable from it through symlinks leaves the
// roots; a confining Env makes the importer's own reads fail outside them.
//
// What is checked, in this order (every refusal is invalid_argument, field
// "path"):
//   1. the text: not empty, no NUL, no "%XX" escape (a body path is never
//      percent-decoded, so an escape there is a trick or a mistake), no ".."
//      segment anywhere;
//   2. where it points: "ROOT-NAME/rest" (ROOT-NAME: a root folder's base
//      name), a path relative to the one root when only one is configured,
//      or an absolute path lexically inside a root;
//   3. after resolution: the canonical path (symlinks resolved) is inside
//      the root it was resolved against;
//   4. the tree: every symlink under the dataset folder (the file's folder
//      for a data.yaml / instances JSON) resolves inside a root, and a
//      symlinked folder inside a root is walked too;
//   5. while importing: every file the importer reads through its Env
//      (the images) resolves inside a root or the Kestrel home.
// The dataset readers themselves keep YAML paths and COCO file names inside
// the dataset folder (core SafeRelativePath), so 4 covers the label and
// annotation files. A root's contents are the operator's: a symlink swapped
// between these checks and the read is not defended against.
//
// Thread-safety: DataRoots is immutable after Open; ConfinedEnv is as
// thread-safe as its target.
#pragma once

#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"

namespace kestrel::server {

class DataRoots {
 public:
  struct Root {
    std::string name;  // the folder's base name, how a request names it
    std::string path;  // canonical, absolute
  };

  DataRoots() = default;
  // Every entry must be an existing folder; two roots may not share a base
  // name. Errors name the field "data-root".
  static Result<DataRoots> Open(const std::vector<std::string>& dirs);

  bool Empty() const { return roots_.empty(); }
  const std::vector<Root>& Roots() const { return roots_; }

  // Steps 1-4 above: the canonical path the importer is to read.
  Result<std::string> Resolve(const std::string& request_path) const;
  // True when canonical `path` is a root or lies under one.
  bool Inside(const std::string& canonical_path) const;

 private:
  Status CheckTree(const std::string& dir) const;
  std::vector<Root> roots_;
};

// True when `path` equals `base` or lies under it, compared by whole path
// components (/data/ab is not under /data/a). Both should be canonical: no
// "..", no symlink is resolved here.
bool PathIsUnder(const std::string& path, const std::string& base);

// An Env whose ReadFile refuses (kInvalidArgument, field "path") a file
// whose canonical path is neither inside a data root nor inside `home`.
class ConfinedEnv : public EnvWrapper {
 public:
  ConfinedEnv(Env& target, const DataRoots& roots, const std::string& home);
  Result<std::string> ReadFile(const std::string& path, uint64_t max_bytes) override;

 private:
  const DataRoots& roots_;
  std::string home_;  // canonical
};

}  // namespace kestrel::server
