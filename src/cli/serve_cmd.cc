// `kestrel serve` (docs/server.md): starts the HTTP API on the Kestrel home's
// store and blocks until SIGTERM or SIGINT, then shuts down gracefully.
#include <pthread.h>
#include <signal.h>

#include <ctime>
#include <filesystem>
#include <iostream>
#include <system_error>

#include "app/leftovers.h"
#include "cli/cli.h"
#include "cli/serve_workers.h"
#include "core/env.h"
#include "server/api.h"
#include "server/metrics.h"
#include "server/static_files.h"
#include "store/private_files.h"

namespace kestrel::cli {

namespace {

// A crashed server's upload bodies (up to --max-upload-mb, unpacked 4x that)
// and the blob store's temp files, reclaimed before this one takes uploads
// (app/leftovers.h: the writer's PID gone, unwritten for 10 minutes); the
// rest of the home is `kestrel gc`'s. A failure only warns.
void ReclaimLeftoversAtStart(const std::string& home, const std::string& upload_dir) {
  app::LeftoverOptions lo;
  lo.quick = true;
  lo.upload_dir = upload_dir;
  auto r = app::ReclaimLeftovers(home, lo, Env::Default().UnixSeconds());
  if (!r.IsOk()) {
    std::cerr << "kestrel serve: warning: leftovers of crashed writers not reclaimed: "
              << r.GetStatus().ToString() << std::endl;
    return;
  }
  if (r->removed == 0 && r->restored == 0) return;
  std::cerr << "kestrel serve: removed " << r->removed << " leftovers of crashed writers ("
            << r->removed_bytes << " bytes)";
  if (r->restored > 0) std::cerr << ", moved " << r->restored << " blobs back from <sha>.gc";
  std::cerr << ":";
  constexpr size_t kShown = 10;
  for (size_t i = 0; i < r->removed_paths.size() && i < kShown; ++i) std::cerr << " " << r->removed_paths[i];
  if (r->removed_paths.size() > kShown) std::cerr << " ... (" << r->removed_paths.size() - kShown << " more)";
  std::cerr << std::endl;
}

}  // namespace

void AddServeCommands(CLI::App& app, Context& ctx, int* exit_code) {
  auto o = std::make_shared<server::ServerOptions>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Serve the read API, /metrics and live job events over HTTP (docs/server.md); SIGTERM stops it");
  cmd->add_option("--host", o->host, "address to listen on (loopback by default; 0.0.0.0 exposes it)")
      ->capture_default_str();
  cmd->add_option("--port", o->port, "port (0: any free port; the first line of stdout names it)")
      ->capture_default_str()
      ->check(IntArg(0, 65535));
  auto workers = std::make_shared<int>(0);
  cmd->add_option("--workers", *workers, "also run N local workers on this store (docs/server.md)")
      ->capture_default_str()
      ->check(IntArg(0, 256));
  cmd->add_flag("--public-read", o->public_read,
                "read routes without a token (writes still need a read-write token; docs/server.md)");
  cmd->add_option("--allowed-hosts", o->allowed_hosts,
                  "host names or addresses a request's Host may name, comma-separated, no ports; others get "
                  "421 (default: localhost, 127.0.0.1, [::1], --host; on 0.0.0.0/:: also this machine's name "
                  "and any IP address; '*': any; docs/server.md)")
      ->delimiter(',');
  cmd->add_option("--data-root", o->data_roots,
                  "a folder POST /api/datasets/import may import from (repeatable; none: import over HTTP is "
                  "refused; docs/server.md)");
  cmd->add_option("--web-dir", o->web_dir,
                  "the web UI's built files (default: web/dist of the build tree this executable is in, "
                  "when scripts/build-web.sh has built it)");
  cmd->add_option_function<int64_t>(
         "--max-upload-mb", [o](const int64_t& mb) { o->upload_limit_bytes = mb << 20; },
         "the largest zip POST /api/datasets/upload takes, in MiB (413 beyond; it may unpack to 4x that)")
      ->default_str(std::to_string(o->upload_limit_bytes >> 20))
      ->check(IntArg(1, 1 << 20));
  cmd->add_option("--max-connections", o->max_connections,
                  "connections open at once; one more gets 503 + Retry-After (0: the descriptor limit less "
                  "a reserve, docs/server.md)")
      ->capture_default_str()
      ->check(IntArg(0, 1 << 20));
  cmd->add_option_function<int64_t>(
         "--stream-max-seconds", [o](const int64_t& s) { o->stream_max_ms = s * 1000; },
         "an event stream ends after this long with a retry hint; the client reconnects with Last-Event-ID")
      ->default_str(std::to_string(o->stream_max_ms / 1000))
      ->check(IntArg(1, 7 * 86400));
  // The Label Studio ML backend (server/api_ls.h, docs/server.md "Label Studio ML backend").
  auto ls = std::make_shared<server::LsOptions>();
  cmd->add_option("--ls-model", ls->model,
                  "answer Label Studio's ML-backend protocol at /ls with this registered model (NAME@TAG, "
                  "NAME@vN): its newest verified ONNX export, run in OpenCV DNN");
  cmd->add_option(
      "--ls-local-files-root", ls->local_files_root,
      "Label Studio's LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT as this host sees it: task images "
      "/data/local-files/?d=PATH are read under it, never outside (default: local files refused)");
  cmd->add_option("--ls-train-template", ls->train_template,
                  "a template (NAME[@vN]) the Label Studio webhook queues a fine-tune of --ls-model from, "
                  "on the version its annotations make (default: annotations are kept until POST /ls/train)");
  cmd->add_option("--ls-train-after", ls->train_after,
                  "annotations created or updated (webhook events) that are merged as a new dataset "
                  "version and queue one fine-tune job on it")
      ->capture_default_str()
      ->check(IntArg(1, 1'000'000'000));
  cmd->add_option("--ls-from-name", ls->from_name,
                  "the RectangleLabels tag's name when a predict request has no label_config")
      ->capture_default_str();
  cmd->add_option("--ls-to-name", ls->to_name,
                  "the Image tag's name when a predict request has no label_config")
      ->capture_default_str();
  cmd->callback(Callback(ctx, exit_code, [&ctx, o, workers, ls]() -> CommandResult {
    // The workers first: a child inherits the signal mask blocked below, and
    // a worker must get the SIGTERM passed on to it. (A signal before the
    // mask is set kills serve; the kernel and the guards kill the workers.)
    std::unique_ptr<LocalWorkers> local;
    if (*workers > 0) {
      KESTREL_ASSIGN_OR_RETURN(local, LocalWorkers::Start(ctx, *workers, std::cerr));
    }
    // Block the stop signals before the I/O thread starts, so it inherits
    // the mask and sigwait below receives them.
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
    if (o->web_dir.empty()) {
      const std::string def = server::DefaultWebDir();
      std::error_code ec;
      if (!def.empty() && std::filesystem::is_regular_file(std::filesystem::path(def) / "index.html", ec))
        o->web_dir = def;
      else
        std::cerr << "kestrel serve: no web UI at '" << def
                  << "' (scripts/build-web.sh builds it; --web-dir DIR names another): serving the API only"
                  << std::endl;
    }
    ReclaimLeftoversAtStart(ctx.home, o->upload_dir);
    KESTREL_ASSIGN_OR_RETURN(std::unique_ptr<server::ApiServer> srv,
                             server::ApiServer::Start(ctx.home, *o, *ls));
    // A home others may read (made by an older kestrel, or by hand): said, not changed.
    for (const auto& line : store::HomeModeWarnings(ctx.home))
      std::cerr << "kestrel serve: " << line << std::endl;
    std::cout << "kestrel serve: listening on " << srv->Url() << std::endl;
    if (!ls->model.empty())
      std::cerr << "kestrel serve: Label Studio ML backend at " << srv->Url() << "/ls (model " << ls->model
                << ")" << std::endl;
    int sig = 0;
    if (local) {
      // Wait for a stop signal, restarting local workers that exit meanwhile.
      server::HttpMetrics& metrics = srv->Metrics();
      metrics.SetLocalWorkers(local->Count());
      local->OnRestart([&metrics](int k) { metrics.LocalWorkerRestarted(k); });
      const timespec tick{0, 200'000'000};
      while ((sig = sigtimedwait(&stop, nullptr, &tick)) < 0) local->Supervise();
    } else {
      sigwait(&stop, &sig);
    }
    std::cerr << "kestrel serve: " << (sig == SIGINT ? "SIGINT" : "SIGTERM")
              << ", finishing requests and closing streams" << std::endl;
    srv->Stop();
    if (local) {
      std::cerr << "kestrel serve: stopping the workers (they checkpoint, hand jobs back)" << std::endl;
      local->Stop(LocalWorkers::kStopTimeoutMs);
    }
    return {};
  }));
}

}  // namespace kestrel::cli
