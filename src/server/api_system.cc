#include "server/api_system.h"

#include <chrono>
#include <string>

#include "app/jobs.h"
#include "app/system.h"
#include "app/tokens.h"
#include "core/env.h"
#include "server/auth.h"
#include "server/json_body.h"

namespace kestrel::server {
namespace {

using nlohmann::json;

// The reset takes no body; an empty one or {} is accepted, anything else is
// refused naming the body or the key (json_body.h), as the other bodiless
// writes do.
Status NoBody(const Request& req) { return ReadJsonObjectBody(req.body, {}, false).GetStatus(); }

}  // namespace

Status AddSystemRoutes(Router& r, ApiContext& ctx) {
  KESTREL_RETURN_IF_ERROR(
      r.Add("GET", "/api/workers",
            {"Registered workers with their devices, running jobs, heartbeat ages and state (`kestrel "
             "workers`)"},
            [&ctx](const Request&, const PathParams&) {
              auto w = app::ListWorkerStatus(ctx.meta, Env::Default().UnixMillis());
              return w.IsOk() ? JsonResponse(app::WorkersJson(*w)) : ErrorResponse(w.GetStatus());
            }));
  KESTREL_RETURN_IF_ERROR(r.Add(
      "GET", "/api/breaker",
      {"The circuit breaker: state, reason, counts, last reset and since when (`kestrel breaker show`)"},
      [&ctx](const Request&, const PathParams&) {
        auto b = app::ReadBreaker(ctx.meta);
        return b.IsOk() ? JsonResponse(app::BreakerJson(*b)) : ErrorResponse(b.GetStatus());
      }));
  KESTREL_RETURN_IF_ERROR(r.Add("POST", "/api/breaker/reset",
                                {"Close the circuit breaker for every worker (`kestrel breaker reset`)",
                                 {},
                                 "application/json",
                                 Access::kWrite,
                                 "none, or {}"},
                                [&ctx](const Request& req, const PathParams&) {
                                  if (Status s = NoBody(req); !s.IsOk()) return ErrorResponse(s);
                                  auto b = app::ResetBreaker(ctx.meta, Env::Default().UnixMillis());
                                  return b.IsOk() ? JsonResponse(app::BreakerResetJson(*b))
                                                  : ErrorResponse(b.GetStatus());
                                }));
  // Drain and quarantine (docs/jobs.md "Quarantine and drain"): the System
  // page's buttons, `kestrel workers drain|undrain|unquarantine`.
  for (const bool drain : {true, false}) {
    const std::string verb = drain ? "drain" : "undrain";
    KESTREL_RETURN_IF_ERROR(r.Add(
        "POST", "/api/workers/{target}/" + verb,
        {drain ? "Drain a worker (its id) or every worker of a host: it finishes its running jobs, claims "
                 "nothing and exits (`kestrel workers drain ID|HOST`)"
               : "Lift a drain: the worker or host claims again (`kestrel workers undrain ID|HOST`)",
         {},
         "application/json",
         Access::kWrite,
         "none, or {}"},
        [&ctx, drain](const Request& req, const PathParams& p) {
          if (Status s = NoBody(req); !s.IsOk()) return ErrorResponse(s);
          auto d = app::DrainWorkers(ctx.meta, p.at("target"), drain, Env::Default().UnixMillis());
          return d.IsOk() ? JsonResponse(*d) : ErrorResponse(d.GetStatus());
        }));
  }
  KESTREL_RETURN_IF_ERROR(
      r.Add("POST", "/api/hosts/{host}/unquarantine",
            {"Lift a host's quarantine and clear its environment failures: its workers claim again (`kestrel "
             "workers unquarantine HOST`)",
             {},
             "application/json",
             Access::kWrite,
             "none, or {}"},
            [&ctx](const Request& req, const PathParams& p) {
              if (Status s = NoBody(req); !s.IsOk()) return ErrorResponse(s);
              auto h = app::UnquarantineHost(ctx.meta, p.at("host"), Env::Default().UnixMillis());
              return h.IsOk() ? JsonResponse(*h) : ErrorResponse(h.GetStatus());
            }));
  KESTREL_RETURN_IF_ERROR(
      r.Add("GET", "/api/token",
            {"The API token this request carries (name, read_only: whether writes are refused); null without "
             "one (--public-read)"},
            [&ctx](const Request& req, const PathParams&) {
              std::string token;
              if (!BearerToken(req.Header("authorization"), &token))
                return JsonResponse({{"ok", true}, {"token", nullptr}, {"public_read", ctx.public_read}});
              // The authorizer accepted it a moment ago; this reads its record.
              auto rec = app::AuthenticateToken(ctx.meta, token, Env::Default().UnixMillis());
              if (!rec.IsOk()) return ErrorResponse(rec.GetStatus());
              return JsonResponse(
                  {{"ok", true}, {"token", app::TokenJson(*rec)}, {"public_read", ctx.public_read}});
            }));
  return {};
}

}  // namespace kestrel::server
