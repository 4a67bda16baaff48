#include "core/json.h"

#include <nlohmann/json.hpp>

#include "core/relabel_paths.h"
#include "core/utf8.h"

namespace kestrel {

nlohmann::json EscapeInvalidUtf8InJson(const nlohmann::json& j) {
  if (j.is_string()) return EscapeInvalidUtf8(j.get_ref<const std::string&>());
  if (j.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : j) out.push_back(EscapeInvalidUtf8InJson(v));
    return out;
  }
  if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto it = j.begin(); it != j.end(); ++it)
      out[EscapeInvalidUtf8(it.key())] = EscapeInvalidUtf8InJson(it.value());
    return out;
  }
  return j;
}

std::string DumpJson(const nlohmann::json& j, int indent) {
  try {
    return j.dump(indent);
  } catch (const nlohmann::json::type_error&) {
    // 316: invalid UTF-8 somewhere. Rare, so the copy is only made then.
  }
  return EscapeInvalidUtf8InJson(j).dump(indent);
}

void RelabelPaths(nlohmann::json& j, const std::string& from, const std::string& to) {
  if (from.empty() || from == to) return;
  auto relabel = [&](std::string& text) {
    for (size_t pos = text.find(from); pos != std::string::npos; pos = text.find(from, pos + to.size()))
      text.replace(pos, from.size(), to);
  };
  if (j.is_string()) {
    relabel(j.get_ref<std::string&>());
  } else if (j.is_array()) {
    for (auto& v : j) RelabelPaths(v, from, to);
  } else if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto& [k, v] : j.items()) {
      std::string key = k;
      relabel(key);
      RelabelPaths(v, from, to);
      out[key] = std::move(v);
    }
    j = std::move(out);
  }
}

}  // namespace kestrel
