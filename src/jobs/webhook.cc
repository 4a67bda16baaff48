// Webhook configuration, bodies, signing and the libcurl dispatcher
// (contracts in webhook.h, protocol in docs/webhooks.md).
#include "jobs/webhook.h"

#include <curl/curl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/hash.h"
#include "core/json.h"
#include "core/thread_annotations.h"

namespace kestrel::jobs {
namespace {

using nlohmann::json;
using store::EventRecord;
using store::JobState;
using store::MetadataStore;

constexpr const char* kUserAgent = "kestrel-webhooks/1";

// libcurl's global init is thread-safe since 7.84, but doing it once here
// keeps older libraries correct too; nothing else in Kestrel uses curl.
void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

bool IsHttpUrl(const std::string& url) {
  return (url.rfind("http://", 0) == 0 && url.size() > 7) ||
         (url.rfind("https://", 0) == 0 && url.size() > 8);
}

Result<std::vector<Webhook>> ParseWebhooks(const std::string& text) {
  auto bad = [](const std::string& msg) { return Status::Corruption(msg, {"", 0, kWebhooksSetting}); };
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_array()) return bad("setting 'webhooks' is not a JSON list");
  std::vector<Webhook> out;
  for (const auto& e : j) {
    if (!e.is_object() || !e.contains("url") || !e["url"].is_string()) {
      return bad("setting 'webhooks' has an entry without a \"url\" string");
    }
    Webhook h;
    h.url = e["url"].get<std::string>();
    if (e.contains("secret") && e["secret"].is_string()) h.secret = e["secret"].get<std::string>();
    out.push_back(std::move(h));
  }
  return out;
}

std::string DumpWebhooks(const std::vector<Webhook>& hooks) {
  json j = json::array();
  for (const auto& h : hooks) j.push_back({{"url", h.url}, {"secret", h.secret}});
  return DumpJson(j);
}

// Read-modify-write of the hook list; the compare-and-set makes a concurrent
// edit (another `kestrel webhooks add`) retry instead of being overwritten.
template <typename F>
Status EditWebhooks(MetadataStore& store, int64_t now_ms, F&& edit) {
  for (int round = 0; round < 50; ++round) {
    auto cur = store.GetSetting(kWebhooksSetting);
    std::optional<std::string> expected;
    std::vector<Webhook> hooks;
    if (cur.IsOk()) {
      expected = *cur;
      KESTREL_ASSIGN_OR_RETURN(hooks, ParseWebhooks(*cur));
    } else if (cur.GetStatus().Code() != StatusCode::kNotFound) {
      return cur.GetStatus();
    }
    KESTREL_RETURN_IF_ERROR(edit(hooks));
    KESTREL_ASSIGN_OR_RETURN(
        bool wrote, store.CompareAndSetSetting(kWebhooksSetting, expected, DumpWebhooks(hooks), now_ms));
    if (wrote) return {};
  }
  return Status::Aborted("the webhook list kept changing during the edit; try again");
}

bool EventsAfter(MetadataStore& store, int64_t id, Status* st) {
  auto r = store.ReadEvents(id, 0, 1);
  if (!r.IsOk()) {
    *st = r.GetStatus();
    return false;
  }
  return !r->empty();
}

// ---- one HTTP POST (easy handle), used blocking or inside a multi handle.

size_t KeepSomeResponse(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<std::string*>(user);
  size_t bytes = size * n;
  if (s->size() < 2048) s->append(data, std::min(bytes, 2048 - s->size()));
  return bytes;
}

struct Transfer {
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  std::string body;
  std::string response;
  char error[CURL_ERROR_SIZE] = {};

  Transfer() = default;
  Transfer(const Transfer&) = delete;
  Transfer& operator=(const Transfer&) = delete;
  ~Transfer() {
    if (headers != nullptr) curl_slist_free_all(headers);
    if (easy != nullptr) curl_easy_cleanup(easy);
  }
};

std::unique_ptr<Transfer> MakeTransfer(const Webhook& hook, const std::string& event_id,
                                       const std::string& type, const std::string& body, int attempt,
                                       const WebhookOptions& o) {
  InitCurlOnce();
  auto t = std::make_unique<Transfer>();
  t->easy = curl_easy_init();
  if (t->easy == nullptr) return nullptr;
  t->body = body;
  std::vector<std::string> lines = {
      "Content-Type: application/json",
      "X-Kestrel-Event: " + event_id,
      "X-Kestrel-Event-Type: " + type,
      "X-Kestrel-Delivery-Attempt: " + std::to_string(attempt),
      "Expect:",  // no 100-continue round trip for small bodies
  };
  if (!hook.secret.empty()) lines.push_back("X-Kestrel-Signature: " + WebhookSignature(hook.secret, body));
  for (const auto& l : lines) t->headers = curl_slist_append(t->headers, l.c_str());
  CURL* e = t->easy;
  curl_easy_setopt(e, CURLOPT_URL, hook.url.c_str());
  curl_easy_setopt(e, CURLOPT_POST, 1L);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, t->body.data());
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(t->body.size()));
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
  curl_easy_setopt(e, CURLOPT_USERAGENT, kUserAgent);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(o.connect_timeout_ms));
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(o.timeout_ms));
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for DNS timeouts
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);  // a redirect would resend the body elsewhere
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, KeepSomeResponse);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &t->response);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->error);
  return t;
}

DeliveryResult Finish(Transfer& t, CURLcode rc) {
  DeliveryResult r;
  long code = 0;
  curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &code);
  r.http_status = code;
  if (rc != CURLE_OK) {
    r.error = t.error[0] != '\0' ? t.error : curl_easy_strerror(rc);
  } else if (code >= 200 && code < 300) {
    r.ok = true;
  } else {
    r.error = "HTTP " + std::to_string(code);
  }
  return r;
}

std::string NewDispatcherId() {
  static std::atomic<int> counter{0};
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return std::string(host[0] != '\0' ? host : "host") + ":" + std::to_string(::getpid()) + ":" +
         std::to_string(counter.fetch_add(1) + 1);
}

// Lease value "<owner> <until_ms>"; "" = free.
void ParseLease(const std::string& v, std::string* owner, int64_t* until_ms) {
  size_t sp = v.rfind(' ');
  if (sp == std::string::npos) {
    owner->clear();
    *until_ms = 0;
    return;
  }
  *owner = v.substr(0, sp);
  *until_ms = std::strtoll(v.c_str() + sp + 1, nullptr, 10);
}

}  // namespace

// ---------------------------------------------------------------------------

Result<std::vector<Webhook>> LoadWebhooks(MetadataStore& store) {
  auto cur = store.GetSetting(kWebhooksSetting);
  if (!cur.IsOk()) {
    if (cur.GetStatus().Code() == StatusCode::kNotFound) return std::vector<Webhook>{};
    return cur.GetStatus();
  }
  return ParseWebhooks(*cur);
}

std::string WebhookCursorSetting(const std::string& url) {
  return "webhook.cursor." + Sha256Hex(url).substr(0, 16);
}

Result<int64_t> LatestEventId(MetadataStore& store) {
  // The largest id M is the smallest x with no event after x: double until
  // nothing follows, then bisect. About 2 log2(M) primary-key lookups.
  Status st;
  if (!EventsAfter(store, 0, &st)) return st.IsOk() ? Result<int64_t>(int64_t{0}) : Result<int64_t>(st);
  int64_t lo = 0, hi = 1;
  while (EventsAfter(store, hi, &st)) {
    lo = hi;
    hi *= 2;
  }
  if (!st.IsOk()) return st;
  while (hi - lo > 1) {  // events after lo, none after hi
    int64_t mid = lo + (hi - lo) / 2;
    bool more = EventsAfter(store, mid, &st);
    if (!st.IsOk()) return st;
    (more ? lo : hi) = mid;
  }
  return hi;
}

Status AddWebhook(MetadataStore& store, const Webhook& hook, int64_t now_ms) {
  if (!IsHttpUrl(hook.url)) {
    return Status::InvalidArgument("webhook URL must start with http:// or https://, not '" + hook.url + "'",
                                   {"command line", 0, "url"});
  }
  bool is_new = false;
  KESTREL_RETURN_IF_ERROR(EditWebhooks(store, now_ms, [&](std::vector<Webhook>& hooks) -> Status {
    auto it = std::find_if(hooks.begin(), hooks.end(), [&](const Webhook& h) { return h.url == hook.url; });
    is_new = it == hooks.end();
    if (is_new) {
      hooks.push_back(hook);
    } else {
      it->secret = hook.secret;
    }
    return {};
  }));
  if (!is_new) return {};
  // From now on, not the history. A dispatcher that saw the URL before this
  // write starts at the newest event too (see Fill()), so the race is benign.
  KESTREL_ASSIGN_OR_RETURN(int64_t latest, LatestEventId(store));
  return store.PutSetting(WebhookCursorSetting(hook.url), std::to_string(latest), now_ms);
}

Status RemoveWebhook(MetadataStore& store, const std::string& url, int64_t now_ms) {
  return EditWebhooks(store, now_ms, [&](std::vector<Webhook>& hooks) -> Status {
    auto it = std::find_if(hooks.begin(), hooks.end(), [&](const Webhook& h) { return h.url == url; });
    if (it == hooks.end()) return Status::NotFound("no webhook '" + url + "' is configured", {"", 0, "url"});
    hooks.erase(it);
    return {};
  });
}

std::string WebhookSignature(std::string_view secret, std::string_view body) {
  return "sha256=" + HmacSha256Hex(secret, body);
}

Result<std::string> BuildWebhookBody(MetadataStore& store, const EventRecord& ev) {
  json payload = json::parse(ev.payload_json, nullptr, false);
  if (payload.is_discarded() || !payload.is_object()) payload = json::object();
  const std::string state = payload.value("state", "");
  const int64_t attempt = payload.value("attempt", ev.attempt);
  json body = {{"type", "job.state"}, {"event_id", ev.id},  {"time_ms", ev.created_ms},
               {"job_id", ev.job_id}, {"attempt", attempt}, {"state", state}};
  if (payload.contains("reason")) body["reason"] = payload["reason"];
  if (payload.contains("not_before_ms")) body["not_before_ms"] = payload["not_before_ms"];
  KESTREL_ASSIGN_OR_RETURN(store::JobRecord job, store.GetJob(ev.job_id));
  body["dataset_version"] = job.spec.dataset_version;
  body["priority"] = store::JobPriorityName(job.spec.priority);
  JobState s = JobState::kQueued;
  store::ParseJobState(state, &s);
  if (s == JobState::kSucceeded) {
    json result = json::parse(job.result_json, nullptr, false);
    body["metrics"] = result.is_discarded() ? json(job.result_json) : result;
  }
  if ((s == JobState::kFailedRetryable || s == JobState::kFailedPermanent) && attempt > 0) {
    KESTREL_ASSIGN_OR_RETURN(auto attempts, store.ListAttempts(ev.job_id));
    for (const auto& a : attempts) {
      if (a.attempt != attempt || a.ended_ms == 0 || a.succeeded) continue;
      body["failure_class"] = store::FailureClassName(a.failure_class);
      body["infrastructure"] = a.infrastructure;
      body["stage"] = store::FailureStageName(a.stage);
      body["exit_code"] = a.exit_code;
      body["signal"] = a.signal;
      body["message"] = a.message;
    }
  }
  return DumpJson(body);
}

Status ValidateWebhookOptions(const WebhookOptions& o) {
  auto bad = [](const std::string& field, const std::string& msg) {
    return Status::InvalidArgument(msg, {"", 0, field});
  };
  if (o.connect_timeout_ms <= 0 || o.timeout_ms <= 0)
    return bad("timeout_ms", "webhook timeouts must be > 0 ms");
  if (o.max_attempts < 1) return bad("max_attempts", "max_attempts must be >= 1");
  if (o.initial_backoff_ms < 0 || o.max_backoff_ms < o.initial_backoff_ms) {
    return bad("backoff", "need 0 <= initial_backoff_ms <= max_backoff_ms");
  }
  if (o.poll_interval_ms < 0) return bad("poll_interval_ms", "poll_interval_ms must be >= 0");
  if (o.lease_ms < 3 * o.poll_interval_ms || o.lease_ms <= 0) {
    return bad("lease_ms",
               "lease_ms must be > 0 and at least 3 poll intervals (the lease is renewed every poll)");
  }
  if (o.batch < 1) return bad("batch", "batch must be >= 1");
  return {};
}

DeliveryResult PostWebhook(const Webhook& hook, const std::string& event_id, const std::string& type,
                           const std::string& body, const WebhookOptions& options) {
  auto t = MakeTransfer(hook, event_id, type, body, 1, options);
  if (t == nullptr) return {false, 0, "curl_easy_init failed"};
  CURLcode rc = curl_easy_perform(t->easy);
  return Finish(*t, rc);
}

// ---------------------------------------------------------------------------
// Dispatcher.

namespace {

struct HookState {
  Webhook hook;
  std::string cursor_key;
  int64_t cursor = -1;            // the stored cursor as we last read or wrote it; -1 = reload
  int64_t scanned = 0;            // events up to this id are queued or handled
  bool more = false;              // the last read filled a whole batch
  std::deque<EventRecord> queue;  // "state" events after the cursor, oldest first
  std::string body;               // body of queue.front() once built (same bytes on every retry)
  std::unique_ptr<Transfer> transfer;
  int failures = 0;  // failed attempts of queue.front()
  int64_t next_try_us = 0;

  void Reset() {
    cursor = -1;
    scanned = 0;
    more = false;
    queue.clear();
    body.clear();
    failures = 0;
    next_try_us = 0;
  }
};

}  // namespace

struct WebhookDispatcher::Impl {
  Impl(std::unique_ptr<MetadataStore> s, Env& e, WebhookOptions o)
      : store(std::move(s)), env(e), opt(o), id(NewDispatcherId()) {
    InitCurlOnce();
    multi = curl_multi_init();
  }
  ~Impl() {
    for (auto& [url, h] : hooks) Abort(h);
    curl_multi_cleanup(multi);
  }

  Status PollOnce(int64_t wait_ms);
  Status RefreshHooks();
  Status HoldLease();
  Status Fill(HookState& h, bool refresh);
  Status AdvanceCursor(HookState& h, int64_t to);
  Status StartTransfer(HookState& h);
  Status Pump(int64_t wait_ms);
  Status Complete(HookState& h, CURLcode rc);
  void Abort(HookState& h);
  void ReleaseLease();
  int64_t IdleMs();
  void Loop();
  void StopThread();
  Status Drain(int64_t timeout_ms);

  std::unique_ptr<MetadataStore> store;
  Env& env;
  WebhookOptions opt;
  std::string id;
  CURLM* multi = nullptr;
  std::map<std::string, HookState> hooks;  // by URL; node addresses are stable (CURLINFO_PRIVATE)
  bool have_refreshed = false;
  int64_t last_refresh_us = 0;
  bool leader = false;
  std::string lease_value;  // what we last wrote

  std::atomic<int64_t> delivered{0}, failed{0}, dropped{0};
  std::atomic<bool> leader_flag{false};

  std::thread thread;
  Mutex mu;
  CondVar cv;                        // signalled when stop is set
  bool stop GUARDED_BY(mu) = false;  // the background thread is to end
};

Status WebhookDispatcher::Impl::PollOnce(int64_t wait_ms) {
  int64_t now_us = env.NowMicros();
  bool refresh = !have_refreshed || now_us - last_refresh_us >= opt.poll_interval_ms * 1000;
  if (refresh) {
    have_refreshed = true;
    last_refresh_us = now_us;
    KESTREL_RETURN_IF_ERROR(RefreshHooks());
    KESTREL_RETURN_IF_ERROR(HoldLease());
  }
  if (!leader) return {};
  Status first;
  for (auto& [url, h] : hooks) {
    if (h.transfer != nullptr) continue;
    Status s = Fill(h, refresh);
    if (s.IsOk() && !h.queue.empty() && now_us >= h.next_try_us) s = StartTransfer(h);
    if (!s.IsOk() && first.IsOk()) first = s;
  }
  Status p = Pump(wait_ms);
  return first.IsOk() ? p : first;
}

Status WebhookDispatcher::Impl::RefreshHooks() {
  KESTREL_ASSIGN_OR_RETURN(auto configured, LoadWebhooks(*store));
  std::map<std::string, Webhook> want;
  for (auto& h : configured) want[h.url] = h;
  for (auto it = hooks.begin(); it != hooks.end();) {
    if (want.count(it->first) == 0) {
      Abort(it->second);
      it = hooks.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [url, h] : want) {
    auto it = hooks.find(url);
    if (it == hooks.end()) {
      HookState st;
      st.hook = h;
      st.cursor_key = WebhookCursorSetting(url);
      hooks.emplace(url, std::move(st));
    } else if (it->second.hook.secret != h.secret) {
      it->second.hook.secret = h.secret;
      it->second.body.clear();  // nothing in flight is re-signed; the next attempt is
    }
  }
  return {};
}

Status WebhookDispatcher::Impl::HoldLease() {
  const int64_t now = env.UnixMillis();
  auto cur = store->GetSetting(kWebhookLeaseSetting);
  std::optional<std::string> expected;
  if (cur.IsOk()) {
    expected = *cur;
  } else if (cur.GetStatus().Code() != StatusCode::kNotFound) {
    return cur.GetStatus();
  }
  std::string owner;
  int64_t until = 0;
  if (expected) ParseLease(*expected, &owner, &until);
  const bool mine = owner == id;
  const bool free = owner.empty() || until <= now;
  bool won = false;
  if (mine || free) {
    std::string value = id + " " + std::to_string(now + opt.lease_ms);
    KESTREL_ASSIGN_OR_RETURN(won, store->CompareAndSetSetting(kWebhookLeaseSetting, expected, value, now));
    if (won) lease_value = value;
  }
  if (leader && !won) {
    spdlog::warn("webhooks: dispatcher {} lost its lease to '{}'; stopping deliveries", id, owner);
  }
  if (!won) {
    // Another dispatcher moves the cursors now: forget what we read.
    for (auto& [url, h] : hooks) {
      Abort(h);
      h.Reset();
    }
  }
  leader = won;
  leader_flag = won;
  return {};
}

Status WebhookDispatcher::Impl::Fill(HookState& h, bool refresh) {
  if (!h.queue.empty()) return {};
  if (h.cursor < 0) {
    auto cur = store->GetSetting(h.cursor_key);
    if (!cur.IsOk() && cur.GetStatus().Code() != StatusCode::kNotFound) return cur.GetStatus();
    if (!cur.IsOk()) {
      // Configured without `kestrel webhooks add` (or that command's cursor
      // write failed): start at the newest event rather than the history.
      KESTREL_ASSIGN_OR_RETURN(int64_t latest, LatestEventId(*store));
      KESTREL_ASSIGN_OR_RETURN(
          bool wrote,
          store->CompareAndSetSetting(h.cursor_key, std::nullopt, std::to_string(latest), env.UnixMillis()));
      (void)wrote;  // either way the stored value is now authoritative
      KESTREL_ASSIGN_OR_RETURN(cur, store->GetSetting(h.cursor_key));
    }
    h.cursor = std::strtoll(cur->c_str(), nullptr, 10);
    h.scanned = h.cursor;
    refresh = true;
  }
  if (!refresh && !h.more) return {};
  KESTREL_ASSIGN_OR_RETURN(auto events, store->ReadEvents(h.scanned, 0, opt.batch));
  h.more = static_cast<int>(events.size()) == opt.batch;
  for (auto& ev : events) {
    h.scanned = ev.id;
    if (ev.kind == "state") h.queue.push_back(std::move(ev));
  }
  // Only other kinds of events: move the cursor past them so a restart does
  // not read them again.
  if (h.queue.empty() && h.scanned > h.cursor) return AdvanceCursor(h, h.scanned);
  return {};
}

Status WebhookDispatcher::Impl::AdvanceCursor(HookState& h, int64_t to) {
  KESTREL_ASSIGN_OR_RETURN(bool wrote, store->CompareAndSetSetting(h.cursor_key, std::to_string(h.cursor),
                                                                   std::to_string(to), env.UnixMillis()));
  if (wrote) {
    h.cursor = to;
    return {};
  }
  // Someone else moved it: we lost the lease without noticing yet (paused
  // past lease_ms). Reload; the next lease check settles who delivers.
  spdlog::warn("webhooks: cursor of {} moved under dispatcher {}; reloading", h.hook.url, id);
  Abort(h);
  h.Reset();
  return {};
}

Status WebhookDispatcher::Impl::StartTransfer(HookState& h) {
  const EventRecord& ev = h.queue.front();
  if (h.body.empty()) {
    KESTREL_ASSIGN_OR_RETURN(h.body, BuildWebhookBody(*store, ev));
  }
  h.transfer = MakeTransfer(h.hook, std::to_string(ev.id), "job.state", h.body, h.failures + 1, opt);
  if (h.transfer == nullptr) return Status::Internal("webhooks: curl_easy_init failed");
  curl_easy_setopt(h.transfer->easy, CURLOPT_PRIVATE, static_cast<void*>(&h));
  CURLMcode mc = curl_multi_add_handle(multi, h.transfer->easy);
  if (mc != CURLM_OK) {
    h.transfer.reset();
    return Status::Internal(std::string("webhooks: curl_multi_add_handle: ") + curl_multi_strerror(mc));
  }
  return {};
}

Status WebhookDispatcher::Impl::Pump(int64_t wait_ms) {
  int running = 0;
  curl_multi_perform(multi, &running);
  if (running > 0 && wait_ms > 0) {
    curl_multi_poll(multi, nullptr, 0, static_cast<int>(wait_ms), nullptr);
    curl_multi_perform(multi, &running);
  }
  Status first;
  int left = 0;
  while (CURLMsg* m = curl_multi_info_read(multi, &left)) {
    if (m->msg != CURLMSG_DONE) continue;
    CURLcode rc = m->data.result;
    void* priv = nullptr;
    curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &priv);
    Status s = Complete(*static_cast<HookState*>(priv), rc);  // invalidates m
    if (!s.IsOk() && first.IsOk()) first = s;
  }
  return first;
}

Status WebhookDispatcher::Impl::Complete(HookState& h, CURLcode rc) {
  DeliveryResult r = Finish(*h.transfer, rc);
  Abort(h);
  const int64_t event_id = h.queue.front().id;
  if (!r.ok) {
    ++failed;
    ++h.failures;
    if (h.failures < opt.max_attempts) {
      int64_t backoff = opt.initial_backoff_ms;
      for (int i = 1; i < h.failures && backoff < opt.max_backoff_ms; ++i) backoff *= 2;
      backoff = std::min(backoff, opt.max_backoff_ms);
      h.next_try_us = env.NowMicros() + backoff * 1000;
      spdlog::debug("webhooks: {} event {} attempt {} failed ({}); retry in {} ms", h.hook.url, event_id,
                    h.failures, r.error, backoff);
      return {};
    }
    ++dropped;
    spdlog::warn("webhooks: giving up on event {} for {} after {} attempts (last: {})", event_id, h.hook.url,
                 h.failures, r.error);
  } else {
    ++delivered;
  }
  h.queue.pop_front();
  h.body.clear();
  h.failures = 0;
  h.next_try_us = 0;
  // If this write fails (store down) the cursor stays behind in the store;
  // the next successful write carries it past this event, and a restart in
  // between resends it (at least once).
  return AdvanceCursor(h, event_id);
}

void WebhookDispatcher::Impl::Abort(HookState& h) {
  if (h.transfer == nullptr) return;
  curl_multi_remove_handle(multi, h.transfer->easy);
  h.transfer.reset();
}

void WebhookDispatcher::Impl::ReleaseLease() {
  if (!leader) return;
  auto r = store->CompareAndSetSetting(kWebhookLeaseSetting, lease_value, "", env.UnixMillis());
  if (!r.IsOk()) spdlog::warn("webhooks: could not release the lease: {}", r.GetStatus().ToString());
  leader = false;
  leader_flag = false;
}

// How long the background thread may sleep before the next round.
int64_t WebhookDispatcher::Impl::IdleMs() {
  int64_t ms = std::max<int64_t>(opt.poll_interval_ms, 1);
  const int64_t now_us = env.NowMicros();
  for (auto& [url, h] : hooks) {
    if (h.transfer != nullptr || h.more) return 0;
    if (!h.queue.empty()) ms = std::min(ms, std::max<int64_t>(0, (h.next_try_us - now_us) / 1000 + 1));
  }
  return ms;
}

void WebhookDispatcher::Impl::Loop() {
  std::string last_error;
  while (true) {
    {
      MutexLock l(mu);
      if (stop) return;
    }
    Status s = PollOnce(100);
    if (!s.IsOk() && s.ToString() != last_error) {
      spdlog::warn("webhooks: {}", s.ToString());
    }
    last_error = s.IsOk() ? "" : s.ToString();
    int64_t idle = s.IsOk() ? IdleMs() : std::max<int64_t>(opt.poll_interval_ms, 100);
    if (idle <= 0) continue;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(idle);
    MutexLock l(mu);
    while (!stop) {
      if (!cv.WaitUntil(mu, until)) break;  // idle is up
    }
  }
}

void WebhookDispatcher::Impl::StopThread() {
  {
    MutexLock l(mu);
    stop = true;
  }
  cv.SignalAll();
  curl_multi_wakeup(multi);
  if (thread.joinable()) thread.join();
}

Status WebhookDispatcher::Impl::Drain(int64_t timeout_ms) {
  const int64_t deadline_us = env.NowMicros() + timeout_ms * 1000;
  KESTREL_ASSIGN_OR_RETURN(const int64_t target, LatestEventId(*store));
  have_refreshed = false;  // read the configuration, the lease and the newest events now
  while (true) {
    Status s = PollOnce(50);
    if (s.IsOk()) {
      if (!leader) return {};  // the lease holder delivers them
      bool done = true;
      for (auto& [url, h] : hooks) {
        done = done && h.cursor >= 0 && h.scanned >= target && !h.more && h.queue.empty() &&
               h.transfer == nullptr;
      }
      if (done) return {};
    }
    const int64_t now_us = env.NowMicros();
    if (now_us >= deadline_us) {
      return Status::Unavailable("webhooks: events up to " + std::to_string(target) +
                                 " not all delivered within " + std::to_string(timeout_ms) + " ms" +
                                 (s.IsOk() ? "" : ": " + s.ToString()));
    }
    // Backing off (or a store error): wait, but not past the deadline.
    const int64_t idle_ms = s.IsOk() ? std::min<int64_t>(IdleMs(), 50) : 50;
    if (idle_ms > 0) env.SleepMicros(std::min(idle_ms * 1000, deadline_us - now_us));
  }
}

WebhookDispatcher::WebhookDispatcher(std::unique_ptr<MetadataStore> store, Env& env, WebhookOptions options)
    : impl_(std::make_unique<Impl>(std::move(store), env, options)) {}

WebhookDispatcher::~WebhookDispatcher() { Stop(); }

Status WebhookDispatcher::PollOnce(int64_t wait_ms) { return impl_->PollOnce(wait_ms); }

void WebhookDispatcher::Start() {
  if (impl_->thread.joinable()) return;
  {
    MutexLock l(impl_->mu);
    impl_->stop = false;
  }
  impl_->thread = std::thread([this] { impl_->Loop(); });
}

void WebhookDispatcher::Stop() {
  impl_->StopThread();
  for (auto& [url, h] : impl_->hooks) impl_->Abort(h);
  impl_->ReleaseLease();
}

Status WebhookDispatcher::Drain(int64_t timeout_ms) {
  impl_->StopThread();
  Status s = impl_->Drain(timeout_ms);
  Stop();
  return s;
}

WebhookDispatcher::Stats WebhookDispatcher::GetStats() const {
  Stats s;
  s.delivered = impl_->delivered.load();
  s.failed_attempts = impl_->failed.load();
  s.dropped = impl_->dropped.load();
  s.leader = impl_->leader_flag.load();
  return s;
}

const std::string& WebhookDispatcher::Id() const { return impl_->id; }

Result<std::unique_ptr<WebhookDispatcher>> StartWebhookDispatcher(const std::string& store_url, Env& env,
                                                                  WebhookOptions options) {
  KESTREL_RETURN_IF_ERROR(ValidateWebhookOptions(options));
  KESTREL_ASSIGN_OR_RETURN(auto store, MetadataStore::Open(store_url));
  auto d = std::make_unique<WebhookDispatcher>(std::move(store), env, options);
  d->Start();
  return d;
}

}  // namespace kestrel::jobs
