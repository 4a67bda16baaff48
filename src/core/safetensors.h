// Safetensors reader/writer, torch-free. Format: 8-byte little-endian header
// length N, N bytes of JSON {name: {dtype, shape, data_offsets:[begin,end]},
// "__metadata__": {str: str}}, then the raw little-endian tensor bytes.
// The torch adapter (model module) converts SafeTensor <-> at::Tensor.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace kestrel {

struct SafeTensor {
  std::string dtype;           // "F32", "F16", "BF16", "I64", "I32", "U8", ...
  std::vector<int64_t> shape;  // row-major
  std::string data;            // raw little-endian bytes, size = numel * itemsize
};

struct SafeTensorFile {
  std::map<std::string, SafeTensor> tensors;  // sorted by name
  std::map<std::string, std::string> metadata;
};

// Bytes per element for a dtype name, 0 when unknown.
int SafeTensorItemSize(const std::string& dtype);

// Parses and validates (offsets in range, contiguous, sizes match shapes).
// `origin` names the file in errors.
Result<SafeTensorFile> ParseSafeTensors(const std::string& bytes, const std::string& origin);
Result<SafeTensorFile> ReadSafeTensorsFile(const std::string& path);

// The safetensors format caps the header at 100 MB.
inline constexpr uint64_t kMaxSafeTensorsHeaderBytes = 100u << 20;
// Reads and checks only the header of the file at `path`, never the tensor
// bytes (cheap on a multi-GB file): a readable regular file (a symlink to
// one is fine) whose header is a JSON object of well-formed tensor entries
// that lie inside the file. Returns dtypes, shapes and metadata; every
// SafeTensor::data is empty. kNotFound / kInvalidArgument (a folder, a
// device) / kIoError / kCorruption (not safetensors), located at `path`.
Result<SafeTensorFile> ReadSafeTensorsHeader(const std::string& path);
// Serializes with tensors in name order (deterministic bytes).
std::string SerializeSafeTensors(const SafeTensorFile& file);

}  // namespace kestrel
