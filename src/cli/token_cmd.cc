// `kestrel token create|list|revoke`: the API tokens of `kestrel serve`
// (docs/server.md "Auth"). Thin over app/tokens.h; the token text is printed
// by `create` only, once.
#include <chrono>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "app/jobs.h"
#include "app/tokens.h"
#include "cli/cli.h"
#include "core/env.h"

namespace kestrel::cli {
namespace {

std::string When(int64_t ms) {
  if (ms <= 0) return "-";
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  std::ostringstream o;
  o << std::put_time(&tm, "%Y-%m-%d %H:%M:%S");
  return o.str();
}

std::string Access(const store::ApiTokenRecord& t) { return t.read_only ? "read-only" : "read-write"; }

// The metadata store alone (the command needs no blobs).
Result<std::unique_ptr<store::MetadataStore>> OpenMeta(const Context& ctx) {
  KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
  return std::move(stores.meta);
}

// Request errors (a bad name) are the command line's here (exit 2).
Status OnCommandLine(const Status& s) { return app::RelocateRequestError(s, "command line"); }

}  // namespace

void AddTokenCommands(CLI::App& app, Context& ctx, int* exit_code) {
  CLI::App* token =
      app.add_subcommand("token", "API tokens for `kestrel serve` (Authorization: Bearer; docs/server.md)");
  token->require_subcommand(1);

  struct State {
    std::string name, ref;
    bool read_only = false;
  };
  auto st = std::make_shared<State>();

  CLI::App* create =
      token->add_subcommand("create", "Make a token; prints it once (only its hash is stored)");
  create->add_option("--name", st->name, "a name unique among live tokens (letters, digits, '-', '_', '.')")
      ->required();
  create->add_flag("--read-only", st->read_only, "the token may call read routes only");
  create->callback(Callback(ctx, exit_code, [&ctx, st]() -> CommandResult {
    KESTREL_ASSIGN_OR_RETURN(std::unique_ptr<store::MetadataStore> meta, OpenMeta(ctx));
    auto c = app::CreateToken(*meta, st->name, st->read_only, Env::Default().UnixMillis());
    if (!c.IsOk()) return OnCommandLine(c.GetStatus());
    const std::string text =
        "token " + c->record.name + " (id " + c->record.id + ", " + Access(c->record) + "):\n" + c->token +
        "\nkeep it now: it is not shown again (send it as `Authorization: Bearer TOKEN`)";
    return Output{text, app::CreatedTokenJson(*c)};
  }));

  CLI::App* list = token->add_subcommand("list", "Every token, revoked ones too (never the secrets)");
  list->callback(Callback(ctx, exit_code, [&ctx]() -> CommandResult {
    KESTREL_ASSIGN_OR_RETURN(std::unique_ptr<store::MetadataStore> meta, OpenMeta(ctx));
    auto all = app::ListTokens(*meta);
    if (!all.IsOk()) return all.GetStatus();
    nlohmann::json arr = nlohmann::json::array();
    std::ostringstream t;
    t << std::left << std::setw(20) << "NAME" << std::setw(14) << "ID" << std::setw(12) << "ACCESS"
      << std::setw(21) << "CREATED" << std::setw(21) << "LAST USED"
      << "REVOKED\n";
    for (const auto& rec : *all) {
      arr.push_back(app::TokenJson(rec));
      t << std::left << std::setw(20) << rec.name << std::setw(14) << rec.id << std::setw(12) << Access(rec)
        << std::setw(21) << When(rec.created_ms) << std::setw(21) << When(rec.last_used_ms)
        << When(rec.revoked_ms) << "\n";
    }
    if (all->empty()) t.str("no tokens (kestrel token create --name NAME)\n");
    return Output{t.str(), {{"ok", true}, {"tokens", arr}}};
  }));

  CLI::App* revoke = token->add_subcommand("revoke", "Revoke a token: the server refuses it from now on");
  revoke->add_option("token", st->ref, "the token's NAME (its live token) or ID")->required();
  revoke->callback(Callback(ctx, exit_code, [&ctx, st]() -> CommandResult {
    KESTREL_ASSIGN_OR_RETURN(std::unique_ptr<store::MetadataStore> meta, OpenMeta(ctx));
    auto r = app::RevokeToken(*meta, st->ref, Env::Default().UnixMillis());
    if (!r.IsOk()) return OnCommandLine(r.GetStatus());
    const std::string who = "token " + r->record.name + " (id " + r->record.id + ")";
    return Output{r->revoked ? "revoked " + who : who + " was already revoked",
                  {{"ok", true}, {"revoked", r->revoked}, {"token", app::TokenJson(r->record)}}};
  }));
}

}  // namespace kestrel::cli
