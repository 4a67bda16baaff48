#include "model/internal/pt_pickle.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>

#include "core/utf8.h"

namespace kestrel::model::pt {

namespace {

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

}  // namespace

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

int StorageItemSize(const std::string& dtype) {
  for (const auto& t : kStorageTypes) {
    if (dtype == t.dtype) return t.itemsize;
  }
  return 0;
}

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

}  // namespace kestrel::model::pt
