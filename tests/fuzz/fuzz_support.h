// Shared checks for the reader fuzzers: what a reader hands on must be safe to
// print as JSON (valid UTF-8 everywhere: issue 10's abort class), and a scratch
// folder per process for readers that only take paths.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "data/dataset.h"

namespace kestrel::fuzz {

// Serializes everything --json output can carry from a SourceDataset with the
// strict (throwing) dumper: a reader that lets invalid UTF-8 through traps.
inline void RequireJsonSafe(const data::SourceDataset& ds) {
  nlohmann::json j;
  j["names"] = ds.names;
  for (const auto& f : ds.findings) {
    j["findings"].push_back({{"check", f.check},
                             {"file", f.file},
                             {"line", f.line},
                             {"field", f.field},
                             {"message", f.message},
                             {"action", f.action}});
    if (f.check.empty()) __builtin_trap();
  }
  for (const auto& s : ds.samples) {
    j["samples"].push_back({{"rel_path", s.rel_path}, {"image", s.image_path}, {"label", s.label_path}});
  }
  try {
    (void)j.dump();
  } catch (const nlohmann::json::exception&) {
    __builtin_trap();
  }
}

inline void RequireJsonSafe(const Status& s) {
  try {
    (void)nlohmann::json({{"message", s.Message()}, {"file", s.Where().file}, {"field", s.Where().field}})
        .dump();
  } catch (const nlohmann::json::exception&) {
    __builtin_trap();
  }
  if (s.Message().empty()) __builtin_trap();
}

// What every reader result must satisfy: a failure is a JSON-safe Status
// with a message; a success is JSON-safe, every sample path stays inside the
// dataset root ("..jpg" is a fine name, "../x" is not) and every pixel box has
// a known class and positive extent. Returns whether the read succeeded.
inline bool RequireSaneRead(const Result<data::SourceDataset>& ds) {
  if (!ds.IsOk()) {
    RequireJsonSafe(ds.GetStatus());
    return false;
  }
  RequireJsonSafe(*ds);
  for (const auto& s : ds->samples) {
    const std::string& r = s.rel_path;
    if (r.empty() || r[0] == '/' || r == ".." || r.rfind("../", 0) == 0 ||
        r.find("/../") != std::string::npos) {
      __builtin_trap();
    }
    for (const auto& b : s.pixel_boxes) {
      if (b.cls < 0 || b.cls >= static_cast<int>(ds->names.size())) __builtin_trap();
      if (!(b.x2 > b.x1) || !(b.y2 > b.y1)) __builtin_trap();
    }
  }
  return true;
}

// A per-process scratch folder under /tmp; every iteration rewrites the same
// few files in it (tools/fuzz.sh removes it afterwards).
inline const std::string& ScratchDir() {
  static const std::string dir = [] {
    std::string d = "/tmp/kestrel-fuzz-" + std::to_string(getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

inline void WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace kestrel::fuzz
