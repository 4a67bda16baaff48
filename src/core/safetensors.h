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
// Serializes with tensors in name order (deterministic bytes).
std::string SerializeSafeTensors(const SafeTensorFile& file);

}  // namespace kestrel
