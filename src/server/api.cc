#include "server/api.h"

#include <cctype>
#include <chrono>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <utility>

#include "app/datasets.h"
#include "app/jobs.h"
#include "app/ls_annotations.h"
#include "app/models.h"
#include "app/stats.h"
#include "app/system.h"
#include "app/templates.h"
#include "core/env.h"
#include "core/json.h"
#include "core/parse.h"
#include "server/api_dataset_audits.h"
#include "server/api_dataset_images.h"
#include "server/api_dataset_upload.h"
#include "server/api_evaluations.h"
#include "server/api_exports.h"
#include "server/api_job_media.h"
#include "server/api_job_run.h"
#include "server/api_jobs.h"
#include "server/api_ls.h"
#include "server/api_metrics.h"
#include "server/api_runs.h"
#include "server/api_studies.h"
#include "server/api_system.h"
#include "server/api_write.h"
#include "server/auth.h"
#include "server/event_feed.h"
#include "server/query_params.h"
#include "server/static_files.h"

namespace kestrel::server {
namespace {

using nlohmann::json;

json Ok(json view) {
  view["ok"] = true;
  return view;
}

// The replay point of an event stream: the Last-Event-ID header (what an
// EventSource sends when it reconnects) wins over ?last_event_id=.
Result<int64_t> LastEventId(const Request& req) {
  const std::string header = req.Header("last-event-id");
  if (!header.empty())
    return ParseInt64(header, {app::kRequestFile, 0, "Last-Event-ID"}, 0, std::numeric_limits<int64_t>::max(),
                      "an event id");
  return QueryInt(req, "last_event_id", 0, 0, std::numeric_limits<int64_t>::max(), "an event id");
}

// A stream's polls are answered by the routes' one EventFeed (one store
// read per 50 ms for every open stream, server/event_feed.h).
Response EventStreamResponse(const std::shared_ptr<EventFeed>& feed, int64_t job_id, int64_t after_id) {
  Response r;
  r.content_type = "text/event-stream";
  EventStream s;
  s.last_id = after_id;
  s.poll = [feed, job_id](int64_t after) -> Result<std::vector<StreamEvent>> {
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
    KESTREL_ASSIGN_OR_RETURN(auto events, feed->Since(after, job_id, now_ms));
    std::vector<StreamEvent> out;
    out.reserve(events.size());
    for (const auto& ev : events) out.push_back({ev.id, ev.kind, DumpJson(EventJson(ev))});
    return out;
  };
  r.stream = std::move(s);
  return r;
}

// Queue depth by state and priority, failed attempts by reason, the
// availability and each worker's heartbeat age at `now_ms`, read from the
// store at each scrape.
Result<std::string> StoreMetrics(ApiContext& ctx, int64_t now_ms) {
  store::JobFilter all;
  all.limit = std::numeric_limits<int64_t>::max();
  KESTREL_ASSIGN_OR_RETURN(auto jobs, ctx.meta.ListJobs(all));
  KESTREL_ASSIGN_OR_RETURN(auto stats, ctx.meta.Stats());
  std::map<std::pair<std::string, std::string>, int64_t> depth;
  for (auto st :
       {store::JobState::kQueued, store::JobState::kRunning, store::JobState::kSucceeded,
        store::JobState::kFailedRetryable, store::JobState::kFailedPermanent, store::JobState::kCancelled}) {
    for (auto p : {store::JobPriority::kHigh, store::JobPriority::kNormal, store::JobPriority::kLow})
      depth[{store::JobStateName(st), store::JobPriorityName(p)}] = 0;
  }
  for (const auto& j : jobs) ++depth[{store::JobStateName(j.state), store::JobPriorityName(j.spec.priority)}];
  std::ostringstream o;
  o << "# HELP kestrel_jobs Jobs in the store, by state and priority (queue depth: state=\"queued\").\n"
    << "# TYPE kestrel_jobs gauge\n";
  for (const auto& [k, n] : depth)
    o << "kestrel_jobs{state=\"" << k.first << "\",priority=\"" << k.second << "\"} " << n << "\n";
  o << "# HELP kestrel_attempts_total Attempts started.\n# TYPE kestrel_attempts_total counter\n"
    << "kestrel_attempts_total " << stats.attempts << "\n";
  o << "# HELP kestrel_attempts_failed_total Failed attempts, by failure reason.\n"
    << "# TYPE kestrel_attempts_failed_total counter\n";
  for (const auto& [reason, n] : stats.failures_by_reason)
    o << "kestrel_attempts_failed_total{reason=\"" << PromLabel(reason) << "\"} " << n << "\n";
  o << "# HELP kestrel_job_availability Succeeded jobs over finished jobs (0 when none finished).\n"
    << "# TYPE kestrel_job_availability gauge\n"
    << "kestrel_job_availability " << stats.availability << "\n";
  KESTREL_ASSIGN_OR_RETURN(auto workers, app::ListWorkerStatus(ctx.meta, now_ms));
  o << "# HELP kestrel_worker_heartbeat_age_seconds Seconds since each registered worker's last heartbeat.\n"
    << "# TYPE kestrel_worker_heartbeat_age_seconds gauge\n";
  for (const auto& w : workers.workers)
    o << "kestrel_worker_heartbeat_age_seconds{worker=\"" << PromLabel(w.worker.id) << "\",state=\""
      << w.state << "\"} " << static_cast<double>(w.heartbeat_age_ms) / 1000.0 << "\n";
  // Issue 31 (docs/jobs.md "Quarantine and drain"): hosts that claim nothing.
  o << "# HELP kestrel_host_quarantined 1 while a host is quarantined for environment failures.\n"
    << "# TYPE kestrel_host_quarantined gauge\n";
  for (const auto& h : workers.hosts)
    o << "kestrel_host_quarantined{host=\"" << PromLabel(h.host) << "\"} " << (h.quarantined_ms > 0 ? 1 : 0)
      << "\n";
  o << "# HELP kestrel_host_environment_failures Environment failures counted since the last unquarantine.\n"
    << "# TYPE kestrel_host_environment_failures gauge\n";
  for (const auto& h : workers.hosts)
    o << "kestrel_host_environment_failures{host=\"" << PromLabel(h.host) << "\"} " << h.env_failures << "\n";
  o << "# HELP kestrel_worker_draining 1 while a worker is asked to drain.\n"
    << "# TYPE kestrel_worker_draining gauge\n";
  for (const auto& w : workers.workers)
    o << "kestrel_worker_draining{worker=\"" << PromLabel(w.worker.id) << "\"} " << (w.draining ? 1 : 0)
      << "\n";
  return o.str();
}

Status AddRoutes(Router& r, ApiContext& ctx) {
  KESTREL_RETURN_IF_ERROR(r.Add(
      "GET", "/healthz", {"Liveness: the process serves requests", {}, "application/json", Access::kOpen},
      [](const Request&, const PathParams&) {
        return JsonResponse({{"ok", true}});
      }));
  KESTREL_RETURN_IF_ERROR(r.Add(
      "GET", "/readyz",
      {"Readiness: the metadata store answers (503 when it does not)", {}, "application/json", Access::kOpen},
      [&ctx](const Request&, const PathParams&) {
        auto v = ctx.meta.SchemaVersion();
        if (!v.IsOk()) return ErrorResponse(Status::Unavailable("store: " + v.GetStatus().ToString()));
        return JsonResponse({{"ok", true}, {"schema_version", *v}});
      }));
  KESTREL_RETURN_IF_ERROR(
      r.Add("GET", "/metrics",
            {"Prometheus metrics, text exposition format 0.0.4", {}, "text/plain; version=0.0.4"},
            [&ctx](const Request&, const PathParams&) {
              auto store_text = StoreMetrics(ctx, Env::Default().UnixMillis());
              if (!store_text.IsOk()) return ErrorResponse(store_text.GetStatus());
              Response resp;
              resp.content_type = "text/plain; version=0.0.4; charset=utf-8";
              resp.body = *store_text + ctx.metrics.Render();
              return resp;
            }));
  KESTREL_RETURN_IF_ERROR(
      r.Add("GET", "/api/stats", {"Job availability, failures, MTTR, breaker, disk (`kestrel stats`)"},
            [&ctx](const Request&, const PathParams&) {
              auto s = app::JobStatsReport(ctx.meta, ctx.home);
              return s.IsOk() ? JsonResponse(app::StatsJson(*s)) : ErrorResponse(s.GetStatus());
            }));
  KESTREL_RETURN_IF_ERROR(r.Add("GET", "/api/datasets",
                                {"Datasets with their newest version (`kestrel dataset list`)"},
                                [&ctx](const Request&, const PathParams&) {
                                  auto all = app::Datasets(ctx.meta, ctx.blobs).List();
                                  if (!all.IsOk()) return ErrorResponse(all.GetStatus());
                                  return JsonResponse(app::DatasetListJson(*all));
                                }));
  KESTREL_RETURN_IF_ERROR(
      r.Add("GET", "/api/datasets/{name}",
            {"A dataset version (`kestrel dataset show NAME[@VERSION]`) and every version of the dataset"},
            [&ctx](const Request&, const PathParams& p) {
              app::Datasets ds(ctx.meta, ctx.blobs);
              const std::string& spec = p.at("name");
              auto v = ds.Show(spec);
              if (!v.IsOk()) return ErrorResponse(v.GetStatus());
              auto versions = ctx.meta.ListVersions(spec.substr(0, spec.find('@')));
              if (!versions.IsOk()) return ErrorResponse(versions.GetStatus());
              json doc = Ok(app::DatasetShowJson(*v));
              json arr = json::array();
              for (const auto& rec : *versions) arr.push_back(app::DatasetVersionJson(rec));
              doc["versions"] = arr;
              return JsonResponse(doc);
            }));
  KESTREL_RETURN_IF_ERROR(
      r.Add("GET", "/api/jobs/{id}", {"A job and its attempts (`kestrel jobs show ID`)"},
            [&ctx](const Request&, const PathParams& p) {
              auto id = JobIdText(p.at("id"));
              if (!id.IsOk()) return ErrorResponse(id.GetStatus());
              auto d = app::ShowJob(ctx.meta, *id);
              if (!d.IsOk()) return ErrorResponse(d.GetStatus());
              json doc = app::JobDetailJson(*d);
              // The weights a fine-tune started from, as a link (WeightsLink).
              const json& cfg = doc["job"]["config"];
              if (cfg.is_object() && cfg.contains("pretrained") && cfg["pretrained"].is_string() &&
                  cfg["pretrained"] != "" && cfg["pretrained"] != "true" && cfg["pretrained"] != "false")
                doc["links"]["pretrained"] = WeightsLink(ctx, cfg["pretrained"].get<std::string>());
              return JsonResponse(doc);
            }));
  KESTREL_RETURN_IF_ERROR(r.Add("GET", "/api/models",
                                {"Registered models, newest first (`kestrel models list`)",
                                 {{"name", "only this model name"},
                                  {"dataset", "only models trained on this dataset"},
                                  {"tag", "only models with this tag"}}},
                                [&ctx](const Request& req, const PathParams&) {
                                  app::ModelRegistry reg(ctx.meta, ctx.blobs, Env::Default());
                                  store::ModelFilter f;
                                  f.name = QueryText(req, "name");
                                  f.dataset = QueryText(req, "dataset");
                                  f.tag = QueryText(req, "tag");
                                  auto list = reg.List(f);
                                  if (!list.IsOk()) return ErrorResponse(list.GetStatus());
                                  return JsonResponse(app::ModelListJson(*list, ctx.blobs));
                                }));
  KESTREL_RETURN_IF_ERROR(
      r.Add("GET", "/api/models/{ref}",
            {"A model with lineage, evaluation and comparison (`kestrel models show REF`: NAME, NAME@vN, "
             "NAME@TAG, id prefix)"},
            [&ctx](const Request&, const PathParams& p) {
              app::ModelRegistry reg(ctx.meta, ctx.blobs, Env::Default());
              auto m = reg.Resolve(p.at("ref"));
              if (!m.IsOk()) return ErrorResponse(m.GetStatus());
              json model = app::ModelJson(*m, ctx.blobs, true);
              // The parent weights as a link now: a model registered after
              // this one (lineage.parent.model is fixed at registration), or a job's weights.
              json& parent = model["lineage"]["parent"];
              if (parent.is_object() && parent.contains("path") && parent["path"].is_string()) {
                json link = WeightsLink(ctx, parent["path"].get<std::string>());
                if (!parent.contains("model") && link.contains("model")) parent["model"] = link["model"];
                if (link.contains("job_id")) parent["job_id"] = link["job_id"];
              }
              return JsonResponse({{"ok", true}, {"model", model}});
            }));
  KESTREL_RETURN_IF_ERROR(r.Add("GET", "/api/templates",
                                {"Config templates, newest version of each (`kestrel template list`)"},
                                [&ctx](const Request&, const PathParams&) {
                                  auto all = app::TemplateLibrary(ctx.meta).List("");
                                  if (!all.IsOk()) return ErrorResponse(all.GetStatus());
                                  return JsonResponse(app::TemplateListJson(*all));
                                }));
  KESTREL_RETURN_IF_ERROR(
      r.Add("GET", "/api/templates/{name}",
            {"A template version with its effective config (`kestrel template show NAME[@vN]`)"},
            [&ctx](const Request&, const PathParams& p) {
              auto t = app::TemplateLibrary(ctx.meta).Resolve(p.at("name"));
              if (!t.IsOk()) return ErrorResponse(t.GetStatus());
              return JsonResponse({{"ok", true}, {"template", app::TemplateJson(*t, true)}});
            }));
  auto feed = std::make_shared<EventFeed>(ctx.meta, ctx.event_page);
  KESTREL_RETURN_IF_ERROR(
      r.Add("GET", "/api/events",
            {"Server-Sent Events of every job, from the store's events table (docs/server.md)",
             {{"last_event_id", "replay the events after this id (the Last-Event-ID header wins)"}},
             "text/event-stream"},
            [feed](const Request& req, const PathParams&) {
              auto after = LastEventId(req);
              if (!after.IsOk()) return ErrorResponse(after.GetStatus());
              return EventStreamResponse(feed, 0, *after);
            }));
  KESTREL_RETURN_IF_ERROR(
      r.Add("GET", "/api/jobs/{id}/events",
            {"Server-Sent Events of one job (docs/server.md)",
             {{"last_event_id", "replay the events after this id (the Last-Event-ID header wins)"}},
             "text/event-stream"},
            [&ctx, feed](const Request& req, const PathParams& p) {
              auto id = JobIdText(p.at("id"));
              if (!id.IsOk()) return ErrorResponse(id.GetStatus());
              auto after = LastEventId(req);
              if (!after.IsOk()) return ErrorResponse(after.GetStatus());
              if (auto job = ctx.meta.GetJob(*id); !job.IsOk()) return ErrorResponse(job.GetStatus());
              return EventStreamResponse(feed, *id, *after);
            }));
  return {};
}

}  // namespace

json EventJson(const store::EventRecord& ev) {
  json payload = json::parse(ev.payload_json, nullptr, false);
  if (payload.is_discarded()) payload = ev.payload_json;
  return {{"id", ev.id},     {"job_id", ev.job_id},         {"attempt", ev.attempt},
          {"kind", ev.kind}, {"created_ms", ev.created_ms}, {"payload", payload}};
}

json OpenApiDocument(const Router& router) {
  const json error_ref = {{"$ref", "#/components/responses/Error"}};
  json paths = json::object();
  auto add = [&](const std::string& method, const std::string& pattern, const RouteDoc& doc) {
    json params = json::array();
    size_t i = 0;
    while ((i = pattern.find('{', i)) != std::string::npos) {
      const size_t j = pattern.find('}', i);
      params.push_back({{"name", pattern.substr(i + 1, j - i - 1)},
                        {"in", "path"},
                        {"required", true},
                        {"schema", {{"type", "string"}}}});
      i = j;
    }
    for (const auto& [name, description] : doc.query)
      params.push_back(
          {{"name", name}, {"in", "query"}, {"description", description}, {"schema", {{"type", "string"}}}});
    std::string lower = method;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    json& op = paths[pattern][lower];
    op = {{"summary", doc.summary},
          {"parameters", params},
          {"responses",
           {{"200",
             {{"description", "success"}, {"content", {{doc.content_type, {{"schema", json::object()}}}}}}},
            {"default", error_ref}}}};
    // docs/server.md "Auth": open routes need nothing; reads a token unless --public-read.
    op["security"] = doc.access == Access::kOpen ? json::array() : json::array({{{"bearer", json::array()}}});
    if (!doc.body.empty()) {
      op["requestBody"] = {{"required", doc.access == Access::kWrite},
                           {"description", doc.body},
                           {"content", {{"application/json", {{"schema", {{"type", "object"}}}}}}}};
    }
    if (!doc.upload.empty()) {
      op["requestBody"] = {
          {"required", true},
          {"description", doc.body},
          {"content", {{doc.upload, {{"schema", {{"type", "string"}, {"contentMediaType", doc.upload}}}}}}}};
    }
  };
  for (const auto& r : router.Routes()) {
    if (!r.doc.summary.empty()) add(r.method, r.pattern, r.doc);
  }
  add("GET", "/api/openapi.json", {"This document: the OpenAPI 3.1 description of every route"});
  return {{"openapi", "3.1.0"},
          {"info", {{"title", "Kestrel API"}, {"version", app::KestrelVersion()}}},
          {"paths", paths},
          {"components",
           {{"securitySchemes",
             {{"bearer",
               {{"type", "http"},
                {"scheme", "bearer"},
                {"description",
                 "an API token from `kestrel token create` (read routes: any live token, or none with "
                 "--public-read; write routes: a read-write token)"}}}}},
            {"responses",
             {{"Error",
               {{"description", "an error: the document `kestrel … --json` prints for it"},
                {"content",
                 {{"application/json",
                   {{"schema",
                     {{"type", "object"},
                      {"properties",
                       {{"ok", {{"type", "boolean"}}},
                        {"error",
                         {{"type", "object"},
                          {"properties",
                           {{"code", {{"type", "string"}}},
                            {"message", {{"type", "string"}}},
                            {"file", {{"type", "string"}}},
                            {"line", {{"type", "integer"}}},
                            {"field", {{"type", "string"}}}}}}}}}}}}}}}}}}}}}};
}

Result<Router> BuildApiRouter(ApiContext& ctx) {
  Router r;
  KESTREL_RETURN_IF_ERROR(AddRoutes(r, ctx));
  KESTREL_RETURN_IF_ERROR(AddWriteRoutes(r, ctx));
  KESTREL_RETURN_IF_ERROR(AddMetricRoutes(r, ctx));
  KESTREL_RETURN_IF_ERROR(AddRunRoutes(r, ctx));
  KESTREL_RETURN_IF_ERROR(AddExportRoutes(r, ctx));
  KESTREL_RETURN_IF_ERROR(AddSystemRoutes(r, ctx));
  KESTREL_RETURN_IF_ERROR(AddEvaluationRoutes(r, ctx));
  KESTREL_RETURN_IF_ERROR(AddStudyRoutes(r, ctx));
  KESTREL_RETURN_IF_ERROR(AddJobRoutes(r, ctx));
  KESTREL_RETURN_IF_ERROR(AddJobMediaRoutes(r, ctx));
  KESTREL_RETURN_IF_ERROR(AddJobRunRoutes(r, ctx));
  KESTREL_RETURN_IF_ERROR(AddDatasetImageRoutes(r, ctx));
  KESTREL_RETURN_IF_ERROR(AddDatasetAuditRoutes(r, ctx));
  KESTREL_RETURN_IF_ERROR(AddDatasetUploadRoutes(r, ctx));
  KESTREL_RETURN_IF_ERROR(AddLabelStudioRoutes(r, ctx));
  const json doc = OpenApiDocument(r);
  KESTREL_RETURN_IF_ERROR(r.Add("GET", "/api/openapi.json", {},
                                [doc](const Request&, const PathParams&) { return JsonResponse(doc); }));
  r.SetAuthorizer(TokenAuthorizer(ctx.meta, ctx.public_read));
  return r;
}

Result<std::unique_ptr<ApiServer>> ApiServer::Start(const std::string& home, const ServerOptions& options,
                                                    const LsOptions& ls) {
  KESTREL_RETURN_IF_ERROR(ValidateLsOptions(ls));
  std::unique_ptr<ApiServer> s(new ApiServer());
  KESTREL_ASSIGN_OR_RETURN(s->meta_, store::MetadataStore::Open(store::MetadataUrl(home)));
  KESTREL_ASSIGN_OR_RETURN(s->blobs_, store::OpenArtifactStore(home));
  s->ctx_ = std::make_unique<ApiContext>(ApiContext{*s->meta_, *s->blobs_, s->metrics_, home});
  s->ctx_->public_read = options.public_read;
  s->ctx_->meta_url = store::MetadataUrl(home);
  if (!ls.model.empty()) {
    KESTREL_ASSIGN_OR_RETURN(auto model, app::LsModel::Load(*s->meta_, *s->blobs_, Env::Default(), ls.model));
    // The webhook's kept annotations and counters (a damaged file stops
    // the server here, not at the first webhook).
    KESTREL_RETURN_IF_ERROR(app::LoadLsState(app::LsStatePath(home)).GetStatus());
    s->ls_ = std::make_unique<LsBackend>(ls, std::move(model), app::LsStatePath(home));
    s->ctx_->ls = s->ls_.get();
  }
  ServerOptions http_options = options;
  if (http_options.upload_dir.empty()) http_options.upload_dir = home + "/uploads";
  s->ctx_->upload_dir = http_options.upload_dir;
  s->ctx_->upload_limit_bytes = http_options.upload_limit_bytes;
  KESTREL_ASSIGN_OR_RETURN(s->ctx_->data_roots, DataRoots::Open(options.data_roots));
  KESTREL_ASSIGN_OR_RETURN(Router router, BuildApiRouter(*s->ctx_));
  s->router_ = std::make_unique<Router>(std::move(router));
  if (!options.web_dir.empty()) {
    KESTREL_ASSIGN_OR_RETURN(StaticFiles files, StaticFiles::Open(options.web_dir));
    s->router_->SetFallback([files](const Request& req, const PathParams&) { return files.Serve(req); });
  }
  KESTREL_ASSIGN_OR_RETURN(s->http_, HttpServer::Start(http_options, *s->router_, s->metrics_));
  return s;
}

ApiServer::~ApiServer() { Stop(); }

void ApiServer::Stop() {
  if (http_) http_->Stop();
}

std::string ApiServer::Url() const {
  const std::string host = Host();
  return "http://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(Port());
}

}  // namespace kestrel::server
