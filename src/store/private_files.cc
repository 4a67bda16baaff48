#include "store/private_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace kestrel::store {
namespace {

Status Errno(const std::string& what, const std::string& path, int e) {
  return Status::IoError(what + ": " + std::strerror(e), {path});
}

std::string Octal(unsigned mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", mode & 07777u);
  return buf;
}

}  // namespace

Status CreatePrivateDir(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return {};
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) return Status::IoError("cannot create folder: " + ec.message(), {parent.string()});
  }
  if (::mkdir(path.c_str(), 0700) != 0) {
    if (errno == EEXIST) return {};  // made meanwhile (another process): theirs
    return Errno("cannot create folder", path, errno);
  }
  // mkdir's mode passes through the umask; chmod's does not.
  if (::chmod(path.c_str(), 0700) != 0) return Errno("cannot set mode 0700", path, errno);
  return {};
}

Status CreatePrivateFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return {};
    return Errno("cannot create", path, errno);
  }
  const int rc = ::fchmod(fd, 0600);
  const int e = errno;
  ::close(fd);
  if (rc != 0) return Errno("cannot set mode 0600", path, e);
  return {};
}

std::vector<std::string> HomeModeWarnings(const std::string& home) {
  std::vector<std::string> out;
  const std::string db = home + "/kestrel.db";
  for (const std::string& p : {home, home + "/objects", db, db + "-wal", db + "-shm"}) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) continue;
    const unsigned mode = st.st_mode & 07777u;
    if ((mode & 077u) == 0) continue;
    const bool dir = S_ISDIR(st.st_mode);
    out.push_back("warning: " + p + " has mode " + Octal(mode) + " (" +
                  ((mode & 044u) != 0 ? "group/other may read it" : "group/other have access") + "): chmod " +
                  (dir ? "700 " : "600 ") + p);
  }
  return out;
}

}  // namespace kestrel::store
