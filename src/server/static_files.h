// The web UI's static files (docs/server.md "Web UI"): `kestrel serve`
// answers GET/HEAD of a path no API route matches from one directory (the
// Vite build: index.html and assets/). "/" is index.html. A path can never
// leave the directory: segments ".", ".." and empty ones, hidden names,
// backslashes and NUL bytes are refused before the file system is asked
// (the path arrives percent-decoded, so "%2e%2e" is ".." here), and the
// resolved file (symlinks followed) must still lie under the directory's
// own resolved path. Paths under /api/ are never files: they keep the
// router's 404 error document.
//
// Thread-safety: immutable after Open; Serve may run on any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "server/router.h"

namespace kestrel::server {

class StaticFiles {
 public:
  // `dir` must be a directory holding index.html; kNotFound (field
  // `web-dir`) otherwise, naming the path.
  static Result<StaticFiles> Open(const std::string& dir);

  // The file for req.path (GET or HEAD), with its Content-Type; 404 error
  // document when there is none or the path is refused. Hashed build
  // outputs under /assets/ may be cached for a year, index.html never.
  // An HTML file carries ContentSecurityPolicy().
  Response Serve(const Request& req) const;

  // The resolved directory.
  const std::string& Root() const { return root_; }

  // The UI's Content-Security-Policy (docs/server.md "Security headers"):
  // scripts, styles, fetches and workers from this server only, plus the
  // inline scripts of index.html as it was at Open, each by its SHA-256.
  const std::string& ContentSecurityPolicy() const { return csp_; }

 private:
  StaticFiles(std::string root, std::string csp) : root_(std::move(root)), csp_(std::move(csp)) {}
  std::string root_;
  std::string csp_;
};

// The CSP source of each inline <script> (one without src=) of an HTML
// text: 'sha256-<base64 of the SHA-256 of its text>', in order.
std::vector<std::string> InlineScriptHashes(const std::string& html);

// The Content-Type for a file name, by extension ("application/octet-stream"
// for an unknown one). Text types carry charset=utf-8.
std::string ContentTypeFor(const std::string& file_name);

// Where the web UI's build is by default: <exe dir>/../../web/dist, the
// CMake build tree's web/dist beside src/cli/kestrel (scripts/build-web.sh
// writes it). "" when the executable's path cannot be read.
std::string DefaultWebDir();

// Files larger than this are not served (the UI's largest is < 1 MiB).
inline constexpr int64_t kMaxStaticFileBytes = int64_t{64} * 1024 * 1024;

}  // namespace kestrel::server
