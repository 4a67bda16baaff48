#include "data/text.h"

#include <cstdio>

namespace kestrel::data {
namespace {

// Length of the well-formed UTF-8 sequence at s[i], or 0 when malformed
// (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF).
size_t SequenceLength(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
  }
  return n;
}

void AppendHex(std::string* out, unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "\\x%02X", c);
  *out += buf;
}

std::string Escape(std::string_view s, bool controls) {
  std::string out;
  out.reserve(s.size() + 8);
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = SequenceLength(s, i);
    if (n == 0 || (controls && (c < 0x20 || c == 0x7F))) {
      AppendHex(&out, c);
      ++i;
      continue;
    }
    out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

bool HasControl(std::string_view s) {
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7F) return true;
  }
  return false;
}

}  // namespace

bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {  // ASCII fast path
      ++i;
      continue;
    }
    const size_t n = SequenceLength(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string EscapeInvalidUtf8(std::string_view s) {
  if (IsValidUtf8(s)) return std::string(s);
  return Escape(s, false);
}

std::string EscapeForDisplay(std::string_view s) {
  if (IsValidUtf8(s) && !HasControl(s)) return std::string(s);
  return Escape(s, true);
}

const char* WideEncodingOf(std::string_view t) {
  auto at = [&](size_t k) { return k < t.size() ? static_cast<unsigned char>(t[k]) : 0x100u; };
  // UTF-32 LE's mark starts like UTF-16 LE's: test it first.
  if (at(0) == 0xFF && at(1) == 0xFE && at(2) == 0 && at(3) == 0) return "UTF-32 LE";
  if (at(0) == 0 && at(1) == 0 && at(2) == 0xFE && at(3) == 0xFF) return "UTF-32 BE";
  if (at(0) == 0xFF && at(1) == 0xFE) return "UTF-16 LE";
  if (at(0) == 0xFE && at(1) == 0xFF) return "UTF-16 BE";
  // No mark: ASCII text in UTF-16/32 has a NUL next to each character.
  if (t.size() >= 4) {
    if (at(0) == 0 && at(1) == 0 && at(2) == 0 && at(3) != 0) return "UTF-32 BE";
    if (at(0) != 0 && at(1) == 0 && at(2) == 0 && at(3) == 0) return "UTF-32 LE";
    if (at(0) == 0 && at(1) != 0 && at(2) == 0 && at(3) != 0) return "UTF-16 BE";
    if (at(0) != 0 && at(1) == 0 && at(2) != 0 && at(3) == 0) return "UTF-16 LE";
  }
  return nullptr;
}

Status RequireNarrowEncoding(std::string_view text, const std::string& file, const char* what) {
  const char* enc = WideEncodingOf(text);
  if (enc == nullptr) return {};
  const bool bom = (text.size() >= 2 && (static_cast<unsigned char>(text[0]) == 0xFF ||
                                         static_cast<unsigned char>(text[0]) == 0xFE)) ||
                   (text.size() >= 4 && text[0] == 0 && text[1] == 0 &&
                    static_cast<unsigned char>(text[2]) == 0xFE);
  std::string how = bom ? " (byte-order mark)" : " (NUL bytes between the characters, no byte-order mark)";
  return Status::InvalidArgument(std::string(what) + " is " + enc + " encoded" + how +
                                     "; save it as UTF-8",
                                 {EscapeInvalidUtf8(file)});
}

std::optional<PathProblem> CheckManifestPath(std::string_view rel) {
  if (!IsValidUtf8(rel)) {
    return PathProblem{"path.not_utf8", "file name is not valid UTF-8: '" + EscapeForDisplay(rel) + "'"};
  }
  for (char ch : rel) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7F) {
      char code[8];
      std::snprintf(code, sizeof(code), "\\x%02X", c);
      std::string what = c == 0 ? "a NUL byte" : c == '\t' ? "a tab" : c == '\n' ? "a newline" : "a control character";
      return PathProblem{"path.control_char",
                         "file name contains " + what + " (" + code + "): '" + EscapeForDisplay(rel) + "'"};
    }
  }
  return std::nullopt;
}

Status SanitizeStatus(const Status& s) {
  const ErrorLocation& w = s.Where();
  if (IsValidUtf8(s.Message()) && IsValidUtf8(w.file) && IsValidUtf8(w.field)) return s;
  return Status(s.Code(), EscapeInvalidUtf8(s.Message()),
                {EscapeInvalidUtf8(w.file), w.line, EscapeInvalidUtf8(w.field)});
}

}  // namespace kestrel::data
