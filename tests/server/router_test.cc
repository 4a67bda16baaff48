// The router without sockets: pattern matching and precedence, 404/405
// error documents, pattern validation, target parsing, the SSE format,
// blocking routes deferred by DispatchOrDefer.
#include "server/router.h"

#include <gtest/gtest.h>

namespace kestrel::server {
namespace {

using nlohmann::json;

Handler Echo(const std::string& name) {
  return [name](const Request&, const PathParams& p) {
    json params = json::object();
    for (const auto& [k, v] : p) params[k] = v;
    return JsonResponse({{"route", name}, {"params", params}});
  };
}

Request Req(const std::string& method, const std::string& target) {
  Request r;
  r.method = method;
  EXPECT_TRUE(ParseTarget(target, &r.path, &r.query)) << target;
  return r;
}

json Body(const Response& r) { return json::parse(r.body); }

TEST(RouterTest, MatchesParamsAndPrefersLiteralSegments) {
  Router r;
  ASSERT_TRUE(r.Add("GET", "/api/jobs/{id}", {"job"}, Echo("job")).IsOk());
  ASSERT_TRUE(r.Add("GET", "/api/jobs/{id}/events", {"events"}, Echo("events")).IsOk());
  ASSERT_TRUE(r.Add("GET", "/api/jobs/stats", {"stats"}, Echo("stats")).IsOk());
  auto a = r.Dispatch(Req("GET", "/api/jobs/42"));
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(Body(a)["route"], "job");
  EXPECT_EQ(Body(a)["params"]["id"], "42");
  EXPECT_EQ(a.route, "/api/jobs/{id}");
  EXPECT_EQ(Body(r.Dispatch(Req("GET", "/api/jobs/42/events")))["params"]["id"], "42");
  EXPECT_EQ(Body(r.Dispatch(Req("GET", "/api/jobs/stats")))["route"], "stats") << "a literal beats {id}";
  EXPECT_EQ(r.Dispatch(Req("GET", "/api/jobs/a%2Fb")).status, 404)
      << "the path is decoded before matching: an escaped '/' separates segments, a {param} never holds one";
}

TEST(RouterTest, UnknownPathIs404AndWrongMethodIs405WithAllow) {
  Router r;
  ASSERT_TRUE(r.Add("GET", "/api/jobs/{id}", {"job"}, Echo("job")).IsOk());
  ASSERT_TRUE(r.Add("DELETE", "/api/jobs/{id}", {"cancel"}, Echo("cancel")).IsOk());
  auto nf = r.Dispatch(Req("GET", "/api/nothing"));
  EXPECT_EQ(nf.status, 404);
  EXPECT_EQ(Body(nf)["error"]["code"], "not_found");
  EXPECT_EQ(Body(nf)["ok"], false);
  EXPECT_EQ(nf.route, "");
  auto na = r.Dispatch(Req("POST", "/api/jobs/3"));
  EXPECT_EQ(na.status, 405);
  EXPECT_EQ(Body(na)["error"]["code"], "method_not_allowed");
  ASSERT_EQ(na.headers.size(), 1u);
  EXPECT_EQ(na.headers[0].first, "Allow");
  EXPECT_EQ(na.headers[0].second, "DELETE, GET");
  EXPECT_EQ(r.Dispatch(Req("GET", "/api/jobs/")).status, 404) << "an empty {param} does not match";
  EXPECT_TRUE(r.Matches("DELETE", "/api/jobs/9"));
  EXPECT_FALSE(r.Matches("PUT", "/api/jobs/9"));
}

// A blocking route (RouteDoc::blocking) is checked now and run later: the
// authorizer answers at once, the handler only when the deferred call runs;
// other routes, 404s and 405s answer at once.
TEST(RouterTest, DispatchOrDeferDefersOnlyAuthorizedBlockingHandlers) {
  Router r;
  int ran = 0;
  RouteDoc slow{"slow"};
  slow.blocking = true;
  ASSERT_TRUE(r.Add("POST", "/api/slow/{id}", slow, [&ran](const Request&, const PathParams& p) {
                 ++ran;
                 return JsonResponse({{"id", p.at("id")}});
               }).IsOk());
  ASSERT_TRUE(r.Add("GET", "/api/fast", {"fast"}, Echo("fast")).IsOk());
  r.SetAuthorizer([](const Request& req, const Route&) -> std::optional<Response> {
    if (req.Header("authorization").empty()) return ErrorResponse(401, "unauthenticated", "no token");
    return std::nullopt;
  });
  EXPECT_TRUE(r.Blocks("POST", "/api/slow/7"));
  EXPECT_FALSE(r.Blocks("GET", "/api/fast"));
  Request req = Req("POST", "/api/slow/7");
  Router::Dispatched denied = r.DispatchOrDefer(req);
  ASSERT_TRUE(denied.response.has_value());
  EXPECT_FALSE(denied.deferred);
  EXPECT_EQ(denied.response->status, 401);
  req.headers["authorization"] = "Bearer t";
  Router::Dispatched d = r.DispatchOrDefer(req);
  ASSERT_TRUE(d.deferred);
  EXPECT_FALSE(d.response.has_value());
  EXPECT_EQ(ran, 0);
  Response resp = d.deferred();
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(Body(resp)["id"], "7");
  EXPECT_EQ(resp.route, "/api/slow/{id}");
  req = Req("GET", "/api/fast");
  req.headers["authorization"] = "Bearer t";
  Router::Dispatched fast = r.DispatchOrDefer(req);
  ASSERT_TRUE(fast.response.has_value());
  EXPECT_FALSE(fast.deferred);
  EXPECT_EQ(Body(*fast.response)["route"], "fast");
  EXPECT_EQ(r.DispatchOrDefer(Req("GET", "/api/slow/7")).response->status, 405);
  // Dispatch runs a blocking handler itself (tests without a transport).
  req = Req("POST", "/api/slow/8");
  req.headers["authorization"] = "Bearer t";
  EXPECT_EQ(Body(r.Dispatch(req))["id"], "8");
  EXPECT_EQ(ran, 2);
}

TEST(RouterTest, RefusesMalformedAndDuplicatePatterns) {
  Router r;
  EXPECT_EQ(r.Add("GET", "api", {}, Echo("x")).Code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Add("GET", "/a/{b", {}, Echo("x")).Code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Add("GET", "/a/x{b}", {}, Echo("x")).Code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Add("GET", "/a/{}", {}, Echo("x")).Code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(r.Add("GET", "/a/{b}", {}, Echo("x")).IsOk());
  Status dup = r.Add("GET", "/a/{b}", {}, Echo("y"));
  EXPECT_EQ(dup.Code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dup.Where().field, "pattern");
}

TEST(RouterTest, ErrorResponsesCarryTheStatusLocationAndHttpCode) {
  auto bad = ErrorResponse(Status::InvalidArgument("unknown state 'x'", {"request", 0, "state"}));
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(Body(bad)["error"]["field"], "state");
  EXPECT_EQ(Body(bad)["error"]["message"], "unknown state 'x'");
  EXPECT_EQ(Body(bad)["error"]["code"], "invalid_argument");
  EXPECT_EQ(ErrorResponse(Status::NotFound("no job 9")).status, 404);
  EXPECT_EQ(ErrorResponse(Status::FailedPrecondition("done")).status, 409);
  EXPECT_EQ(ErrorResponse(Status::Unavailable("down")).status, 503);
  EXPECT_EQ(ErrorResponse(Status::Internal("bug")).status, 500);
}

TEST(RouterTest, ParsesTargetsAndRefusesBadEscapes) {
  std::string path;
  std::map<std::string, std::string> q;
  ASSERT_TRUE(ParseTarget("/api/models/birds%40v2?tag=a+b&x=%2F&flag&x=2", &path, &q));
  EXPECT_EQ(path, "/api/models/birds@v2");
  EXPECT_EQ(q["tag"], "a b");
  EXPECT_EQ(q["x"], "2") << "the last of a repeated key";
  EXPECT_EQ(q.count("flag"), 1u);
  EXPECT_FALSE(ParseTarget("/a%2", &path, &q));
  EXPECT_FALSE(ParseTarget("/a%zz", &path, &q));
  EXPECT_FALSE(ParseTarget("api", &path, &q));
  EXPECT_FALSE(ParseTarget("", &path, &q));
}

TEST(RouterTest, FormatsStreamEventsOneDataLinePerLine) {
  EXPECT_EQ(FormatStreamEvent({7, "state", R"({"a":1})"}), "id: 7\nevent: state\ndata: {\"a\":1}\n\n");
  EXPECT_EQ(FormatStreamEvent({8, "", "x\ny"}), "id: 8\ndata: x\ndata: y\n\n")
      << "a newline in the data cannot end the event early";
}

}  // namespace
}  // namespace kestrel::server
