#include "server/upload_archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

namespace kestrel::server {
namespace {

namespace fs = std::filesystem;

const ErrorLocation kBody{"request", 0, "body"};

Status Refuse(const std::string& entry, const std::string& why) {
  return Status::InvalidArgument("zip entry '" + entry + "' " + why, kBody);
}

// The entry's path `path` as folders under the target: refuses what could
// name a place outside it; "." and empty segments are dropped. `shown` is
// how messages name the entry.
Result<std::vector<std::string>> EntrySegments(const std::string& path, const std::string& shown) {
  if (path.empty()) return Refuse(shown, "has an empty name");
  if (path.front() == '/') return Refuse(shown, "has an absolute path");
  if (path.find('\\') != std::string::npos) return Refuse(shown, "has a backslash in its path");
  if (path.size() >= 2 && path[1] == ':') return Refuse(shown, "starts with a drive letter");
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    const std::string seg = path.substr(i, j - i);
    if (seg == "..") return Refuse(shown, "has a '..' segment");
    if (!seg.empty() && seg != ".") out.push_back(seg);
    i = j + 1;
  }
  if (out.empty()) return Refuse(shown, "names no file");
  return out;
}

// Why an entry of this type (AE_IF*, not a file, folder or symlink) is refused.
std::string TypeText(unsigned type) {
  switch (type) {
    case AE_IFIFO:
      return "is a FIFO (named pipe), not a file or a folder";
    case AE_IFCHR:
      return "is a character device, not a file or a folder";
    case AE_IFBLK:
      return "is a block device, not a file or a folder";
    case AE_IFSOCK:
      return "is a socket, not a file or a folder";
    default: {
      char octal[16];
      std::snprintf(octal, sizeof octal, "%06o", type);
      return std::string("is not a file or a folder (file type ") + octal + ")";
    }
  }
}

struct ArchiveCloser {
  void operator()(struct archive* a) const { archive_read_free(a); }
};

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int Get() const { return fd_; }

 private:
  int fd_;
};

Status WriteAll(int fd, const char* data, size_t n, const std::string& entry) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0)
      return Status::ResourceExhausted("cannot write zip entry '" + entry + "': " + std::strerror(errno),
                                       kBody);
    data += w;
    n -= static_cast<size_t>(w);
  }
  return {};
}

}  // namespace

Status ExtractZip(const std::string& archive_path, const std::string& dest, const ExtractLimits& limits,
                  const std::string& label) {
  std::unique_ptr<struct archive, ArchiveCloser> a(archive_read_new());
  if (!a) return Status::Internal("libarchive: out of memory", kBody);
  archive_read_support_format_zip(a.get());
  if (archive_read_open_filename(a.get(), archive_path.c_str(), size_t{64} << 10) != ARCHIVE_OK) {
    return Status::InvalidArgument(
        std::string("the request body is not a readable zip archive: ") + archive_error_string(a.get()),
        kBody);
  }
  int64_t entries = 0;
  int64_t expanded = 0;
  std::array<char, size_t{64} << 10> buf{};
  for (;;) {
    struct archive_entry* entry = nullptr;
    const int r = archive_read_next_header(a.get(), &entry);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) {
      return Status::InvalidArgument(
          std::string("the request body is not a readable zip archive: ") + archive_error_string(a.get()),
          kBody);
    }
    if (++entries > limits.max_entries) {
      return Status::ResourceExhausted(
          "the zip has more than " + std::to_string(limits.max_entries) + " entries", kBody);
    }
    const char* raw_name = archive_entry_pathname(entry);
    const std::string entry_name = raw_name == nullptr ? std::string() : raw_name;
    const std::string name = label.empty() ? entry_name : label + "/" + entry_name;
    KESTREL_ASSIGN_OR_RETURN(auto segments, EntrySegments(entry_name, name));
    // libarchive's zip reader never reports a hardlink (a zip records no
    // links but symlinks: see upload_archive.h); kept for a reader that does.
    if (archive_entry_hardlink(entry) != nullptr) return Refuse(name, "is a hardlink");
    const auto type = archive_entry_filetype(entry);
    if (type == AE_IFLNK || archive_entry_symlink(entry) != nullptr) return Refuse(name, "is a symlink");
    if (type != AE_IFREG && type != AE_IFDIR) return Refuse(name, TypeText(type));
    fs::path target(dest);
    for (const auto& s : segments) target /= s;
    std::error_code ec;
    if (type == AE_IFDIR) {
      fs::create_directories(target, ec);
      if (ec) return Refuse(name, "cannot be made a folder: " + ec.message());
      continue;
    }
    if (archive_entry_size_is_set(entry) && archive_entry_size(entry) > limits.max_bytes - expanded) {
      return Status::ResourceExhausted(
          "the zip expands to more than " + std::to_string(limits.max_bytes) + " bytes", kBody);
    }
    fs::create_directories(target.parent_path(), ec);
    if (ec) return Refuse(name, "cannot be written: " + ec.message());
    // O_EXCL: a second entry of one path is refused, not merged; O_NOFOLLOW:
    // nothing in the folder is a link (no link entry is written), so a link
    // here is someone else's.
    Fd fd(::open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (fd.Get() < 0) {
      if (errno == EEXIST) return Refuse(name, "appears twice in the zip");
      return Refuse(name, std::string("cannot be written: ") + std::strerror(errno));
    }
    for (;;) {
      const la_ssize_t n = archive_read_data(a.get(), buf.data(), buf.size());
      if (n == 0) break;
      if (n < 0) {
        return Status::InvalidArgument(
            "zip entry '" + name + "' cannot be read: " + archive_error_string(a.get()), kBody);
      }
      expanded += n;
      if (expanded > limits.max_bytes) {
        return Status::ResourceExhausted(
            "the zip expands to more than " + std::to_string(limits.max_bytes) + " bytes", kBody);
      }
      KESTREL_RETURN_IF_ERROR(WriteAll(fd.Get(), buf.data(), static_cast<size_t>(n), name));
    }
  }
  return {};
}

}  // namespace kestrel::server
