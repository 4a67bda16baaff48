// ReadYoloDataset on an arbitrary data.yaml (the rest of the tree is fixed:
// one image and one label per split). Checks: no crash, every error names
// something, every finding and name is JSON-safe, classes stay in range.
#include <cstdint>
#include <string>
#include <string_view>

#include "data/formats.h"
#include "fuzz_support.h"

namespace {

const std::string& Tree() {
  static const std::string root = [] {
    using kestrel::fuzz::WriteFile;
    std::string r = kestrel::fuzz::ScratchDir() + "/yolo";
    for (const char* split : {"train", "val"}) {
      std::filesystem::create_directories(r + "/images/" + split);
      std::filesystem::create_directories(r + "/labels/" + split);
      WriteFile(r + "/images/" + split + "/a.jpg", "not decoded by the reader");
      WriteFile(r + "/labels/" + split + "/a.txt", "0 0.5 0.5 0.2 0.2\n1 0.3 0.3 0.1 0.1\n");
    }
    return r;
  }();
  return root;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string yaml = Tree() + "/data.yaml";
  kestrel::fuzz::WriteFile(yaml, std::string_view(reinterpret_cast<const char*>(data), size));
  kestrel::data::ReadOptions opts;
  opts.format = "yolo";
  auto ds = kestrel::data::ReadDataset(yaml, opts);  // what import and validate call
  if (!kestrel::fuzz::RequireSaneRead(ds)) return 0;
  for (const auto& s : ds->samples) {
    for (const auto& b : s.boxes) {
      if (b.cls < 0 || (!ds->names.empty() && b.cls >= static_cast<int>(ds->names.size()))) __builtin_trap();
    }
  }
  return 0;
}
