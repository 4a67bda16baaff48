#include "server/api_studies.h"

#include "app/jobs.h"
#include "app/templates.h"
#include "app/tune_study.h"
#include "core/env.h"
#include "server/json_body.h"

namespace kestrel::server {
namespace {

using nlohmann::json;

Status BodyError(const std::string& message, const std::string& field) {
  return Status::InvalidArgument(message, {app::kRequestFile, 0, field});
}

// `kestrel tune`'s tokens from {"template"?, "space"?, "keys": {...}}.
Response CreateStudyRoute(ApiContext& ctx, const Request& req) {
  auto body = ReadJsonObjectBody(req.body, {"template", "space", "keys"}, true);
  if (!body.IsOk()) return ErrorResponse(body.GetStatus());
  std::vector<std::string> tokens;
  if (body->contains("template")) {
    const json& t = (*body)["template"];
    if (!t.is_string() || t.get<std::string>().empty())
      return ErrorResponse(BodyError("template must be a template reference (NAME or NAME@vN)", "template"));
    tokens.push_back("template=" + t.get<std::string>());
  }
  const json keys = body->value("keys", json::object());
  if (!keys.is_object())
    return ErrorResponse(BodyError("keys must be a JSON object of key -> value", "keys"));
  for (const auto& [k, v] : keys.items()) {
    if (k.empty() || k.find('=') != std::string::npos || k == "space")
      return ErrorResponse(
          BodyError("'" + k + "' is not a study key (the space comes as \"space\": YAML text)",
                    k.empty() ? "keys" : k));
    if (v.is_string()) {
      tokens.push_back(k + "=" + v.get<std::string>());
    } else if (v.is_boolean()) {
      tokens.push_back(k + "=" + (v.get<bool>() ? "true" : "false"));
    } else if (v.is_number()) {
      tokens.push_back(k + "=" + v.dump());
    } else {
      return ErrorResponse(BodyError("key '" + k + "' must be a string, number or boolean", k));
    }
  }
  app::TemplateLibrary lib(ctx.meta);
  auto expanded = lib.ExpandArgs(tokens);
  if (!expanded.IsOk()) return ErrorResponse(expanded.GetStatus());
  app::StudyRequest sr;
  sr.tokens = *expanded;
  if (body->contains("space")) {
    const json& s = (*body)["space"];
    if (!s.is_string()) return ErrorResponse(BodyError("space must be the space file's YAML text", "space"));
    sr.space_yaml = s.get<std::string>();
  }
  auto r = app::CreateStudy(ctx.meta, sr, Env::Default().UnixMillis());
  if (!r.IsOk()) return ErrorResponse(r.GetStatus());
  auto show = app::StudyShowJson(ctx.meta, r->study.name);
  if (!show.IsOk()) return ErrorResponse(show.GetStatus());
  return JsonResponse({{"ok", true},
                       {"created", r->created},
                       {"study", (*show)["study"]},
                       {"job_id", r->job_id == 0 ? json(nullptr) : json(r->job_id)}},
                      r->created ? 201 : 200);
}

}  // namespace

Status AddStudyRoutes(Router& r, ApiContext& ctx) {
  KESTREL_RETURN_IF_ERROR(r.Add("GET", "/api/studies",
                                {"Hyperparameter studies, newest first (`kestrel tune list`)"},
                                [&ctx](const Request&, const PathParams&) {
                                  auto doc = app::StudyListJson(ctx.meta);
                                  if (!doc.IsOk()) return ErrorResponse(doc.GetStatus());
                                  return JsonResponse(*doc);
                                }));
  KESTREL_RETURN_IF_ERROR(
      r.Add("GET", "/api/studies/{name}",
            {"A study: summary, space, trials, best trial, importances (`kestrel tune show NAME --json`)"},
            [&ctx](const Request&, const PathParams& p) {
              auto doc = app::StudyShowJson(ctx.meta, p.at("name"));
              if (!doc.IsOk()) return ErrorResponse(doc.GetStatus());
              return JsonResponse(*doc);
            }));
  KESTREL_RETURN_IF_ERROR(r.Add("GET", "/api/studies/{name}/trials", {"A study's trials alone, for polling"},
                                [&ctx](const Request&, const PathParams& p) {
                                  auto doc = app::StudyTrialsJson(ctx.meta, p.at("name"));
                                  if (!doc.IsOk()) return ErrorResponse(doc.GetStatus());
                                  return JsonResponse(*doc);
                                }));
  KESTREL_RETURN_IF_ERROR(
      r.Add("POST", "/api/studies",
            {"Create a study or attach to it, and queue its coordinator (`kestrel tune`)",
             {},
             "application/json",
             Access::kWrite,
             "{\"space\": \"YAML\"?, \"template\"?, \"keys\": {\"data\", \"model\", \"trials\", ...}}"},
            [&ctx](const Request& req, const PathParams&) { return CreateStudyRoute(ctx, req); }));
  KESTREL_RETURN_IF_ERROR(
      r.Add("POST", "/api/studies/{name}/stop",
            {"Stop a study: its coordinator cancels the live trials (`kestrel tune stop`)",
             {},
             "application/json",
             Access::kWrite,
             "none, or {}"},
            [&ctx](const Request& req, const PathParams& p) {
              auto body = ReadJsonObjectBody(req.body, {}, false);
              if (!body.IsOk()) return ErrorResponse(body.GetStatus());
              auto doc = app::StopStudy(ctx.meta, p.at("name"), Env::Default().UnixMillis());
              if (!doc.IsOk()) return ErrorResponse(doc.GetStatus());
              return JsonResponse(*doc);
            }));
  return {};
}

}  // namespace kestrel::server
