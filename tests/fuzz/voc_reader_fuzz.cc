// ReadVocDataset on one arbitrary annotation XML (Annotations/a.xml next to
// JPEGImages/a.jpg). Checks: no crash, errors name something, everything the
// reader hands on is JSON-safe, kept boxes are positive-sized with a class in
// range, and file names stay inside JPEGImages/.
#include <cstdint>
#include <string>
#include <string_view>

#include "data/formats.h"
#include "fuzz_support.h"

namespace {

const std::string& Tree() {
  static const std::string root = [] {
    std::string r = kestrel::fuzz::ScratchDir() + "/voc";
    std::filesystem::create_directories(r + "/Annotations");
    std::filesystem::create_directories(r + "/JPEGImages");
    kestrel::fuzz::WriteFile(r + "/JPEGImages/a.jpg", "not decoded by the reader");
    return r;
  }();
  return root;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kestrel::fuzz::WriteFile(Tree() + "/Annotations/a.xml",
                           std::string_view(reinterpret_cast<const char*>(data), size));
  kestrel::data::ReadOptions opts;
  opts.format = "voc";
  auto ds = kestrel::data::ReadVocDataset(Tree(), opts);
  if (!ds.IsOk()) {
    kestrel::fuzz::RequireJsonSafe(ds.GetStatus());
    return 0;
  }
  kestrel::fuzz::RequireJsonSafe(*ds);
  for (const auto& s : ds->samples) {
    const std::string& r = s.rel_path;
    if (r.empty() || r[0] == '/' || r.rfind("../", 0) == 0 || r.find("/../") != std::string::npos) __builtin_trap();
    for (const auto& b : s.pixel_boxes) {
      if (b.cls < 0 || b.cls >= static_cast<int>(ds->names.size())) __builtin_trap();
      if (!(b.x2 > b.x1) || !(b.y2 > b.y1)) __builtin_trap();
    }
  }
  return 0;
}
