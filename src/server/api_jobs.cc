#include "server/api_jobs.h"

#include <limits>
#include <string>

#include "app/fingerprint.h"
#include "app/job_kinds.h"
#include "app/jobs.h"
#include "app/templates.h"
#include "core/parse.h"
#include "server/query_params.h"

namespace kestrel::server {
namespace {

using nlohmann::json;

// The job-kind table's names, "train, val, export".
std::string KindList() {
  std::string out;
  for (const auto& n : app::JobKinds().Names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

Status AddJobRoutes(Router& router, ApiContext& ctx) {
  KESTREL_RETURN_IF_ERROR(router.Add(
      "GET", "/api/job-kinds",
      {"The job-kind table (app/job_kinds.h: each kind's name and summary) and the job states with the "
       "actions each allows (cancel, retry): what the UI shows instead of copying the rules"},
      [](const Request&, const PathParams&) {
        json doc = app::JobKindsJson(app::JobKinds());
        doc["ok"] = true;
        return JsonResponse(doc);
      }));
  KESTREL_RETURN_IF_ERROR(router.Add(
      "GET", "/api/job-kinds/{kind}/keys",
      {"The keys a job of this kind takes at submit, with type, range, default and help (the submit "
       "dialog's key list; `kestrel submit kind=KIND --help`)"},
      [](const Request&, const PathParams& p) {
        auto doc = app::JobKindKeysJson(p.at("kind"));
        return doc.IsOk() ? JsonResponse(*doc) : ErrorResponse(doc.GetStatus());
      }));
  KESTREL_RETURN_IF_ERROR(router.Add(
      "GET", "/api/jobs",
      {"Jobs filtered and sorted by the store, a page at a time (`kestrel jobs list`); page with before= "
       "(the response's next_cursor) or offset=",
       {{"state",
         "only these states, comma-separated (queued, running, succeeded, failed_retryable, "
         "failed_permanent, cancelled)"},
        {"kind", "only this kind (a row of the job-kind table: GET /api/job-kinds): " + KindList()},
        {"priority", "only these priorities, comma-separated (high, normal, low)"},
        {"dataset", "only jobs on this dataset: NAME (any version) or NAME@VERSION"},
        {"search", "only jobs whose name, a tag or the note contains this text (ASCII case ignored)"},
        {"sort", "created (default), priority or state"},
        {"order", "asc or desc (default: desc for created and priority, asc for state)"},
        {"before", "a job id: the jobs after it in this order (the previous page's next_cursor)"},
        {"limit", "at most this many, 1..1000 (default 100)"},
        {"offset", "skip this many (default 0); the response's next_offset is the next page"}}},
      [&ctx](const Request& req, const PathParams&) {
        app::JobListRequest r;
        auto limit = QueryInt(req, "limit", 100, 1, 1000, "an integer");
        if (!limit.IsOk()) return ErrorResponse(limit.GetStatus());
        auto offset = QueryInt(req, "offset", 0, 0, 1'000'000'000, "an integer");
        if (!offset.IsOk()) return ErrorResponse(offset.GetStatus());
        auto before = QueryInt(req, "before", 0, 1, std::numeric_limits<int64_t>::max(),
                               "a job id (a positive number)");
        if (!before.IsOk()) return ErrorResponse(before.GetStatus());
        r.limit = *limit;
        r.offset = *offset;
        r.before = *before;
        r.state = QueryText(req, "state");
        r.kind = QueryText(req, "kind");
        r.priority = QueryText(req, "priority");
        r.dataset = QueryText(req, "dataset");
        r.search = QueryText(req, "search");
        r.sort = QueryText(req, "sort");
        r.order = QueryText(req, "order");
        auto page = app::ListJobPage(ctx.meta, r);
        if (!page.IsOk()) return ErrorResponse(page.GetStatus());
        return JsonResponse(app::JobPageJson(*page));
      }));
  KESTREL_RETURN_IF_ERROR(router.Add(
      "GET", "/api/jobs/{id}/diff",
      {"Key-by-key differences of two jobs' effective configs (`kestrel template diff job:ID job:OTHER`)",
       {{"other", "the job id to compare with (required)"}}},
      [&ctx](const Request& req, const PathParams& p) {
        auto id = JobIdText(p.at("id"), "id");
        if (!id.IsOk()) return ErrorResponse(id.GetStatus());
        const std::string other_text = QueryText(req, "other");
        if (other_text.empty())
          return ErrorResponse(Status::InvalidArgument("other= is required: the job to compare with",
                                                       {app::kRequestFile, 0, "other"}));
        auto other = JobIdText(other_text, "other");
        if (!other.IsOk()) return ErrorResponse(other.GetStatus());
        auto d = app::TemplateLibrary(ctx.meta).Diff("job:" + std::to_string(*id),
                                                     "job:" + std::to_string(*other));
        if (!d.IsOk()) return ErrorResponse(d.GetStatus());
        json doc = app::ConfigDiffJson(*d);
        doc["ok"] = true;
        return JsonResponse(doc);
      }));
  KESTREL_RETURN_IF_ERROR(router.Add(
      "GET", "/api/jobs/{id}/env-diff",
      {"What differs between the environments two attempts ran in (`kestrel jobs diff-env`)",
       {{"attempt", "this job's attempt (default: its last)"},
        {"other", "the other attempt as JOB or JOB:ATTEMPT (required)"}}},
      [&ctx](const Request& req, const PathParams& p) {
        auto id = JobIdText(p.at("id"), "id");
        if (!id.IsOk()) return ErrorResponse(id.GetStatus());
        const std::string other = QueryText(req, "other");
        if (other.empty())
          return ErrorResponse(Status::InvalidArgument(
              "other= is required: JOB or JOB:ATTEMPT to compare with", {app::kRequestFile, 0, "other"}));
        const std::string attempt = QueryText(req, "attempt");
        auto d = app::DiffAttemptEnvironments(
            ctx.meta, std::to_string(*id) + (attempt.empty() ? "" : ":" + attempt), other);
        if (!d.IsOk()) return ErrorResponse(app::RelocateRequestError(d.GetStatus(), app::kRequestFile));
        return JsonResponse(*d);
      }));
  return {};
}

}  // namespace kestrel::server
