#include "core/utf8.h"

#include <cstdint>

namespace kestrel {
namespace {

// Length of the valid UTF-8 sequence starting at text[i], or 0 when the
// bytes there do not form one.
size_t ValidSequenceLength(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  const uint8_t b0 = byte(i);
  if (b0 < 0x80) return 1;
  size_t len = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 == 0xE0) {
    len = 3, lo = 0xA0;  // no overlong 3-byte forms
  } else if (b0 >= 0xE1 &&
             b0 <= 0xEC) {  // NOLINT(bugprone-branch-clone): one branch per row of the UTF-8 table
    len = 3;
  } else if (b0 == 0xED) {
    len = 3, hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xEE && b0 <= 0xEF) {
    len = 3;
  } else if (b0 == 0xF0) {
    len = 4, lo = 0x90;  // no overlong 4-byte forms
  } else if (b0 >= 0xF1 && b0 <= 0xF3) {
    len = 4;
  } else if (b0 == 0xF4) {
    len = 4, hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;  // continuation byte, C0/C1 (overlong) or F5..FF
  }
  if (i + len > text.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < len; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return len;
}

}  // namespace

size_t FirstInvalidUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t n = ValidSequenceLength(text, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

namespace {

bool IsControl(uint8_t b) { return b < 0x20 || b == 0x7F; }

// Escapes from the first byte that needs it; `controls` adds C0 and DEL.
std::string Escape(std::string_view text, size_t first, bool controls) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out(text.substr(0, first));
  out.reserve(text.size() + 16);
  for (size_t i = first; i < text.size();) {
    const auto b = static_cast<uint8_t>(text[i]);
    const size_t n = ValidSequenceLength(text, i);
    if (n > 0 && !(controls && IsControl(b))) {
      out.append(text.substr(i, n));
      i += n;
      continue;
    }
    out += "\\x";
    out += kHex[b >> 4];
    out += kHex[b & 0xF];
    ++i;
  }
  return out;
}

}  // namespace

std::string EscapeInvalidUtf8(std::string_view text) {
  size_t bad = FirstInvalidUtf8(text);
  if (bad == std::string_view::npos) return std::string(text);
  return Escape(text, bad, false);
}

std::string EscapeForDisplay(std::string_view text) {
  size_t first = FirstInvalidUtf8(text);
  for (size_t i = 0; i < text.size() && i < first; ++i) {
    if (IsControl(static_cast<uint8_t>(text[i]))) {
      first = i;
      break;
    }
  }
  if (first == std::string_view::npos) return std::string(text);
  return Escape(text, first, true);
}

std::string EscapeForDisplayCut(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return EscapeForDisplay(text);
  size_t cut = max_bytes;
  // Back off to the start of a UTF-8 sequence so a character is not split.
  for (int i = 0; i < 3 && cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80; ++i) --cut;
  return EscapeForDisplay(text.substr(0, cut)) + "\u2026 (" + std::to_string(text.size()) + " bytes)";
}

}  // namespace kestrel
