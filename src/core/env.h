// Env: the seam through which Kestrel touches the filesystem and the clock, so
// tests can fake time and inject I/O faults (see FaultInjectionEnv and
// FakeClock in core/fault_env.h).
//
// Thread-safety: Env::Default() is thread-safe. Paths are plain POSIX paths.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kestrel {

struct FileInfo {
  bool exists = false;
  bool is_dir = false;
  bool is_regular = false;
  bool is_symlink = false;
  uint64_t size = 0;
  int64_t mtime_ns = 0;  // last modification, nanoseconds since the Unix epoch (of the target when a symlink)
};

class Env {
 public:
  virtual ~Env() = default;

  // The process-wide POSIX environment. Never destroyed.
  static Env& Default();

  // ---- files ----
  // Whole file. Fails with kResourceExhausted (naming the path and the limit)
  // when the file is larger than `max_bytes`, before reading it.
  virtual Result<std::string> ReadFile(const std::string& path, uint64_t max_bytes = UINT64_MAX) = 0;
  // Crash-safe replace: writes `path.tmp-<unique>` in the same folder, fsyncs
  // it, renames it over `path`, fsyncs the folder. After a crash `path` holds
  // either the old or the new content, never a mix.
  virtual Status WriteFileAtomic(const std::string& path, std::string_view data) = 0;
  // Same replace-by-rename, without the fsyncs: after a process crash `path`
  // is old or new, but after a power loss the new content is only durable
  // once SyncFilesystem() has returned. For bulk writes (dataset blobs) that
  // end with one SyncFilesystem() before anything refers to them.
  virtual Status WriteFileDeferred(const std::string& path, std::string_view data) = 0;
  // syncfs(2) of the filesystem holding `path`: every deferred write on it
  // is durable when this returns OK.
  virtual Status SyncFilesystem(const std::string& path) = 0;
  // lstat-like: does not follow a final symlink.
  virtual FileInfo Stat(const std::string& path) = 0;
  // mkdir -p.
  virtual Status CreateDirs(const std::string& path) = 0;
  // Entry names (not paths) of a folder, sorted, without "." and "..".
  virtual Result<std::vector<std::string>> ListDir(const std::string& path) = 0;
  virtual Status RemoveFile(const std::string& path) = 0;
  // rm -r; missing path is OK.
  virtual Status RemoveAll(const std::string& path) = 0;
  // Atomic within one filesystem.
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  // fsync a folder so a rename/create in it is durable.
  virtual Status SyncDir(const std::string& path) = 0;

  // ---- clock ----
  // Monotonic microseconds, for durations and timeouts.
  virtual int64_t NowMicros() = 0;
  // Wall clock, Unix seconds, for timestamps stored in records.
  virtual int64_t UnixSeconds() = 0;
  // Wall clock, Unix milliseconds: the one clock of store times (jobs,
  // attempts, events, tokens, webhooks) and of every front end's "now".
  virtual int64_t UnixMillis() = 0;
  virtual void SleepMicros(int64_t micros) = 0;
};

// A wrapper that forwards everything to a target Env. Subclass to override a
// few calls (fault injection, fake clocks).
class EnvWrapper : public Env {
 public:
  explicit EnvWrapper(Env& target) : target_(target) {}
  Env& Target() { return target_; }

  Result<std::string> ReadFile(const std::string& path, uint64_t max_bytes) override {
    return target_.ReadFile(path, max_bytes);
  }
  Status WriteFileAtomic(const std::string& path, std::string_view data) override {
    return target_.WriteFileAtomic(path, data);
  }
  Status WriteFileDeferred(const std::string& path, std::string_view data) override {
    return target_.WriteFileDeferred(path, data);
  }
  Status SyncFilesystem(const std::string& path) override { return target_.SyncFilesystem(path); }
  FileInfo Stat(const std::string& path) override { return target_.Stat(path); }
  Status CreateDirs(const std::string& path) override { return target_.CreateDirs(path); }
  Result<std::vector<std::string>> ListDir(const std::string& path) override { return target_.ListDir(path); }
  Status RemoveFile(const std::string& path) override { return target_.RemoveFile(path); }
  Status RemoveAll(const std::string& path) override { return target_.RemoveAll(path); }
  Status Rename(const std::string& from, const std::string& to) override { return target_.Rename(from, to); }
  Status SyncDir(const std::string& path) override { return target_.SyncDir(path); }
  int64_t NowMicros() override { return target_.NowMicros(); }
  int64_t UnixSeconds() override { return target_.UnixSeconds(); }
  int64_t UnixMillis() override { return target_.UnixMillis(); }
  void SleepMicros(int64_t micros) override { target_.SleepMicros(micros); }

 private:
  Env& target_;
};

// Path helpers (pure string functions, no I/O).
std::string JoinPath(std::string_view a, std::string_view b);
std::string DirName(std::string_view path);
std::string BaseName(std::string_view path);
// File name without its last extension: "a/b/img.v2.jpg" -> "img.v2".
std::string Stem(std::string_view path);
// Lowercased extension without the dot: "x.JPG" -> "jpg".
std::string Extension(std::string_view path);
// Lexically normalized relative path, or an error when it is absolute or
// climbs above its root ("../x", "a/../../x"). Used to keep user-supplied
// names (COCO file_name, YAML paths) inside a dataset root.
Result<std::string> SafeRelativePath(std::string_view path);

}  // namespace kestrel
