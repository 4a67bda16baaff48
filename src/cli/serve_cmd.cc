// `kestrel serve` (docs/server.md): starts the HTTP API on the Kestrel home's
// store and blocks until SIGTERM or SIGINT, then shuts down gracefully.
#include <pthread.h>
#include <signal.h>

#include <iostream>

#include "cli/cli.h"
#include "server/api.h"

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
  cmd->callback([&ctx, exit_code, o] {
    // Block the stop signals before the I/O thread starts, so it inherits
    // the mask and sigwait below receives them.
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
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
