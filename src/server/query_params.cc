#include "server/query_params.h"

#include "app/jobs.h"
#include "core/parse.h"

namespace kestrel::server {

std::string QueryText(const Request& req, const std::string& name) {
  auto it = req.query.find(name);
  return it == req.query.end() ? std::string() : it->second;
}

Result<int64_t> QueryInt(const Request& req, const std::string& name, int64_t fallback, int64_t min,
                         int64_t max, const std::string& what) {
  auto it = req.query.find(name);
  if (it == req.query.end()) return fallback;
  return ParseInt64(it->second, {app::kRequestFile, 0, name}, min, max, what);
}

Status QueryInts(const Request& req, std::initializer_list<std::pair<const char*, int64_t*>> params) {
  for (const auto& [name, dst] : params) {
    KESTREL_ASSIGN_OR_RETURN(*dst, QueryInt(req, name, *dst));
  }
  return {};
}

Result<int64_t> JobIdText(const std::string& text, const std::string& field) {
  return ParseInt64(text, {app::kRequestFile, 0, field}, 1, std::numeric_limits<int64_t>::max(),
                    "a job id (a positive number)");
}

}  // namespace kestrel::server
