#include "model/pt_checkpoint.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "core/env.h"
#include "core/json.h"
#include "core/utf8.h"
#include "model/spec.h"

namespace kestrel::model {

namespace {

// ---------------------------------------------------------------- zip ----
// torch.save writes a zip of STORED (uncompressed) entries through miniz.
// Reading that needs only the central directory and the local headers, so
// this is a small bounded reader over the bytes rather than a dependency
// (Debian ships minizip's runtime but not its headers here, and a general zip
// library would also accept compression and encryption we never want).

uint32_t Le16(std::string_view b, uint64_t at) {
  return static_cast<uint32_t>(static_cast<uint8_t>(b[at])) |
         static_cast<uint32_t>(static_cast<uint8_t>(b[at + 1])) << 8;
}
uint32_t Le32(std::string_view b, uint64_t at) { return Le16(b, at) | Le16(b, at + 2) << 16; }
uint64_t Le64(std::string_view b, uint64_t at) {
  return static_cast<uint64_t>(Le32(b, at)) | static_cast<uint64_t>(Le32(b, at + 4)) << 32;
}

uint32_t Crc32(std::string_view data) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (char ch : data) c = table[(c ^ static_cast<uint8_t>(ch)) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

struct ZipEntry {
  std::string name;
  uint64_t header_offset = 0;  // local file header
  uint64_t size = 0;           // stored = compressed = uncompressed
  uint32_t crc = 0;
  uint32_t method = 0;  // 0 = stored; anything else is refused when read
};

class ZipArchive {
 public:
  static Result<ZipArchive> Open(std::string_view bytes, const std::string& origin,
                                 const PtReadLimits& limits);
  const ZipEntry* Find(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &entries_[it->second];
  }
  const std::vector<ZipEntry>& Entries() const { return entries_; }
  // The entry's bytes, CRC-checked.
  Result<std::string_view> Read(const ZipEntry& e) const;

 private:
  std::string_view bytes_;
  std::string origin_;
  std::vector<ZipEntry> entries_;
  std::unordered_map<std::string, size_t> index_;
};

Result<ZipArchive> ZipArchive::Open(std::string_view b, const std::string& origin,
                                    const PtReadLimits& limits) {
  auto bad = [&](const std::string& why) {
    return Status::Corruption("damaged or truncated zip archive: " + why, {origin});
  };
  const uint64_t n = b.size();
  if (n < 22) return bad("shorter than an end-of-central-directory record");
  // The end record is the last 22 bytes plus a comment of at most 65535.
  uint64_t eocd = UINT64_MAX;
  const uint64_t lowest = n - 22 > 65535 ? n - 22 - 65535 : 0;
  for (uint64_t at = n - 22 + 1; at-- > lowest;) {
    if (Le32(b, at) == 0x06054b50u) {
      eocd = at;
      break;
    }
  }
  if (eocd == UINT64_MAX) return bad("no end-of-central-directory record (the file was cut short?)");
  uint64_t count = Le16(b, eocd + 10);
  uint64_t cd_size = Le32(b, eocd + 12);
  uint64_t cd_offset = Le32(b, eocd + 16);
  if (Le16(b, eocd + 4) != 0 || Le16(b, eocd + 6) != 0) return bad("multi-disk archives are not supported");
  if (count == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_offset == 0xFFFFFFFFu) {
    // Zip64: a locator right before the end record points at the zip64 end record.
    if (eocd < 20 || Le32(b, eocd - 20) != 0x07064b50u) return bad("zip64 sizes without a zip64 locator");
    const uint64_t z = Le64(b, eocd - 20 + 8);
    if (z > n || n - z < 56 || Le32(b, z) != 0x06064b50u) return bad("zip64 end record out of range");
    count = Le64(b, z + 32);
    cd_size = Le64(b, z + 40);
    cd_offset = Le64(b, z + 48);
  }
  if (cd_offset > n || cd_size > n - cd_offset) return bad("central directory lies outside the file");
  if (count > limits.max_zip_entries) {
    return Status::ResourceExhausted("zip archive declares " + std::to_string(count) + " entries (limit " +
                                         std::to_string(limits.max_zip_entries) + ")",
                                     {origin});
  }
  if (count > cd_size / 46)
    return bad("central directory too small for " + std::to_string(count) + " entries");
  ZipArchive zip;
  zip.bytes_ = b;
  zip.origin_ = origin;
  zip.entries_.reserve(count);
  uint64_t at = cd_offset;
  const uint64_t cd_end = cd_offset + cd_size;
  for (uint64_t i = 0; i < count; ++i) {
    if (cd_end - at < 46 || Le32(b, at) != 0x02014b50u)
      return bad("central directory record " + std::to_string(i) + " is damaged");
    const uint32_t flags = Le16(b, at + 8), method = Le16(b, at + 10);
    uint64_t csize = Le32(b, at + 20), usize = Le32(b, at + 24), offset = Le32(b, at + 42);
    const uint64_t name_len = Le16(b, at + 28), extra_len = Le16(b, at + 30), comment_len = Le16(b, at + 32);
    if (cd_end - at - 46 < name_len + extra_len + comment_len)
      return bad("central directory record " + std::to_string(i) + " overruns");
    ZipEntry e;
    e.name.assign(b.substr(at + 46, name_len));
    e.crc = Le32(b, at + 16);
    // Zip64 extra field: the 64-bit values of those fields that read 0xFFFFFFFF.
    for (uint64_t x = at + 46 + name_len, x_end = x + extra_len; x_end - x >= 4;) {
      const uint32_t id = Le16(b, x), len = Le16(b, x + 2);
      if (x_end - x - 4 < len) return bad("extra field of '" + EscapeInvalidUtf8(e.name) + "' overruns");
      if (id == 0x0001) {
        uint64_t p = x + 4, end = p + len;
        for (uint64_t* f : {&usize, &csize, &offset}) {
          if (*f != 0xFFFFFFFFu) continue;
          if (end - p < 8) return bad("short zip64 field for '" + EscapeInvalidUtf8(e.name) + "'");
          *f = Le64(b, p);
          p += 8;
        }
      }
      x += 4 + len;
    }
    if (flags & 1)
      return Status::InvalidArgument("zip entry '" + EscapeInvalidUtf8(e.name) + "' is encrypted", {origin});
    if (method == 0 && csize != usize)
      return bad("stored entry '" + EscapeInvalidUtf8(e.name) + "' has two different sizes");
    e.method = method;
    e.size = csize;  // the bytes in the file; Read refuses compressed entries
    e.header_offset = offset;
    if (offset > n || n - offset < 30 || e.size > n)
      return bad("entry '" + EscapeInvalidUtf8(e.name) + "' lies outside the file");
    if (!zip.index_.emplace(e.name, zip.entries_.size()).second) {
      return bad("duplicate entry '" + EscapeInvalidUtf8(e.name) + "'");
    }
    zip.entries_.push_back(std::move(e));
    at += 46 + name_len + extra_len + comment_len;
  }
  return zip;
}

Result<std::string_view> ZipArchive::Read(const ZipEntry& e) const {
  if (e.method != 0) {
    return Status::InvalidArgument("zip entry '" + EscapeInvalidUtf8(e.name) + "' is compressed (method " +
                                       std::to_string(e.method) +
                                       "); torch.save writes stored entries, was the file re-zipped?",
                                   {origin_});
  }
  const std::string_view b = bytes_;
  const uint64_t at = e.header_offset;  // Open checked at + 30 <= size
  if (Le32(b, at) != 0x04034b50u) {
    return Status::Corruption("zip entry '" + EscapeInvalidUtf8(e.name) + "' has no local header", {origin_});
  }
  const uint64_t data = at + 30 + Le16(b, at + 26) + Le16(b, at + 28);
  if (data > b.size() || b.size() - data < e.size) {
    return Status::Corruption("zip entry '" + EscapeInvalidUtf8(e.name) + "' is truncated (" +
                                  std::to_string(e.size) + " bytes declared)",
                              {origin_});
  }
  std::string_view out = b.substr(data, e.size);
  if (Crc32(out) != e.crc) {
    return Status::Corruption(
        "zip entry '" + EscapeInvalidUtf8(e.name) + "' fails its CRC check (damaged file)", {origin_});
  }
  return out;
}

// ------------------------------------------------------------- pickle ----
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

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kStr:
      return "str";
    case Kind::kBytes:
      return "bytes";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kDict:
      return "dict";
    case Kind::kSet:
      return "set";
    case Kind::kGlobal:
      return "global";
    case Kind::kObject:
      return "object";
    case Kind::kStorage:
      return "storage";
    case Kind::kTensor:
      return "tensor";
  }
  return "?";
}

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

struct StorageType {
  const char* name;
  const char* dtype;
  int itemsize;
};
constexpr StorageType kStorageTypes[] = {
    {"torch.FloatStorage", "F32", 4},  {"torch.HalfStorage", "F16", 2}, {"torch.BFloat16Storage", "BF16", 2},
    {"torch.DoubleStorage", "F64", 8}, {"torch.LongStorage", "I64", 8}, {"torch.IntStorage", "I32", 4},
    {"torch.ShortStorage", "I16", 2},  {"torch.CharStorage", "I8", 1},  {"torch.ByteStorage", "U8", 1},
    {"torch.BoolStorage", "BOOL", 1},
};
const StorageType* FindStorageType(const std::string& name) {
  for (const auto& t : kStorageTypes) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

// Names a GLOBAL may resolve to. Nothing is ever called: the rebuilders are
// interpreted here, and classes become inert objects whose BUILD state is kept.
bool AllowedGlobal(const std::string& name) {
  static const std::set<std::string> exact = {
      "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_parameter",
      "torch._utils._rebuild_parameter_with_state", "collections.OrderedDict", "builtins.set",
      "builtins.frozenset", "builtins.slice", "torch.Size", "torch.device", "_codecs.encode",
      "copyreg._reconstructor", "builtins.object", "builtins.dict", "builtins.list", "builtins.tuple",
      // Scalars in train_metrics / train_args of some Ultralytics versions: kept inert.
      "numpy.core.multiarray.scalar", "numpy._core.multiarray.scalar", "numpy.dtype",
      "numpy.core.multiarray._reconstruct", "numpy._core.multiarray._reconstruct", "numpy.ndarray",
      "ultralytics.utils.IterableSimpleNamespace", "argparse.Namespace", "types.SimpleNamespace",
      "pathlib.PosixPath", "pathlib.WindowsPath"};
  if (exact.count(name) || FindStorageType(name)) return true;
  // Module classes: torch layers and Ultralytics' model graph.
  for (const char* prefix : {"torch.nn.modules.", "ultralytics.nn.modules.", "ultralytics.nn.tasks."}) {
    if (name.rfind(prefix, 0) == 0 && name.find_first_of(" ()\n") == std::string::npos) return true;
  }
  return false;
}

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

Result<int32_t> Unpickler::New(Kind k) {
  if (nodes_.size() >= limits_.max_nodes) {
    return Status::ResourceExhausted(
        "data.pkl holds more than " + std::to_string(limits_.max_nodes) + " values", {origin_});
  }
  nodes_.emplace_back();
  nodes_.back().kind = k;
  return static_cast<int32_t>(nodes_.size() - 1);
}

Status Unpickler::Charge(uint64_t n) {
  refs_ += n;
  if (refs_ > 4 * limits_.max_nodes) {
    return Status::ResourceExhausted(
        "data.pkl makes more than " + std::to_string(4 * limits_.max_nodes) + " references to values",
        {origin_});
  }
  return Status();
}

Result<std::string_view> Unpickler::Take(uint64_t n) {
  if (n > b_.size() - pos_)
    return Bad("truncated: " + std::to_string(n) + " bytes needed, " + std::to_string(b_.size() - pos_) +
               " left");
  std::string_view out = b_.substr(pos_, n);
  pos_ += n;
  return out;
}

Result<uint64_t> Unpickler::TakeLe(int n) {
  KESTREL_ASSIGN_OR_RETURN(std::string_view s, Take(static_cast<uint64_t>(n)));
  uint64_t v = 0;
  for (int k = n - 1; k >= 0; --k) v = v << 8 | static_cast<uint8_t>(s[static_cast<size_t>(k)]);
  return v;
}

Result<int32_t> Unpickler::Pop() {
  if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) return Bad("stack underflow");
  int32_t v = stack_.back();
  stack_.pop_back();
  return v;
}

Result<std::vector<int32_t>> Unpickler::PopToMark() {
  if (marks_.empty()) return Bad("no MARK for this opcode");
  std::vector<int32_t> out(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
  stack_.resize(marks_.back());
  marks_.pop_back();
  return out;
}

Status Unpickler::Nest(int32_t parent, int32_t child) {
  Node& p = nodes_[static_cast<size_t>(parent)];
  p.depth = std::max(p.depth, nodes_[static_cast<size_t>(child)].depth + 1);
  if (p.depth > limits_.max_nesting) {
    return Status::ResourceExhausted(
        "data.pkl nests containers deeper than " + std::to_string(limits_.max_nesting) + " levels",
        {origin_});
  }
  return Status();
}

int32_t Unpickler::Get(int32_t dict, const std::string& key) const {
  if (dict < 0) return -1;
  const Node* d = &At(dict);
  if (d->kind == Kind::kObject && d->state >= 0) d = &At(d->state);
  if (d->kind != Kind::kDict) return -1;
  int32_t found = -1;
  for (size_t k = 0; k + 1 < d->items.size(); k += 2) {
    const Node& kn = At(d->items[k]);
    if (kn.kind == Kind::kStr && kn.s == key) found = d->items[k + 1];
  }
  return found;
}

Result<int32_t> Unpickler::MakeGlobal(std::string module, const std::string& name) {
  if (module == "__builtin__") module = "builtins";
  const std::string full = module + "." + name;
  if (!AllowedGlobal(full)) {
    return Status::InvalidArgument(
        "refusing pickle GLOBAL '" + EscapeInvalidUtf8(full) + "' (at byte " + std::to_string(op_at_) +
            "): a .pt file may only name torch's tensor/storage rebuilders, collections.OrderedDict, set, "
            "torch.nn.modules.* and ultralytics.nn.* classes; nothing in it is ever executed",
        {origin_});
  }
  KESTREL_ASSIGN_OR_RETURN(int32_t g, New(Kind::kGlobal));
  nodes_[static_cast<size_t>(g)].s = full;
  return g;
}

Status Unpickler::Reduce(int32_t callable, int32_t args, int32_t* out) {
  const Node& c = At(callable);
  if (c.kind != Kind::kGlobal) return Bad(std::string("REDUCE on a ") + KindName(c.kind) + ", not a global");
  const Node& a = At(args);
  if (a.kind != Kind::kTuple) return Bad("REDUCE arguments are not a tuple");
  const std::string fn = c.s;               // a copy: New() may move the nodes
  const std::vector<int32_t> av = a.items;  // copy: New() may reallocate nodes_
  auto arg_kind = [&](size_t k) { return k < av.size() ? At(av[k]).kind : Kind::kNone; };
  if (fn == "torch._utils._rebuild_tensor_v2") {
    // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
    if (av.size() < 4 || arg_kind(0) != Kind::kStorage || arg_kind(1) != Kind::kInt ||
        arg_kind(2) != Kind::kTuple || arg_kind(3) != Kind::kTuple) {
      return Bad("_rebuild_tensor_v2 expects (storage, offset, size, stride, ...)");
    }
    KESTREL_ASSIGN_OR_RETURN(int32_t t, New(Kind::kTensor));
    Node& tn = nodes_[static_cast<size_t>(t)];
    tn.items = {av[0]};
    tn.i = At(av[1]).i;
    for (int part = 0; part < 2; ++part) {
      for (int32_t d : At(av[2 + part]).items) {
        if (At(d).kind != Kind::kInt) return Bad("tensor size/stride entries must be ints");
        (part == 0 ? tn.shape : tn.stride).push_back(At(d).i);
      }
    }
    if (tn.shape.size() != tn.stride.size()) return Bad("tensor size and stride differ in length");
    *out = t;
    return Status();
  }
  if (fn == "torch._utils._rebuild_parameter" || fn == "torch._utils._rebuild_parameter_with_state") {
    if (av.empty() || arg_kind(0) != Kind::kTensor) return Bad(fn + " expects a tensor first");
    *out = av[0];
    return Status();
  }
  if (fn == "collections.OrderedDict" || fn == "builtins.dict") {
    KESTREL_ASSIGN_OR_RETURN(*out, New(Kind::kDict));
    if (!av.empty() && (arg_kind(0) == Kind::kList || arg_kind(0) == Kind::kTuple)) {
      const std::vector<int32_t> pairs = At(av[0]).items;
      for (int32_t p : pairs) {
        if (At(p).kind != Kind::kTuple || At(p).items.size() != 2)
          return Bad("OrderedDict items must be pairs");
        nodes_[static_cast<size_t>(*out)].items.push_back(At(p).items[0]);
        nodes_[static_cast<size_t>(*out)].items.push_back(At(p).items[1]);
        KESTREL_RETURN_IF_ERROR(Nest(*out, At(p).items[1]));
      }
    }
    return Status();
  }
  if (fn == "builtins.set" || fn == "builtins.frozenset" || fn == "builtins.list" || fn == "builtins.tuple" ||
      fn == "torch.Size") {
    KESTREL_ASSIGN_OR_RETURN(*out, New(fn == "builtins.list"                          ? Kind::kList
                                       : fn == "torch.Size" || fn == "builtins.tuple" ? Kind::kTuple
                                                                                      : Kind::kSet));
    if (!av.empty() &&
        (arg_kind(0) == Kind::kList || arg_kind(0) == Kind::kTuple || arg_kind(0) == Kind::kSet)) {
      KESTREL_RETURN_IF_ERROR(Charge(At(av[0]).items.size()));
      nodes_[static_cast<size_t>(*out)].items = At(av[0]).items;
      nodes_[static_cast<size_t>(*out)].depth = At(av[0]).depth;
    }
    return Status();
  }
  if (fn == "_codecs.encode") {  // protocol 2's spelling of bytes: (str, "latin1")
    KESTREL_ASSIGN_OR_RETURN(*out, New(Kind::kBytes));
    if (!av.empty() && arg_kind(0) == Kind::kStr) nodes_[static_cast<size_t>(*out)].s = At(av[0]).s;
    return Status();
  }
  if (fn == "copyreg._reconstructor") {  // (cls, base, state): an instance of cls
    if (av.empty() || arg_kind(0) != Kind::kGlobal) return Bad("copyreg._reconstructor expects a class");
    KESTREL_ASSIGN_OR_RETURN(*out, New(Kind::kObject));
    nodes_[static_cast<size_t>(*out)].s = At(av[0]).s;
    return Status();
  }
  if (FindStorageType(fn)) return Bad("a storage type cannot be called");
  // Any other allowed name is a class (or an inert numpy/pathlib helper): an
  // object that remembers its class and arguments.
  KESTREL_ASSIGN_OR_RETURN(*out, New(Kind::kObject));
  KESTREL_RETURN_IF_ERROR(Charge(av.size()));
  nodes_[static_cast<size_t>(*out)].s = fn;
  nodes_[static_cast<size_t>(*out)].items = av;
  return Status();
}

Result<int32_t> Unpickler::Run() {
  if (b_.size() > limits_.max_pickle_bytes) {
    return Status::ResourceExhausted("data.pkl is " + std::to_string(b_.size()) + " bytes (limit " +
                                         std::to_string(limits_.max_pickle_bytes) + ")",
                                     {origin_});
  }
  KESTREL_ASSIGN_OR_RETURN(none_, New(Kind::kNone));
  KESTREL_ASSIGN_OR_RETURN(true_, New(Kind::kBool));
  nodes_[static_cast<size_t>(true_)].i = 1;
  KESTREL_ASSIGN_OR_RETURN(false_, New(Kind::kBool));
  auto push = [&](int32_t v) { stack_.push_back(v); };
  auto memo_put = [&](uint64_t key) -> Status {
    if (stack_.empty()) return Bad("memo store with an empty stack");
    if (memo_.size() >= limits_.max_memo && !memo_.count(key)) {
      return Status::ResourceExhausted(
          "data.pkl memo exceeds " + std::to_string(limits_.max_memo) + " entries", {origin_});
    }
    memo_[key] = stack_.back();
    return Status();
  };
  auto memo_get = [&](uint64_t key) -> Status {
    auto it = memo_.find(key);
    if (it == memo_.end()) return Bad("memo key " + std::to_string(key) + " was never stored");
    push(it->second);
    return Status();
  };
  auto str_node = [&](Kind k, uint64_t len) -> Status {
    KESTREL_ASSIGN_OR_RETURN(std::string_view s, Take(len));
    KESTREL_ASSIGN_OR_RETURN(int32_t n, New(k));
    nodes_[static_cast<size_t>(n)].s.assign(s);
    push(n);
    return Status();
  };
  auto int_node = [&](int64_t v) -> Status {
    KESTREL_ASSIGN_OR_RETURN(int32_t n, New(Kind::kInt));
    nodes_[static_cast<size_t>(n)].i = v;
    push(n);
    return Status();
  };
  auto tuple_of = [&](std::vector<int32_t> items) -> Status {
    KESTREL_ASSIGN_OR_RETURN(int32_t n, New(Kind::kTuple));
    for (int32_t c : items) KESTREL_RETURN_IF_ERROR(Nest(n, c));
    nodes_[static_cast<size_t>(n)].items = std::move(items);
    push(n);
    return Status();
  };
  auto read_line = [&]() -> Result<std::string> {
    const size_t nl = b_.find('\n', pos_);
    if (nl == std::string_view::npos || nl - pos_ > 1024) return Bad("GLOBAL name is not a short line");
    std::string out(b_.substr(pos_, nl - pos_));
    pos_ = nl + 1;
    return out;
  };

  while (true) {
    op_at_ = pos_;
    KESTREL_ASSIGN_OR_RETURN(std::string_view opb, Take(1));
    KESTREL_RETURN_IF_ERROR(Charge(1));
    const uint8_t op = static_cast<uint8_t>(opb[0]);
    switch (op) {
      case 0x80: {  // PROTO
        KESTREL_ASSIGN_OR_RETURN(uint64_t v, TakeLe(1));
        if (v < 2 || v > 5) return Bad("pickle protocol " + std::to_string(v) + " (2..5 are read)");
        break;
      }
      case 0x95:
        KESTREL_RETURN_IF_ERROR(TakeLe(8).GetStatus());
        break;     // FRAME: a hint only
      case '.': {  // STOP
        KESTREL_ASSIGN_OR_RETURN(int32_t top, Pop());
        return top;
      }
      case '(':
        marks_.push_back(stack_.size());
        break;
      case '}': {
        KESTREL_ASSIGN_OR_RETURN(int32_t n, New(Kind::kDict));
        push(n);
        break;
      }
      case ']': {
        KESTREL_ASSIGN_OR_RETURN(int32_t n, New(Kind::kList));
        push(n);
        break;
      }
      case 0x8f: {
        KESTREL_ASSIGN_OR_RETURN(int32_t n, New(Kind::kSet));
        push(n);
        break;
      }  // EMPTY_SET
      case ')':
        KESTREL_RETURN_IF_ERROR(tuple_of({}));
        break;
      case 'N':
        push(none_);
        break;
      case 0x88:
        push(true_);
        break;
      case 0x89:
        push(false_);
        break;
      case 'X': {
        KESTREL_ASSIGN_OR_RETURN(uint64_t n, TakeLe(4));
        KESTREL_RETURN_IF_ERROR(str_node(Kind::kStr, n));
        break;
      }
      case 0x8c: {
        KESTREL_ASSIGN_OR_RETURN(uint64_t n, TakeLe(1));
        KESTREL_RETURN_IF_ERROR(str_node(Kind::kStr, n));
        break;
      }
      case 0x8d: {
        KESTREL_ASSIGN_OR_RETURN(uint64_t n, TakeLe(8));
        KESTREL_RETURN_IF_ERROR(str_node(Kind::kStr, n));
        break;
      }
      case 'B': {
        KESTREL_ASSIGN_OR_RETURN(uint64_t n, TakeLe(4));
        KESTREL_RETURN_IF_ERROR(str_node(Kind::kBytes, n));
        break;
      }
      case 'C': {
        KESTREL_ASSIGN_OR_RETURN(uint64_t n, TakeLe(1));
        KESTREL_RETURN_IF_ERROR(str_node(Kind::kBytes, n));
        break;
      }
      case 0x8e: {
        KESTREL_ASSIGN_OR_RETURN(uint64_t n, TakeLe(8));
        KESTREL_RETURN_IF_ERROR(str_node(Kind::kBytes, n));
        break;
      }
      case 'J': {
        KESTREL_ASSIGN_OR_RETURN(uint64_t v, TakeLe(4));
        KESTREL_RETURN_IF_ERROR(int_node(static_cast<int32_t>(static_cast<uint32_t>(v))));
        break;
      }
      case 'K': {
        KESTREL_ASSIGN_OR_RETURN(uint64_t v, TakeLe(1));
        KESTREL_RETURN_IF_ERROR(int_node(static_cast<int64_t>(v)));
        break;
      }
      case 'M': {
        KESTREL_ASSIGN_OR_RETURN(uint64_t v, TakeLe(2));
        KESTREL_RETURN_IF_ERROR(int_node(static_cast<int64_t>(v)));
        break;
      }
      case 0x8a: {  // LONG1: n-byte little-endian two's complement
        KESTREL_ASSIGN_OR_RETURN(uint64_t n, TakeLe(1));
        if (n > 8) return Bad("integer wider than 64 bits");
        KESTREL_ASSIGN_OR_RETURN(uint64_t v, n ? TakeLe(static_cast<int>(n)) : Result<uint64_t>(uint64_t{0}));
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);  // sign-extend
        KESTREL_RETURN_IF_ERROR(int_node(static_cast<int64_t>(v)));
        break;
      }
      case 'G': {  // BINFLOAT: big-endian double
        KESTREL_ASSIGN_OR_RETURN(std::string_view s, Take(8));
        uint64_t bits = 0;
        for (char ch : s) bits = bits << 8 | static_cast<uint8_t>(ch);
        KESTREL_ASSIGN_OR_RETURN(int32_t n, New(Kind::kFloat));
        std::memcpy(&nodes_[static_cast<size_t>(n)].f, &bits, 8);
        push(n);
        break;
      }
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        const size_t k = op - 0x84u;
        std::vector<int32_t> items(k);
        for (size_t j = k; j-- > 0;) {
          KESTREL_ASSIGN_OR_RETURN(items[j], Pop());
        }
        KESTREL_RETURN_IF_ERROR(tuple_of(std::move(items)));
        break;
      }
      case 't': {
        KESTREL_ASSIGN_OR_RETURN(auto items, PopToMark());
        KESTREL_RETURN_IF_ERROR(tuple_of(std::move(items)));
        break;
      }
      case 0x91: {  // FROZENSET
        KESTREL_ASSIGN_OR_RETURN(auto items, PopToMark());
        KESTREL_ASSIGN_OR_RETURN(int32_t n, New(Kind::kSet));
        for (int32_t c : items) KESTREL_RETURN_IF_ERROR(Nest(n, c));
        nodes_[static_cast<size_t>(n)].items = std::move(items);
        push(n);
        break;
      }
      case 'a':
      case 'e':
      case 0x90: {  // APPEND, APPENDS, ADDITEMS
        std::vector<int32_t> items;
        if (op == 'a') {
          KESTREL_ASSIGN_OR_RETURN(int32_t v, Pop());
          items.push_back(v);
        } else {
          KESTREL_ASSIGN_OR_RETURN(items, PopToMark());
        }
        if (stack_.empty()) return Bad("APPEND without a list");
        const int32_t target = stack_.back();
        const Kind tk = At(target).kind;
        if (tk != Kind::kList && tk != Kind::kSet) return Bad(std::string("APPEND to a ") + KindName(tk));
        KESTREL_RETURN_IF_ERROR(Charge(items.size()));
        for (int32_t c : items) {
          KESTREL_RETURN_IF_ERROR(Nest(target, c));
          nodes_[static_cast<size_t>(target)].items.push_back(c);
        }
        break;
      }
      case 's':
      case 'u': {  // SETITEM, SETITEMS
        std::vector<int32_t> kv(2);
        if (op == 's') {
          KESTREL_ASSIGN_OR_RETURN(kv[1], Pop());
          KESTREL_ASSIGN_OR_RETURN(kv[0], Pop());
        } else {
          KESTREL_ASSIGN_OR_RETURN(kv, PopToMark());
          if (kv.size() % 2) return Bad("SETITEMS with an odd number of values");
        }
        if (stack_.empty()) return Bad("SETITEM without a dict");
        const int32_t target = stack_.back();
        if (At(target).kind != Kind::kDict)
          return Bad(std::string("SETITEM on a ") + KindName(At(target).kind));
        for (size_t j = 0; j < kv.size(); j += 2) KESTREL_RETURN_IF_ERROR(Nest(target, kv[j + 1]));
        KESTREL_RETURN_IF_ERROR(Charge(kv.size()));
        auto& items = nodes_[static_cast<size_t>(target)].items;
        items.insert(items.end(), kv.begin(), kv.end());
        break;
      }
      case 'q': {
        KESTREL_ASSIGN_OR_RETURN(uint64_t k, TakeLe(1));
        KESTREL_RETURN_IF_ERROR(memo_put(k));
        break;
      }
      case 'r': {
        KESTREL_ASSIGN_OR_RETURN(uint64_t k, TakeLe(4));
        KESTREL_RETURN_IF_ERROR(memo_put(k));
        break;
      }
      case 0x94:
        KESTREL_RETURN_IF_ERROR(memo_put(memo_.size()));
        break;  // MEMOIZE
      case 'h': {
        KESTREL_ASSIGN_OR_RETURN(uint64_t k, TakeLe(1));
        KESTREL_RETURN_IF_ERROR(memo_get(k));
        break;
      }
      case 'j': {
        KESTREL_ASSIGN_OR_RETURN(uint64_t k, TakeLe(4));
        KESTREL_RETURN_IF_ERROR(memo_get(k));
        break;
      }
      case '0':
        KESTREL_RETURN_IF_ERROR(Pop().GetStatus());
        break;  // POP
      case '1':
        KESTREL_RETURN_IF_ERROR(PopToMark().GetStatus());
        break;     // POP_MARK
      case '2': {  // DUP
        if (stack_.empty()) return Bad("DUP on an empty stack");
        push(stack_.back());
        break;
      }
      case 'c': {  // GLOBAL "module\nname\n"
        KESTREL_ASSIGN_OR_RETURN(std::string module, read_line());
        KESTREL_ASSIGN_OR_RETURN(std::string name, read_line());
        KESTREL_ASSIGN_OR_RETURN(int32_t g, MakeGlobal(module, name));
        push(g);
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        KESTREL_ASSIGN_OR_RETURN(int32_t name, Pop());
        KESTREL_ASSIGN_OR_RETURN(int32_t module, Pop());
        if (At(name).kind != Kind::kStr || At(module).kind != Kind::kStr)
          return Bad("STACK_GLOBAL needs two strings");
        KESTREL_ASSIGN_OR_RETURN(int32_t g, MakeGlobal(At(module).s, At(name).s));
        push(g);
        break;
      }
      case 'R': {  // REDUCE
        KESTREL_ASSIGN_OR_RETURN(int32_t args, Pop());
        KESTREL_ASSIGN_OR_RETURN(int32_t callable, Pop());
        int32_t out = -1;
        KESTREL_RETURN_IF_ERROR(Reduce(callable, args, &out));
        push(out);
        break;
      }
      case 0x81:
      case 0x92: {  // NEWOBJ (cls, args), NEWOBJ_EX (cls, args, kwargs)
        if (op == 0x92) KESTREL_RETURN_IF_ERROR(Pop().GetStatus());
        KESTREL_ASSIGN_OR_RETURN(int32_t args, Pop());
        KESTREL_ASSIGN_OR_RETURN(int32_t cls, Pop());
        if (At(cls).kind != Kind::kGlobal) return Bad("NEWOBJ on a non-class");
        const std::string c = At(cls).s;  // a copy: New() may move the nodes
        if (c.rfind("torch._utils.", 0) == 0 || FindStorageType(c) || c == "_codecs.encode" ||
            c == "copyreg._reconstructor") {
          return Bad("NEWOBJ of '" + c + "', which is not a class");
        }
        int32_t out = -1;
        if (c == "collections.OrderedDict" || c == "builtins.dict" || c == "builtins.set" ||
            c == "builtins.list") {
          KESTREL_RETURN_IF_ERROR(Reduce(cls, args, &out));
        } else {
          KESTREL_ASSIGN_OR_RETURN(out, New(Kind::kObject));
          nodes_[static_cast<size_t>(out)].s = c;
        }
        push(out);
        break;
      }
      case 'b': {  // BUILD: keep an object's state; anything else ignores it
        KESTREL_ASSIGN_OR_RETURN(int32_t st, Pop());
        if (stack_.empty()) return Bad("BUILD without an object");
        const int32_t target = stack_.back();
        if (At(target).kind == Kind::kObject) {
          // (dict, slots) states keep the dict.
          int32_t s = st;
          if (At(s).kind == Kind::kTuple && !At(s).items.empty()) s = At(s).items[0];
          KESTREL_RETURN_IF_ERROR(Nest(target, s));
          nodes_[static_cast<size_t>(target)].state = s;
        }
        break;
      }
      case 'Q': {  // BINPERSID: ('storage', StorageType, key, location, numel)
        KESTREL_ASSIGN_OR_RETURN(int32_t pid, Pop());
        const Node& p = At(pid);
        if (p.kind != Kind::kTuple || p.items.size() != 5 || At(p.items[0]).kind != Kind::kStr ||
            At(p.items[0]).s != "storage" || At(p.items[1]).kind != Kind::kGlobal ||
            At(p.items[2]).kind != Kind::kStr || At(p.items[4]).kind != Kind::kInt) {
          return Bad("persistent id is not ('storage', type, key, location, numel)");
        }
        const StorageType* type = FindStorageType(At(p.items[1]).s);
        if (!type) {
          return Status::InvalidArgument(
              "unsupported storage type '" + EscapeInvalidUtf8(At(p.items[1]).s) + "'", {origin_});
        }
        const int64_t numel = At(p.items[4]).i;
        if (numel < 0) return Bad("negative storage size");
        std::string key = At(p.items[2]).s;
        KESTREL_ASSIGN_OR_RETURN(int32_t n, New(Kind::kStorage));
        nodes_[static_cast<size_t>(n)].s = std::move(key);
        nodes_[static_cast<size_t>(n)].dtype = type->dtype;
        nodes_[static_cast<size_t>(n)].i = numel;
        push(n);
        break;
      }
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        return Bad(std::string("unsupported pickle opcode ") + hex +
                   " (torch.save's protocol-2 subset is read; text opcodes and extensions are not)");
      }
    }
  }
}

// ------------------------------------------------------------- tensors ----

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      exp = 127 - 15 + 1;
      while (!(man & 0x400u)) {
        man <<= 1;
        --exp;
      }
      bits = sign | exp << 23 | (man & 0x3FFu) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7F800000u | man << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

int ItemSize(const std::string& dtype) {
  for (const auto& t : kStorageTypes) {
    if (dtype == t.dtype) return t.itemsize;
  }
  return 0;
}

class Converter {
 public:
  Converter(const Unpickler& u, const ZipArchive& zip, std::string archive, const std::string& origin,
            const PtReadLimits& limits)
      : u_(u), zip_(zip), archive_(std::move(archive)), origin_(origin), limits_(limits) {}

  Result<SafeTensor> Tensor(int32_t node, const std::string& name);
  Status CollectModule(int32_t module, const std::string& prefix, int depth,
                       std::vector<std::pair<std::string, int32_t>>* out);

 private:
  const Unpickler& u_;
  const ZipArchive& zip_;
  std::string archive_, origin_;
  PtReadLimits limits_;
  uint64_t total_bytes_ = 0;
  uint64_t visits_ = 0;                          // module walk work (shared children are walked again)
  std::map<std::string, uint64_t> storage_use_;  // elements taken from each storage
};

Result<SafeTensor> Converter::Tensor(int32_t node, const std::string& name) {
  const Node& t = u_.At(node);
  const Node& st = u_.At(t.items.at(0));
  auto bad = [&](const std::string& why) {
    return Status::Corruption("tensor '" + EscapeInvalidUtf8(name) + "': " + why, {origin_});
  };
  const int itemsize = ItemSize(st.dtype);
  const ZipEntry* e = zip_.Find(archive_ + "/data/" + st.s);
  if (!e) return bad("its storage '" + EscapeInvalidUtf8(st.s) + "' is not in the archive");
  if (static_cast<uint64_t>(st.i) > e->size / static_cast<uint64_t>(itemsize)) {
    return bad("storage '" + EscapeInvalidUtf8(st.s) + "' declares " + std::to_string(st.i) +
               " elements but holds " + std::to_string(e->size) + " bytes");
  }
  const uint64_t storage_numel = static_cast<uint64_t>(st.i);
  if (t.i < 0) return bad("negative storage offset");
  uint64_t numel = 1, last = static_cast<uint64_t>(t.i);
  for (size_t d = 0; d < t.shape.size(); ++d) {
    if (t.shape[d] < 0 || t.stride[d] < 0) return bad("negative size or stride");
    const uint64_t n = static_cast<uint64_t>(t.shape[d]);
    if (n != 0 && numel > storage_numel / n + 1) return bad("declares more elements than its storage holds");
    numel *= n;
  }
  if (t.shape.size() > 64) return bad("has " + std::to_string(t.shape.size()) + " dimensions");
  // Model weights never share storage, so no storage yields more elements
  // than it holds: the output stays within a small multiple of the file size.
  uint64_t& used = storage_use_[st.s];
  if (numel > storage_numel - std::min(used, storage_numel)) {
    return bad("takes " + std::to_string(numel) + " elements from storage '" + EscapeInvalidUtf8(st.s) +
               "' of " + std::to_string(storage_numel) + ", " + std::to_string(used) +
               " of them already used by other tensors (expanded or shared views are not model weights)");
  }
  used += numel;
  if (numel > 0) {
    for (size_t d = 0; d < t.shape.size(); ++d) {
      const uint64_t span = static_cast<uint64_t>(t.shape[d] - 1);
      const uint64_t stride = static_cast<uint64_t>(t.stride[d]);
      if (stride != 0 && span > (storage_numel - last) / stride)
        return bad("view reaches past the end of its storage");
      last += span * stride;
    }
    if (last >= storage_numel) return bad("view reaches past the end of its storage");
  }
  const bool is_float = st.dtype == "F32" || st.dtype == "F16" || st.dtype == "BF16" || st.dtype == "F64";
  const uint64_t out_item = is_float ? 4 : 8;
  if (numel * out_item > limits_.max_tensor_bytes - std::min(total_bytes_, limits_.max_tensor_bytes)) {
    return Status::ResourceExhausted("tensors exceed " + std::to_string(limits_.max_tensor_bytes) +
                                         " bytes at '" + EscapeInvalidUtf8(name) + "'",
                                     {origin_});
  }
  total_bytes_ += numel * out_item;
  KESTREL_ASSIGN_OR_RETURN(std::string_view raw, zip_.Read(*e));
  SafeTensor out;
  out.dtype = is_float ? "F32" : "I64";
  out.shape = t.shape;
  out.data.resize(numel * out_item);
  std::vector<int64_t> idx(t.shape.size(), 0);
  uint64_t src = static_cast<uint64_t>(t.i);
  for (uint64_t k = 0; k < numel; ++k) {
    const char* p = raw.data() + src * static_cast<uint64_t>(itemsize);
    char* q = out.data.data() + k * out_item;
    if (is_float) {
      float v = 0;
      if (st.dtype == "F32") {
        std::memcpy(&v, p, 4);
      } else if (st.dtype == "F16") {
        uint16_t h;
        std::memcpy(&h, p, 2);
        v = HalfToFloat(h);
      } else if (st.dtype == "BF16") {
        uint16_t h;
        std::memcpy(&h, p, 2);
        const uint32_t bits = static_cast<uint32_t>(h) << 16;
        std::memcpy(&v, &bits, 4);
      } else {
        double dv;
        std::memcpy(&dv, p, 8);
        v = static_cast<float>(dv);
      }
      std::memcpy(q, &v, 4);
    } else {
      int64_t v = 0;
      if (st.dtype == "I64") {
        std::memcpy(&v, p, 8);
      } else if (st.dtype == "I32") {
        int32_t x;
        std::memcpy(&x, p, 4);
        v = x;
      } else if (st.dtype == "I16") {
        int16_t x;
        std::memcpy(&x, p, 2);
        v = x;
      } else if (st.dtype == "I8") {
        v = static_cast<int8_t>(*p);
      } else {  // U8, BOOL
        v = static_cast<uint8_t>(*p);
      }
      std::memcpy(q, &v, 8);
    }
    // Advance the row-major index over the view.
    for (size_t d = t.shape.size(); d-- > 0;) {
      src += static_cast<uint64_t>(t.stride[d]);
      if (++idx[d] < t.shape[d]) break;
      src -= static_cast<uint64_t>(t.stride[d]) * static_cast<uint64_t>(t.shape[d]);
      idx[d] = 0;
    }
  }
  return out;
}

// nn.Module state_dict order: own parameters, own persistent buffers, then
// each child under "name.".
Status Converter::CollectModule(int32_t module, const std::string& prefix, int depth,
                                std::vector<std::pair<std::string, int32_t>>* out) {
  if (depth > limits_.max_module_depth) {
    return Status::InvalidArgument("modules nest deeper than " + std::to_string(limits_.max_module_depth) +
                                       " at '" + EscapeInvalidUtf8(prefix) + "'",
                                   {origin_});
  }
  if (++visits_ > limits_.max_module_visits) {
    return Status::ResourceExhausted("the module tree is larger than " +
                                         std::to_string(limits_.max_module_visits) +
                                         " visits (modules shared or nested without end?)",
                                     {origin_});
  }
  const Node& m = u_.At(module);
  if (m.kind != Kind::kObject || m.state < 0 || u_.At(m.state).kind != Kind::kDict) {
    return Status::InvalidArgument(
        "'" + EscapeInvalidUtf8(prefix) + "' is a " + KindName(m.kind) + ", not a pickled nn.Module",
        {origin_});
  }
  std::set<std::string> non_persistent;
  if (int32_t np = u_.Get(module, "_non_persistent_buffers_set"); np >= 0) {
    for (int32_t k : u_.At(np).items) {
      if (u_.At(k).kind == Kind::kStr) non_persistent.insert(u_.At(k).s);
    }
  }
  for (const char* group : {"_parameters", "_buffers", "_modules"}) {
    const int32_t d = u_.Get(module, group);
    if (d < 0) continue;
    if (u_.At(d).kind != Kind::kDict) {
      return Status::InvalidArgument("'" + EscapeInvalidUtf8(prefix) + group + "' is not a dict", {origin_});
    }
    const std::vector<int32_t> items = u_.At(d).items;
    visits_ += items.size();
    for (size_t k = 0; k + 1 < items.size(); k += 2) {
      const Node& key = u_.At(items[k]);
      const int32_t value = items[k + 1];
      if (key.kind != Kind::kStr)
        return Status::Corruption(prefix + group + " has a non-string key", {origin_});
      if (u_.At(value).kind == Kind::kNone) continue;  // e.g. a conv without bias
      const bool is_module = std::strcmp(group, "_modules") == 0;
      if (is_module) {
        KESTREL_RETURN_IF_ERROR(CollectModule(value, prefix + key.s + ".", depth + 1, out));
        continue;
      }
      if (std::strcmp(group, "_buffers") == 0 && non_persistent.count(key.s)) continue;
      if (u_.At(value).kind != Kind::kTensor) {
        return Status::InvalidArgument("'" + EscapeInvalidUtf8(prefix + key.s) + "' is a " +
                                           KindName(u_.At(value).kind) + ", not a tensor",
                                       {origin_});
      }
      out->emplace_back(prefix + key.s, value);
    }
  }
  return Status();
}

// The torch module class each YOLOv8 layer kind is pickled as.
const char* UltralyticsClass(LayerKind kind) {
  switch (kind) {
    case LayerKind::kConv:
      return "ultralytics.nn.modules.conv.Conv";
    case LayerKind::kC2f:
      return "ultralytics.nn.modules.block.C2f";
    case LayerKind::kSppf:
      return "ultralytics.nn.modules.block.SPPF";
    case LayerKind::kUpsample:
      return "torch.nn.modules.upsampling.Upsample";
    case LayerKind::kConcat:
      return "ultralytics.nn.modules.conv.Concat";
    case LayerKind::kDetect:
      return "ultralytics.nn.modules.head.Detect";
  }
  return "?";
}

constexpr const char* kDetectionModel = "ultralytics.nn.tasks.DetectionModel";
constexpr const char* kAccepted =
    "Kestrel reads Ultralytics YOLOv8 detection checkpoints (a dict with 'ema' or 'model' holding an "
    "ultralytics.nn.tasks.DetectionModel, a pickled DetectionModel, or a YOLOv8 state_dict with model.N.* "
    "names)";

std::string DescribeDictKeys(const Unpickler& u, int32_t dict) {
  std::string keys;
  const auto& items = u.At(dict).items;
  for (size_t k = 0; k + 1 < items.size() && k < 20; k += 2) {
    const Node& key = u.At(items[k]);
    keys += (k ? ", " : "") +
            (key.kind == Kind::kStr ? "'" + EscapeInvalidUtf8(key.s) + "'" : std::string(KindName(key.kind)));
  }
  if (items.size() > 20) keys += ", ...";
  return "{" + keys + "}";
}

bool AllTensors(const Unpickler& u, int32_t dict) {
  const auto& items = u.At(dict).items;
  if (items.empty()) return false;
  for (size_t k = 0; k + 1 < items.size(); k += 2) {
    if (u.At(items[k]).kind != Kind::kStr || u.At(items[k + 1]).kind != Kind::kTensor) return false;
  }
  return true;
}

// The 23 children of model.model must be the yolov8.yaml graph.
Status CheckYolov8Graph(const Unpickler& u, int32_t model, const std::string& origin) {
  const int32_t mods = u.Get(model, "_modules");
  const int32_t seq = mods >= 0 ? u.Get(mods, "model") : -1;
  const int32_t children = seq >= 0 ? u.Get(seq, "_modules") : -1;
  if (children < 0 || u.At(children).kind != Kind::kDict) {
    return Status::InvalidArgument(
        "the DetectionModel has no 'model' Sequential of layers. " + std::string(kAccepted), {origin});
  }
  const auto plan = BuildLayerPlan(ModelSpec{KnownScales()[0], 1});
  const auto& items = u.At(children).items;
  std::string found;
  bool ok = items.size() == 2 * plan.size();
  for (size_t k = 0; k + 1 < items.size(); k += 2) {
    const Node& child = u.At(items[k + 1]);
    const std::string cls = child.kind == Kind::kObject ? child.s : KindName(child.kind);
    const size_t idx = k / 2;
    if (idx < plan.size() && cls != UltralyticsClass(plan[idx].kind)) ok = false;
    if (!ok && found.empty()) {
      found = idx < plan.size() ? "layer " + std::to_string(idx) + " is " + EscapeInvalidUtf8(cls) +
                                      " (YOLOv8 has " + UltralyticsClass(plan[idx].kind) + ")"
                                : "";
    }
  }
  if (!ok) {
    if (found.empty()) {
      found = std::to_string(items.size() / 2) + " layers (YOLOv8 detection has " +
              std::to_string(plan.size()) + ")";
    }
    return Status::InvalidArgument("not a YOLOv8 detection model: " + found +
                                       ". Kestrel builds the yolov8.yaml detection graph (scales n/s/m/l/x); "
                                       "other architectures (YOLO11, P2/P6 variants, ...) are not supported",
                                   {origin});
  }
  return Status();
}

}  // namespace

bool LooksLikeZip(std::string_view prefix) {
  return prefix.substr(0, 4) == std::string_view("PK\x03\x04", 4);
}

bool FileLooksLikeZip(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[4] = {};
  return in.read(head, 4) && LooksLikeZip(std::string_view(head, 4));
}

bool IsWeightsPath(const std::string& model) {
  auto ends = [&](std::string_view suffix) {
    if (model.size() < suffix.size()) return false;
    for (size_t i = 0; i < suffix.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(model[model.size() - suffix.size() + i])) != suffix[i])
        return false;
    }
    return true;
  };
  return ends(".pt") || ends(".safetensors");
}

Result<PtCheckpoint> ParsePtCheckpoint(std::string_view bytes, const std::string& origin,
                                       const PtReadLimits& limits) {
  if (bytes.size() > limits.max_file_bytes) {
    return Status::ResourceExhausted("file is " + std::to_string(bytes.size()) + " bytes (limit " +
                                         std::to_string(limits.max_file_bytes) + ")",
                                     {origin});
  }
  if (!LooksLikeZip(bytes)) {
    if (bytes.substr(0, 3) == std::string_view("\x80\x02\x8a", 3)) {
      return Status::InvalidArgument(
          "a legacy (torch < 1.6) torch.save file; re-save it with a current torch (zip format)", {origin});
    }
    return Status::InvalidArgument(
        "not a PyTorch .pt checkpoint: it does not start with the zip signature PK\\x03\\x04", {origin});
  }
  KESTREL_ASSIGN_OR_RETURN(ZipArchive zip, ZipArchive::Open(bytes, origin, limits));
  // torch names every entry "<archive>/..."; the archive is the first entry's folder.
  if (zip.Entries().empty()) return Status::Corruption("empty zip archive", {origin});
  const std::string& first = zip.Entries()[0].name;
  const std::string archive = first.substr(0, first.find('/'));
  const bool has_code = std::any_of(zip.Entries().begin(), zip.Entries().end(), [&](const ZipEntry& e) {
    return e.name.rfind(archive + "/code/", 0) == 0;
  });
  if (zip.Find(archive + "/constants.pkl") || has_code) {
    return Status::InvalidArgument(
        "a TorchScript archive (torch.jit.save), not a torch.save checkpoint. " + std::string(kAccepted),
        {origin});
  }
  const ZipEntry* pkl = zip.Find(archive + "/data.pkl");
  if (!pkl) {
    return Status::InvalidArgument(
        "zip archive without '" + EscapeInvalidUtf8(archive) + "/data.pkl': not a torch.save checkpoint",
        {origin});
  }
  if (const ZipEntry* bo = zip.Find(archive + "/byteorder")) {
    KESTREL_ASSIGN_OR_RETURN(std::string_view order, zip.Read(*bo));
    if (order != "little") {
      return Status::InvalidArgument(
          "byteorder '" + EscapeInvalidUtf8(order) + "': only little-endian checkpoints are read", {origin});
    }
  }
  KESTREL_ASSIGN_OR_RETURN(std::string_view pickle, zip.Read(*pkl));
  Unpickler u(pickle, origin, limits);
  KESTREL_ASSIGN_OR_RETURN(int32_t root, u.Run());

  PtCheckpoint out;
  int32_t model = -1, state_dict = -1;
  const Node& r = u.At(root);
  if (r.kind == Kind::kDict) {
    if (int32_t v = u.Get(root, "version"); v >= 0 && u.At(v).kind == Kind::kStr)
      out.ultralytics_version = u.At(v).s;
    for (const char* key : {"ema", "model"}) {
      const int32_t m = u.Get(root, key);
      if (m >= 0 && u.At(m).kind != Kind::kNone) {
        out.source = key;
        model = m;
        break;
      }
    }
    if (model < 0 && AllTensors(u, root)) {
      state_dict = root;
      out.source = "state_dict";
    } else if (model < 0) {
      return Status::InvalidArgument("found a dict with keys " + DescribeDictKeys(u, root) +
                                         " and no 'ema' or 'model' entry. " + kAccepted,
                                     {origin});
    } else if (u.At(model).kind == Kind::kDict && AllTensors(u, model)) {
      state_dict = model;  // {"model": state_dict}
      out.source = "state_dict";
    }
  } else if (r.kind == Kind::kObject) {
    model = root;
    out.source = "object";
  } else {
    return Status::InvalidArgument(std::string("found a pickled ") + KindName(r.kind) + ". " + kAccepted,
                                   {origin});
  }

  std::vector<std::pair<std::string, int32_t>> tensors;
  Converter conv(u, zip, archive, origin, limits);
  if (state_dict >= 0) {
    const auto& items = u.At(state_dict).items;
    for (size_t k = 0; k + 1 < items.size(); k += 2) tensors.emplace_back(u.At(items[k]).s, items[k + 1]);
    if (std::none_of(tensors.begin(), tensors.end(),
                     [](const auto& t) { return t.first.rfind("model.0.", 0) == 0; })) {
      return Status::InvalidArgument("found a state_dict of " + std::to_string(tensors.size()) +
                                         " tensors (first: '" + EscapeInvalidUtf8(tensors[0].first) +
                                         "') without YOLOv8 names (model.0.*). " + kAccepted,
                                     {origin});
    }
  } else {
    const Node& m = u.At(model);
    out.model_class = m.kind == Kind::kObject ? m.s : KindName(m.kind);
    if (out.model_class != kDetectionModel) {
      return Status::InvalidArgument(
          "found " + EscapeInvalidUtf8(out.model_class) + " in '" + out.source + "'. " + kAccepted, {origin});
    }
    KESTREL_RETURN_IF_ERROR(CheckYolov8Graph(u, model, origin));
    KESTREL_RETURN_IF_ERROR(conv.CollectModule(model, "", 0, &tensors));
    // Model facts: nc, names, the yaml's scale.
    const int32_t yaml = u.Get(model, "yaml");
    if (int32_t s = u.Get(yaml, "scale"); s >= 0 && u.At(s).kind == Kind::kStr) out.scale = u.At(s).s;
    int32_t nc = u.Get(model, "nc");
    if (nc < 0) nc = u.Get(yaml, "nc");
    if (nc >= 0 && u.At(nc).kind == Kind::kInt) {
      if (u.At(nc).i < 1 || u.At(nc).i > 10000) {
        return Status::InvalidArgument("nc=" + std::to_string(u.At(nc).i) + " is outside [1, 10000]",
                                       {origin});
      }
      out.nc = static_cast<int>(u.At(nc).i);
    }
    if (int32_t names = u.Get(model, "names"); names >= 0) {
      const Node& n = u.At(names);
      std::vector<std::string> by_index;
      bool ok = true;
      if (n.kind == Kind::kList || n.kind == Kind::kTuple) {
        for (int32_t v : n.items) {
          ok = ok && u.At(v).kind == Kind::kStr;
          if (ok) by_index.push_back(u.At(v).s);
        }
      } else if (n.kind == Kind::kDict) {  // {0: "a", 1: "b"}: keys must be 0..N-1
        const size_t count = n.items.size() / 2;
        by_index.assign(count, "");
        std::vector<bool> seen(count, false);
        for (size_t k = 0; ok && k + 1 < n.items.size(); k += 2) {
          const Node& key = u.At(n.items[k]);
          const Node& val = u.At(n.items[k + 1]);
          ok = key.kind == Kind::kInt && key.i >= 0 && static_cast<uint64_t>(key.i) < count &&
               !seen[static_cast<size_t>(key.i)] && val.kind == Kind::kStr;
          if (ok) {
            seen[static_cast<size_t>(key.i)] = true;
            by_index[static_cast<size_t>(key.i)] = val.s;
          }
        }
      } else {
        ok = false;
      }
      if (!ok)
        return Status::InvalidArgument("model names are not a list or an {index: name} dict of strings",
                                       {origin});
      out.names = std::move(by_index);
    }
  }

  for (const auto& [name, node] : tensors) {
    KESTREL_ASSIGN_OR_RETURN(SafeTensor t, conv.Tensor(node, name));
    if (!out.weights.tensors.emplace(name, std::move(t)).second) {
      return Status::Corruption("tensor '" + EscapeInvalidUtf8(name) + "' appears twice", {origin});
    }
  }

  // Cross-check the recorded facts against the tensors, so a wrong yaml is
  // reported here rather than as a hundred shape mismatches.
  auto cls = out.weights.tensors.find("model.22.cv3.0.2.bias");
  if (out.nc > 0 && cls != out.weights.tensors.end() &&
      (cls->second.shape.size() != 1 || cls->second.shape[0] != out.nc)) {
    return Status::InvalidArgument(
        "the model says nc=" + std::to_string(out.nc) + " but model.22.cv3.0.2.bias has another shape",
        {origin});
  }
  if (!out.names.empty() && out.nc > 0 && static_cast<int>(out.names.size()) != out.nc) {
    return Status::InvalidArgument(
        std::to_string(out.names.size()) + " class names for nc=" + std::to_string(out.nc), {origin});
  }
  if (!out.scale.empty()) {
    auto spec = ParseModelSpec(out.scale, out.nc > 0 ? out.nc : 1);
    if (!spec.IsOk()) return spec.GetStatus().WithLocation({origin, 0, "yaml.scale"});
    auto stem = out.weights.tensors.find("model.0.conv.weight");
    const int want = BuildLayerPlan(*spec)[0].c_out;
    if (stem == out.weights.tensors.end() || stem->second.shape.empty() || stem->second.shape[0] != want) {
      return Status::InvalidArgument("the model yaml says scale '" + EscapeInvalidUtf8(out.scale) +
                                         "' but model.0.conv.weight does not have its " +
                                         std::to_string(want) + " output channels",
                                     {origin});
    }
  }
  return out;
}

Result<PtCheckpoint> ReadPtCheckpoint(const std::string& path, const PtReadLimits& limits) {
  KESTREL_ASSIGN_OR_RETURN(std::string bytes, Env::Default().ReadFile(path, limits.max_file_bytes));
  return ParsePtCheckpoint(bytes, path, limits);
}

Result<SafeTensorFile> ReadWeightsFile(const std::string& path) {
  const PtReadLimits limits;
  KESTREL_ASSIGN_OR_RETURN(std::string bytes, Env::Default().ReadFile(path, limits.max_file_bytes));
  auto lower_ends = [&](std::string_view suffix) {
    if (path.size() < suffix.size()) return false;
    for (size_t i = 0; i < suffix.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(path[path.size() - suffix.size() + i])) != suffix[i])
        return false;
    }
    return true;
  };
  if (!LooksLikeZip(bytes) && !(lower_ends(".pt") || lower_ends(".pth")))
    return ParseSafeTensors(bytes, path);
  KESTREL_ASSIGN_OR_RETURN(PtCheckpoint ckpt, ParsePtCheckpoint(bytes, path, limits));
  SafeTensorFile file = std::move(ckpt.weights);
  file.metadata["format"] = "ultralytics.pt";
  file.metadata["source"] = ckpt.source;
  if (!ckpt.ultralytics_version.empty()) file.metadata["ultralytics_version"] = ckpt.ultralytics_version;
  if (ckpt.nc > 0) file.metadata["nc"] = std::to_string(ckpt.nc);
  if (!ckpt.scale.empty()) file.metadata["scale"] = ckpt.scale;
  if (!ckpt.names.empty()) file.metadata["names"] = DumpJson(nlohmann::json(ckpt.names));
  return file;
}

}  // namespace kestrel::model
