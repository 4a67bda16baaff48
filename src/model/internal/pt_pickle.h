// Private to src/model (pt_checkpoint.cc): a restricted unpickler for
// torch.save's data.pkl. It reads the protocol 2..5 opcodes torch.save emits
// and only rebuilds tensors and the containers around them: GLOBAL resolves
// to an allow-list (torch's tensor/storage rebuilders, a few builtins and
// inert numpy/pathlib helpers, torch.nn.modules.* and ultralytics.nn.*
// classes); every other name is an error and nothing is ever called.
// Torch-free, like pt_checkpoint.cc.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "model/pt_checkpoint.h"

namespace kestrel::model::pt {

// Values live in one arena and refer to each other by index: the memo shares
// them, lists and dicts are filled after they are memoized, and a hostile
// pickle may build cycles — none of which needs ownership here.

enum class Kind : uint8_t {
  kNone,
  kBool,
  kInt,
  kFloat,
  kStr,
  kBytes,
  kList,
  kTuple,
  kDict,
  kSet,
  kGlobal,
  kObject,
  kStorage,
  kTensor
};

// "None", "dict", "tensor", ...: the Python-side name, for messages.
const char* KindName(Kind k);

struct Node {
  Kind kind = Kind::kNone;
  int depth = 0;               // container nesting (an upper bound when filled late)
  int64_t i = 0;               // int, bool; storage: element count; tensor: storage offset
  double f = 0;                // float
  std::string s;               // str, bytes; global and object: "module.Name"; storage: key; tensor: unused
  std::vector<int32_t> items;  // list/tuple/set; dict: key, value, key, value...; tensor: storage node
  int32_t state = -1;          // object: BUILD state; storage: unused
  std::string dtype;           // storage: "F32", "F16", ...
  std::vector<int64_t> shape, stride;  // tensor
};

// Bytes per element of a storage dtype as Node::dtype spells it ("F32" -> 4,
// "BF16" -> 2, "BOOL" -> 1); 0 for any other string.
int StorageItemSize(const std::string& dtype);

// One pass over the pickle's bytes (which must outlive the unpickler); every
// value is counted against `limits` (max_pickle_bytes, max_nodes, max_memo,
// max_nesting) so a hostile file is an error, never a large allocation.
class Unpickler {
 public:
  Unpickler(std::string_view bytes, const std::string& origin, const PtReadLimits& limits)
      : b_(bytes), origin_(origin), limits_(limits) {}

  Result<int32_t> Run();
  const Node& At(int32_t i) const { return nodes_[static_cast<size_t>(i)]; }
  // dict (or an object's state dict) entry by string key; -1 when absent.
  int32_t Get(int32_t dict, const std::string& key) const;

 private:
  Status Bad(const std::string& why) const {
    return Status::Corruption("data.pkl: " + why + " (at byte " + std::to_string(op_at_) + ")", {origin_});
  }
  Result<int32_t> New(Kind k);
  // Every stack push and container item counts: BINGET and copies add no
  // values but still cost memory.
  Status Charge(uint64_t n);
  Result<std::string_view> Take(uint64_t n);
  Result<uint64_t> TakeLe(int n);
  Result<int32_t> Pop();
  Result<std::vector<int32_t>> PopToMark();
  Status Nest(int32_t parent, int32_t child);
  Status Reduce(int32_t callable, int32_t args, int32_t* out);
  Result<int32_t> MakeGlobal(std::string module, const std::string& name);

  std::string_view b_;
  std::string origin_;
  PtReadLimits limits_;
  uint64_t pos_ = 0, op_at_ = 0;
  std::vector<Node> nodes_;
  std::vector<int32_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, int32_t> memo_;
  int32_t none_ = -1, true_ = -1, false_ = -1;
  uint64_t refs_ = 0;
};

}  // namespace kestrel::model::pt
