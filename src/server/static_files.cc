#include "server/static_files.h"

#include <array>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <utility>

namespace kestrel::server {
namespace {

namespace fs = std::filesystem;

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
  return StaticFiles(root.string());
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
