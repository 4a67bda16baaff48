// ReadCocoJson on arbitrary bytes (in memory, no files). Checks that every
// box has a remapped class inside names and a positive size, and that
// everything `--json` can print of the result (findings, names, paths, the
// error) is valid UTF-8: the strict JSON dumper would abort the CLI otherwise.
#include <cstdint>
#include <string>
#include <string_view>

#include "data/formats.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view json(reinterpret_cast<const char*>(data), size);
  auto ds = kestrel::data::ReadCocoJson(json, "fuzz.json", "/nonexistent/images");
  if (!ds.IsOk()) {
    kestrel::fuzz::RequireJsonSafe(ds.GetStatus());
    return 0;
  }
  kestrel::fuzz::RequireJsonSafe(*ds);
  for (const auto& s : ds->samples) {
    // file_name must stay inside the image root ("..jpg" is a fine name).
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
  return 0;
}
