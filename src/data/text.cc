#include "data/text.h"

#include <cstdio>

namespace kestrel::data {

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
  const bool bom =
      (text.size() >= 2 &&
       (static_cast<unsigned char>(text[0]) == 0xFF || static_cast<unsigned char>(text[0]) == 0xFE)) ||
      (text.size() >= 4 && text[0] == 0 && text[1] == 0 && static_cast<unsigned char>(text[2]) == 0xFE);
  std::string how = bom ? " (byte-order mark)" : " (NUL bytes between the characters, no byte-order mark)";
  return Status::InvalidArgument(std::string(what) + " is " + enc + " encoded" + how + "; save it as UTF-8",
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
      std::string what = c == 0      ? "a NUL byte"
                         : c == '\t' ? "a tab"
                         : c == '\n' ? "a newline"
                                     : "a control character";
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
