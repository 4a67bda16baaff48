// `kestrel tune key=value …` and `kestrel tune show|best|stop|list`
// (docs/tune.md, issue 32): a thin adapter over app/tune_study.h — parse,
// call, print. The JSON documents are app's views unchanged (the
// /api/studies routes return the same).
#include <filesystem>

#include "app/jobs.h"
#include "app/templates.h"
#include "app/tune_study.h"
#include "cli/cli.h"
#include "core/env.h"
#include "core/json.h"
#include "eval/study_plots.h"

namespace kestrel::cli {
namespace {

using nlohmann::json;

Status OnCommandLine(const Status& s) { return app::RelocateRequestError(s, "command line"); }

// `tune`'s key=value words are its positional option, so CLI11 hands a
// subcommand's stray word (`tune list extra`) to it: refused here as CLI11
// refuses one elsewhere.
Status NoStrayWords(const std::vector<std::string>& words) {
  if (words.empty()) return {};
  return Status::InvalidArgument("The following argument was not expected: " + words.front(),
                                 {"command line", 0, ""});
}

}  // namespace

void AddTuneCommands(CLI::App& app, Context& ctx, int* exit_code) {
  CLI::App* tc = app.add_subcommand(
      "tune", "Hyperparameter search over the job queue: a study of train jobs (TPE, ASHA; docs/tune.md)");
  tc->footer(
      "kestrel tune data=NAME model=M [template=T] [space=space.yaml] trials=50 parallel=4 epochs=30 "
      "metric=fitness direction=maximize sampler=tpe|random pruner=asha|median|none seed=0 [name=STUDY] "
      "[min_epochs=1 eta=3 multivariate=false] [train keys…]\n"
      "Creates the study (or attaches to it: same name and space) and queues its coordinator, a `tune` job "
      "that `kestrel worker`s run beside the trials. Without space= the default detection space "
      "(docs/tune.md).");
  auto keys = std::make_shared<std::vector<std::string>>();
  tc->add_option("key=value", *keys, "study keys and the train keys every trial shares");
  auto create = Callback(ctx, exit_code, [&ctx, keys]() -> CommandResult {
    if (keys->empty()) {
      return Status::InvalidArgument("kestrel tune needs data= and model= (see kestrel tune --help)",
                                     {"command line", 0, "data"});
    }
    KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
    app::TemplateLibrary lib(*stores.meta);
    auto expanded = lib.ExpandArgs(*keys);
    if (!expanded.IsOk()) return OnCommandLine(expanded.GetStatus());
    app::StudyRequest req;
    req.tokens = *expanded;
    req.read_space = [](const std::string& path) { return Env::Default().ReadFile(path, 1 << 20); };
    auto r = app::CreateStudy(*stores.meta, req, Env::Default().UnixMillis());
    if (!r.IsOk()) return OnCommandLine(r.GetStatus());
    std::string text =
        (r->created ? "created study " : "attached to study ") + r->study.name + " (" + r->study.state + ")";
    if (r->job_id != 0) {
      text +=
          ", coordinator job " + std::to_string(r->job_id) + (r->job_created ? " queued" : " (already live)");
    }
    text += "\nfollow it: kestrel tune show " + r->study.name + "\n";
    return Output{text, json{{"ok", true},
                             {"created", r->created},
                             {"study", r->study.name},
                             {"state", r->study.state},
                             {"job_id", r->job_id == 0 ? json(nullptr) : json(r->job_id)}}};
  });
  // The group's own callback also runs after a subcommand's: create only
  // when none was given.
  tc->callback([tc, create] {
    if (tc->get_subcommands().empty()) create();
  });

  struct ShowArgs {
    std::string study, plots;
  };
  auto sa = std::make_shared<ShowArgs>();
  CLI::App* show = tc->add_subcommand("show", "A study: settings, trials table, best trial, importances");
  show->add_option("study", sa->study, "study name")->required();
  show->add_option("--plots", sa->plots,
                   "write history.png, parallel_coordinates.png, slice.png and importances.png into this "
                   "folder (docs/tune.md \"Plots\")");
  show->callback(Callback(ctx, exit_code, [&ctx, sa, keys]() -> CommandResult {
    KESTREL_RETURN_IF_ERROR(NoStrayWords(*keys));
    KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
    auto doc = app::StudyShowJson(*stores.meta, sa->study);
    if (!doc.IsOk()) return OnCommandLine(doc.GetStatus());
    std::string text = app::StudyShowText(*doc);
    if (!sa->plots.empty()) {
      auto data = app::StudyPlotDataFor(*stores.meta, sa->study);
      if (!data.IsOk()) return OnCommandLine(data.GetStatus());
      KESTREL_RETURN_IF_ERROR(eval::WriteStudyPlots(Env::Default(), sa->plots, *data));
      json files = json::array();
      text += "plots:\n";
      for (const char* f : {"history.png", "parallel_coordinates.png", "slice.png", "importances.png"}) {
        const std::string path = (std::filesystem::path(sa->plots) / f).string();
        text += "  " + path + "\n";
        files.push_back(path);
      }
      (*doc)["plots"] = files;
    }
    return Output{text, *doc};
  }));

  CLI::App* list = tc->add_subcommand("list", "Every study, newest first");
  list->callback(Callback(ctx, exit_code, [&ctx, keys]() -> CommandResult {
    KESTREL_RETURN_IF_ERROR(NoStrayWords(*keys));
    KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
    KESTREL_ASSIGN_OR_RETURN(json doc, app::StudyListJson(*stores.meta));
    std::string text;
    for (const auto& s : doc["studies"]) {
      text += s["name"].get<std::string>() + "  " + s["state"].get<std::string>() + "  " + s["spent"].dump() +
              "/" + s["settings"]["trials"].dump() + " trials  best " +
              (s["best"].is_null() ? std::string("-") : s["best"]["value"].dump()) + "\n";
    }
    if (text.empty()) text = "no studies\n";
    return Output{text, doc};
  }));

  auto stop_name = std::make_shared<std::string>();
  CLI::App* stop = tc->add_subcommand("stop", "Stop a study: its coordinator cancels the live trials");
  stop->add_option("study", *stop_name, "study name")->required();
  stop->callback(Callback(ctx, exit_code, [&ctx, stop_name, keys]() -> CommandResult {
    KESTREL_RETURN_IF_ERROR(NoStrayWords(*keys));
    KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
    auto doc = app::StopStudy(*stores.meta, *stop_name, Env::Default().UnixMillis());
    if (!doc.IsOk()) return OnCommandLine(doc.GetStatus());
    return Output{"study " + *stop_name + ": " + (*doc)["study"]["state"].get<std::string>() + "\n", *doc};
  }));

  struct BestArgs {
    std::string study, save_template;
  };
  auto ba = std::make_shared<BestArgs>();
  CLI::App* best = tc->add_subcommand("best", "The best trial's train keys; --save-template NAME saves them");
  best->add_option("study", ba->study, "study name")->required();
  best->add_option("--save-template", ba->save_template, "save the keys as this config template");
  best->callback(Callback(ctx, exit_code, [&ctx, ba, keys]() -> CommandResult {
    KESTREL_RETURN_IF_ERROR(NoStrayWords(*keys));
    KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
    auto tokens = app::BestTrialTokens(*stores.meta, ba->study);
    if (!tokens.IsOk()) return OnCommandLine(tokens.GetStatus());
    std::string text;
    for (const auto& t : *tokens) text += t + "\n";
    json doc = {{"ok", true}, {"study", ba->study}, {"keys", *tokens}};
    if (!ba->save_template.empty()) {
      app::TemplateLibrary lib(*stores.meta);
      auto saved = lib.Save(ba->save_template, *tokens, Env::Default().UnixMillis());
      if (!saved.IsOk()) return OnCommandLine(saved.GetStatus());
      doc["template"] = app::TemplateSaveJson(*saved);
      text += "saved as template " + saved->tpl.name + "@v" + std::to_string(saved->tpl.seq) + "\n";
    }
    return Output{text, doc};
  }));
}

}  // namespace kestrel::cli
