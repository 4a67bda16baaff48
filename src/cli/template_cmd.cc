// `kestrel template save|show|list|diff` (docs/templates.md): a thin adapter
// over app/templates.h — parse, call, print. The JSON documents carry
// app::TemplateJson / TemplateSaveJson / ConfigDiffJson unchanged (plus "ok").
#include <cstdio>
#include <ctime>

#include "app/jobs.h"
#include "app/templates.h"
#include "cli/cli.h"
#include "core/env.h"
#include "core/json.h"
#include "core/utf8.h"

namespace kestrel::cli {
namespace {

using nlohmann::json;

std::string FormatMs(int64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%SZ", &tm);
  return buf;
}

// A JSON value as the user would type it after key=.
std::string ValueText(const json& v) {
  if (v.is_null()) return "(absent)";
  if (v.is_string()) return EscapeInvalidUtf8(v.get<std::string>());
  return DumpJson(v);
}

std::string KeysText(const store::TemplateRecord& t) {
  std::string out;
  auto keys = json::parse(t.keys_json, nullptr, false);
  if (!keys.is_object()) return "    (unreadable keys)\n";
  for (auto it = keys.begin(); it != keys.end(); ++it) {
    out += "    " + EscapeInvalidUtf8(it.key()) + "=" + ValueText(it.value()) + "\n";
  }
  return out;
}

// `body(library)`'s result, with the store open (or the error opening it).
template <typename F>
CommandResult WithLibrary(const Context& ctx, F&& body) {
  KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
  app::TemplateLibrary lib(*stores.meta);
  return body(lib);
}

json Ok(json view) {
  view["ok"] = true;
  return view;
}

}  // namespace

void AddTemplateCommands(CLI::App& app, Context& ctx, int* exit_code) {
  CLI::App* tc = app.add_subcommand("template", "Named, versioned sets of submit keys (docs/templates.md)");
  tc->require_subcommand(1);

  struct SaveArgs {
    std::string name;
    std::vector<std::string> keys;
  };
  auto sa = std::make_shared<SaveArgs>();
  CLI::App* save =
      tc->add_subcommand("save", "Validate key=value submit keys and save them as NAME's next version");
  save->add_option("name", sa->name, "template name")->required();
  save->add_option("key=value", sa->keys, "train keys and job keys, as `kestrel submit` takes them");
  save->callback(Callback(ctx, exit_code, [&ctx, sa]() -> CommandResult {
    return WithLibrary(ctx, [&](app::TemplateLibrary& lib) -> CommandResult {
      auto r = lib.Save(sa->name, sa->keys, Env::Default().UnixMillis());
      if (!r.IsOk()) return app::RelocateRequestError(r.GetStatus(), "command line");
      const std::string ref = EscapeInvalidUtf8(app::TemplateRef(r->tpl));
      std::string text = (r->created ? "saved " + ref : "unchanged: identical keys are already " + ref) +
                         "\n" + KeysText(r->tpl);
      return Output{text, Ok(app::TemplateSaveJson(*r))};
    });
  }));

  auto show_ref = std::make_shared<std::string>();
  CLI::App* show = tc->add_subcommand("show", "A template version's keys and its effective config");
  show->add_option("template", *show_ref, "NAME (newest version) or NAME@vN")->required();
  show->callback(Callback(ctx, exit_code, [&ctx, show_ref]() -> CommandResult {
    return WithLibrary(ctx, [&](app::TemplateLibrary& lib) -> CommandResult {
      auto t = lib.Resolve(*show_ref);
      if (!t.IsOk()) return app::RelocateRequestError(t.GetStatus(), "command line");
      std::string text = EscapeInvalidUtf8(app::TemplateRef(*t)) + "  saved " + FormatMs(t->created_ms) +
                         "  content " + t->content_sha.substr(0, 12) + "\n  keys:\n" + KeysText(*t);
      return Output{text, {{"ok", true}, {"template", app::TemplateJson(*t, true)}}};
    });
  }));

  auto list_name = std::make_shared<std::string>();
  CLI::App* list = tc->add_subcommand("list", "Templates (newest version of each), or every version of NAME");
  list->add_option("name", *list_name, "list every version of this template");
  list->callback(Callback(ctx, exit_code, [&ctx, list_name]() -> CommandResult {
    return WithLibrary(ctx, [&](app::TemplateLibrary& lib) -> CommandResult {
      auto all = lib.List(*list_name);
      if (!all.IsOk()) return app::RelocateRequestError(all.GetStatus(), "command line");
      std::string text;
      char line[512];
      std::snprintf(line, sizeof(line), "%-28s %-21s %s\n", "TEMPLATE", "SAVED", "KEYS");
      text += line;
      for (const auto& t : *all) {
        std::string keys;
        auto kj = json::parse(t.keys_json, nullptr, false);
        if (kj.is_object()) {
          for (auto it = kj.begin(); it != kj.end(); ++it) {
            keys += (keys.empty() ? "" : " ") + EscapeInvalidUtf8(it.key()) + "=" + ValueText(it.value());
          }
        }
        std::snprintf(line, sizeof(line), "%-28s %-21s %s\n", EscapeInvalidUtf8(app::TemplateRef(t)).c_str(),
                      FormatMs(t.created_ms).c_str(), keys.c_str());
        text += line;
      }
      if (all->empty()) text = "no templates yet: kestrel template save NAME key=value ...\n";
      return Output{text, app::TemplateListJson(*all)};
    });
  }));

  auto diff_a = std::make_shared<std::string>(), diff_b = std::make_shared<std::string>();
  CLI::App* diff = tc->add_subcommand(
      "diff", "Key-by-key differences of two effective configs: templates (NAME, NAME@vN) or jobs (job:ID)");
  diff->add_option("a", *diff_a, "NAME, NAME@vN or job:ID")->required();
  diff->add_option("b", *diff_b, "NAME, NAME@vN or job:ID")->required();
  diff->callback(Callback(ctx, exit_code, [&ctx, diff_a, diff_b]() -> CommandResult {
    return WithLibrary(ctx, [&](app::TemplateLibrary& lib) -> CommandResult {
      auto d = lib.Diff(*diff_a, *diff_b);
      if (!d.IsOk()) return app::RelocateRequestError(d.GetStatus(), "command line");
      std::string text = "diff " + EscapeInvalidUtf8(d->a) + " -> " + EscapeInvalidUtf8(d->b) + ": " +
                         std::to_string(d->differences.size()) + " keys differ, " + std::to_string(d->same) +
                         " equal\n";
      for (const auto& x : d->differences) {
        text += "  " + EscapeInvalidUtf8(x.key) + ": " + ValueText(x.a) + " -> " + ValueText(x.b) + "\n";
      }
      return Output{text, Ok(app::ConfigDiffJson(*d))};
    });
  }));
}

}  // namespace kestrel::cli
