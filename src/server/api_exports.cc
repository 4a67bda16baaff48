#include "server/api_exports.h"

#include <string>

#include "app/jobs.h"
#include "app/models.h"
#include "core/env.h"
#include "core/hash.h"

namespace kestrel::server {
namespace {

// A filename for Content-Disposition: the model's name, version and the
// export id's start, with anything but [A-Za-z0-9._-] replaced.
std::string DownloadName(const store::ModelRecord& m, const store::ModelExportRecord& e) {
  std::string name = m.name + "-v" + std::to_string(m.seq) + "-" + e.id.substr(0, 12) + ".onnx";
  for (char& c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) c = '_';
  }
  return name;
}

// The export of `m` whose id is `id` (the full 64 hex characters, or a
// prefix of at least 8 that only one of its exports has).
Result<store::ModelExportRecord> FindExport(const store::ModelRecord& m, const std::string& id) {
  const ErrorLocation where{app::kRequestFile, 0, "id"};
  const std::string ref = m.name + "@v" + std::to_string(m.seq);
  if (id.size() < 8) {
    return Status::InvalidArgument("an export id is at least 8 hex characters (`kestrel models show " + ref +
                                       "` lists them), got '" + id + "'",
                                   where);
  }
  const store::ModelExportRecord* found = nullptr;
  for (const auto& e : m.exports) {
    if (e.id.compare(0, id.size(), id) != 0) continue;
    if (found != nullptr) {
      return Status::InvalidArgument(
          "export id '" + id + "' is ambiguous on " + ref + ": give more characters", where);
    }
    found = &e;
  }
  if (found == nullptr) return Status::NotFound("model " + ref + " has no export '" + id + "'", where);
  return *found;
}

}  // namespace

Status AddExportRoutes(Router& router, ApiContext& ctx) {
  return router.Add(
      "GET", "/api/models/{ref}/exports/{id}/file",
      {"The bytes of a registered model's verified ONNX export (`kestrel export model=REF`; the id as "
       "`models show` lists it, or a unique prefix of 8+ characters): served only while the recorded file "
       "still has its recorded size and SHA-256; an unverified export is refused (409)",
       {},
       "application/octet-stream"},
      [&ctx](const Request&, const PathParams& p) {
        app::ModelRegistry reg(ctx.meta, ctx.blobs, Env::Default());
        auto m = reg.Resolve(p.at("ref"));
        if (!m.IsOk()) return ErrorResponse(m.GetStatus());
        auto e = FindExport(*m, p.at("id"));
        if (!e.IsOk()) return ErrorResponse(e.GetStatus());
        const ErrorLocation where{app::kRequestFile, 0, "id"};
        const std::string what =
            "export " + e->id.substr(0, 12) + " of " + m->name + "@v" + std::to_string(m->seq);
        if (!e->verified) {
          return ErrorResponse(Status::FailedPrecondition(
              what + " is not verified (its runtime check failed and `kestrel export --force` kept it): "
                     "the server hands out verified exports only",
              where));
        }
        if (e->format != "onnx") {
          return ErrorResponse(Status::FailedPrecondition(
              what + " is in format '" + e->format + "'; only onnx files are served", where));
        }
        // The recorded path is the CLI's, never the request's; a relative one
        // was relative to the exporting process's folder, which the server
        // does not know.
        if (e->path.empty() || e->path[0] != '/') {
          return ErrorResponse(Status::FailedPrecondition(
              what + " was recorded with the relative path '" + e->path + "', which the server cannot locate",
              where));
        }
        if (static_cast<uint64_t>(e->bytes) > ctx.export_file_limit) {
          return ErrorResponse(Status::FailedPrecondition(what + " has " + std::to_string(e->bytes) +
                                                              " bytes, over the server's limit of " +
                                                              std::to_string(ctx.export_file_limit),
                                                          where));
        }
        Env& env = Env::Default();
        const FileInfo info = env.Stat(e->path);
        if (!info.exists)
          return ErrorResponse(Status::NotFound(what + ": its file " + e->path + " is gone", where));
        if (!info.is_regular || info.size != static_cast<uint64_t>(e->bytes)) {
          return ErrorResponse(Status::FailedPrecondition(
              what + ": " + e->path + " is no longer the file that was recorded (not a regular file of " +
                  std::to_string(e->bytes) + " bytes)",
              where));
        }
        auto bytes = env.ReadFile(e->path, ctx.export_file_limit);
        if (!bytes.IsOk()) return ErrorResponse(bytes.GetStatus());
        // The recorded hash pins the content: a file replaced after the
        // export (or a symlink swapped in) is not served.
        if (Sha256Hex(*bytes) != e->sha256) {
          return ErrorResponse(Status::FailedPrecondition(
              what + ": " + e->path + " changed since it was recorded (its SHA-256 differs)", where));
        }
        Response r;
        r.content_type = "application/octet-stream";
        r.body = std::move(bytes).Value();
        r.headers.emplace_back("Content-Disposition",
                               "attachment; filename=\"" + DownloadName(*m, *e) + "\"");
        r.headers.emplace_back("ETag", "\"" + e->sha256 + "\"");
        r.headers.emplace_back("Cache-Control", "no-cache");
        r.headers.emplace_back("X-Content-Type-Options", "nosniff");
        return r;
      });
}

}  // namespace kestrel::server
