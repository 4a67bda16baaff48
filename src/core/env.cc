#include "core/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

namespace kestrel {
namespace {

Status ErrnoStatus(const std::string& what, const std::string& path, int err) {
  std::string msg = what + ": " + std::strerror(err);
  if (err == ENOSPC || err == EDQUOT) return Status::ResourceExhausted(msg, {path});
  if (err == ENOENT) return Status::NotFound(msg, {path});
  return Status::IoError(msg, {path});
}

class PosixEnv final : public Env {
 public:
  Result<std::string> ReadFile(const std::string& path, uint64_t max_bytes) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("cannot open", path, errno);
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      int e = errno;
      ::close(fd);
      return ErrnoStatus("cannot stat", path, e);
    }
    if (S_ISDIR(st.st_mode)) {
      ::close(fd);
      return Status::InvalidArgument("is a directory, expected a file", {path});
    }
    if (static_cast<uint64_t>(st.st_size) > max_bytes) {
      ::close(fd);
      return Status::ResourceExhausted(
          "file is " + std::to_string(st.st_size) + " bytes, over the limit of " + std::to_string(max_bytes),
          {path});
    }
    std::string out;
    out.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < out.size()) {
      ssize_t n = ::read(fd, out.data() + got, out.size() - got);
      if (n < 0) {
        if (errno == EINTR) continue;
        int e = errno;
        ::close(fd);
        return ErrnoStatus("read failed", path, e);
      }
      if (n == 0) break;  // file shrank while reading
      got += static_cast<size_t>(n);
    }
    out.resize(got);
    ::close(fd);
    return out;
  }

  Status WriteFileAtomic(const std::string& path, std::string_view data) override {
    return WriteByRename(path, data, /*sync=*/true);
  }

  Status WriteFileDeferred(const std::string& path, std::string_view data) override {
    return WriteByRename(path, data, /*sync=*/false);
  }

  Status SyncFilesystem(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("cannot open", path, errno);
    int rc = ::syncfs(fd);
    int e = errno;
    ::close(fd);
    if (rc != 0) return ErrnoStatus("syncfs failed", path, e);
    return {};
  }

  Status WriteByRename(const std::string& path, std::string_view data, bool sync) {
    static std::atomic<uint64_t> counter{0};
    std::string tmp =
        path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoStatus("cannot create", tmp, errno);
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::write(fd, data.data() + off, data.size() - off);
      if (n < 0) {
        if (errno == EINTR) continue;
        int e = errno;
        ::close(fd);
        ::unlink(tmp.c_str());
        return ErrnoStatus("write failed", path, e);
      }
      off += static_cast<size_t>(n);
    }
    if (sync && ::fsync(fd) != 0) {
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return ErrnoStatus("fsync failed", path, e);
    }
    if (::close(fd) != 0) {
      int e = errno;
      ::unlink(tmp.c_str());
      return ErrnoStatus("close failed", path, e);
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      int e = errno;
      ::unlink(tmp.c_str());
      return ErrnoStatus("rename failed", path, e);
    }
    return sync ? SyncDir(DirName(path)) : Status();
  }

  FileInfo Stat(const std::string& path) override {
    FileInfo info;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return info;
    info.exists = true;
    info.is_symlink = S_ISLNK(st.st_mode);
    if (info.is_symlink) {
      struct stat target {};
      if (::stat(path.c_str(), &target) == 0) st = target;
    }
    info.is_dir = S_ISDIR(st.st_mode);
    info.is_regular = S_ISREG(st.st_mode);
    info.size = static_cast<uint64_t>(st.st_size);
    info.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + int64_t{st.st_mtim.tv_nsec};
    return info;
  }

  Status CreateDirs(const std::string& path) override {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) return Status::IoError("cannot create folder: " + ec.message(), {path});
    return {};
  }

  Result<std::vector<std::string>> ListDir(const std::string& path) override {
    DIR* d = ::opendir(path.c_str());
    if (d == nullptr) return ErrnoStatus("cannot list folder", path, errno);
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(std::move(n));
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return names;
  }

  Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return ErrnoStatus("cannot remove", path, errno);
    return {};
  }

  Status RemoveAll(const std::string& path) override {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    if (ec) return Status::IoError("cannot remove: " + ec.message(), {path});
    return {};
  }

  Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return ErrnoStatus("cannot rename " + from + " to " + to, to, errno);
    }
    return {};
  }

  Status SyncDir(const std::string& path) override {
    int fd = ::open(path.empty() ? "." : path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("cannot open folder", path, errno);
    int rc = ::fsync(fd);
    int e = errno;
    ::close(fd);
    if (rc != 0 && e != EINVAL) return ErrnoStatus("fsync folder failed", path, e);
    return {};
  }

  int64_t NowMicros() override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  int64_t UnixSeconds() override {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  int64_t UnixMillis() override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  void SleepMicros(int64_t micros) override {
    std::this_thread::sleep_for(std::chrono::microseconds(micros));
  }
};

}  // namespace

Env& Env::Default() {
  static PosixEnv* env = new PosixEnv();  // never destroyed: usable during exit
  return *env;
}

std::string JoinPath(std::string_view a, std::string_view b) {
  if (a.empty()) return std::string(b);
  if (b.empty()) return std::string(a);
  if (b.front() == '/') return std::string(b);
  std::string out(a);
  if (out.back() != '/') out += '/';
  out += b;
  return out;
}

std::string DirName(std::string_view path) {
  size_t p = path.find_last_of('/');
  if (p == std::string_view::npos) return ".";
  if (p == 0) return "/";
  return std::string(path.substr(0, p));
}

std::string BaseName(std::string_view path) {
  size_t p = path.find_last_of('/');
  return std::string(p == std::string_view::npos ? path : path.substr(p + 1));
}

std::string Stem(std::string_view path) {
  std::string base = BaseName(path);
  size_t dot = base.find_last_of('.');
  if (dot == std::string::npos || dot == 0) return base;
  return base.substr(0, dot);
}

std::string Extension(std::string_view path) {
  std::string base = BaseName(path);
  size_t dot = base.find_last_of('.');
  if (dot == std::string::npos || dot == 0) return "";
  std::string ext = base.substr(dot + 1);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

Result<std::string> SafeRelativePath(std::string_view path) {
  if (path.empty()) return Status::InvalidArgument("empty path");
  if (path.front() == '/' || path.find('\\') != std::string_view::npos ||
      (path.size() > 1 && path[1] == ':')) {
    return Status::InvalidArgument("path '" + std::string(path) + "' must be relative to the dataset root");
  }
  std::vector<std::string> parts;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string part(path.substr(i, j - i));
    if (part.empty() || part == ".") {
      // skip
    } else if (part == "..") {
      if (parts.empty()) {
        return Status::InvalidArgument("path '" + std::string(path) + "' escapes the dataset root");
      }
      parts.pop_back();
    } else {
      parts.push_back(std::move(part));
    }
    i = j + 1;
  }
  if (parts.empty()) return Status::InvalidArgument("path '" + std::string(path) + "' is empty");
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += '/';
    out += p;
  }
  return out;
}

}  // namespace kestrel
