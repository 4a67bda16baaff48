#include "model/pt_checkpoint.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/env.h"
#include "core/json.h"
#include "core/parse.h"
#include "core/utf8.h"
#include "model/internal/pt_pickle.h"
#include "model/internal/pt_zip.h"
#include "model/spec.h"

// The checkpoint-to-spec half of the .pt reader: which object in the pickle
// is the model, its tensors in state_dict order converted to SafeTensors, and
// the checks that it is the YOLOv8 detection graph. The bytes come from
// internal/pt_zip.h and the values from internal/pt_pickle.h.

namespace kestrel::model {

namespace {

using pt::Kind;
using pt::KindName;
using pt::Node;
using pt::StorageItemSize;
using pt::Unpickler;
using pt::ZipArchive;
using pt::ZipEntry;

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
  const int itemsize = StorageItemSize(st.dtype);
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
        // NOLINTNEXTLINE(bugprone-signed-char-misuse): I8 storage is signed.
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

// The torch module class each layer kind is pickled as.
const char* UltralyticsClass(LayerKind kind) {
  switch (kind) {
    case LayerKind::kConv:
      return "ultralytics.nn.modules.conv.Conv";
    case LayerKind::kC2f:
      return "ultralytics.nn.modules.block.C2f";
    case LayerKind::kC3:
      return "ultralytics.nn.modules.block.C3";
    case LayerKind::kC3k2:
      return "ultralytics.nn.modules.block.C3k2";
    case LayerKind::kSppf:
      return "ultralytics.nn.modules.block.SPPF";
    case LayerKind::kC2psa:
      return "ultralytics.nn.modules.block.C2PSA";
    case LayerKind::kUpsample:
      return "torch.nn.modules.upsampling.Upsample";
    case LayerKind::kConcat:
      return "ultralytics.nn.modules.conv.Concat";
    case LayerKind::kDetect:
      return "ultralytics.nn.modules.head.Detect";
  }
  return "?";
}

const char* FamilyTitle(Family f) {
  switch (f) {
    case Family::kYolov8:
      return "YOLOv8";
    case Family::kYolo11:
      return "YOLO11";
    case Family::kYolov5u:
      return "YOLOv5u";
  }
  return "?";
}

constexpr const char* kDetectionModel = "ultralytics.nn.tasks.DetectionModel";
constexpr const char* kAccepted =
    "Kestrel reads Ultralytics YOLOv8, YOLO11 and YOLOv5u detection checkpoints (a dict with 'ema' or "
    "'model' holding an ultralytics.nn.tasks.DetectionModel, a pickled DetectionModel, or a state_dict with "
    "model.N.* names)";

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

// The children of model.model must be one family's graph (yolov8.yaml,
// yolo11.yaml or yolov5.yaml); returns that family.
Result<Family> CheckFamilyGraph(const Unpickler& u, int32_t model, const std::string& origin) {
  const int32_t mods = u.Get(model, "_modules");
  const int32_t seq = mods >= 0 ? u.Get(mods, "model") : -1;
  const int32_t children = seq >= 0 ? u.Get(seq, "_modules") : -1;
  if (children < 0 || u.At(children).kind != Kind::kDict) {
    return Status::InvalidArgument(
        "the DetectionModel has no 'model' Sequential of layers. " + std::string(kAccepted), {origin});
  }
  const auto& items = u.At(children).items;
  const size_t count = items.size() / 2;
  std::string found, counts;
  for (Family f : AllFamilies()) {
    const auto plan = BuildLayerPlan(ModelSpec{KnownScales(f)[0], 1, f});
    counts += std::string(counts.empty() ? "" : ", ") + FamilyTitle(f) + " " + std::to_string(plan.size());
    if (count != plan.size()) continue;
    bool ok = true;
    for (size_t k = 0; ok && k + 1 < items.size(); k += 2) {
      const Node& child = u.At(items[k + 1]);
      const std::string cls = child.kind == Kind::kObject ? child.s : KindName(child.kind);
      const size_t idx = k / 2;
      if (cls != UltralyticsClass(plan[idx].kind)) {
        ok = false;
        if (found.empty()) {
          found = "layer " + std::to_string(idx) + " is " + EscapeInvalidUtf8(cls) + " (" + FamilyTitle(f) +
                  " has " + UltralyticsClass(plan[idx].kind) + ")";
        }
      }
    }
    if (ok) return f;
  }
  if (found.empty()) found = std::to_string(count) + " layers (the detection graphs have " + counts + ")";
  return Status::InvalidArgument(
      "not a YOLOv8, YOLO11 or YOLOv5u detection model: " + found +
          ". Kestrel builds the yolov8.yaml, yolo11.yaml and yolov5.yaml (anchor-free "
          "'u') detection graphs at scales n/s/m/l/x; other architectures (P2/P6 "
          "variants, YOLOv9/10, ...) are not supported",
      {origin});
}

// train_args["imgsz"]: an int or an [h, w] list/tuple (the long side is
// Kestrel's imgsz, as a letterbox into h x w resizes the long side to it).
// 0 when train_args or its imgsz is absent or None; InvalidArgument for a
// value that is not a plausible image size, so a damaged field is reported
// rather than silently replaced by 640.
Result<int> TrainImgsz(const Unpickler& u, int32_t train_args, const std::string& origin) {
  if (train_args < 0) return 0;  // Get also reads an object's __dict__ (a namespace)
  const int32_t v = u.Get(train_args, "imgsz");
  if (v < 0 || u.At(v).kind == Kind::kNone) return 0;
  const Node& n = u.At(v);
  std::vector<int64_t> sides;
  if (n.kind == Kind::kInt) {
    sides.push_back(n.i);
  } else if ((n.kind == Kind::kList || n.kind == Kind::kTuple) && !n.items.empty() && n.items.size() <= 2) {
    const bool all_ints = std::all_of(n.items.begin(), n.items.end(),
                                      [&](int32_t item) { return u.At(item).kind == Kind::kInt; });
    for (int32_t item : n.items) {
      if (all_ints) sides.push_back(u.At(item).i);
    }
  }
  if (sides.empty()) {
    return Status::InvalidArgument(std::string("train_args imgsz is a ") + KindName(n.kind) +
                                       ", not an image size (an int or an [h, w] pair)",
                                   {origin, 0, "train_args.imgsz"});
  }
  const int64_t side = *std::max_element(sides.begin(), sides.end());
  if (side < 1 || side > 65536) {
    return Status::InvalidArgument("train_args imgsz " + std::to_string(side) + " is outside [1, 65536]",
                                   {origin, 0, "train_args.imgsz"});
  }
  return static_cast<int>(side);
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
    KESTREL_ASSIGN_OR_RETURN(out.imgsz, TrainImgsz(u, u.Get(root, "train_args"), origin));
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
                                         "') without YOLO layer names (model.0.*). " + kAccepted,
                                     {origin});
    }
  } else {
    const Node& m = u.At(model);
    out.model_class = m.kind == Kind::kObject ? m.s : KindName(m.kind);
    if (out.model_class != kDetectionModel) {
      return Status::InvalidArgument(
          "found " + EscapeInvalidUtf8(out.model_class) + " in '" + out.source + "'. " + kAccepted, {origin});
    }
    KESTREL_ASSIGN_OR_RETURN(Family family, CheckFamilyGraph(u, model, origin));
    out.arch = FamilyName(family);
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
  Family family = Family::kYolov8;  // a state_dict without the module tree: checked by its loader
  for (Family f : AllFamilies()) {
    if (out.arch == FamilyName(f)) family = f;
  }
  const std::string cls_name =
      "model." + std::to_string(BuildLayerPlan(ModelSpec{KnownScales(family)[0], 1, family}).size() - 1) +
      ".cv3.0.2.bias";
  auto cls = out.weights.tensors.find(cls_name);
  if (out.nc > 0 && cls != out.weights.tensors.end() &&
      (cls->second.shape.size() != 1 || cls->second.shape[0] != out.nc)) {
    return Status::InvalidArgument(
        "the model says nc=" + std::to_string(out.nc) + " but " + cls_name + " has another shape", {origin});
  }
  if (!out.names.empty() && out.nc > 0 && static_cast<int>(out.names.size()) != out.nc) {
    return Status::InvalidArgument(
        std::to_string(out.names.size()) + " class names for nc=" + std::to_string(out.nc), {origin});
  }
  if (!out.scale.empty()) {
    auto spec = SpecFromArchAndScale(out.arch, out.scale, out.nc > 0 ? out.nc : 1);
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

Status MissingWeightsError(const std::string& path, const std::string& key) {
  std::error_code ec;
  std::string looked = std::filesystem::absolute(path, ec).lexically_normal().string();
  if (ec) looked = path;
  const std::string stem = std::filesystem::path(path).stem().string();
  const std::string scratch = ParseModelSpec(stem, 1).IsOk()
                                  ? "; to train " + stem + " from scratch use " + key + "=" + stem +
                                        ".yaml (its architecture, untrained)"
                                  : "";
  return Status::NotFound(
      key + "=" + EscapeInvalidUtf8(path) + ": no such file (looked for '" + EscapeInvalidUtf8(looked) +
          "'). Nothing is downloaded: Kestrel has no network and never fetches weights as the "
          "reference framework does. Copy the file from a machine that has it and pass its "
          "path, or keep it in the model registry (`kestrel models register FILE`)" +
          EscapeInvalidUtf8(scratch),
      {path, 0, key});
}

Result<SafeTensorFile> ReadWeightsFile(const std::string& path) {
  const PtReadLimits limits;
  auto read = Env::Default().ReadFile(path, limits.max_file_bytes);
  if (read.GetStatus().Code() == StatusCode::kNotFound && !Env::Default().Stat(path).exists) {
    return MissingWeightsError(path);
  }
  KESTREL_ASSIGN_OR_RETURN(std::string bytes, std::move(read));
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
  if (!ckpt.arch.empty()) file.metadata["arch"] = ckpt.arch;
  if (!ckpt.names.empty()) file.metadata["names"] = DumpJson(nlohmann::json(ckpt.names));
  if (ckpt.imgsz > 0) file.metadata["imgsz"] = std::to_string(ckpt.imgsz);
  return file;
}

Result<int> ReadRecordedImgsz(const std::string& path) {
  if (FileLooksLikeZip(path)) {
    KESTREL_ASSIGN_OR_RETURN(PtCheckpoint ckpt, ReadPtCheckpoint(path));
    return ckpt.imgsz;
  }
  KESTREL_ASSIGN_OR_RETURN(SafeTensorFile header, ReadSafeTensorsHeader(path));
  auto it = header.metadata.find("imgsz");
  if (it == header.metadata.end()) return 0;
  auto v = ParseInt64(it->second, {path, 0, "imgsz"}, 1, 65536, "a positive image side in pixels");
  if (!v.IsOk()) return Status::Corruption("metadata imgsz: " + v.GetStatus().Message(), {path, 0, "imgsz"});
  return static_cast<int>(*v);
}

}  // namespace kestrel::model
