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
  auto ds = kestrel::data::ReadDataset(Tree(), opts);  // what import and validate call
  kestrel::fuzz::RequireSaneRead(ds);
  return 0;
}
