#include "server/router.h"

#include <algorithm>

#include "core/json.h"

namespace kestrel::server {
namespace {

std::vector<std::string> Segments(const std::string& path) {
  std::vector<std::string> out;
  size_t i = 1;  // past the leading '/'
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    out.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

bool IsParam(const std::string& seg) { return seg.size() > 2 && seg.front() == '{' && seg.back() == '}'; }

// Matches `path` against `pattern`; the number of literal segments matched
// (higher wins), or -1 when it does not match.
int MatchPattern(const std::string& pattern, const std::string& path, PathParams* params) {
  const auto pat = Segments(pattern);
  const auto got = Segments(path);
  if (pat.size() != got.size()) return -1;
  PathParams found;
  int literal = 0;
  for (size_t i = 0; i < pat.size(); ++i) {
    if (IsParam(pat[i])) {
      if (got[i].empty()) return -1;
      found[pat[i].substr(1, pat[i].size() - 2)] = got[i];
    } else if (pat[i] == got[i]) {
      ++literal;
    } else {
      return -1;
    }
  }
  if (params != nullptr) *params = std::move(found);
  return literal;
}

int HttpStatusOf(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kAborted:
      return 409;
    case StatusCode::kResourceExhausted:
      return 413;
    case StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string Request::Header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

Status Router::Add(std::string method, std::string pattern, RouteDoc doc, Handler handler) {
  const ErrorLocation where{"router", 0, "pattern"};
  if (pattern.empty() || pattern.front() != '/')
    return Status::InvalidArgument("route pattern '" + pattern + "' must start with '/'", where);
  for (const auto& seg : Segments(pattern)) {
    const bool braces = seg.find_first_of("{}") != std::string::npos;
    if (braces && (!IsParam(seg) || seg.find_first_of("{}", 1) != seg.size() - 1))
      return Status::InvalidArgument("route pattern '" + pattern + "': a {param} must be a whole segment",
                                     where);
  }
  for (const auto& r : routes_) {
    if (r.method == method && r.pattern == pattern)
      return Status::InvalidArgument("route " + method + " " + pattern + " is already defined", where);
  }
  routes_.push_back({std::move(method), std::move(pattern), std::move(doc), std::move(handler)});
  return {};
}

const Route* Router::Find(const std::string& method, const std::string& path, PathParams* params,
                          std::vector<std::string>* allowed) const {
  const Route* best = nullptr;
  int best_literal = -1;
  for (const auto& r : routes_) {
    PathParams p;
    const int literal = MatchPattern(r.pattern, path, &p);
    if (literal < 0) continue;
    if (allowed != nullptr && std::find(allowed->begin(), allowed->end(), r.method) == allowed->end())
      allowed->push_back(r.method);
    if (r.method == method && literal > best_literal) {
      best = &r;
      best_literal = literal;
      *params = std::move(p);
    }
  }
  return best;
}

bool Router::Matches(const std::string& method, const std::string& path) const {
  PathParams p;
  return Find(method, path, &p, nullptr) != nullptr;
}

bool Router::TakesUpload(const std::string& method, const std::string& path) const {
  PathParams p;
  const Route* r = Find(method, path, &p, nullptr);
  return r != nullptr && !r->doc.upload.empty();
}

std::optional<Response> Router::Authorize(const Request& req) const {
  PathParams p;
  const Route* r = Find(req.method, req.path, &p, nullptr);
  if (r == nullptr || !authorizer_ || r->doc.access == Access::kOpen) return std::nullopt;
  std::optional<Response> denied = authorizer_(req, *r);
  if (denied) denied->route = r->pattern;
  return denied;
}

bool Router::Blocks(const std::string& method, const std::string& path) const {
  PathParams p;
  const Route* r = Find(method, path, &p, nullptr);
  return r != nullptr && r->doc.blocking;
}

Response Router::Dispatch(const Request& req) const {
  Dispatched d = DispatchOrDefer(req);
  return d.deferred ? d.deferred() : std::move(*d.response);
}

Router::Dispatched Router::DispatchOrDefer(Request req) const {
  PathParams params;
  std::vector<std::string> allowed;
  const Route* r = Find(req.method, req.path, &params, &allowed);
  if (r == nullptr && req.method == "HEAD") r = Find("GET", req.path, &params, nullptr);
  if (r == nullptr) {
    if (allowed.empty() && fallback_ && (req.method == "GET" || req.method == "HEAD"))
      return {fallback_(req, {}), nullptr};
    if (allowed.empty()) return {ErrorResponse(404, "not_found", "no route for " + req.path), nullptr};
    std::sort(allowed.begin(), allowed.end());
    std::string allow;
    for (const auto& m : allowed) allow += (allow.empty() ? "" : ", ") + m;
    Response resp =
        ErrorResponse(405, "method_not_allowed",
                      req.method + " is not allowed on " + req.path + " (allowed: " + allow + ")");
    resp.headers.emplace_back("Allow", allow);
    return {std::move(resp), nullptr};
  }
  if (authorizer_ && r->doc.access != Access::kOpen) {
    if (std::optional<Response> denied = authorizer_(req, *r)) {
      denied->route = r->pattern;
      return {std::move(denied), nullptr};
    }
  }
  if (r->doc.blocking) {
    // The route outlives the call: routes_ does not change after the router is built.
    return {std::nullopt, [r, req = std::move(req), params = std::move(params)] {
              Response resp = r->handler(req, params);
              resp.route = r->pattern;
              return resp;
            }};
  }
  Response resp = r->handler(req, params);
  resp.route = r->pattern;
  if (resp.stream && authorizer_ && r->doc.access != Access::kOpen) {
    // The stream outlives the request: it is asked again later with the
    // same credentials (the body is not needed for that).
    Request creds;
    creds.method = req.method;
    creds.path = req.path;
    creds.query = req.query;
    creds.headers = req.headers;
    resp.stream->still_allowed = [authorizer = authorizer_, creds = std::move(creds), r] {
      return !authorizer(creds, *r).has_value();
    };
  }
  return {std::move(resp), nullptr};
}

Response JsonResponse(const nlohmann::json& doc, int status, int indent) {
  Response r;
  r.status = status;
  r.body = DumpJson(doc, indent) + "\n";
  return r;
}

Response ErrorResponse(const Status& status) {
  const auto& w = status.Where();
  return JsonResponse({{"ok", false},
                       {"error",
                        {{"code", StatusCodeName(status.Code())},
                         {"message", status.Message()},
                         {"file", w.file},
                         {"line", w.line},
                         {"field", w.field}}}},
                      HttpStatusOf(status.Code()));
}

Response ErrorResponse(int http_status, const std::string& code, const std::string& message,
                       const std::string& field) {
  return JsonResponse(
      {{"ok", false},
       {"error", {{"code", code}, {"message", message}, {"file", ""}, {"line", 0}, {"field", field}}}},
      http_status);
}

bool PercentDecode(const std::string& text, std::string* out) {
  std::string r;
  r.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      r += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return false;
    const int hi = HexValue(text[i + 1]);
    const int lo = HexValue(text[i + 2]);
    if (hi < 0 || lo < 0) return false;
    r += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  *out = std::move(r);
  return true;
}

bool ParseTarget(const std::string& target, std::string* path, std::map<std::string, std::string>* query) {
  const size_t q = target.find('?');
  const std::string raw_path = target.substr(0, q);
  if (raw_path.empty() || raw_path.front() != '/') return false;
  if (!PercentDecode(raw_path, path)) return false;
  query->clear();
  if (q == std::string::npos) return true;
  const std::string qs = target.substr(q + 1);
  size_t i = 0;
  while (i <= qs.size()) {
    size_t j = qs.find('&', i);
    if (j == std::string::npos) j = qs.size();
    const std::string pair = qs.substr(i, j - i);
    if (!pair.empty()) {
      const size_t eq = pair.find('=');
      std::string key, value;
      std::string raw_value = eq == std::string::npos ? "" : pair.substr(eq + 1);
      std::replace(raw_value.begin(), raw_value.end(), '+', ' ');
      if (!PercentDecode(pair.substr(0, eq), &key) || !PercentDecode(raw_value, &value)) return false;
      (*query)[key] = value;
    }
    i = j + 1;
  }
  return true;
}

std::string FormatStreamEvent(const StreamEvent& ev) {
  std::string out = "id: " + std::to_string(ev.id) + "\n";
  if (!ev.event.empty()) out += "event: " + ev.event + "\n";
  // A data line ends at a newline; JSON from DumpJson has none, but a
  // payload from the store is split so it cannot end the event early.
  size_t i = 0;
  do {
    size_t j = ev.data.find('\n', i);
    if (j == std::string::npos) j = ev.data.size();
    out += "data: " + ev.data.substr(i, j - i) + "\n";
    i = j + 1;
  } while (i <= ev.data.size());
  return out + "\n";
}

}  // namespace kestrel::server
