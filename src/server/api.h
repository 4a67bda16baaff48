// The read API (docs/server.md): the routes of `kestrel serve` over the
// application layer, each returning the JSON view `kestrel … --json` prints
// for the same question; Prometheus /metrics; the event streams; and the
// OpenAPI document of the routes. ApiServer puts them on HTTP.
//
// Thread-safety: `meta` is used by the server's I/O thread only; blocking
// routes (RouteDoc::blocking) open their own store (ApiContext::meta_url).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "server/api_ls.h"
#include "server/data_roots.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/router.h"
#include "store/artifact_store.h"
#include "store/job_types.h"
#include "store/metadata_store.h"

namespace kestrel::server {

// What the handlers borrow; everything must outlive the router.
struct ApiContext {
  store::MetadataStore& meta;
  store::ArtifactStore& blobs;
  HttpMetrics& metrics;
  std::string home;          // the Kestrel home (stats' disk figures)
  int event_page = 500;      // events an event-stream poll reads at most
  bool public_read = false;  // read routes without a token (docs/server.md "Auth")
  DataRoots data_roots;      // where POST /api/datasets/import may read (none: it is refused)
  // The largest export file GET /api/models/{ref}/exports/{id}/file serves
  // (it is read whole into the response).
  uint64_t export_file_limit = uint64_t{512} << 20;
  // POST /api/datasets/upload: the zip's size limit (the transport's,
  // ServerOptions::upload_limit_bytes); it may expand to 4x that, in at most
  // upload_max_entries entries, unpacked under upload_dir.
  int64_t upload_limit_bytes = int64_t{512} << 20;
  int64_t upload_max_entries = 100'000;
  std::string upload_dir;  // "" = <home>/uploads
  // The store's URL (store::MetadataUrl(home)). A blocking route's handler
  // (RouteDoc::blocking: the imports) runs off the I/O thread, and a
  // MetadataStore serves one thread: it opens its own store from this URL.
  // "": it uses `meta` (a router dispatched on one thread, as in tests).
  std::string meta_url;
  // The Label Studio ML backend (api_ls.h; `kestrel serve --ls-model`):
  // borrowed, null when the server has none (the /ls routes answer 503).
  LsBackend* ls = nullptr;
};

// Every route of the read API, the write routes (api_write.h), /metrics, the
// event streams and /api/openapi.json (built from the other routes'
// RouteDoc); the token authorizer (auth.h) guards every route but /healthz
// and /readyz.
Result<Router> BuildApiRouter(ApiContext& ctx);

// The OpenAPI 3.1 document of `router`'s routes plus the document's own
// route (GET /api/openapi.json).
nlohmann::json OpenApiDocument(const Router& router);

// An event as the streams send it (the SSE data line): id, job_id,
// attempt, kind, created_ms, payload (the stored JSON; a string when the
// stored text is not JSON).
nlohmann::json EventJson(const store::EventRecord& ev);

// `kestrel serve`: opens the stores of `home`, builds the router and
// starts the HTTP server.
class ApiServer {
 public:
  // `ls`: the Label Studio ML backend's options (ls.model "" = none); its
  // model is loaded before the server listens (app::LsModel::Load errors).
  static Result<std::unique_ptr<ApiServer>> Start(const std::string& home, const ServerOptions& options,
                                                  const LsOptions& ls = {});
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  std::string Host() const { return http_->Host(); }
  int Port() const { return http_->Port(); }
  // http://HOST:PORT (IPv6 addresses in brackets).
  std::string Url() const;
  HttpMetrics& Metrics() { return metrics_; }
  // HttpServer::Stop: graceful, idempotent.
  void Stop();

 private:
  ApiServer() = default;
  std::unique_ptr<store::MetadataStore> meta_;
  std::unique_ptr<store::ArtifactStore> blobs_;
  HttpMetrics metrics_;
  std::unique_ptr<LsBackend> ls_;
  std::unique_ptr<ApiContext> ctx_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<HttpServer> http_;
};

}  // namespace kestrel::server
