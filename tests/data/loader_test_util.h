// Helpers the loader tests share (loader_test.cc, loader_stats_test.cc):
// an in-memory dataset and a loader over it.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/hash.h"
#include "data/loader.h"

namespace kestrel::data {

// An in-memory dataset: manifest + encoded image bytes by path.
struct MemData {
  Manifest manifest;
  std::map<std::string, std::string> bytes;
  ImageSource Source(std::string fail_path = "") const {
    return [this, fail_path](const ManifestEntry& e) -> Result<std::string> {
      if (e.path == fail_path) return Status::IoError("injected read failure", {e.path});
      auto it = bytes.find(e.path);
      if (it == bytes.end()) return Status::NotFound("no such image", {e.path});
      return it->second;
    };
  }
};

inline void AddEntry(MemData& d, const std::string& path, Split split, const std::string& jpeg, int w, int h,
                     std::vector<Box> boxes) {
  ManifestEntry e;
  e.path = path;
  e.split = split;
  e.image_sha = Sha256Hex(jpeg);
  e.width = w;
  e.height = h;
  e.boxes = std::move(boxes);
  d.manifest.entries.push_back(e);
  d.bytes[path] = jpeg;
}

inline std::unique_ptr<Loader> Make(const MemData& d, const LoaderOptions& o, const AugmentOptions& a = {},
                                    ImageSource source = nullptr, Split split = Split::kTrain) {
  auto l = Loader::Create(d.manifest, split, source ? source : d.Source(), o, a);
  EXPECT_TRUE(l.IsOk()) << l.GetStatus().ToString();
  return l.IsOk() ? std::move(l).Value() : nullptr;
}

}  // namespace kestrel::data
