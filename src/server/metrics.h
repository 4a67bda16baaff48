// What the HTTP transport counts for Prometheus (/metrics, text exposition
// format 0.0.4): requests by method, route pattern and status, a latency
// histogram per route, and the open event streams. The store's gauges
// (queue depth, failures, availability) are read per scrape in api.cc.
// Every label takes values from a bounded set (docs/server.md "Metrics"), so
// no request, however hostile, adds a series beyond them: methods by name
// only for the standard seven (MetricMethod), statuses by code only for the
// ones Kestrel answers with (MetricCode), routes by pattern (at most kMaxRoutes).
//
// Thread-safety: every method may be called from any thread (mu_ guards
// every count; checked by `scripts/lint.sh threads`).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "core/thread_annotations.h"

namespace kestrel::server {

class HttpMetrics {
 public:
  // Upper bounds of the latency buckets, seconds (+Inf is implicit).
  static constexpr std::array<double, 10> kBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025,
                                                      0.05,  0.1,    0.25,  0.5,  1.0};

  // Distinct route labels kept; later new ones count as "other". Above the
  // router's routes (~50), so in practice only a bug reaches it.
  static constexpr size_t kMaxRoutes = 200;

  // One finished response; `route` "" (no route matched) is labelled
  // "unmatched", `method` and `status` as MetricMethod / MetricCode say.
  void RecordRequest(const std::string& method, const std::string& route, int status, double seconds)
      EXCLUDES(mu_);
  void StreamOpened() EXCLUDES(mu_);
  void StreamClosed() EXCLUDES(mu_);
  int64_t StreamClients() const EXCLUDES(mu_);
  // `kestrel serve --workers N`: N local workers, each restart of worker k
  // (1-based) counted in kestrel_serve_worker_restarts_total{worker="k"}.
  void SetLocalWorkers(int n) EXCLUDES(mu_);
  void LocalWorkerRestarted(int k) EXCLUDES(mu_);

  // kestrel_http_requests_total, kestrel_http_request_duration_seconds,
  // kestrel_sse_clients (and kestrel_serve_worker_restarts_total with local
  // workers), each with its # HELP and # TYPE lines.
  std::string Render() const EXCLUDES(mu_);

 private:
  struct Latency {
    std::array<int64_t, kBuckets.size()> buckets{};  // not cumulative; Render sums them
    int64_t count = 0;
    double sum = 0;
  };
  mutable Mutex mu_;
  // method, route, code
  std::map<std::tuple<std::string, std::string, std::string>, int64_t> requests_ GUARDED_BY(mu_);
  std::map<std::string, Latency> latency_ GUARDED_BY(mu_);  // by route
  int64_t streams_ GUARDED_BY(mu_) = 0;
  std::map<int, int64_t> worker_restarts_ GUARDED_BY(mu_);  // by local worker number
};

// The method label: GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS as
// themselves, anything else (an invented method, "") "other".
std::string MetricMethod(const std::string& method);
// The code label: 200 201 204 206 304 400 401 403 404 405 408 409 411 413
// 415 416 429 431 500 503 as themselves, another status as its class ("4xx"),
// one outside 100-599 "other".
std::string MetricCode(int status);

// A Prometheus label value with '\\', '"' and newlines escaped.
std::string PromLabel(const std::string& value);

}  // namespace kestrel::server
