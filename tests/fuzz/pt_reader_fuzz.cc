// ParsePtCheckpoint (model/pt_checkpoint.h) on arbitrary bytes, with small
// limits so the fuzzer explores the limit paths quickly. Besides "no crash":
// an error always has a message, and every rebuilt tensor's bytes match its
// shape and dtype (F32 or I64).
#include <cstdint>
#include <string_view>

#include "model/pt_checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kestrel::model::PtReadLimits limits;
  limits.max_nodes = 1 << 16;
  limits.max_memo = 1 << 14;
  limits.max_module_visits = 1 << 14;
  limits.max_tensor_bytes = 64u << 20;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto r = kestrel::model::ParsePtCheckpoint(bytes, "fuzz.pt", limits);
  if (!r.IsOk()) {
    if (r.GetStatus().Message().empty()) __builtin_trap();
    return 0;
  }
  for (const auto& [name, t] : r->weights.tensors) {
    uint64_t numel = 1;
    for (int64_t d : t.shape) {
      if (d < 0) __builtin_trap();
      numel *= static_cast<uint64_t>(d);
    }
    const uint64_t item = t.dtype == "F32" ? 4 : t.dtype == "I64" ? 8 : 0;
    if (item == 0 || t.data.size() != numel * item) __builtin_trap();
  }
  return 0;
}
