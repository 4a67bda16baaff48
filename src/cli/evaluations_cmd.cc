// `kestrel evaluations list|show|images|confusion|compare`: the evaluations
// (succeeded val jobs) and their comparison, thin over app/evaluations.h;
// --json prints the documents the API routes return (docs/server.md
// "Evaluations and comparisons").
#include <cstdint>
#include <memory>
#include <string>

#include "app/evaluations.h"
#include "app/jobs.h"
#include "cli/cli.h"
#include "core/env.h"

namespace kestrel::cli {
namespace {

// Request errors (a bad filter) are the command line's (exit 2).
Status OnCommandLine(const Status& s) { return app::RelocateRequestError(s, "command line"); }

// Opens the stores and runs `use` over app::Evaluations: its text or JSON view.
template <typename Use, typename Text, typename View>
CommandResult Run(const Context& ctx, Use use, Text text, View view) {
  KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
  app::Evaluations evals(*stores.meta, *stores.blobs, Env::Default(), ctx.home);
  auto r = use(evals);
  if (!r.IsOk()) return OnCommandLine(r.GetStatus());
  return Output{text(*r), view(*r)};
}

}  // namespace

void AddEvaluationCommands(CLI::App& app, Context& ctx, int* exit_code) {
  CLI::App* group = app.add_subcommand(
      "evaluations",
      "Evaluations (succeeded `submit kind=val` jobs) and their comparison (docs/evaluation.md)");
  group->require_subcommand(1);

  auto lr = std::make_shared<app::EvaluationListRequest>();
  CLI::App* list = group->add_subcommand("list", "Evaluations, newest first");
  list->add_option(
      "--model", lr->model,
      "only this model: a name (every version), NAME@vN, NAME@TAG, an id prefix, or model= as given");
  list->add_option("--dataset", lr->dataset, "only this dataset: NAME or NAME@vN");
  list->add_option("--split", lr->split, "only this split: train, val or test");
  list->add_option("--limit", lr->limit, "at most this many")->capture_default_str()->check(IntArg(1, 1000));
  list->add_option("--offset", lr->offset, "skip this many of the newest")
      ->capture_default_str()
      ->check(IntArg(0));
  list->callback(Callback(ctx, exit_code, [&ctx, lr]() -> CommandResult {
    return Run(
        ctx, [&](app::Evaluations& e) { return e.List(*lr); }, app::EvaluationListText,
        app::EvaluationListJson);
  }));

  auto show_id = std::make_shared<int64_t>(0);
  CLI::App* show =
      group->add_subcommand("show", "An evaluation: summary, per-class metrics, the result record");
  show->add_option("id", *show_id, "evaluation id (the val job's id)")->required()->check(IntArg(1));
  show->callback(Callback(ctx, exit_code, [&ctx, show_id]() -> CommandResult {
    return Run(
        ctx, [&](app::Evaluations& e) { return e.Show(*show_id); }, app::EvaluationDetailText,
        app::EvaluationDetailJson);
  }));

  struct ImagesArgs {
    int64_t id = 0;
    app::EvaluationImagesRequest req;
  };
  auto ia = std::make_shared<ImagesArgs>();
  CLI::App* images = group->add_subcommand(
      "images",
      "An evaluation's images with labels, stored detections and right/wrong (needs save_json=true)");
  images->add_option("id", ia->id, "evaluation id")->required()->check(IntArg(1));
  images->add_option("--filter", ia->req.filter, "all, right or wrong")->capture_default_str();
  images->add_option("--sha", ia->req.sha,
                     "only the image with this SHA-256 (64 lowercase hex digits, as the list names it)");
  images->add_option("--offset", ia->req.offset, "skip this many images")
      ->capture_default_str()
      ->check(IntArg(0));
  images->add_option("--limit", ia->req.limit, "at most this many images")
      ->capture_default_str()
      ->check(IntArg(1, 500));
  images->callback(Callback(ctx, exit_code, [&ctx, ia]() -> CommandResult {
    return Run(
        ctx, [&](app::Evaluations& e) { return e.Images(ia->id, ia->req); },
        [](const app::EvaluationImages& p) {
          std::string out = std::to_string(p.total) + " images (" + p.filter + "); right " +
                            std::to_string(p.right) + ", wrong " + std::to_string(p.wrong) + "\n";
          for (const auto& im : p.images)
            out += std::string(im["right"].get<bool>() ? "right " : "wrong ") +
                   im["path"].get<std::string>() + " (" + std::to_string(im["labels"].size()) + " labels, " +
                   std::to_string(im["detections"].size()) + " detections)\n";
          return out;
        },
        app::EvaluationImagesJson);
  }));

  struct CellArgs {
    int64_t id = 0;
    app::ConfusionCellRequest req;
  };
  auto ca = std::make_shared<CellArgs>();
  CLI::App* cell =
      group->add_subcommand("confusion", "The boxes behind one confusion-matrix cell (needs save_json=true)");
  cell->add_option("id", ca->id, "evaluation id")->required()->check(IntArg(1));
  cell->add_option("--gt", ca->req.gt, "the label class (nc = background)")->required()->check(IntArg(0));
  cell->add_option("--pred", ca->req.pred, "the predicted class (nc = background)")
      ->required()
      ->check(IntArg(0));
  cell->add_option("--offset", ca->req.offset, "skip this many boxes")
      ->capture_default_str()
      ->check(IntArg(0));
  cell->add_option("--limit", ca->req.limit, "at most this many boxes")
      ->capture_default_str()
      ->check(IntArg(1, 1000));
  cell->callback(Callback(ctx, exit_code, [&ctx, ca]() -> CommandResult {
    return Run(
        ctx, [&](app::Evaluations& e) { return e.Confusion(ca->id, ca->req); },
        [](const app::ConfusionCell& c) {
          const nlohmann::json v = app::ConfusionCellJson(c);
          std::string out = "label " + v["gt_name"].get<std::string>() + ", predicted " +
                            v["pred_name"].get<std::string>() + ": " + std::to_string(c.count) +
                            " (the record's cell: " + std::to_string(c.matrix_value) + ")\n";
          for (const auto& b : c.boxes) out += b["path"].get<std::string>() + "\n";
          return out;
        },
        app::ConfusionCellJson);
  }));

  auto ids = std::make_shared<std::pair<int64_t, int64_t>>(0, 0);
  CLI::App* compare = group->add_subcommand(
      "compare", "Two evaluations of the same dataset version and split: deltas (B - A), right/wrong images");
  compare->add_option("a", ids->first, "evaluation A")->required()->check(IntArg(1));
  compare->add_option("b", ids->second, "evaluation B")->required()->check(IntArg(1));
  compare->callback(Callback(ctx, exit_code, [&ctx, ids]() -> CommandResult {
    return Run(
        ctx, [&](app::Evaluations& e) { return e.Compare(ids->first, ids->second); }, app::ComparisonText,
        app::ComparisonJson);
  }));
}

}  // namespace kestrel::cli
