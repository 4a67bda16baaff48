#include "core/safetensors.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/env.h"
#include "core/json.h"

namespace kestrel {

int SafeTensorItemSize(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL") return 1;
  return 0;
}

namespace {

// The header JSON (`header_text`) of a file whose tensor bytes are
// `data_size` long. With `base` (the tensor bytes) each tensor's data is
// copied; without, only dtype and shape are filled in.
Result<SafeTensorFile> ParseHeader(std::string_view header_text, uint64_t data_size, const char* base,
                                   const std::string& origin) {
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_text.begin(), header_text.end());
  } catch (const std::exception&) {
    // Not the parser's text: it quotes the bytes it read, and the file may
    // be anyone's (a path a client named).
    return Status::Corruption("header is not JSON", {origin});
  }
  if (!header.is_object()) return Status::Corruption("header is not a JSON object", {origin});
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
        if (d > 0 && numel > UINT64_MAX / static_cast<uint64_t>(d))
          return Status::Corruption("shape too large", where);
        numel *= static_cast<uint64_t>(d);
      }
      if (numel > UINT64_MAX / static_cast<uint64_t>(item) ||
          numel * static_cast<uint64_t>(item) != off[1] - off[0]) {
        return Status::Corruption("byte size does not match shape and dtype", where);
      }
      if (base != nullptr) t.data.assign(base + off[0], off[1] - off[0]);
    } catch (const std::exception& e) {
      return Status::Corruption(std::string("malformed entry: ") + e.what(), where);
    }
    out.tensors.emplace(it.key(), std::move(t));
  }
  return out;
}

// The header length is the file's first 8 bytes: a message that printed it
// would print those bytes of any file it is pointed at ("root:x:0" of
// /etc/passwd as 3475222254926655346), so no message here shows it.
constexpr const char* kHeaderLengthOutOfRange = "header length out of range: more than the file holds";

uint64_t HeaderLength(const char* p) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(p[i]);
  return n;
}

}  // namespace

Result<SafeTensorFile> ParseSafeTensors(const std::string& bytes, const std::string& origin) {
  if (bytes.size() < 8) return Status::Corruption("file too small for a safetensors header", {origin});
  const uint64_t n = HeaderLength(bytes.data());
  if (n > bytes.size() - 8) {
    return Status::Corruption(kHeaderLengthOutOfRange, {origin});
  }
  return ParseHeader(std::string_view(bytes).substr(8, n), bytes.size() - 8 - n, bytes.data() + 8 + n,
                     origin);
}

Result<SafeTensorFile> ReadSafeTensorsHeader(const std::string& path) {
  const FileInfo info = Env::Default().Stat(path);
  if (!info.exists) return Status::NotFound("no such file", {path});
  std::error_code ec;
  // Stat does not follow a final symlink; the file it points to must be regular.
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Status::InvalidArgument(
        std::filesystem::is_directory(path, ec) ? "is a folder, not a weights file" : "is not a regular file",
        {path});
  }
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return Status::IoError("cannot read the file size: " + ec.message(), {path});
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IoError(std::string("cannot open for reading: ") + std::strerror(errno), {path});
  if (size < 8) return Status::Corruption("file too small for a safetensors header", {path});
  char len[8];
  if (!in.read(len, 8)) return Status::IoError("cannot read the header length", {path});
  const uint64_t n = HeaderLength(len);
  if (n > size - 8) return Status::Corruption(kHeaderLengthOutOfRange, {path});
  if (n > kMaxSafeTensorsHeaderBytes)
    return Status::Corruption("header length is over the 100 MB safetensors limit", {path});
  std::string header(n, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(n)))
    return Status::IoError("cannot read the header", {path});
  return ParseHeader(header, size - 8 - n, nullptr, path);
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
  std::string h = DumpJson(header);          // metadata may carry class names with stray bytes
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
