#include "server/api_evaluations.h"

#include <limits>
#include <string>

#include "app/evaluations.h"
#include "app/jobs.h"
#include "core/env.h"
#include "core/parse.h"
#include "server/query_params.h"

namespace kestrel::server {
namespace {

// An evaluation id (a val job's id), named by `field`.
Result<int64_t> EvaluationId(const std::string& text, const std::string& field) {
  return ParseInt64(text, {app::kRequestFile, 0, field}, 1, std::numeric_limits<int64_t>::max(),
                    "an evaluation id (a val job's id, a positive number)");
}

app::Evaluations Use(ApiContext& ctx) {
  return app::Evaluations(ctx.meta, ctx.blobs, Env::Default(), ctx.home);
}

template <typename T, typename View>
Response Reply(const Result<T>& r, View view) {
  return r.IsOk() ? JsonResponse(view(*r)) : ErrorResponse(r.GetStatus());
}

}  // namespace

Status AddEvaluationRoutes(Router& r, ApiContext& ctx) {
  KESTREL_RETURN_IF_ERROR(
      r.Add("GET", "/api/evaluations",
            {"Evaluations (succeeded val jobs), newest first (`kestrel evaluations list`)",
             {{"model",
               "only evaluations of this model: a name (every version), NAME@vN, NAME@TAG, an id prefix, or "
               "model= as submitted"},
              {"dataset", "only evaluations on this dataset: NAME or NAME@vN"},
              {"split", "only this split: train, val or test"},
              {"limit", "at most this many, 1..1000 (default 100)"},
              {"offset", "skip this many (default 0); the response's next_offset is the next page"}}},
            [&ctx](const Request& req, const PathParams&) {
              app::EvaluationListRequest lr;
              lr.model = QueryText(req, "model");
              lr.dataset = QueryText(req, "dataset");
              lr.split = QueryText(req, "split");
              if (Status s = QueryInts(req, {{"limit", &lr.limit}, {"offset", &lr.offset}}); !s.IsOk())
                return ErrorResponse(s);
              return Reply(Use(ctx).List(lr), app::EvaluationListJson);
            }));
  KESTREL_RETURN_IF_ERROR(
      r.Add("GET", "/api/evaluations/{id}",
            {"An evaluation: its summary, the full result record and the mean curves at IoU 0.5 (101 points; "
             "null for records without them) (`kestrel evaluations show ID`)"},
            [&ctx](const Request&, const PathParams& p) {
              auto id = EvaluationId(p.at("id"), "id");
              if (!id.IsOk()) return ErrorResponse(id.GetStatus());
              return Reply(Use(ctx).Show(*id), app::EvaluationDetailJson);
            }));
  KESTREL_RETURN_IF_ERROR(r.Add(
      "GET", "/api/evaluations/{id}/images",
      {"A page of an evaluation's images (or one image's, sha=): labels, the stored detections (score >= "
       "0.001, at most 300) and whether the image is right by `kestrel compare`'s rule; 409 without stored "
       "predictions (save_json=true)",
       {{"filter", "all (default), right or wrong"},
        {"sha",
         "only the rows of the image with this SHA-256 (64 lowercase hex digits, as the rows name it); "
         "404 when the split has no such image"},
        {"offset", "skip this many matching images (default 0)"},
        {"limit", "at most this many images, 1..500 (default 50)"}}},
      [&ctx](const Request& req, const PathParams& p) {
        auto id = EvaluationId(p.at("id"), "id");
        if (!id.IsOk()) return ErrorResponse(id.GetStatus());
        app::EvaluationImagesRequest ir;
        ir.filter = QueryText(req, "filter");
        ir.sha = QueryText(req, "sha");
        if (Status s = QueryInts(req, {{"limit", &ir.limit}, {"offset", &ir.offset}}); !s.IsOk())
          return ErrorResponse(s);
        return Reply(Use(ctx).Images(*id, ir), app::EvaluationImagesJson);
      }));
  KESTREL_RETURN_IF_ERROR(r.Add(
      "GET", "/api/evaluations/{id}/confusion",
      {"The boxes behind one confusion-matrix cell (matrix[pred][gt], index nc = background), recomputed "
       "from the stored predictions; count equals the record's cell; 409 without stored predictions",
       {{"gt", "the cell's column: the label class 0..nc (nc = background), required"},
        {"pred", "the cell's row: the predicted class 0..nc (nc = background), required"},
        {"offset", "skip this many boxes (default 0)"},
        {"limit", "at most this many boxes, 1..1000 (default 100)"}}},
      [&ctx](const Request& req, const PathParams& p) {
        auto id = EvaluationId(p.at("id"), "id");
        if (!id.IsOk()) return ErrorResponse(id.GetStatus());
        app::ConfusionCellRequest cr;
        for (const auto& [name, dst] : {std::pair{"gt", &cr.gt}, std::pair{"pred", &cr.pred}}) {
          if (QueryText(req, name).empty())
            return ErrorResponse(
                Status::InvalidArgument(std::string(name) + " is required (a class id, nc = background)",
                                        {app::kRequestFile, 0, name}));
          auto v = QueryInt(req, name, -1);
          if (!v.IsOk()) return ErrorResponse(v.GetStatus());
          *dst = *v;
        }
        if (Status s = QueryInts(req, {{"limit", &cr.limit}, {"offset", &cr.offset}}); !s.IsOk())
          return ErrorResponse(s);
        return Reply(Use(ctx).Confusion(*id, cr), app::ConfusionCellJson);
      }));
  KESTREL_RETURN_IF_ERROR(r.Add(
      "GET", "/api/comparisons",
      {"Two evaluations of the same dataset version and split side by side: metric deltas (B - A, as "
       "`kestrel compare`), the images one gets right and the other wrong, both mean curves and confusion "
       "matrices (`kestrel evaluations compare A B`)",
       {{"a", "evaluation A (a val job id), required"}, {"b", "evaluation B (a val job id), required"}}},
      [&ctx](const Request& req, const PathParams&) {
        int64_t ids[2] = {0, 0};
        const char* names[2] = {"a", "b"};
        for (int i = 0; i < 2; ++i) {
          const std::string v = QueryText(req, names[i]);
          if (v.empty())
            return ErrorResponse(
                Status::InvalidArgument(std::string(names[i]) + "=ID is required (an evaluation id)",
                                        {app::kRequestFile, 0, names[i]}));
          auto id = EvaluationId(v, names[i]);
          if (!id.IsOk()) return ErrorResponse(id.GetStatus());
          ids[i] = *id;
        }
        return Reply(Use(ctx).Compare(ids[0], ids[1]), app::ComparisonJson);
      }));
  return {};
}

}  // namespace kestrel::server
