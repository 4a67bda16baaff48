#include "data/image.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <opencv2/core.hpp>
#include <opencv2/core/utils/logger.hpp>
#ifdef KESTREL_IMGCODECS_SONAME
#include <dlfcn.h>
#endif
#include <opencv2/imgproc.hpp>
#include <string>
#include <utility>

#include "data/codec.h"

namespace kestrel::data {
namespace {

constexpr size_t kNpos = std::string_view::npos;

#ifdef KESTREL_IMGCODECS_SONAME
// OpenCV's imgcodecs, loaded on the first BMP, WebP or TIFF only: Debian
// builds it with GDAL, whose ~120 libraries cost every process that links
// it ~0.1 s to start, and JPEG and PNG (nearly every image) need none of it
// (codec.h). Loaded once, never unloaded; the soname is the one the build
// found (src/data/CMakeLists.txt).
using ImdecodeFn = cv::Mat (*)(const cv::_InputArray&, int);
struct Imgcodecs {
  ImdecodeFn imdecode = nullptr;
  std::string error;  // why it is null
};
const Imgcodecs& LoadImgcodecs() {
  static const Imgcodecs loaded = [] {
    Imgcodecs c;
    void* lib = dlopen(KESTREL_IMGCODECS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* e = dlerror();
      c.error = e != nullptr ? e : "dlopen " KESTREL_IMGCODECS_SONAME " failed";
      return c;
    }
    // cv::imdecode(cv::InputArray, int), OpenCV 4's C++ ABI.
    void* fn = dlsym(lib, "_ZN2cv8imdecodeERKNS_11_InputArrayEi");
    if (fn == nullptr) {
      c.error = KESTREL_IMGCODECS_SONAME " has no cv::imdecode(InputArray, int)";
      return c;
    }
    c.imdecode = reinterpret_cast<ImdecodeFn>(fn);  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
    return c;
  }();
  return loaded;
}
#endif

// Bounds-checked integer reads; out-of-range reads return 0 so a header that
// lies about its lengths can never make us read past the buffer.
uint32_t U8(std::string_view b, size_t i) { return i < b.size() ? static_cast<unsigned char>(b[i]) : 0; }
uint32_t U16BE(std::string_view b, size_t i) { return (U8(b, i) << 8) | U8(b, i + 1); }
uint32_t U16LE(std::string_view b, size_t i) { return U8(b, i) | (U8(b, i + 1) << 8); }
uint32_t U24LE(std::string_view b, size_t i) { return U16LE(b, i) | (U8(b, i + 2) << 16); }
uint32_t U32BE(std::string_view b, size_t i) { return (U16BE(b, i) << 16) | U16BE(b, i + 2); }
uint32_t U32LE(std::string_view b, size_t i) { return U16LE(b, i) | (U16LE(b, i + 2) << 16); }

bool Has(std::string_view b, size_t off, std::string_view magic) {
  return b.size() >= off + magic.size() && b.substr(off, magic.size()) == magic;
}

// A refusal: the Status for people and, in `*why`, its typed cause for code.
Status Bad(DecodeFailure* why, DecodeFailure cause, StatusCode code, const std::string& origin,
           std::string msg) {
  *why = cause;
  return Status(code, std::move(msg), ErrorLocation{origin});
}

// "%.3g" without the exponent's '+' and leading zeros: 2.5e+09 -> 2.5e9.
std::string ShortNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g", v);
  std::string s = buf;
  size_t e = s.find('e');
  if (e == std::string::npos) return s;
  std::string exp = s.substr(e + 1);
  std::string sign;
  if (!exp.empty() && (exp[0] == '+' || exp[0] == '-')) {
    if (exp[0] == '-') sign = "-";
    exp = exp.substr(1);
  }
  while (exp.size() > 1 && exp[0] == '0') exp = exp.substr(1);
  return s.substr(0, e + 1) + sign + exp;
}

// ---- TIFF IFD (also the payload of JPEG APP1 / PNG eXIf / WebP EXIF) ----

struct TiffTags {
  uint32_t width = 0, height = 0, bits = 0, photometric = 2, samples = 0;
  uint32_t orientation = 1;
  bool extra_samples = false;
  bool ok = false;
};

// Reads the first value of the SHORT/LONG tags Kestrel cares about from IFD0.
TiffTags ParseTiffIfd0(std::string_view t) {
  TiffTags out;
  bool le;
  if (Has(t, 0, std::string_view("II*\0", 4))) {
    le = true;
  } else if (Has(t, 0, std::string_view("MM\0*", 4))) {
    le = false;
  } else {
    return out;
  }
  auto u16 = [&](size_t i) { return le ? U16LE(t, i) : U16BE(t, i); };
  auto u32 = [&](size_t i) { return le ? U32LE(t, i) : U32BE(t, i); };
  size_t ifd = u32(4);
  if (ifd < 8 || ifd + 2 > t.size()) return out;
  uint32_t count = u16(ifd);
  for (uint32_t k = 0; k < count; ++k) {
    size_t e = ifd + 2 + static_cast<size_t>(k) * 12;
    if (e + 12 > t.size()) break;
    uint32_t tag = u16(e), type = u16(e + 2), n = u32(e + 4);
    uint32_t size = type == 3 ? 2 : type == 4 ? 4 : 0;  // SHORT, LONG
    if (size == 0 || n == 0) {
      if (tag == 0x152) out.extra_samples = true;
      continue;
    }
    size_t at = static_cast<uint64_t>(size) * n <= 4 ? e + 8 : u32(e + 8);
    if (at + size > t.size()) continue;
    uint32_t v = size == 2 ? u16(at) : u32(at);
    switch (tag) {
      case 0x100:
        out.width = v;
        break;
      case 0x101:
        out.height = v;
        break;
      case 0x102:
        out.bits = v;
        break;
      case 0x106:
        out.photometric = v;
        break;
      case 0x115:
        out.samples = v;
        break;
      case 0x112:
        out.orientation = v;
        break;
      case 0x152:
        out.extra_samples = true;
        break;
      default:
        break;
    }
  }
  out.ok = true;
  return out;
}

int OrientationFromTiff(std::string_view tiff) {
  TiffTags t = ParseTiffIfd0(tiff);
  // Values outside 1..8 are invalid tags: treat as "as stored".
  return (t.ok && t.orientation >= 1 && t.orientation <= 8) ? static_cast<int>(t.orientation) : 1;
}

// ---- JPEG ----

bool IsSofMarker(uint32_t m) { return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC; }

struct JpegScan {
  bool sof = false;
  bool eoi = false;  // an EOI marker follows the last scan
};

// Walks the marker segments. With `to_eoi` false it stops at the first scan
// (header probe); otherwise it skips entropy-coded data (where 0xFF is always
// followed by 0x00 or an RSTn) and looks for the EOI that ends the image.
JpegScan WalkJpeg(std::string_view b, ImageInfo* info, bool to_eoi) {
  JpegScan scan;
  bool exif_seen = false;
  size_t n = b.size();
  size_t pos = 2;
  while (pos < n) {
    if (U8(b, pos) != 0xFF) {  // stray bytes between segments: libjpeg skips them too
      const void* ff = std::memchr(b.data() + pos, 0xFF, n - pos);
      if (ff == nullptr) break;
      pos = static_cast<size_t>(static_cast<const char*>(ff) - b.data());
    }
    while (pos < n && U8(b, pos) == 0xFF) ++pos;
    if (pos >= n) break;
    uint32_t m = U8(b, pos++);
    if (m == 0xD9) {
      scan.eoi = true;
      break;
    }
    if (m == 0x00 || m == 0x01 || m == 0xD8 || (m >= 0xD0 && m <= 0xD7)) continue;
    if (pos + 2 > n) break;
    size_t len = U16BE(b, pos);
    if (len < 2 || pos + len > n) break;  // truncated segment
    std::string_view seg = b.substr(pos + 2, len - 2);
    if (IsSofMarker(m) && !scan.sof && seg.size() >= 6) {
      scan.sof = true;
      info->bit_depth = static_cast<int>(U8(seg, 0));
      info->stored_height = static_cast<int>(U16BE(seg, 1));
      info->stored_width = static_cast<int>(U16BE(seg, 3));
      info->channels = static_cast<int>(U8(seg, 5));
    } else if (m == 0xE1 && !exif_seen && Has(seg, 0, std::string_view("Exif\0\0", 6))) {
      exif_seen = true;
      info->exif_orientation = OrientationFromTiff(seg.substr(6));
    }
    pos += len;
    if (m == 0xDA) {
      if (!to_eoi) break;
      // Entropy-coded data until a real marker.
      while (pos < n) {
        const void* ff = std::memchr(b.data() + pos, 0xFF, n - pos);
        if (ff == nullptr) {
          pos = n;
          break;
        }
        pos = static_cast<size_t>(static_cast<const char*>(ff) - b.data());
        uint32_t next = U8(b, pos + 1);
        if (pos + 1 >= n) {
          pos = n;
        } else if (next == 0x00 || (next >= 0xD0 && next <= 0xD7)) {
          pos += 2;
        } else if (next == 0xFF) {
          pos += 1;
        } else {
          break;  // a marker: back to the segment loop
        }
      }
    }
  }
  return scan;
}

Status ProbeJpeg(std::string_view b, const std::string& origin, ImageInfo* info, DecodeFailure* why) {
  info->format = "jpeg";
  if (!WalkJpeg(b, info, false).sof) {
    return Bad(why, DecodeFailure::kTruncated, StatusCode::kCorruption, origin,
               "truncated or corrupt JPEG: no frame header (SOF marker) found");
  }
  info->is_gray = info->channels == 1;
  info->is_cmyk = info->channels == 4;
  return {};
}

// ---- PNG ----

constexpr std::string_view kPngSig("\x89PNG\r\n\x1a\n", 8);

// Walks chunks from the signature. Returns true when IEND is reached with
// every chunk complete. Calls `fn(type, data)` for chunks before IDAT.
template <typename Fn>
bool WalkPng(std::string_view b, Fn fn) {
  size_t pos = 8;
  bool before_idat = true;
  while (pos + 8 <= b.size()) {
    uint64_t len = U32BE(b, pos);
    std::string_view type = b.substr(pos + 4, 4);
    if (len > 0x7FFFFFFFu || pos + 12 + len > b.size()) return false;
    if (type == "IDAT") before_idat = false;
    if (before_idat) fn(type, b.substr(pos + 8, static_cast<size_t>(len)));
    if (type == "IEND") return true;
    pos += 12 + static_cast<size_t>(len);
  }
  return false;
}

Status ProbePng(std::string_view b, const std::string& origin, ImageInfo* info, DecodeFailure* why) {
  info->format = "png";
  if (b.size() < 8 + 8 + 13 || b.substr(12, 4) != "IHDR") {
    return Bad(why, DecodeFailure::kCorrupt, StatusCode::kCorruption, origin,
               "corrupt PNG: missing IHDR header");
  }
  uint32_t w = U32BE(b, 16), h = U32BE(b, 20);
  if (w > 0x7FFFFFFFu || h > 0x7FFFFFFFu) {
    return Bad(why, DecodeFailure::kCorrupt, StatusCode::kCorruption, origin,
               "corrupt PNG: IHDR size out of range");
  }
  info->stored_width = static_cast<int>(w);
  info->stored_height = static_cast<int>(h);
  info->bit_depth = static_cast<int>(U8(b, 24));
  uint32_t colour = U8(b, 25);
  switch (colour) {
    case 0:
      info->channels = 1;
      info->is_gray = true;
      break;
    case 2:  // NOLINT(bugprone-branch-clone): one case per PNG colour type
      info->channels = 3;
      break;
    case 3:
      info->channels = 3;
      break;  // palette, expands to RGB
    case 4:
      info->channels = 2;
      info->is_gray = true;
      info->has_alpha = true;
      break;
    case 6:
      info->channels = 4;
      info->has_alpha = true;
      break;
    default:
      return Bad(why, DecodeFailure::kCorrupt, StatusCode::kCorruption, origin,
                 "corrupt PNG: unknown colour type " + std::to_string(colour));
  }
  WalkPng(b, [&](std::string_view type, std::string_view data) {
    if (type == "tRNS") {
      info->has_alpha = true;
      if (colour != 0) info->channels = 4;
    } else if (type == "eXIf") {
      info->exif_orientation = OrientationFromTiff(data);
    }
  });
  return {};
}

// ---- BMP, WebP, TIFF ----

Status ProbeBmp(std::string_view b, const std::string& origin, ImageInfo* info, DecodeFailure* why) {
  info->format = "bmp";
  uint32_t dib = U32LE(b, 14);
  if (b.size() < 26 || dib < 12) {
    return Bad(why, DecodeFailure::kCorrupt, StatusCode::kCorruption, origin,
               "corrupt BMP: header too short");
  }
  int64_t w, h;
  uint32_t bpp;
  if (dib == 12) {  // OS/2 BITMAPCOREHEADER
    w = U16LE(b, 18);
    h = U16LE(b, 20);
    bpp = U16LE(b, 24);
  } else {
    w = static_cast<int32_t>(U32LE(b, 18));
    h = static_cast<int32_t>(U32LE(b, 22));  // negative: rows stored top-down
    bpp = U16LE(b, 28);
  }
  if (h < 0) h = -h;
  if (w < 0 || w > std::numeric_limits<int>::max() || h > std::numeric_limits<int>::max()) {
    return Bad(why, DecodeFailure::kCorrupt, StatusCode::kCorruption, origin,
               "corrupt BMP: size out of range");
  }
  info->stored_width = static_cast<int>(w);
  info->stored_height = static_cast<int>(h);
  info->channels = bpp == 32 ? 4 : 3;
  info->bit_depth = 8;
  return {};
}

Status ProbeWebp(std::string_view b, const std::string& origin, ImageInfo* info, DecodeFailure* why) {
  info->format = "webp";
  std::string_view fourcc = b.substr(12, 4);
  std::string_view d = b.size() > 20 ? b.substr(20) : std::string_view();
  info->channels = 3;
  if (fourcc == "VP8 ") {
    if (d.size() < 10 || !Has(d, 3, "\x9d\x01\x2a")) {
      return Bad(why, DecodeFailure::kCorrupt, StatusCode::kCorruption, origin,
                 "corrupt WebP: bad VP8 frame header");
    }
    info->stored_width = static_cast<int>(U16LE(d, 6) & 0x3FFF);
    info->stored_height = static_cast<int>(U16LE(d, 8) & 0x3FFF);
  } else if (fourcc == "VP8L") {
    if (d.size() < 5 || U8(d, 0) != 0x2F) {
      return Bad(why, DecodeFailure::kCorrupt, StatusCode::kCorruption, origin,
                 "corrupt WebP: bad VP8L header");
    }
    uint32_t bits = U32LE(d, 1);
    info->stored_width = static_cast<int>((bits & 0x3FFF) + 1);
    info->stored_height = static_cast<int>(((bits >> 14) & 0x3FFF) + 1);
    info->has_alpha = ((bits >> 28) & 1) != 0;
  } else if (fourcc == "VP8X") {
    if (d.size() < 10)
      return Bad(why, DecodeFailure::kCorrupt, StatusCode::kCorruption, origin, "corrupt WebP: short VP8X");
    info->has_alpha = (U8(d, 0) & 0x10) != 0;
    info->stored_width = static_cast<int>(U24LE(d, 4) + 1);
    info->stored_height = static_cast<int>(U24LE(d, 7) + 1);
    size_t pos = 12;
    while (pos + 8 <= b.size()) {
      uint64_t len = U32LE(b, pos + 4);
      if (pos + 8 + len > b.size()) break;
      if (b.substr(pos, 4) == "EXIF") {
        std::string_view exif = b.substr(pos + 8, static_cast<size_t>(len));
        if (Has(exif, 0, std::string_view("Exif\0\0", 6))) exif = exif.substr(6);
        info->exif_orientation = OrientationFromTiff(exif);
      }
      pos += 8 + static_cast<size_t>(len) + (len & 1);
    }
  } else {
    return Bad(why, DecodeFailure::kUnsupported, StatusCode::kInvalidArgument, origin,
               "unsupported WebP chunk '" + std::string(fourcc) + "'");
  }
  if (info->has_alpha) info->channels = 4;
  return {};
}

Status ProbeTiff(std::string_view b, const std::string& origin, ImageInfo* info, DecodeFailure* why) {
  info->format = "tiff";
  TiffTags t = ParseTiffIfd0(b);
  if (!t.ok || t.width > 0x7FFFFFFFu || t.height > 0x7FFFFFFFu) {
    return Bad(why, DecodeFailure::kCorrupt, StatusCode::kCorruption, origin,
               "corrupt TIFF: unreadable first IFD");
  }
  info->stored_width = static_cast<int>(t.width);
  info->stored_height = static_cast<int>(t.height);
  info->bit_depth = t.bits == 0 ? 1 : static_cast<int>(t.bits);
  info->is_gray = t.photometric <= 1;
  info->is_cmyk = t.photometric == 5;
  info->channels = t.samples == 0 ? (info->is_gray ? 1 : 3) : static_cast<int>(t.samples);
  int colour = info->is_gray ? 1 : info->is_cmyk ? 4 : 3;
  info->has_alpha = t.extra_samples && info->channels > colour;
  info->exif_orientation = (t.orientation >= 1 && t.orientation <= 8) ? static_cast<int>(t.orientation) : 1;
  return {};
}

const char* OrientationName(int o) {
  switch (o) {
    case 2:
      return "mirror horizontal";
    case 3:
      return "rotate 180";
    case 4:
      return "mirror vertical";
    case 5:
      return "transpose";
    case 6:
      return "rotate 90 clockwise";
    case 7:
      return "transverse";
    case 8:
      return "rotate 90 counter-clockwise";
    default:
      return "as stored";
  }
}

// Turns the stored pixels into the displayed image (EXIF 2.32, tag 0x0112).
cv::Mat ApplyOrientation(const cv::Mat& in, int o) {
  cv::Mat out;
  switch (o) {
    case 2:
      cv::flip(in, out, 1);
      break;
    case 3:
      cv::rotate(in, out, cv::ROTATE_180);
      break;
    case 4:
      cv::flip(in, out, 0);
      break;
    case 5:
      cv::transpose(in, out);
      break;
    case 6:
      cv::rotate(in, out, cv::ROTATE_90_CLOCKWISE);
      break;
    case 7: {
      cv::Mat t;
      cv::transpose(in, t);
      cv::flip(t, out, -1);
      break;
    }
    case 8:
      cv::rotate(in, out, cv::ROTATE_90_COUNTERCLOCKWISE);
      break;
    default:
      out = in;
      break;
  }
  return out;
}

Result<cv::Mat> DecodeChecked(std::string_view bytes, const std::string& origin, const DecodeOptions& opts,
                              const ImageInfo& info, DecodeFailure* why) {
  if (info.stored_width <= 0 || info.stored_height <= 0) {
    return Bad(why, DecodeFailure::kZeroSize, StatusCode::kInvalidArgument, origin,
               "image has zero size (" + std::to_string(info.stored_width) + "x" +
                   std::to_string(info.stored_height) + ")");
  }
  int64_t pixels = int64_t{info.stored_width} * info.stored_height;
  if (pixels > opts.max_pixels) {
    return Bad(why, DecodeFailure::kTooLarge, StatusCode::kResourceExhausted, origin,
               "image is " + std::to_string(info.stored_width) + "x" + std::to_string(info.stored_height) +
                   " = " + ShortNumber(static_cast<double>(pixels)) + " pixels, over the limit of " +
                   ShortNumber(static_cast<double>(opts.max_pixels)) + " (decompression bomb)");
  }
  // OpenCV 4.6 returns a full-size, gray-filled image for a cut JPEG, with
  // only a warning on stderr, so truncation is detected here.
  if (info.format == "jpeg") {
    ImageInfo scratch;
    if (!WalkJpeg(bytes, &scratch, true).eoi) {
      return Bad(why, DecodeFailure::kTruncated, StatusCode::kCorruption, origin,
                 "truncated JPEG: no end-of-image marker");
    }
  } else if (info.format == "png") {
    if (!WalkPng(bytes, [](std::string_view, std::string_view) {})) {
      return Bad(why, DecodeFailure::kTruncated, StatusCode::kCorruption, origin,
                 "truncated PNG: no IEND chunk");
    }
  }
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return Bad(why, DecodeFailure::kTooLarge, StatusCode::kResourceExhausted, origin,
               "image file over 2 GiB");
  }
  // JPEG and PNG through libjpeg-turbo and libpng (data/codec.h), the rest
  // through OpenCV's imgcodecs where this build has it. Both give depth and
  // alpha as stored (imdecode's IMREAD_UNCHANGED) and no EXIF rotation, so
  // orientation is applied exactly once, below.
  cv::Mat m;
  if (info.format == "jpeg" || info.format == "png") {
    Result<cv::Mat> decoded = info.format == "jpeg" ? DecodeJpeg(bytes) : DecodePng(bytes);
    if (!decoded.IsOk()) {
      const bool memory = decoded.GetStatus().Code() == StatusCode::kResourceExhausted;
      return Bad(why, memory ? DecodeFailure::kTooLarge : DecodeFailure::kCorrupt,
                 memory ? StatusCode::kResourceExhausted : StatusCode::kCorruption, origin,
                 "cannot decode " + info.format + " image: " + decoded.GetStatus().Message());
    }
    m = std::move(*decoded);
  } else {
#ifdef KESTREL_IMGCODECS_SONAME
    const Imgcodecs& codecs = LoadImgcodecs();
    if (codecs.imdecode == nullptr) {
      return Bad(why, DecodeFailure::kUnsupported, StatusCode::kInvalidArgument, origin,
                 info.format + " images need OpenCV's imgcodecs, which did not load: " + codecs.error);
    }
    // imdecode only reads the buffer; the const_cast is for cv::Mat's API.
    const cv::Mat buf(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data()));
    m = codecs.imdecode(buf, -1);  // IMREAD_UNCHANGED
    if (m.empty()) {
      return Bad(why, DecodeFailure::kCorrupt, StatusCode::kCorruption, origin,
                 "cannot decode " + info.format + " image");
    }
#else
    return Bad(
        why, DecodeFailure::kUnsupported, StatusCode::kInvalidArgument, origin,
        info.format + " images need OpenCV's imgcodecs, which this build (JPEG and PNG only) leaves out");
#endif
  }
  if (m.cols != info.stored_width || m.rows != info.stored_height) {
    return Bad(why, DecodeFailure::kCorrupt, StatusCode::kCorruption, origin,
               "decoded size " + std::to_string(m.cols) + "x" + std::to_string(m.rows) +
                   " differs from the header's " + std::to_string(info.stored_width) + "x" +
                   std::to_string(info.stored_height));
  }
  if (m.depth() == CV_16U) {
    cv::Mat eight;
    m.convertTo(eight, CV_8U, 1.0 / 257.0);
    m = eight;
  } else if (m.depth() != CV_8U) {
    return Bad(why, DecodeFailure::kUnsupported, StatusCode::kInvalidArgument, origin,
               "unsupported pixel depth (only 8- and 16-bit integer images)");
  }
  cv::Mat rgb;
  switch (m.channels()) {
    case 1:
      cv::cvtColor(m, rgb, cv::COLOR_GRAY2RGB);
      break;
    case 2: {
      cv::Mat gray;
      cv::extractChannel(m, gray, 0);
      cv::cvtColor(gray, rgb, cv::COLOR_GRAY2RGB);
      break;
    }
    case 3:
      cv::cvtColor(m, rgb, cv::COLOR_BGR2RGB);
      break;
    case 4:
      cv::cvtColor(m, rgb, cv::COLOR_BGRA2RGB);
      break;
    default:
      return Bad(why, DecodeFailure::kUnsupported, StatusCode::kInvalidArgument, origin,
                 "unsupported channel count " + std::to_string(m.channels()));
  }
  return ApplyOrientation(rgb, info.exif_orientation);
}

Result<ImageInfo> Probe(std::string_view b, const std::string& origin, DecodeFailure* why) {
  ImageInfo info;
  Status st;
  if (b.empty())
    return Bad(why, DecodeFailure::kEmpty, StatusCode::kInvalidArgument, origin, "empty image file");
  if (Has(b, 0, "\xFF\xD8\xFF")) {
    st = ProbeJpeg(b, origin, &info, why);
  } else if (Has(b, 0, kPngSig)) {
    st = ProbePng(b, origin, &info, why);
  } else if (Has(b, 0, "BM") && b.size() >= 18) {
    st = ProbeBmp(b, origin, &info, why);
  } else if (Has(b, 0, "RIFF") && Has(b, 8, "WEBP") && b.size() >= 16) {
    st = ProbeWebp(b, origin, &info, why);
  } else if (Has(b, 0, std::string_view("II*\0", 4)) || Has(b, 0, std::string_view("MM\0*", 4))) {
    st = ProbeTiff(b, origin, &info, why);
  } else {
    return Bad(why, DecodeFailure::kUnknownFormat, StatusCode::kInvalidArgument, origin,
               "unknown image format (expected JPEG, PNG, BMP, WebP or TIFF)");
  }
  if (!st.IsOk()) return st;
  bool swap = info.exif_orientation >= 5;
  info.width = swap ? info.stored_height : info.stored_width;
  info.height = swap ? info.stored_width : info.stored_height;
  return info;
}

}  // namespace

Result<ImageInfo> ProbeImage(std::string_view b, const std::string& origin) {
  DecodeFailure ignored = DecodeFailure::kNone;
  return Probe(b, origin, &ignored);
}

Result<cv::Mat> DecodeImage(std::string_view bytes, const std::string& origin, const DecodeOptions& opts,
                            ImageInfo* info_out, DecodeFailure* failure) {
  DecodeFailure local = DecodeFailure::kNone;
  DecodeFailure* why = failure != nullptr ? failure : &local;
  *why = DecodeFailure::kNone;
  Result<ImageInfo> info = Probe(bytes, origin, why);
  if (!info.IsOk()) return info.GetStatus();
  if (info_out != nullptr) *info_out = *info;
  try {
    return DecodeChecked(bytes, origin, opts, *info, why);
  } catch (const cv::Exception& e) {
    return Bad(why, DecodeFailure::kCorrupt, StatusCode::kCorruption, origin,
               std::string("OpenCV: ") + e.err);
  } catch (const std::bad_alloc&) {
    return Bad(why, DecodeFailure::kTooLarge, StatusCode::kResourceExhausted, origin,
               "out of memory while decoding");
  } catch (const std::exception& e) {
    return Bad(why, DecodeFailure::kCorrupt, StatusCode::kInternal, origin,
               std::string("decode failed: ") + e.what());
  }
}

const char* DecodeFailureCheck(DecodeFailure f) {
  switch (f) {
    case DecodeFailure::kTooLarge:
      return "image.too_large";
    case DecodeFailure::kTruncated:
      return "image.truncated";
    case DecodeFailure::kZeroSize:
      return "image.zero_size";
    case DecodeFailure::kEmpty:
      return "image.empty";
    case DecodeFailure::kNone:
    case DecodeFailure::kUnknownFormat:
    case DecodeFailure::kCorrupt:
    case DecodeFailure::kUnsupported:
      break;
  }
  return "image.decode";
}

std::vector<Finding> ImageInfoFindings(const ImageInfo& info, const std::string& file) {
  std::vector<Finding> out;
  auto add = [&](const char* check, std::string message, const char* action) {
    Finding f;
    f.severity = Severity::kInfo;
    f.check = check;
    f.file = file;
    f.message = std::move(message);
    f.action = action;
    out.push_back(std::move(f));
  };
  if (info.is_gray) add("image.grayscale", "grayscale " + info.format + " image", "normalized to RGB");
  if (info.is_cmyk) add("image.cmyk", "CMYK " + info.format + " image", "normalized to RGB");
  if (info.bit_depth == 16) {
    add("image.16bit", "16 bits per channel", "normalized to RGB");
  }
  if (info.has_alpha) add("image.alpha", "image has an alpha channel (dropped)", "normalized to RGB");
  if (info.exif_orientation != 1) {
    add("image.exif_orientation",
        "EXIF orientation " + std::to_string(info.exif_orientation) + " (" +
            OrientationName(info.exif_orientation) + "): stored " + std::to_string(info.stored_width) + "x" +
            std::to_string(info.stored_height) + ", used as " + std::to_string(info.width) + "x" +
            std::to_string(info.height),
        "rotated per EXIF");
  }
  return out;
}

bool IsImageExtension(const std::string& ext) {
  std::string e = ext;
  if (!e.empty() && e[0] == '.') e = e.substr(1);
  for (char& c : e) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return e == "jpg" || e == "jpeg" || e == "png" || e == "bmp" || e == "webp" || e == "tif" || e == "tiff";
}

void SetImageCodecThreads(int threads) { cv::setNumThreads(threads); }

bool DecodesEveryFormat() {
#ifdef KESTREL_IMGCODECS_SONAME
  return LoadImgcodecs().imdecode != nullptr;
#else
  return false;
#endif
}

void QuietImageCodecLogs() { cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_ERROR); }

}  // namespace kestrel::data
