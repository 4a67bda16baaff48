#include "core/safetensors.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/env.h"

namespace kestrel {

int SafeTensorItemSize(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL") return 1;
  return 0;
}

Result<SafeTensorFile> ParseSafeTensors(const std::string& bytes, const std::string& origin) {
  if (bytes.size() < 8) return Status::Corruption("file too small for a safetensors header", {origin});
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  if (n > bytes.size() - 8) {
    return Status::Corruption("header length " + std::to_string(n) + " exceeds file size", {origin});
  }
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(n));
  } catch (const std::exception& e) {
    return Status::Corruption(std::string("header is not JSON: ") + e.what(), {origin});
  }
  if (!header.is_object()) return Status::Corruption("header is not a JSON object", {origin});
  const uint64_t data_size = bytes.size() - 8 - n;
  const char* base = bytes.data() + 8 + n;
  SafeTensorFile out;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object()) return Status::Corruption("__metadata__ is not an object", {origin});
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (m.value().is_string()) out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const auto& v = it.value();
    ErrorLocation where{origin, 0, it.key()};
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets")) {
      return Status::Corruption("tensor entry needs dtype, shape and data_offsets", where);
    }
    SafeTensor t;
    try {
      t.dtype = v["dtype"].get<std::string>();
      t.shape = v["shape"].get<std::vector<int64_t>>();
      auto off = v["data_offsets"].get<std::vector<uint64_t>>();
      if (off.size() != 2 || off[0] > off[1] || off[1] > data_size) {
        return Status::Corruption("data_offsets out of range", where);
      }
      int item = SafeTensorItemSize(t.dtype);
      if (item == 0) return Status::Corruption("unknown dtype " + t.dtype, where);
      uint64_t numel = 1;
      for (int64_t d : t.shape) {
        if (d < 0) return Status::Corruption("negative dimension", where);
        numel *= static_cast<uint64_t>(d);
      }
      if (numel * static_cast<uint64_t>(item) != off[1] - off[0]) {
        return Status::Corruption("byte size does not match shape and dtype", where);
      }
      t.data.assign(base + off[0], off[1] - off[0]);
    } catch (const std::exception& e) {
      return Status::Corruption(std::string("malformed entry: ") + e.what(), where);
    }
    out.tensors.emplace(it.key(), std::move(t));
  }
  return out;
}

Result<SafeTensorFile> ReadSafeTensorsFile(const std::string& path) {
  KESTREL_ASSIGN_OR_RETURN(std::string bytes, Env::Default().ReadFile(path));
  return ParseSafeTensors(bytes, path);
}

std::string SerializeSafeTensors(const SafeTensorFile& file) {
  nlohmann::json header = nlohmann::json::object();
  if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
  uint64_t off = 0;
  for (const auto& [name, t] : file.tensors) {
    header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.data.size()}}};
    off += t.data.size();
  }
  std::string h = header.dump();
  while ((h.size() + 8) % 8 != 0) h += ' ';  // keep data 8-byte aligned
  std::string out;
  out.reserve(8 + h.size() + off);
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  out += h;
  for (const auto& [name, t] : file.tensors) out += t.data;
  return out;
}

}  // namespace kestrel
