#include "server/metrics.h"

#include <algorithm>
#include <sstream>

namespace kestrel::server {
namespace {

// The methods counted by name; any other (an invented one the router answers
// 405 or 404) is counted as "other", so a client cannot add series.
constexpr std::array<const char*, 7> kMethods = {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"};

// The statuses Kestrel answers with, counted by code; any other as its class
// ("4xx"). A route or the transport picks the status, never the client, but
// the bound holds whatever a future route answers.
constexpr std::array<int, 20> kCodes = {200, 201, 204, 206, 304, 400, 401, 403, 404, 405,
                                        408, 409, 411, 413, 415, 416, 429, 431, 500, 503};

}  // namespace

std::string MetricMethod(const std::string& method) {
  for (const char* m : kMethods)
    if (method == m) return method;
  return "other";
}

std::string MetricCode(int status) {
  if (std::find(kCodes.begin(), kCodes.end(), status) != kCodes.end()) return std::to_string(status);
  if (status >= 100 && status <= 599) return std::to_string(status / 100) + "xx";
  return "other";
}

std::string PromLabel(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void HttpMetrics::RecordRequest(const std::string& method, const std::string& route, int status,
                                double seconds) {
  MutexLock lock(mu_);
  // A route label is a registered pattern; past kMaxRoutes of them (more
  // than the router has) "other", so the bound holds whatever the caller passes.
  std::string label = route.empty() ? "unmatched" : route;
  if (latency_.count(label) == 0 && latency_.size() >= kMaxRoutes) label = "other";
  ++requests_[{MetricMethod(method), label, MetricCode(status)}];
  Latency& l = latency_[label];
  size_t b = 0;
  while (b < kBuckets.size() && seconds > kBuckets[b]) ++b;
  if (b < kBuckets.size()) ++l.buckets[b];
  ++l.count;
  l.sum += seconds;
}

void HttpMetrics::StreamOpened() {
  MutexLock lock(mu_);
  ++streams_;
}

void HttpMetrics::StreamClosed() {
  MutexLock lock(mu_);
  --streams_;
}

int64_t HttpMetrics::StreamClients() const {
  MutexLock lock(mu_);
  return streams_;
}

std::string HttpMetrics::Render() const {
  MutexLock lock(mu_);
  std::ostringstream o;
  o << "# HELP kestrel_http_requests_total HTTP requests answered, by method, route pattern and status.\n"
    << "# TYPE kestrel_http_requests_total counter\n";
  for (const auto& [key, n] : requests_) {
    const auto& [method, route, code] = key;
    o << "kestrel_http_requests_total{method=\"" << PromLabel(method) << "\",route=\"" << PromLabel(route)
      << "\",code=\"" << code << "\"} " << n << "\n";
  }
  o << "# HELP kestrel_http_request_duration_seconds Time from a parsed request to its response, by route.\n"
    << "# TYPE kestrel_http_request_duration_seconds histogram\n";
  for (const auto& [route, l] : latency_) {
    const std::string r = PromLabel(route);
    int64_t cumulative = 0;
    for (size_t b = 0; b < kBuckets.size(); ++b) {
      cumulative += l.buckets[b];
      o << "kestrel_http_request_duration_seconds_bucket{route=\"" << r << "\",le=\"" << kBuckets[b] << "\"} "
        << cumulative << "\n";
    }
    o << "kestrel_http_request_duration_seconds_bucket{route=\"" << r << "\",le=\"+Inf\"} " << l.count << "\n"
      << "kestrel_http_request_duration_seconds_sum{route=\"" << r << "\"} " << l.sum << "\n"
      << "kestrel_http_request_duration_seconds_count{route=\"" << r << "\"} " << l.count << "\n";
  }
  o << "# HELP kestrel_sse_clients Open Server-Sent Event streams.\n"
    << "# TYPE kestrel_sse_clients gauge\n"
    << "kestrel_sse_clients " << streams_ << "\n";
  if (!worker_restarts_.empty()) {
    o << "# HELP kestrel_serve_worker_restarts_total Restarts of each local worker (serve --workers) after "
         "it "
         "exited.\n"
      << "# TYPE kestrel_serve_worker_restarts_total counter\n";
    for (const auto& [k, n] : worker_restarts_)
      o << "kestrel_serve_worker_restarts_total{worker=\"" << k << "\"} " << n << "\n";
  }
  return o.str();
}

void HttpMetrics::SetLocalWorkers(int n) {
  MutexLock lock(mu_);
  for (int k = 1; k <= n; ++k) worker_restarts_.try_emplace(k, 0);
}

void HttpMetrics::LocalWorkerRestarted(int k) {
  MutexLock lock(mu_);
  ++worker_restarts_[k];
}

}  // namespace kestrel::server
