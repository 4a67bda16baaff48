#include "server/api_dataset_upload.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <system_error>

#include "app/datasets.h"
#include "app/jobs.h"
#include "core/env.h"
#include "core/names.h"
#include "core/options.h"
#include "core/relabel_paths.h"
#include "server/api_write.h"
#include "server/data_roots.h"
#include "server/upload_archive.h"

namespace kestrel::server {
namespace {

namespace fs = std::filesystem;

Status QueryError(const std::string& message, const std::string& field) {
  return Status::InvalidArgument(message, {app::kRequestFile, 0, field});
}

// A fresh folder under `parent`, removed (with what is in it) when this goes.
class TempFolder {
 public:
  explicit TempFolder(const std::string& parent) {
    static std::atomic<uint64_t> counter{0};
    std::error_code ec;
    fs::create_directories(parent, ec);
    path_ = parent + "/import-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
    fs::remove_all(path_, ec);
    ok_ = fs::create_directory(path_, ec) && !ec;
  }
  ~TempFolder() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  bool Ok() const { return ok_; }
  const std::string& Path() const { return path_; }

 private:
  std::string path_;
  bool ok_ = false;
};

// The dataset inside the unpacked zip: the folder itself, or its one
// top-level folder when the zip wraps the dataset in one ("birds/...").
std::string DatasetFolder(const std::string& dir) {
  std::error_code ec;
  std::string only;
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (++n > 1) return dir;
    if (!e.is_directory(ec)) return dir;
    only = e.path().string();
  }
  return n == 1 ? only : dir;
}

Response Upload(ApiContext& ctx, const Request& req) {
  std::string type = req.Header("content-type");
  type = type.substr(0, type.find(';'));
  while (!type.empty() && type.back() == ' ') type.pop_back();
  if (type != "application/zip" && type != "application/x-zip-compressed") {
    return ErrorResponse(
        415, "unsupported_media_type",
        "the request body must be a zip archive sent as Content-Type: application/zip, got '" + type + "'",
        "body");
  }
  if (req.body_file.empty())
    return ErrorResponse(QueryError("the request body must be a zip archive; none arrived", "body"));
  auto name = req.query.find("name");
  if (name == req.query.end() || name->second.empty())
    return ErrorResponse(
        QueryError("query parameter name is required: the registry name to import as", "name"));
  // The registry's rule (core/names.h), checked before the zip is unpacked.
  if (Status s = CheckName(NameKind::kDataset, name->second, {app::kRequestFile, 0, "name"}); !s.IsOk())
    return ErrorResponse(s);
  data::ImportOptions opts;
  OptionSet set;
  opts.Bind(set);
  for (const auto& [k, v] : req.query) {
    if (k == "name" || k == "filename") continue;
    Status s = set.Set(k, v, {app::kRequestFile, 0, k});
    if (!s.IsOk()) return ErrorResponse(s);
  }
  // The unpacked folder is gone after this request: a version referencing
  // its files (docs/datasets.md "Copy or reference") would name nothing.
  if (opts.data_mode == "reference") {
    return ErrorResponse(Status::InvalidArgument(
        "data_mode=reference cannot apply to an upload: it is unpacked into a temporary folder that is "
        "removed "
        "after the import, so its images are always copied (import a folder under a --data-root by reference "
        "with POST /api/datasets/import)",
        {app::kRequestFile, 0, "data_mode"}));
  }
  // The unpacked folder is gone after this request: the version's source
  // names the upload instead.
  auto filename = req.query.find("filename");
  opts.source_label =
      "upload:" + (filename != req.query.end() && !filename->second.empty() ? filename->second.substr(0, 200)
                                                                            : name->second + ".zip");
  TempFolder tmp(ctx.upload_dir.empty() ? ctx.home + "/uploads" : ctx.upload_dir);
  if (!tmp.Ok())
    return ErrorResponse(500, "internal", "cannot make a folder to unpack the upload in", "body");
  ExtractLimits limits;
  limits.max_entries = ctx.upload_max_entries;
  limits.max_bytes = 4 * ctx.upload_limit_bytes;
  if (Status s = ExtractZip(req.body_file, tmp.Path(), limits, opts.source_label); !s.IsOk())
    return ErrorResponse(s);
  // The importer reads nothing outside the unpacked folder (data_roots.h):
  // a data.yaml in the zip cannot point it at the server's files.
  auto roots = DataRoots::Open({tmp.Path()});
  if (!roots.IsOk()) return ErrorResponse(roots.GetStatus());
  const std::string canonical = roots->Roots().front().path;
  ConfinedEnv env(Env::Default(), *roots, canonical);
  const std::string folder = DatasetFolder(canonical);
  Response r = ImportDatasetResponse(ctx, env, folder, name->second, opts);
  // The answer (created version, or the error and its report) names files
  // as the stored report does: under the upload's label, not the folder
  // that is removed when this request ends.
  nlohmann::json doc = nlohmann::json::parse(r.body, nullptr, false);
  if (doc.is_discarded()) return r;
  RelabelPaths(doc, folder, opts.source_label);
  RelabelPaths(doc, canonical, opts.source_label);
  return JsonResponse(doc, r.status);
}

}  // namespace

Status AddDatasetUploadRoutes(Router& router, ApiContext& ctx) {
  RouteDoc doc{
      "Import a dataset sent as a zip (`kestrel dataset import` of its unpacked folder): 201 when a new "
      "version is stored, 200 when identical content is already the dataset's; 413 over "
      "`serve --max-upload-mb` or when it expands past 4x that; 400 for entries with absolute or '..' "
      "paths, links, devices, FIFOs or sockets; 415 for another Content-Type; 503 (Retry-After) while the "
      "server runs as many imports as it allows. The query's other parameters are "
      "`dataset import`'s options (val_ratio=0.1, allow_errors=true, ...)",
      {{"name", "the registry name to import as (required)"},
       {"filename", "the zip's file name, recorded as the version's source (upload:FILE; default NAME.zip)"}},
      "application/json",
      Access::kWrite,
      "the zip file: a dataset folder (YOLO, COCO or VOC), at the top or in one top-level folder"};
  doc.upload = "application/zip";
  doc.blocking = true;  // unpacks and imports the whole zip: off the I/O thread
  return router.Add("POST", "/api/datasets/upload", doc,
                    [&ctx](const Request& req, const PathParams&) { return Upload(ctx, req); });
}

}  // namespace kestrel::server
