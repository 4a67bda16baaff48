// The Kestrel home is its owner's alone (docs/disk.md "Permissions"): it
// holds the metadata database (API token hashes, every job's config) and
// the artifact store (datasets, model weights). Kestrel creates the home,
// the SQLite database (its -wal/-shm take the database's mode) and the
// blob store's objects/ folder owner-only, whatever the umask, and warns
// when existing ones let group or other users in. It never changes the
// mode of something it did not create.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace kestrel::store {

// Creates folder `path` with mode 0700 (set with chmod: a umask cannot
// widen or narrow it) when it does not exist; its missing parents are
// created as by Env::CreateDirs. An existing folder is left as it is.
Status CreatePrivateDir(const std::string& path);
// Creates `path` as an empty file of mode 0600 when it does not exist; an
// existing file is left as it is.
Status CreatePrivateFile(const std::string& path);

// One line per existing `home`, `home`/objects, `home`/kestrel.db and its
// -wal/-shm whose mode has group or other bits: "warning: PATH has mode
// 0755 (group/other may read it): chmod 700 PATH". Empty when all are
// owner-only or absent.
std::vector<std::string> HomeModeWarnings(const std::string& home);

}  // namespace kestrel::store
