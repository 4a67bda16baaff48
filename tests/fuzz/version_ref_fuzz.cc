// NAME@VERSION references (`dataset show`, `submit data=`, `train data=` ...)
// on arbitrary bytes, resolved against a real SQLite store holding three
// versions of "d". Checks: no exception escapes (std::stoll once aborted the
// CLI on d@v99999999999999999999), an error always has a message that
// serializes as JSON, and a resolved version really matches the reference
// (vN -> seq N, a prefix -> an id starting with it, nothing -> the latest).
#include <cstdint>
#include <string>
#include <string_view>

#include "core/json.h"
#include "fuzz_support.h"
#include "store/metadata_store.h"

namespace {

kestrel::store::MetadataStore& Store() {
  static std::unique_ptr<kestrel::store::MetadataStore> store = [] {
    std::string path = kestrel::fuzz::ScratchDir() + "/meta.db";
    std::filesystem::remove(path);
    auto s = kestrel::store::MetadataStore::Open("sqlite:" + path);
    if (!s.IsOk()) __builtin_trap();
    for (const char* id : {"aaaaaa11", "aaaaaa22", "b0b0b0b0"}) {
      kestrel::store::DatasetVersionRecord r;
      r.dataset = "d";
      r.version_id = std::string(id) + std::string(56, '0');
      r.manifest_sha = r.report_sha = std::string(64, 'f');
      bool created = false;
      if (!(*s)->AddDatasetVersion(r, &created).IsOk()) __builtin_trap();
    }
    return std::move(*s);
  }();
  return *store;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string spec(reinterpret_cast<const char*>(data), size);
  std::string name, ref;
  kestrel::store::SplitDatasetRef(spec, &name, &ref);
  auto v = Store().GetVersion(name, ref);
  if (!v.IsOk()) {
    if (v.GetStatus().Message().empty()) __builtin_trap();
    (void)kestrel::DumpJson({{"message", v.GetStatus().Message()}});  // must not throw
    return 0;
  }
  if (v->dataset != name) __builtin_trap();
  const bool seq_form = ref.size() >= 2 && (ref[0] == 'v' || ref[0] == 'V') &&
                        ref.find_first_not_of("0123456789", 1) == std::string::npos;
  if (ref.empty() || ref == "latest") {
    if (v->seq != 3) __builtin_trap();
  } else if (seq_form) {
    size_t first = ref.find_first_not_of('0', 1);
    std::string digits = first == std::string::npos ? "0" : ref.substr(first);
    if (digits != std::to_string(v->seq)) __builtin_trap();
  } else if (v->version_id.compare(0, ref.size(), ref) != 0) {
    __builtin_trap();
  }
  return 0;
}
