#include "server/api_runs.h"

#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "app/run_table.h"
#include "server/query_params.h"

namespace kestrel::server {

Status AddRunRoutes(Router& router, ApiContext& ctx) {
  return router.Add(
      "GET", "/api/runs",
      {"A page of runs (jobs, training by default) with each run's name, tags, note, state, dataset, the "
       "config values asked for and a summary of each metric series (count, last, min, max and their x): "
       "the Runs page's table in one request (docs/server.md)",
       {{"kind", "only this kind (default train)"},
        {"state", "only these states, comma-separated"},
        {"dataset", "only runs on this dataset: NAME or NAME@VERSION"},
        {"search", "only runs whose name, a tag or the note contains this text"},
        {"keys", "comma-separated config keys to return per run (default: every key); at most 200"},
        {"metrics", "comma-separated series names to summarise per run (default: every series); at most 200"},
        {"ids",
         "comma-separated job ids (at most 100): exactly these runs, in this order, any kind (a report)"},
        {"before", "a job id: the runs after it, newest first (the previous page's next_cursor)"},
        {"limit", "at most this many, 1..1000 (default 200)"}}},
      [&ctx, cache = std::make_shared<app::RunSummaryCache>()](const Request& req, const PathParams&) {
        app::RunTableRequest r;
        auto limit = QueryInt(req, "limit", 200, 1, 1000, "an integer");
        if (!limit.IsOk()) return ErrorResponse(limit.GetStatus());
        auto before = QueryInt(req, "before", 0, 1, std::numeric_limits<int64_t>::max(),
                               "a job id (a positive number)");
        if (!before.IsOk()) return ErrorResponse(before.GetStatus());
        r.list.limit = *limit;
        r.list.before = *before;
        r.list.kind = QueryText(req, "kind");
        r.list.state = QueryText(req, "state");
        r.list.dataset = QueryText(req, "dataset");
        r.list.search = QueryText(req, "search");
        for (auto [name, list, all] :
             {std::tuple{"keys", &r.keys, &r.all_keys}, std::tuple{"metrics", &r.metrics, &r.all_metrics}}) {
          auto it = req.query.find(name);
          if (it == req.query.end()) continue;
          auto names = app::SplitNameList(it->second, name);
          if (!names.IsOk()) return ErrorResponse(names.GetStatus());
          *list = std::move(names).Value();
          *all = false;
        }
        if (auto it = req.query.find("ids"); it != req.query.end()) {
          auto names = app::SplitNameList(it->second, "ids", 100);
          if (!names.IsOk()) return ErrorResponse(names.GetStatus());
          for (const auto& text : *names) {
            auto id = JobIdText(text, "ids");
            if (!id.IsOk()) return ErrorResponse(id.GetStatus());
            r.ids.push_back(*id);
          }
        }
        auto doc = app::RunTableJson(ctx.meta, r, *cache);
        if (!doc.IsOk()) return ErrorResponse(doc.GetStatus());
        // Compact: hundreds of runs with every config key.
        return JsonResponse(*doc, 200, -1);
      });
}

}  // namespace kestrel::server
