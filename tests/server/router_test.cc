// The router without sockets: pattern matching and precedence, 404/405
// error documents, pattern validation, target parsing, the SSE format.
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
