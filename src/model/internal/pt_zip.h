// Private to src/model (pt_checkpoint.cc): torch.save's zip container.
// torch.save writes a zip of STORED (uncompressed) entries through miniz.
// Reading that needs only the central directory and the local headers, so
// this is a small bounded reader over the bytes rather than a dependency
// (Debian ships minizip's runtime but not its headers here, and a general zip
// library would also accept compression and encryption we never want).
// Torch-free, like pt_checkpoint.cc.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"
#include "model/pt_checkpoint.h"

namespace kestrel::model::pt {

struct ZipEntry {
  std::string name;
  uint64_t header_offset = 0;  // local file header
  uint64_t size = 0;           // stored = compressed = uncompressed
  uint32_t crc = 0;
  uint32_t method = 0;  // 0 = stored; anything else is refused when read
};

// A view over the bytes of a .pt file; the bytes must outlive the archive.
// Open checks the central directory against `limits` and the file's size;
// Read checks each entry's local header, size and CRC when it is read.
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

// CRC-32 (zip's polynomial) of `data`.
uint32_t Crc32(std::string_view data);

// A zip of STORED entries as torch.save writes one (pt_writer.cc): entries in
// the given order, each entry's data 64-byte aligned (the padding sits in its
// local header's extra field, as torch's writer puts it), no compression, no
// data descriptors. ResourceExhausted when the archive would need zip64
// (4 GiB or more, or 65535 entries).
Result<std::string> WriteStoredZip(const std::vector<std::pair<std::string, std::string_view>>& entries);

}  // namespace kestrel::model::pt
