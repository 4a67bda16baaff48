// `kestrel serve` (docs/server.md): starts the HTTP API on the Kestrel home's
// store and blocks until SIGTERM or SIGINT, then shuts down gracefully.
#include <pthread.h>
#include <signal.h>

#include <filesystem>
#include <iostream>
#include <system_error>

#include "cli/cli.h"
#include "server/api.h"
#include "server/static_files.h"

namespace kestrel::cli {

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
  cmd->add_option("--web-dir", o->web_dir,
                  "the web UI's built files (default: web/dist of the build tree this executable is in, "
                  "when scripts/build-web.sh has built it)");
  cmd->callback([&ctx, exit_code, o] {
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
    auto srv = server::ApiServer::Start(ctx.home, *o);
    if (!srv.IsOk()) {
      *exit_code = Fail(ctx, srv.GetStatus());
      return;
    }
    std::cout << "kestrel serve: listening on " << (*srv)->Url() << std::endl;
    int sig = 0;
    sigwait(&stop, &sig);
    std::cerr << "kestrel serve: " << (sig == SIGINT ? "SIGINT" : "SIGTERM")
              << ", finishing requests and closing streams" << std::endl;
    (*srv)->Stop();
    *exit_code = kExitOk;
  });
}

}  // namespace kestrel::cli
