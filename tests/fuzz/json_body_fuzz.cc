// The JSON request-body reader (server/json_body.h: every JSON route of
// `kestrel serve` reads its body there) on arbitrary bytes. Checks: nothing
// escapes (nlohmann's out_of_range on 1e400 once ended the server), an error
// always names a field and has a message that serializes as JSON, and an
// accepted document is an object or value no deeper than kMaxJsonBodyDepth
// that serializes and parses back to itself.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/json.h"
#include "server/json_body.h"

namespace {

using nlohmann::json;

// The nesting depth of `doc` (a scalar is 1), without recursion.
int Depth(const json& doc) {
  int deepest = 0;
  std::vector<std::pair<const json*, int>> todo{{&doc, 1}};
  while (!todo.empty()) {
    auto [j, d] = todo.back();
    todo.pop_back();
    deepest = std::max(deepest, d);
    if (j->is_structured())
      for (const auto& child : *j) todo.emplace_back(&child, d + 1);
  }
  return deepest;
}

void CheckError(const kestrel::Status& s) {
  if (s.IsOk() || s.Message().empty() || s.Where().field.empty()) __builtin_trap();
  (void)kestrel::DumpJson({{"message", s.Message()}, {"field", s.Where().field}});  // must not throw
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto doc = kestrel::server::ParseJsonBody(body);
  if (!doc.IsOk()) {
    CheckError(doc.GetStatus());
  } else {
    if (Depth(*doc) > kestrel::server::kMaxJsonBodyDepth) __builtin_trap();
    const std::string text = kestrel::DumpJson(*doc);
    auto again = kestrel::server::ParseJsonBody(text);
    if (!again.IsOk() || *again != *doc) __builtin_trap();
  }
  auto obj = kestrel::server::ReadJsonObjectBody(body, {"keys", "template"}, false);
  if (!obj.IsOk()) {
    CheckError(obj.GetStatus());
  } else {
    if (!obj->is_object()) __builtin_trap();
    for (const auto& [k, v] : obj->items())
      if (k != "keys" && k != "template") __builtin_trap();
  }
  return 0;
}
