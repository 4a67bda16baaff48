// The HTTP server's transport-free half: a request and a response as plain
// values, and the router that maps a method and a path pattern
// ("/api/jobs/{id}") to a handler. Routes are tested without sockets
// (tests/server/router_test.cc); http_server.h carries them over HTTP/1.1.
//
// Thread-safety: a Router is built once, then only Dispatch is called, from
// one thread (the server's I/O thread); a blocking route's deferred handler
// call (DispatchOrDefer) runs on another thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace kestrel::server {

struct Request {
  std::string method;                          // "GET", as sent
  std::string path;                            // percent-decoded, without the query
  std::map<std::string, std::string> query;    // percent-decoded; a repeated key keeps its last value
  std::map<std::string, std::string> headers;  // names lowercased
  std::string body;
  // An upload route's body (RouteDoc::upload): the file the transport
  // streamed it to (body stays empty), removed after the response; "" else.
  std::string body_file;

  // The header's value ("" when absent); `name` lowercase.
  std::string Header(const std::string& name) const;
};

// One Server-Sent Event (docs/server.md "Events").
struct StreamEvent {
  int64_t id = 0;     // the store's event id: the client's Last-Event-ID
  std::string event;  // the event type ("state", ...)
  std::string data;   // one line of JSON
};

// A response that stays open and sends events (text/event-stream). The
// transport calls `poll` on a timer with the id of the last event it sent
// and writes what comes back, in order; an error ends the stream.
struct EventStream {
  int64_t last_id = 0;  // replay starts after this id (Last-Event-ID)
  std::function<Result<std::vector<StreamEvent>>(int64_t after_id)> poll;
  // Whether the request that opened the stream would still be let through
  // (its token not revoked or expired since): the transport asks on a
  // timer (ServerOptions::stream_auth_check_ms) and ends the stream on
  // false. Set by the Router from its Authorizer; empty: always.
  std::function<bool()> still_allowed;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
  std::optional<EventStream> stream;                         // set: an SSE response, body unused
  std::string route;  // the matched pattern ("/api/jobs/{id}"), "" when none: metrics label
};

// The path parameters of the matched pattern, by name.
using PathParams = std::map<std::string, std::string>;
using Handler = std::function<Response(const Request&, const PathParams&)>;

struct Route;
// Runs before the handler of every kRead and kWrite route: std::nullopt lets
// the request through, a response (401, 403, ...) answers it instead.
using Authorizer = std::function<std::optional<Response>(const Request&, const Route&)>;

// Who may call a route (docs/server.md "Auth"); the router's Authorizer
// decides for kRead and kWrite routes, never for kOpen ones.
enum class Access {
  kRead,   // a token (read-only or not), or none with --public-read
  kWrite,  // a token that is not read-only
  kOpen,   // anyone (/healthz, /readyz)
};

// What the OpenAPI document says about a route (openapi.h).
struct RouteDoc {
  std::string summary;
  // Query parameters: name -> description.
  std::vector<std::pair<std::string, std::string>> query;
  std::string content_type = "application/json";  // of the success response
  Access access = Access::kRead;
  std::string body;  // the JSON request body, described; "" = the route takes none
  // Set (a media type, "application/zip"): the body is a file the transport
  // streams to disk (Request::body_file) under its own size limit
  // (ServerOptions::upload_limit_bytes), not the JSON body limit.
  std::string upload;
  // The handler may run long (an import reads and hashes a whole dataset):
  // the transport runs it on its blocking pool, off the I/O thread
  // (http_server.h, ServerOptions::blocking_threads), so it may not use
  // what only the I/O thread may (the context's store: ApiContext::meta_url).
  bool blocking = false;
};

struct Route {
  std::string method;
  std::string pattern;  // "/api/jobs/{id}": literal segments and whole-segment {params}
  RouteDoc doc;
  Handler handler;
};

class Router {
 public:
  // Adds a route. kInvalidArgument (field `pattern`) for a pattern that does
  // not start with '/', has an empty or malformed {param} segment, or
  // duplicates a method + pattern already added.
  Status Add(std::string method, std::string pattern, RouteDoc doc, Handler handler);

  // Runs the handler of the route that matches; literal segments win over
  // {params} at the same position. An unknown path is a 404 error document,
  // a known path with another method a 405 (with an Allow header).
  Response Dispatch(const Request& req) const;

  // Dispatch in two steps, for a transport that runs blocking routes
  // (RouteDoc::blocking) off its I/O thread: all Dispatch does but a
  // blocking route's handler happens now (404, 405, the authorizer, a
  // non-blocking handler) and is `response`; for a blocking route the
  // authorizer let through, `deferred` is its handler's call (the request
  // moved into it), to run once on any thread while the router lives.
  struct Dispatched {
    std::optional<Response> response;
    std::function<Response()> deferred;
  };
  Dispatched DispatchOrDefer(Request req) const;

  // Whether some route has this method and a pattern matching `path`.
  bool Matches(const std::string& method, const std::string& path) const;
  // Whether the route for this method and path is an upload route (RouteDoc::upload).
  bool TakesUpload(const std::string& method, const std::string& path) const;
  // Whether the route for this method and path is a blocking route (RouteDoc::blocking).
  bool Blocks(const std::string& method, const std::string& path) const;
  // The authorizer's answer for `req` (its headers; the body need not be
  // read yet): std::nullopt when it may go on (or the route is kOpen or
  // unknown: Dispatch answers those), else the 401/403 response.
  std::optional<Response> Authorize(const Request& req) const;

  const std::vector<Route>& Routes() const { return routes_; }

  // Every later Dispatch to a route that is not Access::kOpen asks it first
  // (one place for authentication: docs/server.md "Auth").
  void SetAuthorizer(Authorizer authorizer) { authorizer_ = std::move(authorizer); }

  // Answers a GET or HEAD whose path no route has (the web UI's files,
  // static_files.h) instead of the 404 error document.
  void SetFallback(Handler handler) { fallback_ = std::move(handler); }

 private:
  // The route for this method and path, or nullptr; `allowed` gets the
  // methods of every route whose pattern matches the path.
  const Route* Find(const std::string& method, const std::string& path, PathParams* params,
                    std::vector<std::string>* allowed) const;

  std::vector<Route> routes_;
  Authorizer authorizer_;
  Handler fallback_;
};

// {"ok": false, "error": {"code", "message", "file", "line", "field"}}: the
// document `kestrel … --json` prints for the same Status, with the HTTP
// status of its code (invalid_argument 400, not_found 404, already_exists
// and failed_precondition 409, unavailable 503, others 500).
Response ErrorResponse(const Status& status);
// An error document with an explicit HTTP status and code (405, 413, ...).
Response ErrorResponse(int http_status, const std::string& code, const std::string& message,
                       const std::string& field = "");
// 200 with `doc` as JSON (core DumpJson: invalid UTF-8 escaped, never throws),
// indented by `indent` spaces (readable with curl); -1: compact, for the
// large documents (a job's metric series).
Response JsonResponse(const nlohmann::json& doc, int status = 200, int indent = 2);

// Percent-decodes `text` ('+' stays '+'); false for a malformed escape.
[[nodiscard]] bool PercentDecode(const std::string& text, std::string* out);
// Splits a request target into its decoded path and query; false when the
// target is malformed (bad escape, no leading '/'). In the query a '+' is a space.
[[nodiscard]] bool ParseTarget(const std::string& target, std::string* path,
                               std::map<std::string, std::string>* query);

// One event in the text/event-stream format: "id: N\nevent: K\ndata: ...\n\n".
std::string FormatStreamEvent(const StreamEvent& ev);

}  // namespace kestrel::server
