#include "server/api_write.h"

#include <chrono>
#include <limits>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "app/datasets.h"
#include "app/jobs.h"
#include "app/models.h"
#include "app/templates.h"
#include "core/env.h"
#include "core/options.h"
#include "core/parse.h"
#include "core/utf8.h"
#include "server/data_roots.h"
#include "server/job_paths.h"
#include "server/json_body.h"
#include "server/query_params.h"
#include "store/metadata_store.h"

namespace kestrel::server {
namespace {

using nlohmann::json;

Status BodyError(const std::string& message, const std::string& field = "body") {
  return Status::InvalidArgument(message, {app::kRequestFile, 0, field});
}

// The request body as a JSON object with only `allowed` keys (json_body.h:
// the one reader of every JSON route's body).
Result<json> BodyObject(const Request& req, const std::vector<std::string>& allowed, bool required) {
  return ReadJsonObjectBody(req.body, allowed, required);
}

// A body value as the text a command line would carry.
Result<std::string> ValueText(const std::string& key, const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return std::string(v.get<bool>() ? "true" : "false");
  if (v.is_number()) return v.dump();
  return BodyError("key '" + EscapeForDisplayCut(key) + "' must be a string, number or boolean, not " +
                       std::string(v.type_name()),
                   EscapeForDisplayCut(key));
}

// `kestrel submit`'s steps over a JSON body: {"template": "NAME[@vN]"}
// and/or {"keys": {key: value}}, the keys winning over the template's like
// the command line does.
Response Submit(ApiContext& ctx, const Request& req) {
  auto body = BodyObject(req, {"template", "keys"}, true);
  if (!body.IsOk()) return ErrorResponse(body.GetStatus());
  std::vector<std::string> tokens;
  if (body->contains("template")) {
    const json& t = (*body)["template"];
    if (!t.is_string() || t.get<std::string>().empty())
      return ErrorResponse(BodyError("template must be a template reference (NAME or NAME@vN)", "template"));
    tokens.push_back("template=" + t.get<std::string>());
  }
  if (body->contains("keys")) {
    const json& keys = (*body)["keys"];
    if (!keys.is_object())
      return ErrorResponse(BodyError("keys must be a JSON object of key -> value (\"epochs\": 10)", "keys"));
    for (const auto& [k, v] : keys.items()) {
      if (k.empty() || k.find('=') != std::string::npos)
        return ErrorResponse(
            BodyError("'" + EscapeForDisplayCut(k) + "' is not a submit key (keys are names without '=')",
                      k.empty() ? "keys" : EscapeForDisplayCut(k)));
      auto text = ValueText(k, v);
      if (!text.IsOk()) return ErrorResponse(text.GetStatus());
      tokens.push_back(k + "=" + *text);
    }
  }
  if (tokens.empty())
    return ErrorResponse(
        BodyError("the request body needs \"keys\" (and/or \"template\"): nothing to submit"));
  // app::SubmitTokens: the template expanded, the draft, the job. Every key
  // that names a file (pretrained=, model=) is a registered model (the job
  // stores its blob's path) or a file under a data root or the home
  // (job_paths.h): an HTTP client reads nothing else of this host. An export
  // job's model= also keeps which registered model it named (pinned as NAME@vN).
  const JobFilePolicy files(ctx.data_roots, ctx.home);
  app::ModelRegistry reg(ctx.meta, ctx.blobs, Env::Default());
  app::SubmitSteps steps;
  steps.open_store = [&ctx]() -> Result<store::MetadataStore*> { return &ctx.meta; };
  steps.resolve_weights = [&](const std::string& key, std::string* weights) -> Status {
    KESTREL_ASSIGN_OR_RETURN(auto resolved, files.Resolve(reg, key, *weights));
    *weights = resolved.path;
    return {};
  };
  steps.resolve_model = [&](const std::string& text) { return files.Resolve(reg, "model", text); };
  auto r = app::SubmitTokens(tokens, steps, Env::Default().UnixMillis());
  if (!r.IsOk()) return ErrorResponse(r.GetStatus());
  return JsonResponse(app::SubmitResultJson(*r), r->created ? 201 : 200);
}

Response ChangeJob(ApiContext& ctx, const Request& req, const PathParams& p, bool cancel) {
  auto id = JobIdText(p.at("id"));
  if (!id.IsOk()) return ErrorResponse(id.GetStatus());
  auto body = BodyObject(req, {}, false);
  if (!body.IsOk()) return ErrorResponse(body.GetStatus());
  auto job = cancel ? app::CancelJob(ctx.meta, *id, Env::Default().UnixMillis())
                    : app::RetryJob(ctx.meta, *id, Env::Default().UnixMillis());
  if (!job.IsOk()) return ErrorResponse(job.GetStatus());
  return JsonResponse({{"ok", true}, {"job", app::JobJson(*job, false)}});
}

// `kestrel dataset import PATH --name NAME key=value ...` over a JSON body
// {"path", "name", option: value, ...}: the path resolved inside a data root
// (data_roots.h), the options bound and checked as on the command line, the
// importer's reads confined to the roots. A failed import stores nothing;
// its error document carries the validation report when the source was read.
Response ImportDataset(ApiContext& ctx, const Request& req) {
  if (ctx.data_roots.Empty())
    return ErrorResponse(403, "permission_denied",
                         "dataset import over HTTP is off: the server has no data root (start it with "
                         "kestrel serve --data-root DIR to allow imports from DIR)",
                         "path");
  data::ImportOptions opts;
  OptionSet set;
  opts.Bind(set);
  std::vector<std::string> allowed{"path", "name"};
  for (const auto& k : set.Keys()) allowed.push_back(k);
  auto body = BodyObject(req, allowed, true);
  if (!body.IsOk()) return ErrorResponse(body.GetStatus());
  for (const char* key : {"path", "name"}) {
    if (!body->contains(key) || !(*body)[key].is_string())
      return ErrorResponse(BodyError(std::string("the request body needs \"") + key +
                                         "\": a string (\"path\": a dataset folder or data.yaml / instances "
                                         "JSON under a data root, \"name\": the registry name)",
                                     key));
  }
  for (const auto& [k, v] : body->items()) {
    if (k == "path" || k == "name") continue;
    auto text = ValueText(k, v);
    if (!text.IsOk()) return ErrorResponse(text.GetStatus());
    Status s = set.Set(k, *text, {app::kRequestFile, 0, k});
    if (!s.IsOk()) return ErrorResponse(s);
  }
  auto path = ctx.data_roots.Resolve((*body)["path"].get<std::string>());
  if (!path.IsOk()) return ErrorResponse(path.GetStatus());
  ConfinedEnv env(Env::Default(), ctx.data_roots, ctx.home);
  return ImportDatasetResponse(ctx, env, *path, (*body)["name"].get<std::string>(), opts);
}

}  // namespace

Response ImportDatasetResponse(ApiContext& ctx, Env& env, const std::string& path, const std::string& name,
                               const data::ImportOptions& opts) {
  // This runs on a blocking thread (RouteDoc::blocking): its own store.
  std::unique_ptr<store::MetadataStore> own;
  if (!ctx.meta_url.empty()) {
    auto opened = store::MetadataStore::Open(ctx.meta_url);
    if (!opened.IsOk()) return ErrorResponse(opened.GetStatus());
    own = std::move(opened).Value();
  }
  data::ValidationReport report;
  auto r = app::Datasets(own ? *own : ctx.meta, ctx.blobs, env).Import(path, name, opts, &report);
  if (!r.IsOk()) {
    Response err = ErrorResponse(r.GetStatus());
    if (report.source.empty()) return err;
    json doc = json::parse(err.body, nullptr, false);
    if (doc.is_discarded()) return err;
    const std::string& message = r.GetStatus().Message();
    doc["error"]["message"] = message.substr(0, message.find('\n'));
    doc["report"] = report.ToJson();
    return JsonResponse(doc, err.status);
  }
  json doc = app::DatasetImportJson(*r);
  doc["ok"] = true;
  return JsonResponse(doc, r->created ? 201 : 200);
}

Status AddWriteRoutes(Router& r, ApiContext& ctx) {
  KESTREL_RETURN_IF_ERROR(r.Add(
      "POST", "/api/jobs",
      {"Queue a job (`kestrel submit`): 201 when queued, 200 when an identical live job exists",
       {},
       "application/json",
       Access::kWrite,
       "{\"template\": \"NAME[@vN]\" (optional), \"keys\": {\"data\": \"birds\", \"epochs\": 10, ...}}: "
       "the submit keys as key -> value (string, number or boolean), winning over the template's; data= "
       "is a registered dataset (NAME[@VERSION])"},
      [&ctx](const Request& req, const PathParams&) { return Submit(ctx, req); }));
  KESTREL_RETURN_IF_ERROR(
      r.Add("POST", "/api/jobs/{id}/cancel",
            {"Cancel a job (`kestrel jobs cancel ID`); a running attempt is stopped by its worker",
             {},
             "application/json",
             Access::kWrite,
             "none, or {}"},
            [&ctx](const Request& req, const PathParams& p) { return ChangeJob(ctx, req, p, true); }));
  KESTREL_RETURN_IF_ERROR(
      r.Add("POST", "/api/jobs/{id}/retry",
            {"Requeue a failed or cancelled job with a fresh retry budget (`kestrel jobs retry ID`)",
             {},
             "application/json",
             Access::kWrite,
             "none, or {}"},
            [&ctx](const Request& req, const PathParams& p) { return ChangeJob(ctx, req, p, false); }));
  KESTREL_RETURN_IF_ERROR(r.Add(
      "POST", "/api/models/{ref}/tags",
      {"Tag a model (`kestrel models tag REF TAG`); tag production promotes it (`models promote`), moving it "
       "from the dataset's holder",
       {},
       "application/json",
       Access::kWrite,
       "{\"tag\": \"candidate\"}"},
      [&ctx](const Request& req, const PathParams& p) {
        auto body = BodyObject(req, {"tag"}, true);
        if (!body.IsOk()) return ErrorResponse(body.GetStatus());
        if (!body->contains("tag") || !(*body)["tag"].is_string())
          return ErrorResponse(
              BodyError("the request body needs \"tag\": a string (e.g. \"candidate\")", "tag"));
        app::ModelRegistry reg(ctx.meta, ctx.blobs, Env::Default());
        auto t = reg.Tag(p.at("ref"), (*body)["tag"].get<std::string>(), Env::Default().UnixMillis());
        if (!t.IsOk()) return ErrorResponse(t.GetStatus());
        json doc = app::TagResultJson(*t, ctx.blobs);
        doc["ok"] = true;
        return JsonResponse(doc);
      }));
  KESTREL_RETURN_IF_ERROR(r.Add(
      "DELETE", "/api/models/{ref}/tags/{tag}",
      {"Remove a tag from a model (`kestrel models untag REF TAG`)", {}, "application/json", Access::kWrite},
      [&ctx](const Request& req, const PathParams& p) {
        auto body = BodyObject(req, {}, false);
        if (!body.IsOk()) return ErrorResponse(body.GetStatus());
        app::ModelRegistry reg(ctx.meta, ctx.blobs, Env::Default());
        auto m = reg.Untag(p.at("ref"), p.at("tag"));
        if (!m.IsOk()) return ErrorResponse(m.GetStatus());
        return JsonResponse(
            {{"ok", true}, {"model", app::ModelJson(*m, ctx.blobs, false)}, {"tag", p.at("tag")}});
      }));
  RouteDoc import_doc{
      "Import a dataset from a folder or file under a data root (`kestrel dataset import`): 201 when a "
      "new version is stored, 200 when identical content is already the dataset's; 403 when the server "
      "has no --data-root; 503 (Retry-After) while the server runs as many imports as it allows",
      {},
      "application/json",
      Access::kWrite,
      "{\"path\": \"ROOT-NAME/folder\" (or relative to the only root, or absolute inside a root), "
      "\"name\": \"birds\", plus `dataset import`'s options as key -> value (\"val_ratio\": 0.1, "
      "\"allow_errors\": true, ...)}"};
  import_doc.blocking = true;  // reads and hashes the whole dataset: off the I/O thread
  KESTREL_RETURN_IF_ERROR(
      r.Add("POST", "/api/datasets/import", import_doc,
            [&ctx](const Request& req, const PathParams&) { return ImportDataset(ctx, req); }));
  return {};
}

}  // namespace kestrel::server
