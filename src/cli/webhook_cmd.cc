// `kestrel webhooks add|list|remove|test`: the URLs that receive signed job
// state changes (docs/webhooks.md). The list lives in the store's settings,
// so every worker's dispatcher picks a change up within its poll interval.
#include <algorithm>
#include <iostream>

#include "cli/cli.h"
#include "core/env.h"
#include "core/hash.h"
#include "core/json.h"
#include "core/parse.h"
#include "jobs/webhook.h"

namespace kestrel::cli {
namespace {

// The metadata store alone (the command needs no blobs).
Result<std::unique_ptr<store::MetadataStore>> OpenMeta(const Context& ctx) {
  KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
  return std::move(stores.meta);
}

}  // namespace

void AddWebhookCommands(CLI::App& app, Context& ctx, int* exit_code) {
  CLI::App* wh = app.add_subcommand("webhooks", "POST signed job state changes to URLs (docs/webhooks.md)");
  wh->require_subcommand(1);

  struct State {
    std::string url, secret;
    bool no_secret = false;
    int64_t timeout_ms = 10'000;
  };
  auto st = std::make_shared<State>();

  CLI::App* add = wh->add_subcommand("add", "Add a URL (or replace its secret); it gets changes from now on");
  add->add_option("url", st->url, "http:// or https:// URL")->required();
  add->add_option("--secret", st->secret,
                  "HMAC-SHA256 key (default: a new random 32-byte hex secret, printed)");
  add->add_flag("--no-secret", st->no_secret, "send unsigned requests");
  add->callback(Callback(ctx, exit_code, [&ctx, st]() -> CommandResult {
    if (st->no_secret && !st->secret.empty())
      return Status::InvalidArgument("--secret and --no-secret exclude each other",
                                     {"command line", 0, "secret"});
    jobs::Webhook hook{st->url, st->secret};
    const bool generated = hook.secret.empty() && !st->no_secret;
    if (generated) hook.secret = RandomHex(32);
    if (generated && hook.secret.empty()) return Status::Internal("could not generate a random secret");
    KESTREL_ASSIGN_OR_RETURN(std::unique_ptr<store::MetadataStore> meta, OpenMeta(ctx));
    Status s = jobs::AddWebhook(*meta, hook, Env::Default().UnixMillis());
    if (!s.IsOk()) return s;
    std::string text = "added webhook " + hook.url + (hook.secret.empty() ? " (unsigned)" : "");
    if (generated)
      text += "\nsecret: " + hook.secret + "\n(verify X-Kestrel-Signature with it; it is not shown again)";
    nlohmann::json j = {{"ok", true}, {"url", hook.url}, {"signed", !hook.secret.empty()}};
    if (generated) j["secret"] = hook.secret;
    return Output{text, j};
  }));

  CLI::App* list =
      wh->add_subcommand("list", "List URLs (secrets are never shown) and their delivery cursors");
  list->callback(Callback(ctx, exit_code, [&ctx]() -> CommandResult {
    KESTREL_ASSIGN_OR_RETURN(std::unique_ptr<store::MetadataStore> meta, OpenMeta(ctx));
    auto hooks = jobs::LoadWebhooks(*meta);
    if (!hooks.IsOk()) return hooks.GetStatus();
    auto latest = jobs::LatestEventId(*meta);
    if (!latest.IsOk()) return latest.GetStatus();
    std::string lease = "none";
    if (auto l = meta->GetSetting(jobs::kWebhookLeaseSetting); l.IsOk() && !l->empty()) lease = *l;
    nlohmann::json arr = nlohmann::json::array();
    std::string text = hooks->empty() ? "no webhooks configured (kestrel webhooks add URL)\n" : "";
    for (const auto& h : *hooks) {
      int64_t cursor = 0;
      if (auto c = meta->GetSetting(jobs::WebhookCursorSetting(h.url)); c.IsOk()) {
        auto parsed = ParseInt64(*c, {});  // a stored value; 0 when unreadable
        if (parsed.IsOk()) cursor = *parsed;
      }
      arr.push_back({{"url", h.url}, {"signed", !h.secret.empty()}, {"cursor", cursor}});
      text += h.url + (h.secret.empty() ? "  unsigned" : "  signed") + "  delivered up to event " +
              std::to_string(cursor) + " of " + std::to_string(*latest) + "\n";
    }
    if (!hooks->empty()) text += "dispatcher lease: " + lease + "\n";
    return Output{text, {{"ok", true}, {"webhooks", arr}, {"latest_event", *latest}, {"lease", lease}}};
  }));

  CLI::App* rm = wh->add_subcommand("remove", "Stop sending to a URL");
  rm->add_option("url", st->url, "a configured URL")->required();
  rm->callback(Callback(ctx, exit_code, [&ctx, st]() -> CommandResult {
    KESTREL_ASSIGN_OR_RETURN(std::unique_ptr<store::MetadataStore> meta, OpenMeta(ctx));
    Status s = jobs::RemoveWebhook(*meta, st->url, Env::Default().UnixMillis());
    if (!s.IsOk()) return s;
    return Output{"removed webhook " + st->url, {{"ok", true}, {"url", st->url}}};
  }));

  CLI::App* test = wh->add_subcommand("test", "Send a signed ping to a URL now and report the answer");
  test->add_option("url", st->url, "a configured URL (or any URL with --secret)")->required();
  test->add_option("--secret", st->secret, "sign with this key instead of the configured one");
  test->add_option("--timeout-ms", st->timeout_ms, "whole-request timeout")
      ->capture_default_str()
      ->check(IntArg(1, 3'600'000));
  test->callback(Callback(ctx, exit_code, [&ctx, st]() -> CommandResult {
    jobs::Webhook hook{st->url, st->secret};
    if (hook.secret.empty()) {
      KESTREL_ASSIGN_OR_RETURN(std::unique_ptr<store::MetadataStore> meta, OpenMeta(ctx));
      auto hooks = jobs::LoadWebhooks(*meta);
      if (!hooks.IsOk()) return hooks.GetStatus();
      bool found = false;
      for (const auto& h : *hooks) {
        if (h.url == st->url) {
          hook = h;
          found = true;
        }
      }
      if (!found)
        return Status::NotFound(
            "no webhook '" + st->url + "' is configured (add it, or pass --secret to sign a ping)",
            {"command line", 0, "url"});
    }
    if (st->timeout_ms <= 0)
      return Status::InvalidArgument("--timeout-ms must be > 0", {"command line", 0, "timeout-ms"});
    jobs::WebhookOptions opt;
    opt.timeout_ms = st->timeout_ms;
    opt.connect_timeout_ms = std::min<int64_t>(opt.connect_timeout_ms, st->timeout_ms);
    const std::string id = "ping-" + RandomHex(8);
    nlohmann::json body = {{"type", "ping"},
                           {"event_id", id},
                           {"time_ms", Env::Default().UnixMillis()},
                           {"message", "kestrel webhook test"}};
    jobs::DeliveryResult r = jobs::PostWebhook(hook, id, "ping", DumpJson(body), opt);
    nlohmann::json j = {{"ok", r.ok},
                        {"url", hook.url},
                        {"event", id},
                        {"http_status", r.http_status},
                        {"signed", !hook.secret.empty()}};
    if (!r.ok) {
      // Fail()'s error document plus what the ping got back.
      std::cerr << "error: ping to " << hook.url << " failed: " << r.error << std::endl;
      j["error"] = {{"code", "unavailable"},
                    {"message", "ping to " + hook.url + " failed: " + r.error},
                    {"file", ""},
                    {"line", 0},
                    {"field", "url"}};
      if (ctx.json) PrintJsonDocument(j);
      return CommandResult::Reported(kExitFailure);
    }
    return Output{"ping " + id + " delivered to " + hook.url + ": HTTP " + std::to_string(r.http_status), j};
  }));
}

}  // namespace kestrel::cli
