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
  kestrel::fuzz::RequireSaneRead(ds);
  return 0;
}
