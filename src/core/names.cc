#include "core/names.h"

#include <algorithm>
#include <cctype>

#include "core/utf8.h"

namespace kestrel {
namespace {

struct NameRule {
  const char* what;        // "dataset name"
  const char* characters;  // what it may hold, for the error
  size_t max_chars;
};

NameRule RuleOf(NameKind kind) {
  constexpr const char* kModelChars = "letters, digits, '-', '_', '.', not starting with '.' or '-'";
  switch (kind) {
    case NameKind::kDataset:
      return {"dataset name", "UTF-8 without '@', '/', spaces or control characters", kMaxNameChars};
    case NameKind::kModel:
      return {"model name", kModelChars, kMaxNameChars};
    case NameKind::kTemplate:
      return {"template name", kModelChars, kMaxNameChars};
    case NameKind::kToken:
      return {"token name", kModelChars, kMaxNameChars};
    case NameKind::kTag:
      return {"tag", "lowercase letters, digits, '-', '_', '.', starting with a letter", kMaxTagChars};
  }
  return {"name", "", kMaxNameChars};
}

// Unicode code points in valid UTF-8 (bytes that do not continue a sequence).
size_t CodePoints(std::string_view text) {
  return static_cast<size_t>(std::count_if(
      text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

bool CharactersOk(NameKind kind, std::string_view name) {
  if (name.empty()) return false;
  const auto c0 = static_cast<unsigned char>(name[0]);
  switch (kind) {
    case NameKind::kDataset:
      return name.find_first_of("@/ \t") == std::string_view::npos && IsValidUtf8(name) &&
             EscapeForDisplay(name) == name;
    case NameKind::kModel:
    case NameKind::kTemplate:
    case NameKind::kToken:
      if (c0 == '.' || c0 == '-') return false;
      return std::all_of(name.begin(), name.end(), [](unsigned char c) {
        return std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.';
      });
    case NameKind::kTag:
      if (std::islower(c0) == 0) return false;
      return std::all_of(name.begin(), name.end(), [](unsigned char c) {
        return std::islower(c) != 0 || std::isdigit(c) != 0 || c == '-' || c == '_' || c == '.';
      });
  }
  return false;
}

}  // namespace

size_t MaxNameChars(NameKind kind) { return RuleOf(kind).max_chars; }

bool IsValidName(NameKind kind, std::string_view name) {
  return CharactersOk(kind, name) && CodePoints(name) <= MaxNameChars(kind);
}

Status CheckName(NameKind kind, std::string_view name, const ErrorLocation& where) {
  const NameRule rule = RuleOf(kind);
  const std::string max = std::to_string(rule.max_chars);
  if (name.empty()) return Status::InvalidArgument(std::string(rule.what) + " must not be empty", where);
  // Length first: a long name's characters are beside the point, and the
  // message names the bound the user has to meet.
  const size_t chars = IsValidUtf8(name) ? CodePoints(name) : name.size();
  if (chars > rule.max_chars) {
    return Status::InvalidArgument(std::string(rule.what) + " '" + EscapeForDisplayCut(name) + "' is " +
                                       std::to_string(chars) + " characters long; at most " + max,
                                   where);
  }
  if (!CharactersOk(kind, name)) {
    return Status::InvalidArgument("invalid " + std::string(rule.what) + " '" + EscapeForDisplayCut(name) +
                                       "': " + rule.characters + ", 1-" + max + " characters",
                                   where);
  }
  return {};
}

}  // namespace kestrel
