// Zips written byte by byte for tests (APPNOTE's local file headers,
// central directory and end record; no zip64, no data descriptors): the
// upload tests' entries libarchive's zip writer will not make — FIFO, device
// and socket entries (their type is the Unix mode in the central directory's
// external attributes, "version made by" Unix) and entries whose headers
// claim fewer bytes than their data expands to — and the stored archives
// (torch.save's layout) of the .pt reader's tests.
#pragma once

#include <sys/stat.h>
#include <zlib.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kestrel::testing {

struct RawZipEntry {
  std::string name;
  std::string data;                // the entry's expanded bytes
  uint32_t mode = S_IFREG | 0644;  // st_mode: external attributes << 16, made by Unix (3)
  bool deflate = false;            // method 8 (raw deflate of data), else 0 (stored)
  int64_t declared_size = -1;      // the expanded size the headers claim; -1: data.size()
};

namespace zip_bytes_detail {
inline void Put16(std::string* out, uint32_t v) {
  out->push_back(static_cast<char>(v & 0xff));
  out->push_back(static_cast<char>((v >> 8) & 0xff));
}
inline void Put32(std::string* out, uint32_t v) {
  Put16(out, v & 0xffff);
  Put16(out, v >> 16);
}
// Raw deflate (no zlib header), as zip method 8 stores it; "" on failure.
inline std::string Deflate(const std::string& data) {
  z_stream s{};
  if (deflateInit2(&s, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) return {};
  std::string out(deflateBound(&s, static_cast<uLong>(data.size())), '\0');
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  s.avail_in = static_cast<uInt>(data.size());
  s.next_out = reinterpret_cast<Bytef*>(out.data());
  s.avail_out = static_cast<uInt>(out.size());
  const int r = deflate(&s, Z_FINISH);
  out.resize(s.total_out);
  deflateEnd(&s);
  return r == Z_STREAM_END ? out : std::string();
}
}  // namespace zip_bytes_detail

// The zip of `entries`, as bytes (each under 4 GiB).
inline std::string RawZip(const std::vector<RawZipEntry>& entries) {
  using zip_bytes_detail::Put16;
  using zip_bytes_detail::Put32;
  std::string out, central;
  for (const auto& e : entries) {
    const std::string stored = e.deflate ? zip_bytes_detail::Deflate(e.data) : e.data;
    const auto crc = static_cast<uint32_t>(
        crc32(0L, reinterpret_cast<const Bytef*>(e.data.data()), static_cast<uInt>(e.data.size())));
    const auto size = static_cast<uint32_t>(e.declared_size < 0 ? e.data.size() : e.declared_size);
    const auto offset = static_cast<uint32_t>(out.size());
    const uint32_t method = e.deflate ? 8 : 0;
    // The fields the local header and the central record share, from "version needed".
    std::string common;
    Put16(&common, 20);      // version needed: 2.0
    Put16(&common, 0);       // flags
    Put16(&common, method);  // compression method
    Put16(&common, 0);       // time 00:00:00
    Put16(&common, 0x21);    // date 1980-01-01
    Put32(&common, crc);     // CRC-32 of the expanded bytes
    Put32(&common, static_cast<uint32_t>(stored.size()));
    Put32(&common, size);  // expanded size (as claimed)
    Put16(&common, static_cast<uint32_t>(e.name.size()));
    Put16(&common, 0);        // extra field length
    Put32(&out, 0x04034b50);  // local file header
    out += common + e.name + stored;
    Put32(&central, 0x02014b50);      // central directory record
    Put16(&central, (3u << 8) | 20);  // made by Unix, 2.0: the external attributes carry st_mode
    central += common;
    Put16(&central, 0);  // comment length
    Put16(&central, 0);  // disk number
    Put16(&central, 0);  // internal attributes
    Put32(&central, e.mode << 16);
    Put32(&central, offset);
    central += e.name;
  }
  const auto central_offset = static_cast<uint32_t>(out.size());
  out += central;
  Put32(&out, 0x06054b50);  // end of central directory
  Put16(&out, 0);
  Put16(&out, 0);
  Put16(&out, static_cast<uint32_t>(entries.size()));
  Put16(&out, static_cast<uint32_t>(entries.size()));
  Put32(&out, static_cast<uint32_t>(central.size()));
  Put32(&out, central_offset);
  Put16(&out, 0);  // comment length
  return out;
}

}  // namespace kestrel::testing
