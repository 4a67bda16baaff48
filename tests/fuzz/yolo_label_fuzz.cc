// ParseYoloLabels on arbitrary bytes. Besides "no crash", checks the
// contract: every kept box is finite, positive-sized, inside [0, 1] and of a
// class in range.
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#include "data/formats.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using kestrel::data::Finding;
  // The first byte picks the class count, including "unknown" (-1).
  int num_classes = size > 0 ? static_cast<int>(data[0] % 8) - 1 : 3;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<Finding> findings;
  auto boxes = kestrel::data::ParseYoloLabels(text, "fuzz.txt", num_classes, &findings);
  constexpr double kTol = 1e-5;
  for (const auto& b : boxes) {
    bool ok = std::isfinite(b.cx) && std::isfinite(b.cy) && std::isfinite(b.w) && std::isfinite(b.h) &&
              b.w > 0 && b.h > 0 && b.cx - b.w / 2 >= -kTol && b.cx + b.w / 2 <= 1 + kTol &&
              b.cy - b.h / 2 >= -kTol && b.cy + b.h / 2 <= 1 + kTol && b.cls >= 0 &&
              (num_classes < 0 || b.cls < num_classes);
    if (!ok) __builtin_trap();
  }
  for (const Finding& f : findings) {
    if (f.check.empty() || f.file != "fuzz.txt" || f.line < 0) __builtin_trap();
  }
  return 0;
}
