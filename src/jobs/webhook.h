// Webhooks: on every job state change (a "state" event in the store), POST a
// signed JSON body to each configured URL (docs/webhooks.md).
//
// Configuration and progress live in the store's settings table, so every
// worker and server shares them and delivery resumes after a restart:
//   "webhooks"                 JSON list of {"url", "secret"}
//   "webhook.cursor.<key>"     last event id handled for that URL (decimal)
//   "webhook.lease"            "<dispatcher id> <until unix ms>": the one
//                              dispatcher allowed to deliver right now
// Delivery is at least once per (URL, event id): only the lease holder
// delivers and it advances a URL's cursor (compare-and-set) after the
// receiver answered 2xx, so several dispatchers never send the same event
// twice in normal operation; a crash between the answer and the cursor
// write resends that one event (receivers dedup on X-Kestrel-Event).
//
// libcurl and the transfers stay in webhook.cc.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "store/metadata_store.h"

namespace kestrel::jobs {

struct Webhook {
  std::string url;     // http:// or https://
  std::string secret;  // HMAC-SHA256 key; "" = unsigned (no signature header)
};

inline constexpr const char* kWebhooksSetting = "webhooks";
inline constexpr const char* kWebhookLeaseSetting = "webhook.lease";

// Configured hooks; an unset setting is an empty list.
Result<std::vector<Webhook>> LoadWebhooks(store::MetadataStore& store);
// Adds `hook` (or replaces the secret of the same URL) with a compare-and-set
// loop, so concurrent edits are not lost. A new URL's cursor starts at the
// newest event: it receives changes from now on, not the history.
// kInvalidArgument for a URL that is not http(s)://.
Status AddWebhook(store::MetadataStore& store, const Webhook& hook, int64_t now_ms);
// kNotFound when `url` is not configured.
Status RemoveWebhook(store::MetadataStore& store, const std::string& url, int64_t now_ms);
// "webhook.cursor." + first 16 hex chars of sha256(url).
std::string WebhookCursorSetting(const std::string& url);
// Highest event id in the store (0 when there is none). Ids are dense, so a
// few indexed probes find it.
Result<int64_t> LatestEventId(store::MetadataStore& store);

// "sha256=" + lowercase hex HMAC-SHA256(secret, body): the
// X-Kestrel-Signature header value.
std::string WebhookSignature(std::string_view secret, std::string_view body);
// The JSON body for one "state" event (fields: docs/webhooks.md). Reads the
// job (metrics on success) and its attempt (failure class on failure).
Result<std::string> BuildWebhookBody(store::MetadataStore& store, const store::EventRecord& event);

struct WebhookOptions {
  int64_t connect_timeout_ms = 5'000;  // TCP + TLS connect
  int64_t timeout_ms = 10'000;         // whole request, connect included
  int max_attempts = 12;               // per URL and event; then it is dropped (logged, counted)
  int64_t initial_backoff_ms = 1'000;  // wait after the first failure; doubles per failure
  int64_t max_backoff_ms = 600'000;    // cap of the doubling
  int64_t poll_interval_ms = 1'000;    // how often the store is read (config, lease, events)
  int64_t lease_ms = 30'000;           // a silent dispatcher's lease expires after this
  int batch = 100;                     // events read per query
};
Status ValidateWebhookOptions(const WebhookOptions& o);

struct DeliveryResult {
  bool ok = false;          // the receiver answered 2xx
  int64_t http_status = 0;  // 0 when there was no HTTP answer
  std::string error;        // transport error or "HTTP 500" when !ok
};
// One blocking, signed POST (`kestrel webhooks test`): headers as for events,
// with X-Kestrel-Event = `event_id` and X-Kestrel-Event-Type = `type`.
DeliveryResult PostWebhook(const Webhook& hook, const std::string& event_id, const std::string& type,
                           const std::string& body, const WebhookOptions& options);

// Tails the store's events and delivers them to every configured URL. Each
// URL has its own cursor, queue and backoff, and all transfers run
// concurrently without blocking (libcurl multi), so a slow or dead URL
// delays only itself.
//
// Thread-safety: PollOnce() from one thread at a time, or Start() for a
// background thread (then do not call PollOnce()). Stop() and GetStats()
// may be called from any thread; Drain() from the owner, not while
// PollOnce() runs.
class WebhookDispatcher {
 public:
  // `store` is the dispatcher's own connection. `env`: NowMicros for backoff,
  // UnixSeconds for the lease; must outlive the dispatcher.
  WebhookDispatcher(std::unique_ptr<store::MetadataStore> store, Env& env, WebhookOptions options = {});
  ~WebhookDispatcher();  // Stop()
  WebhookDispatcher(const WebhookDispatcher&) = delete;
  WebhookDispatcher& operator=(const WebhookDispatcher&) = delete;

  // One round: re-read the configuration, take or renew the lease, start due
  // deliveries, wait up to `wait_ms` for transfers, record the answers.
  // Errors are store failures (the next round tries again).
  Status PollOnce(int64_t wait_ms = 0);
  // Runs PollOnce in a background thread until Stop().
  void Start();
  // Stops the thread, abandons transfers in flight (their events stay
  // undelivered and are sent again by the next lease holder) and releases
  // the lease. Idempotent.
  void Stop();
  // For a process about to exit: stops the thread, then delivers, on the
  // calling thread, every state event that exists now (up to
  // LatestEventId at the call) to every configured URL, then Stop()s. So
  // the last changes a worker made (its job's `succeeded`) are not left for
  // whichever dispatcher runs next. Returns at once when another dispatcher
  // holds the lease (that one delivers them); kUnavailable when
  // `timeout_ms` passed first (what is left goes to the next lease holder).
  Status Drain(int64_t timeout_ms);

  struct Stats {
    int64_t delivered = 0;        // 2xx answers
    int64_t failed_attempts = 0;  // non-2xx answers and transport errors
    int64_t dropped = 0;          // events given up after max_attempts
    bool leader = false;          // held the lease in the last round
  };
  Stats GetStats() const;
  // Unique per dispatcher: "<host>:<pid>:<n>".
  const std::string& Id() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Entry point for long-running processes other than a Worker (which runs
// its own, WorkerOptions::webhooks): opens a connection to `store_url` and
// starts a dispatcher in the background. Always starts one (it costs one
// settings read per poll interval while no URL is configured), so
// `kestrel webhooks add` takes effect without a restart. Keep the returned
// object alive while the process runs; its destructor stops it and
// releases the lease.
Result<std::unique_ptr<WebhookDispatcher>> StartWebhookDispatcher(const std::string& store_url, Env& env,
                                                                  WebhookOptions options = {});

}  // namespace kestrel::jobs
