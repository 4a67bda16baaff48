#include "server/api_dataset_audits.h"

#include <string>

#include "app/dataset_audits.h"
#include "core/parse.h"
#include "server/query_params.h"

namespace kestrel::server {

Status AddDatasetAuditRoutes(Router& router, ApiContext& ctx) {
  KESTREL_RETURN_IF_ERROR(router.Add(
      "GET", "/api/datasets/{name}/audits",
      {"The stored label audits of a dataset version (NAME or NAME@VERSION), oldest first: number, "
       "created_ms, model, split, images, items and the item count per kind (`kestrel dataset audit` stores "
       "each)"},
      [&ctx](const Request&, const PathParams& p) {
        auto list = app::ListAudits(ctx.meta, p.at("name"));
        if (!list.IsOk()) return ErrorResponse(list.GetStatus());
        nlohmann::json arr = nlohmann::json::array();
        for (const app::StoredAudit& a : *list) arr.push_back(app::StoredAuditJson(a));
        return JsonResponse({{"ok", true}, {"audits", arr}});
      }));
  return router.Add(
      "GET", "/api/datasets/{name}/audits/{n}",
      {"A page of one stored audit's items (n: its number, or latest) with the version's labels and the "
       "audit's predictions of every image on the page (pixels, xyxy)",
       {{"kind",
         "errors (default: every kind but ok), all, missing, spurious, wrong_class, localisation or ok"},
        {"sort", "score (default, highest first), -score, image or kind"},
        {"offset", "skip this many items (default 0)"},
        {"limit", "at most this many items, 1..500 (default 50)"}}},
      [&ctx](const Request& req, const PathParams& p) {
        app::AuditPageRequest r;
        r.spec = p.at("name");
        const std::string& n = p.at("n");
        if (n != "latest") {
          auto number = ParseInt64(n, {"", 0, "n"}, 1, INT64_MAX, "an audit number or latest");
          if (!number.IsOk()) return ErrorResponse(number.GetStatus());
          r.number = *number;
        }
        if (std::string kind = QueryText(req, "kind"); !kind.empty()) r.kind = kind;
        if (std::string sort = QueryText(req, "sort"); !sort.empty()) r.sort = sort;
        if (Status s = QueryInts(req, {{"offset", &r.offset}, {"limit", &r.limit}}); !s.IsOk())
          return ErrorResponse(s);
        auto page = app::AuditPage(ctx.meta, ctx.blobs, r);
        return page.IsOk() ? JsonResponse(*page) : ErrorResponse(page.GetStatus());
      });
}

}  // namespace kestrel::server
