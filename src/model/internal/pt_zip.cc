#include "model/internal/pt_zip.h"

#include <array>

#include "core/utf8.h"

namespace kestrel::model::pt {

namespace {

uint32_t Le16(std::string_view b, uint64_t at) {
  return static_cast<uint32_t>(static_cast<uint8_t>(b[at])) |
         static_cast<uint32_t>(static_cast<uint8_t>(b[at + 1])) << 8;
}
uint32_t Le32(std::string_view b, uint64_t at) { return Le16(b, at) | Le16(b, at + 2) << 16; }
uint64_t Le64(std::string_view b, uint64_t at) {
  return static_cast<uint64_t>(Le32(b, at)) | static_cast<uint64_t>(Le32(b, at + 4)) << 32;
}

}  // namespace

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

Result<std::string> WriteStoredZip(const std::vector<std::pair<std::string, std::string_view>>& entries) {
  constexpr uint64_t kAlign = 64;
  uint64_t total = 22;
  for (const auto& [name, data] : entries) total += 30 + 46 + 2 * name.size() + 4 + kAlign + data.size();
  if (total >= 0xFFFFFFFFull || entries.size() >= 0xFFFF) {
    return Status::ResourceExhausted("a .pt of " + std::to_string(total) + " bytes and " +
                                     std::to_string(entries.size()) +
                                     " entries would need zip64, which this writer does not write");
  }
  std::string out;
  out.reserve(total);
  auto u16 = [&](uint32_t v) {
    out.push_back(static_cast<char>(v & 0xFF));
    out.push_back(static_cast<char>((v >> 8) & 0xFF));
  };
  auto u32 = [&](uint32_t v) {
    u16(v & 0xFFFF);
    u16(v >> 16);
  };
  struct Written {
    uint32_t offset, crc, size;
  };
  std::vector<Written> written;
  written.reserve(entries.size());
  for (const auto& [name, data] : entries) {
    const auto offset = static_cast<uint32_t>(out.size());
    const uint32_t crc = Crc32(data);
    // Pad so the data starts on a 64-byte boundary; an extra field is at least its 4-byte header.
    uint64_t pad = (kAlign - (out.size() + 30 + name.size() + 4) % kAlign) % kAlign;
    u32(0x04034b50u);
    u16(20);  // version needed: 2.0
    u16(0);   // flags
    u16(0);   // stored
    u16(0);   // time
    u16(0);   // date
    u32(crc);
    u32(static_cast<uint32_t>(data.size()));
    u32(static_cast<uint32_t>(data.size()));
    u16(static_cast<uint32_t>(name.size()));
    u16(static_cast<uint32_t>(4 + pad));
    out += name;
    u16(0x4246);  // "FB": torch's padding field
    u16(static_cast<uint32_t>(pad));
    out.append(pad, 'Z');
    out.append(data);
    written.push_back({offset, crc, static_cast<uint32_t>(data.size())});
  }
  const auto cd_offset = static_cast<uint32_t>(out.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string& name = entries[i].first;
    u32(0x02014b50u);
    u16(20);  // made by
    u16(20);  // needed
    u16(0);
    u16(0);
    u16(0);
    u16(0);
    u32(written[i].crc);
    u32(written[i].size);
    u32(written[i].size);
    u16(static_cast<uint32_t>(name.size()));
    u16(0);  // extra
    u16(0);  // comment
    u16(0);  // disk
    u16(0);  // internal attributes
    u32(0);  // external attributes
    u32(written[i].offset);
    out += name;
  }
  const auto cd_size = static_cast<uint32_t>(out.size() - cd_offset);
  u32(0x06054b50u);
  u16(0);
  u16(0);
  u16(static_cast<uint32_t>(entries.size()));
  u16(static_cast<uint32_t>(entries.size()));
  u32(cd_size);
  u32(cd_offset);
  u16(0);
  return out;
}

}  // namespace kestrel::model::pt
