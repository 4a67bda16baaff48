#include "server/static_files.h"

#include <array>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <utility>

#include "core/hash.h"

namespace kestrel::server {
namespace {

namespace fs = std::filesystem;

// RFC 4648 base64 with padding (a CSP hash source).
std::string Base64(const std::string& bytes) {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (static_cast<uint8_t>(bytes[i]) << 16) | (static_cast<uint8_t>(bytes[i + 1]) << 8) |
                       static_cast<uint8_t>(bytes[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
  }
  if (i + 1 == bytes.size()) {
    const uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
    out += std::string{kAlphabet[(v >> 18) & 63], kAlphabet[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == bytes.size()) {
    const uint32_t v = (static_cast<uint8_t>(bytes[i]) << 16) | (static_cast<uint8_t>(bytes[i + 1]) << 8);
    out += std::string{kAlphabet[(v >> 18) & 63], kAlphabet[(v >> 12) & 63], kAlphabet[(v >> 6) & 63], '='};
  }
  return out;
}

Response NotFound(const std::string& path) { return ErrorResponse(404, "not_found", "no route for " + path); }

// Whether `p` equals `root` or lies under it (both resolved, no trailing '/').
bool Under(const std::string& p, const std::string& root) {
  return p.size() > root.size() && p.compare(0, root.size(), root) == 0 && p[root.size()] == '/';
}

// The relative file path for a request path, or "" when it is refused.
std::string SafeRelative(const std::string& path) {
  if (path.empty() || path.front() != '/') return "";
  if (path == "/") return "index.html";
  if (path.find('\0') != std::string::npos || path.find('\\') != std::string::npos) return "";
  std::string rel;
  size_t i = 1;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    const std::string seg = path.substr(i, j - i);
    // Empty (a "//" or a trailing '/'), ".", ".." and hidden names.
    if (seg.empty() || seg.front() == '.') return "";
    rel += (rel.empty() ? "" : "/") + seg;
    i = j + 1;
  }
  return rel;
}

}  // namespace

Result<StaticFiles> StaticFiles::Open(const std::string& dir) {
  const ErrorLocation where{"command line", 0, "web-dir"};
  std::error_code ec;
  const fs::path root = fs::canonical(dir, ec);
  if (ec || !fs::is_directory(root, ec))
    return Status::NotFound("web UI directory '" + dir + "' does not exist (build it: scripts/build-web.sh)",
                            where);
  if (!fs::is_regular_file(root / "index.html", ec))
    return Status::NotFound(
        "web UI directory '" + dir + "' has no index.html (build it: scripts/build-web.sh)", where);
  std::ifstream in(root / "index.html", std::ios::binary);
  const std::string index((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof())
    return Status::Unavailable("cannot read " + (root / "index.html").string(), where);
  // ECharts and Element Plus set style attributes: inline styles stay
  // allowed; scripts never run inline but for index.html's own (by hash).
  // WebAssembly (onnxruntime-web, try it in the browser) needs
  // 'wasm-unsafe-eval', which allows compiling WASM and nothing else.
  std::string scripts = "'self' 'wasm-unsafe-eval'";
  for (const std::string& h : InlineScriptHashes(index)) scripts += " " + h;
  std::string csp = "default-src 'self'; script-src " + scripts +
                    "; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; font-src 'self' data:; "
                    "connect-src 'self'; worker-src 'self' blob:; object-src 'none'; base-uri 'self'; "
                    "form-action 'self'; frame-ancestors 'none'";
  return StaticFiles(root.string(), std::move(csp));
}

std::vector<std::string> InlineScriptHashes(const std::string& html) {
  std::vector<std::string> out;
  size_t i = 0;
  while ((i = html.find("<script", i)) != std::string::npos) {
    const size_t open_end = html.find('>', i);
    if (open_end == std::string::npos) break;
    const size_t close = html.find("</script", open_end);
    if (close == std::string::npos) break;
    const std::string tag = html.substr(i, open_end - i);
    if (tag.find(" src=") == std::string::npos && tag.find("\tsrc=") == std::string::npos &&
        tag.find("\nsrc=") == std::string::npos) {
      const std::string hex = Sha256Hex(std::string_view(html).substr(open_end + 1, close - open_end - 1));
      std::string digest;
      for (size_t k = 0; k + 1 < hex.size(); k += 2)
        digest += static_cast<char>(std::stoi(hex.substr(k, 2), nullptr, 16));
      out.push_back("'sha256-" + Base64(digest) + "'");
    }
    i = close + 1;
  }
  return out;
}

Response StaticFiles::Serve(const Request& req) const {
  if (req.path == "/api" || req.path.rfind("/api/", 0) == 0) return NotFound(req.path);
  const std::string rel = SafeRelative(req.path);
  if (rel.empty()) return NotFound(req.path);
  std::error_code ec;
  const fs::path resolved = fs::canonical(fs::path(root_) / rel, ec);
  if (ec || !Under(resolved.string(), root_) || !fs::is_regular_file(resolved, ec)) return NotFound(req.path);
  const auto size = fs::file_size(resolved, ec);
  if (ec || size > static_cast<uintmax_t>(kMaxStaticFileBytes)) return NotFound(req.path);
  std::ifstream in(resolved, std::ios::binary);
  if (!in) return NotFound(req.path);
  Response r;
  r.body.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad())
    return ErrorResponse(500, "io_error", "cannot read " + resolved.string() + " for " + req.path);
  r.content_type = ContentTypeFor(resolved.filename().string());
  r.route = "/{static}";
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  if (r.content_type.rfind("text/html", 0) == 0) r.headers.emplace_back("Content-Security-Policy", csp_);
  if (req.path.rfind("/assets/", 0) == 0)
    r.headers.emplace_back("Cache-Control", "public, max-age=31536000, immutable");
  return r;
}

std::string ContentTypeFor(const std::string& file_name) {
  static const std::array<std::pair<const char*, const char*>, 18> kTypes = {{
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},
      {".map", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".jpg", "image/jpeg"},
      {".jpeg", "image/jpeg"},
      {".gif", "image/gif"},
      {".webp", "image/webp"},
      {".ico", "image/x-icon"},
      {".woff", "font/woff"},
      {".woff2", "font/woff2"},
      {".ttf", "font/ttf"},
      {".txt", "text/plain; charset=utf-8"},
      // onnxruntime-web's runtime (try it in the browser): compiled while it streams in.
      {".wasm", "application/wasm"},
  }};
  const size_t dot = file_name.rfind('.');
  if (dot == std::string::npos) return "application/octet-stream";
  std::string ext = file_name.substr(dot);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& [e, type] : kTypes) {
    if (ext == e) return type;
  }
  return "application/octet-stream";
}

std::string DefaultWebDir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  return (exe.parent_path() / ".." / ".." / "web" / "dist").lexically_normal().string();
}

}  // namespace kestrel::server
