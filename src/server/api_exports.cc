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

// The content type of a stored plot by its name's extension (the registry
// keeps .png and .jpg files only).
std::string PlotContentType(const std::string& file) {
  const auto ends = [&file](const std::string& ext) {
    return file.size() >= ext.size() && file.compare(file.size() - ext.size(), ext.size(), ext) == 0;
  };
  if (ends(".png")) return "image/png";
  if (ends(".jpg") || ends(".jpeg")) return "image/jpeg";
  return "application/octet-stream";
}

Response ServePlot(ApiContext& ctx, const PathParams& p) {
  app::ModelRegistry reg(ctx.meta, ctx.blobs, Env::Default());
  auto m = reg.Resolve(p.at("ref"));
  if (!m.IsOk()) return ErrorResponse(m.GetStatus());
  const ErrorLocation where{app::kRequestFile, 0, "file"};
  const std::string& file = p.at("file");
  const std::string ref = m->name + "@v" + std::to_string(m->seq);
  const nlohmann::json eval = nlohmann::json::parse(m->eval_json, nullptr, false);
  const nlohmann::json* plots = nullptr;
  if (eval.is_object() && eval.contains("plots") && eval["plots"].is_array()) plots = &eval["plots"];
  std::string sha;
  std::string names;
  if (plots != nullptr) {
    for (const auto& plot : *plots) {
      if (!plot.is_object() || !plot.contains("file") || !plot["file"].is_string()) continue;
      const std::string name = plot["file"].get<std::string>();
      names += (names.empty() ? "" : ", ") + name;
      if (name == file && plot.contains("sha256") && plot["sha256"].is_string())
        sha = plot["sha256"].get<std::string>();
    }
  }
  if (sha.empty()) {
    return ErrorResponse(
        Status::NotFound("model " + ref + " has no stored plot '" + file + "' (" +
                             (names.empty() ? std::string("it stores none") : "it stores " + names) + ")",
                         where));
  }
  // Get verifies the blob's hash: a damaged plot is an error, never served.
  auto bytes = ctx.blobs.Get(sha);
  if (!bytes.IsOk()) return ErrorResponse(bytes.GetStatus());
  Response r;
  r.content_type = PlotContentType(file);
  r.body = std::move(bytes).Value();
  r.headers.emplace_back("ETag", "\"" + sha + "\"");
  // Content-addressed: the same name of the same model version is always these bytes.
  r.headers.emplace_back("Cache-Control", "private, max-age=86400");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  return r;
}

bool IsSha256Name(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

nlohmann::json WeightsLink(ApiContext& ctx, const std::string& path) {
  nlohmann::json link = {{"path", path}};
  if (path.empty()) return link;
  const size_t slash = path.find_last_of('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (IsSha256Name(base)) {
    store::ModelFilter f;
    f.weights_sha = base;
    auto models = ctx.meta.ListModels(f);
    if (models.IsOk() && !models->empty()) {
      const auto& m = models->front();
      link["model"] = {{"id", m.id}, {"ref", m.name + "@v" + std::to_string(m.seq)}};
      return link;
    }
  }
  std::string jobs = ctx.home;
  if (!jobs.empty() && jobs.back() != '/') jobs += '/';
  jobs += "jobs/";
  if (!ctx.home.empty() && path.compare(0, jobs.size(), jobs) == 0) {
    size_t i = jobs.size();
    int64_t id = 0;
    while (i < path.size() && path[i] >= '0' && path[i] <= '9' && id < (int64_t{1} << 50))
      id = id * 10 + (path[i++] - '0');
    if (id > 0 && i < path.size() && path[i] == '/') link["job_id"] = id;
  }
  return link;
}

Status AddExportRoutes(Router& router, ApiContext& ctx) {
  KESTREL_RETURN_IF_ERROR(router.Add(
      "GET", "/api/models/{ref}/plots/{file}",
      {"A plot the model's run wrote, kept with its evaluation at registration (PR_curve.png, F1_curve.png, "
       "confusion_matrix_normalized.png, results.png, ...: the names its evaluation.plots lists), "
       "hash-verified; 404 naming the stored ones for any other name",
       {},
       "image/png"},
      [&ctx](const Request&, const PathParams& p) { return ServePlot(ctx, p); }));
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
