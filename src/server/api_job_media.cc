#include "server/api_job_media.h"

#include <limits>
#include <string>

#include "app/job_media.h"
#include "app/jobs.h"
#include "core/env.h"
#include "core/parse.h"
#include "server/query_params.h"

namespace kestrel::server {

Status AddJobMediaRoutes(Router& router, ApiContext& ctx) {
  KESTREL_RETURN_IF_ERROR(router.Add(
      "GET", "/api/jobs/{id}/samples",
      {"The epochs of a training job with prediction samples (val_samples), each with the attempt whose file "
       "is served (a later attempt wins) (`kestrel jobs samples ID`)"},
      [&ctx](const Request&, const PathParams& p) {
        auto id = JobIdText(p.at("id"));
        if (!id.IsOk()) return ErrorResponse(id.GetStatus());
        auto r = app::JobMedia(ctx.meta, Env::Default(), ctx.home).Epochs(*id);
        return r.IsOk() ? JsonResponse(app::JobSampleEpochsJson(*r)) : ErrorResponse(r.GetStatus());
      }));
  return router.Add(
      "GET", "/api/jobs/{id}/samples/{epoch}",
      {"One epoch's prediction samples: the first val_samples val images (dataset, version and SHA-256 for "
       "the "
       "dataset image route), their labels and the detections with score >= conf, boxes xyxy in original "
       "pixels (`kestrel jobs samples ID --epoch E`)"},
      [&ctx](const Request&, const PathParams& p) {
        auto id = JobIdText(p.at("id"));
        if (!id.IsOk()) return ErrorResponse(id.GetStatus());
        auto epoch =
            ParseInt64(p.at("epoch"), {app::kRequestFile, 0, "epoch"}, 1, 1'000'000, "an epoch (1-based)");
        if (!epoch.IsOk()) return ErrorResponse(epoch.GetStatus());
        auto r = app::JobMedia(ctx.meta, Env::Default(), ctx.home).Panel(*id, *epoch);
        return r.IsOk() ? JsonResponse(app::JobSamplePanelJson(*r)) : ErrorResponse(r.GetStatus());
      });
}

}  // namespace kestrel::server
