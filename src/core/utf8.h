// UTF-8 checks for text that ends up in JSON documents (nlohmann::json throws
// type_error 316 when it serializes a string that is not valid UTF-8) or in
// stored records. Valid means what nlohmann and RFC 3629 accept: no overlong
// forms, no surrogates (U+D800..U+DFFF), nothing above U+10FFFF.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kestrel {

// Byte offset of the first byte that does not start a valid UTF-8 sequence,
// or std::string_view::npos when all of `text` is valid.
size_t FirstInvalidUtf8(std::string_view text);
inline bool IsValidUtf8(std::string_view text) { return FirstInvalidUtf8(text) == std::string_view::npos; }

// `text` with every byte that is not part of a valid UTF-8 sequence written
// as the four characters \xHH (uppercase hex), so nothing is lost and the
// result is valid UTF-8: "a\xFFb" (bytes 61 FF 62) -> the text `a\xFFb`.
// Valid text is returned unchanged.
std::string EscapeInvalidUtf8(std::string_view text);

// Like EscapeInvalidUtf8, and also writes C0 control characters and DEL as
// \xHH: for file names shown to people, where a NUL, tab or newline inside
// the name would otherwise be invisible.
std::string EscapeForDisplay(std::string_view text);

// EscapeForDisplay of at most the first `max_bytes` bytes of `text` (cut at
// a character boundary), followed by "… (N bytes)" when it was cut: for
// quoting user input in an error message without echoing megabytes of it.
std::string EscapeForDisplayCut(std::string_view text, size_t max_bytes = 60);

}  // namespace kestrel
