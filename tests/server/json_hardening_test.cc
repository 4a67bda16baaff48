// Hostile JSON bodies and hostile requests over real HTTP on loopback (issue
// 26; docs/server.md "Errors", "Metrics", "Names"): an in-process ApiServer
// on port 0 over a temporary SQLite home.
// - Every route that reads a JSON body (found in the OpenAPI document, so a
//   new route cannot be left out) gets numbers past a double or 64 bits,
//   underflowing ones, NaN/Infinity text, every wrong type in every field,
//   100,000 levels of nesting, invalid UTF-8 in strings, duplicate keys,
//   empty and non-object bodies and trailing bytes: each is a 4xx with the
//   error document, and the server keeps answering /healthz (one number,
//   1e400, used to end the process).
// - 10,000 requests with invented methods, random paths and error statuses
//   leave /metrics with the series it had after the first few.
// - Names past their bound are refused over HTTP naming the field.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "app/jobs.h"
#include "app/models.h"
#include "app/tokens.h"
#include "birds_home.h"
#include "core/env.h"
#include "core/names.h"
#include "core/safetensors.h"
#include "http_client.h"
#include "server/api.h"
#include "server/json_body.h"
#include "server/metrics.h"
#include "write_route_test.h"

namespace kestrel::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HttpReply;

// write_route_test.h: tokens, servers, Call and Doc.
class JsonHardeningTest : public testing::WriteRouteTest {
 protected:
  void SetUp() override {
    testing::OpenHomeWithBirds("kestrel_server_hardening_", 4, &dir_, &home_, &meta_, &blobs_);
    if (HasFatalFailure()) return;
    testing::RegisterBirdsModel(*meta_, *blobs_, dir_, 2000);
    if (HasFatalFailure()) return;
    auto d = app::DraftJob({"data=birds", "epochs=1"}, nullptr);
    ASSERT_TRUE(d.IsOk()) << d.GetStatus().ToString();
    auto s = app::SubmitJob(*meta_, std::move(d).Value(), 4000);
    ASSERT_TRUE(s.IsOk()) << s.GetStatus().ToString();
    job_ = s->job.id;
    CreateTokens();
    ServerOptions o;
    o.data_roots = {dir_.string()};  // "synth" is the birds' source folder
    port_ = StartServer(o);
  }

  // A 4xx with the error document; its error object.
  json ExpectRefused(const HttpReply& r, const std::string& what) {
    EXPECT_GE(r.status, 400) << what << ": " << r.body.substr(0, 300);
    EXPECT_LT(r.status, 500) << what << ": " << r.body.substr(0, 300);
    json doc = json::parse(r.body, nullptr, false);
    EXPECT_TRUE(doc.is_object()) << what << ": " << r.body.substr(0, 300);
    if (!doc.is_object()) return json::object();
    EXPECT_EQ(doc.value("ok", true), false) << what;
    EXPECT_TRUE(doc["error"].is_object() && doc["error"]["message"].is_string() &&
                !doc["error"]["message"].get<std::string>().empty())
        << what << ": " << r.body.substr(0, 300);
    return doc["error"];
  }
  store::JobState State() { return meta_->GetJob(job_)->state; }
  bool Healthy() { return testing::Get(port_, "/healthz").status == 200; }
  std::string Metrics() {
    HttpReply r = testing::Get(port_, "/metrics", {"Authorization: Bearer " + write_});
    EXPECT_EQ(r.status, 200);
    return r.body;
  }

  int64_t job_ = 0;
};

// A JSON route as the test feeds it: a target with its path parameters
// filled, a body around the hostile value per field, and whether a blank
// body (or {}) is a valid request.
struct JsonRoute {
  std::string method, pattern, target;
  // Field path -> a body with "@" where the value goes; every other field
  // is valid or leads to a 4xx by itself (a missing import path).
  std::map<std::string, std::string> fields;
  bool takes_no_body = false;
};

std::string Fill(const std::string& shape, const std::string& value) {
  std::string out = shape;
  out.replace(out.find('@'), 1, value);
  return out;
}

TEST_F(JsonHardeningTest, EveryJsonRouteRefusesHostileBodiesWith4xxAndKeepsServing) {
  const std::string id = std::to_string(job_);
  std::vector<JsonRoute> routes = {
      {"POST",
       "/api/jobs",
       "/api/jobs",
       {{"template", R"({"template": @})"},
        {"keys", R"({"keys": @})"},
        {"keys.epochs", R"({"keys": {"data": "birds", "epochs": @}})"},
        {"keys.data", R"({"keys": {"data": @, "epochs": 1}})"},
        {"keys.imgsz", R"({"keys": {"data": "birds", "epochs": 1, "imgsz": @}})"}}},
      {"POST", "/api/jobs/{id}/cancel", "/api/jobs/" + id + "/cancel", {{"x", R"({"x": @})"}}, true},
      {"POST", "/api/jobs/{id}/retry", "/api/jobs/" + id + "/retry", {{"x", R"({"x": @})"}}, true},
      // No such job: a name or note the rules accept ("a b@/c") ends in a 404.
      {"POST",
       "/api/jobs/{id}/labels",
       "/api/jobs/424242/labels",
       {{"name", R"({"name": @})"},
        {"note", R"({"note": @})"},
        {"tags", R"({"tags": @})"},
        {"add_tags", R"({"add_tags": @})"},
        {"remove_tags", R"({"remove_tags": @})"}}},
      {"POST", "/api/models/{ref}/tags", "/api/models/birds/tags", {{"tag", R"({"tag": @})"}}},
      {"DELETE",
       "/api/models/{ref}/tags/{tag}",
       "/api/models/birds/tags/candidate",
       {{"x", R"({"x": @})"}},
       true},
      {"POST", "/api/breaker/reset", "/api/breaker/reset", {{"x", R"({"x": @})"}}, true},
      {"POST",
       "/api/datasets/import",
       "/api/datasets/import",
       {{"path", R"({"path": @, "name": "n"})"},
        {"name", R"({"path": "nosuch", "name": @})"},
        {"val_ratio", R"({"path": "nosuch", "name": "n", "val_ratio": @})"},
        {"allow_errors", R"({"path": "nosuch", "name": "n", "allow_errors": @})"}}},
      {"POST",
       "/api/studies",
       "/api/studies",
       {{"template", R"({"template": @})"},
        {"keys", R"({"keys": @})"},
        {"keys.trials", R"({"keys": {"data": "birds", "model": "n", "trials": @}})"},
        {"keys.data", R"({"keys": {"data": @, "model": "n"}})"},
        {"space", R"({"keys": {"data": "birds", "model": "n"}, "space": @})"}}},
      {"POST", "/api/studies/{name}/stop", "/api/studies/nosuch/stop", {{"x", R"({"x": @})"}}, true},
      // Issue 31's System page buttons (no such worker or host: 404 once the body passes).
      {"POST", "/api/workers/{target}/drain", "/api/workers/nosuch/drain", {{"x", R"({"x": @})"}}, true},
      {"POST", "/api/workers/{target}/undrain", "/api/workers/nosuch/undrain", {{"x", R"({"x": @})"}}, true},
      // The Label Studio ML backend (api_ls.h; this server has no --ls-model:
      // a body that passes answers 503, so every field here is refused first).
      {"POST", "/ls/setup", "/ls/setup", {{"schema", R"({"schema": @})"}}},
      {"POST",
       "/ls/predict",
       "/ls/predict",
       {{"tasks", R"({"tasks": @})"},
        {"tasks[0]", R"({"tasks": [@]})"},
        {"tasks[0].data", R"({"tasks": [{"data": @}]})"},
        {"label_config", R"({"tasks": [{"data": {"image": "/x"}}], "label_config": @})"}}},
      {"POST",
       "/ls/webhook",
       "/ls/webhook",
       {{"action", R"({"action": @})"},
        {"annotation",
         R"({"action": "ANNOTATION_CREATED", "annotation": @, "task": {"id": 1, "data": {"image": "/x"}}})"},
        {"annotation.id",
         R"({"action": "ANNOTATION_CREATED", "annotation": {"id": @, "result": []}, "task": {"id": 1, "data": {"image": "/x"}}})"},
        {"annotation.result[0]",
         R"({"action": "ANNOTATION_UPDATED", "annotation": {"id": 1, "result": [@]}, "task": {"id": 1, "data": {"image": "/x"}}})"},
        {"task", R"({"action": "ANNOTATION_CREATED", "annotation": {"id": 1, "result": []}, "task": @})"},
        {"task.data",
         R"({"action": "ANNOTATION_CREATED", "annotation": {"id": 1, "result": []}, "task": {"id": 1, "data": @}})"},
        {"annotations", R"({"action": "ANNOTATIONS_DELETED", "annotations": @})"},
        {"annotations[0]", R"({"action": "ANNOTATIONS_DELETED", "annotations": [@]})"}}},
      {"POST", "/ls/train", "/ls/train", {{"x", R"({"x": @})"}}, true},
      {"POST",
       "/api/hosts/{host}/unquarantine",
       "/api/hosts/nosuch/unquarantine",
       {{"x", R"({"x": @})"}},
       true},
  };

  // Every route that is not a GET and takes no upload reads a JSON body:
  // the OpenAPI document lists them, and each must be in the table above.
  HttpReply api = testing::Get(port_, "/api/openapi.json", {"Authorization: Bearer " + write_});
  ASSERT_EQ(api.status, 200);
  json openapi = json::parse(api.body);
  std::set<std::string> listed, fed;
  for (const auto& [path, ops] : openapi["paths"].items()) {
    for (const auto& [method, op] : ops.items()) {
      if (method == "get" || method == "head") continue;
      if (op.contains("requestBody") && !op["requestBody"]["content"].contains("application/json")) continue;
      std::string upper = method;
      for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      listed.insert(upper + " " + path);
    }
  }
  for (const auto& r : routes) fed.insert(r.method + " " + r.pattern);
  EXPECT_EQ(listed, fed) << "a JSON route the test does not feed (or one it feeds that is gone)";

  const std::string deep_arrays(100'000, '[');
  std::string deep_objects;
  for (int i = 0; i < 50'000; ++i) deep_objects += "{\"a\":";
  const std::string nested_65 = std::string(65, '[') + std::string(65, ']');
  // Values that are wrong wherever they go (no field takes a string like
  // "a b@/c", a number like these or a container).
  const std::vector<std::string> values = {"1e400",
                                           "-1e400",
                                           "1e-400",
                                           "-0",
                                           "-0.0",
                                           "18446744073709551616",
                                           "9223372036854775808",
                                           "-9223372036854775809",
                                           "NaN",
                                           "Infinity",
                                           "-Infinity",
                                           "\"a b@/c\"",
                                           "[]",
                                           "[1, 2]",
                                           "{}",
                                           R"({"a": 1})",
                                           "null",
                                           "true",
                                           "false",
                                           nested_65,
                                           "\"x\xFFy\"",
                                           "\"\xC3\"",
                                           "\"\xED\xA0\x80\"",
                                           "\"\\ud800\"",
                                           "01",
                                           "1.",
                                           ".5",
                                           "+1",
                                           "0x10",
                                           "'single'"};
  // Whole bodies that are wrong for every route.
  const std::vector<std::string> bodies = {"1e400",
                                           "[1e400]",
                                           "{\"a\":1e400}",
                                           "-1e400",
                                           "1e-400",
                                           "NaN",
                                           "Infinity",
                                           "[]",
                                           "\"text\"",
                                           "null",
                                           "true",
                                           "123",
                                           "18446744073709551616",
                                           deep_arrays,
                                           deep_objects,
                                           "{\"a\":\"\xFF\"}",
                                           "{\"a\":1,\"a\":1}",
                                           "{\"x\":{\"y\":1,\"y\":2}}",
                                           "{} {}",
                                           "{}x",
                                           "{\"a\":1}garbage",
                                           "{",
                                           "}",
                                           "\xEF\xBB\xBF[]",
                                           "{\"a\":1,}",
                                           "[1,]",
                                           "{'a':1}",
                                           std::string("{\0}", 3),
                                           std::string(1, '\0')};

  int requests = 0;
  for (const auto& route : routes) {
    const std::string where = route.method + " " + route.target;
    for (const auto& body : bodies) {
      json err = ExpectRefused(Call(route.method, route.target, write_, body),
                               where + " body " + body.substr(0, 40));
      ++requests;
      if (err.is_object()) {
        EXPECT_EQ(err.value("code", ""), "invalid_argument") << where << " " << body.substr(0, 40);
      }
    }
    if (!route.takes_no_body) {
      ExpectRefused(Call(route.method, route.target, write_, ""), where + " empty body");
      ExpectRefused(Call(route.method, route.target, write_, "{}"), where + " {}");
      requests += 2;
    }
    for (const auto& [field, shape] : route.fields) {
      for (const auto& v : values) {
        ExpectRefused(Call(route.method, route.target, write_, Fill(shape, v)),
                      where + " " + field + " = " + v.substr(0, 40));
        ++requests;
      }
    }
    ASSERT_TRUE(Healthy()) << "the server stopped answering after " << where;
  }
  std::printf("%d hostile JSON requests over %zu routes, all 4xx\n", requests, routes.size());
  EXPECT_EQ(State(), store::JobState::kQueued) << "no hostile body cancelled the job";
}

TEST_F(JsonHardeningTest, ReaderErrorsNameTheFieldAndTheValue) {
  struct Case {
    std::string body, field, in_message;
  };
  const std::vector<Case> cases = {
      {R"({"keys":{"data":"birds","epochs":1e400}})", "keys.epochs", "1e400"},
      {R"({"keys":{"data":"birds","epochs":-1e400}})", "keys.epochs", "out of range"},
      {R"({"keys":{"data":"birds","lr0":1e-400}})", "keys.lr0", "would be read as 0"},
      {R"({"keys":{"data":"birds","epochs":18446744073709551616}})", "keys.epochs", "64-bit"},
      {R"({"keys":{"data":"birds","epochs":1,"epochs":2}})", "keys.epochs", "appears twice"},
      {R"({"template":"a","template":"b"})", "template", "'template' appears twice"},
      {std::string(100'000, '['), "body", "deeper than 64 levels"},
      {R"({"keys":{"data":"birds","epochs":NaN}})", "body", "not valid JSON (at byte"},
      {"{\"keys\":{\"data\":\"bi\xFFrds\"}}", "body", "ill-formed UTF-8"},
      {R"({"keys":{"data":"birds"}} trailing)", "body", "not valid JSON"},
      {R"([{"keys":{}}])", "body", "must be a JSON object, not array"},
      {R"({"keys":{"data":"birds"},"extra":1})", "extra", "unknown key 'extra'"},
      // Values of the wrong type for a submit key: the field is the key, the
      // message the command line's for epochs=VALUE.
      {R"({"keys":{"data":"birds","epochs":"abc"}})", "epochs", "got 'abc'"},
      {R"({"keys":{"data":"birds","epochs":9223372036854775808}})", "epochs", "outside the allowed range"},
      {R"({"keys":{"data":"birds","epochs":1.5}})", "epochs", "got '1.5'"},
      {R"({"keys":{"data":"birds","epochs":[1]}})", "epochs", "not array"},
      {R"({"keys":{"data":"birds","epochs":{}}})", "epochs", "not object"},
      {R"({"keys":{"data":"birds","epochs":null}})", "epochs", "not null"},
      {R"({"keys":{"data":"birds","epochs":true}})", "epochs", "got 'true'"},
  };
  for (const auto& c : cases) {
    HttpReply r = Call("POST", "/api/jobs", write_, c.body);
    EXPECT_EQ(r.status, 400) << c.body.substr(0, 80) << ": " << r.body.substr(0, 300);
    json err = ExpectRefused(r, c.body.substr(0, 80));
    if (!err.is_object() || !err.contains("field")) continue;
    EXPECT_EQ(err["field"], c.field) << c.body.substr(0, 80) << ": " << r.body.substr(0, 300);
    EXPECT_NE(err.value("message", "").find(c.in_message), std::string::npos)
        << c.body.substr(0, 80) << ": " << err.dump();
    EXPECT_LT(r.body.size(), 1000u) << "the error quotes the input cut, not whole";
  }
  EXPECT_TRUE(Healthy());
  auto jobs = meta_->ListJobs({});
  ASSERT_TRUE(jobs.IsOk());
  EXPECT_EQ(jobs->size(), 1u) << "no hostile submit queued a job";
}

TEST_F(JsonHardeningTest, TheReaderAloneRefusesWhatNlohmannWouldAcceptOrThrowOn) {
  // ParseJsonBody is what every route calls; nlohmann's own parse throws
  // out_of_range on 1e400 and keeps the last of two duplicate keys.
  EXPECT_FALSE(ParseJsonBody("{\"a\":1e400}").IsOk());
  EXPECT_FALSE(ParseJsonBody("{\"a\":1,\"a\":2}").IsOk());
  EXPECT_FALSE(
      ParseJsonBody(std::string(kMaxJsonBodyDepth + 1, '[') + std::string(kMaxJsonBodyDepth + 1, ']'))
          .IsOk());
  auto at_limit = ParseJsonBody(std::string(kMaxJsonBodyDepth, '[') + std::string(kMaxJsonBodyDepth, ']'));
  EXPECT_TRUE(at_limit.IsOk()) << at_limit.GetStatus().ToString();
  auto fine =
      ParseJsonBody(R"({"a":[1,2.5,-0,9223372036854775807,18446744073709551615,1e308,0.0,"\u00fc"]})");
  ASSERT_TRUE(fine.IsOk()) << fine.GetStatus().ToString();
  EXPECT_EQ((*fine)["a"][4].get<uint64_t>(), 18446744073709551615ull);
  // Two objects may use the same key; one object may not.
  EXPECT_TRUE(ParseJsonBody(R"([{"a":1},{"a":2}])").IsOk());
  // An empty key is named too (the fuzzer's first find: a field "" named nothing).
  auto empty_key = ReadJsonObjectBody(R"({"":1})", {"a"}, false);
  ASSERT_FALSE(empty_key.IsOk());
  EXPECT_EQ(empty_key.GetStatus().Where().field, "\"\"");
  auto nested_empty = ParseJsonBody(R"({"":{"b":1e400}})");
  ASSERT_FALSE(nested_empty.IsOk());
  EXPECT_EQ(nested_empty.GetStatus().Where().field, "\"\".b");
  auto blank = ReadJsonObjectBody(" \r\n", {}, false);
  ASSERT_TRUE(blank.IsOk());
  EXPECT_TRUE(blank->empty());
  EXPECT_FALSE(ReadJsonObjectBody("", {}, true).IsOk());
}

TEST_F(JsonHardeningTest, HostileRequestsAddNoMetricSeries) {
  // The hostile mix: invented methods on a route and on unknown paths, random
  // paths (API and static), requests without a token, bad targets.
  auto batch = [&](int from, int n) {
    std::string raw;
    for (int i = from; i < from + n; ++i) {
      const std::string tag = std::to_string(i);
      std::string line;
      switch (i % 6) {
        case 0:
          line = "FOO" + tag + " /api/jobs";
          break;  // 405, an invented method
        case 1:
          line = "BREW" + tag + " /api/nothing/" + tag;
          break;  // 404, invented method and path
        case 2:
          line = "GET /api/r" + tag + "/x";
          break;  // 404
        case 3:
          line = "GET /static-" + tag + ".js";
          break;  // no such file
        case 4:
          line = "GET /api/jobs/" + tag;
          break;  // 401: no token
        case 5:
          line = "PROPFIND" + tag + " /api/jobs/" + tag + "/cancel";
          break;  // 405
      }
      raw += line + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + (i + 1 == from + n ? "Connection: close\r\n" : "") +
             "\r\n";
    }
    HttpReply r = testing::SendRaw(port_, raw, 5000);
    // Every request got an answer (pipelined on one keep-alive connection).
    size_t answers = r.status == 0 ? 0 : 1;
    for (size_t at = r.body.find("HTTP/1.1 "); at != std::string::npos; at = r.body.find("HTTP/1.1 ", at + 1))
      ++answers;
    return answers;
  };
  auto series = [](const std::string& text) {
    std::set<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
      if (line.rfind("kestrel_http_", 0) == 0) out.insert(line.substr(0, line.rfind(' ')));
    return out;
  };
  auto total = [](const std::string& text) {
    int64_t n = 0;
    std::regex re(R"(^kestrel_http_requests_total\{.*\} (\d+)$)");
    std::istringstream in(text);
    std::smatch m;
    for (std::string line; std::getline(in, line);)
      if (std::regex_match(line, m, re)) n += std::stoll(m[1]);
    return n;
  };

  constexpr int kBatch = 200, kHostile = 10'000;
  ASSERT_EQ(batch(0, kBatch), static_cast<size_t>(kBatch));
  Metrics();  // the scrape's own series, recorded after it answers
  const std::string before = Metrics();
  const std::set<std::string> first = series(before);
  int answered = 0;
  for (int from = kBatch; from < kBatch + kHostile; from += kBatch)
    answered += static_cast<int>(batch(from, kBatch));
  EXPECT_EQ(answered, kHostile) << "every hostile request was answered";
  const std::string after = Metrics();
  EXPECT_EQ(series(after), first) << "hostile requests added series:\n" << after.substr(0, 3000);
  EXPECT_GE(total(after) - total(before), kHostile) << "and they were all counted";
  EXPECT_LT(after.size(), before.size() + 2000) << "/metrics does not grow";
  EXPECT_NE(after.find("method=\"other\""), std::string::npos) << "invented methods count as other";
  EXPECT_EQ(after.find("FOO"), std::string::npos);
  EXPECT_TRUE(Healthy());
}

TEST(HttpMetricsLabelsTest, EveryLabelIsBoundedWhateverTheCallerPasses) {
  HttpMetrics m;
  for (int i = 0; i < 5000; ++i) {
    m.RecordRequest("M" + std::to_string(i), "/route/" + std::to_string(i), 100 + i % 700, 0.001);
  }
  const std::string text = m.Render();
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  // methods: other; routes: kMaxRoutes + "other"; codes: classes and "other".
  EXPECT_LT(lines, (HttpMetrics::kMaxRoutes + 1) * (8 + 14) + 20) << "bounded, not 5000 series";
  EXPECT_EQ(MetricMethod("GET"), "GET");
  EXPECT_EQ(MetricMethod("OPTIONS"), "OPTIONS");
  EXPECT_EQ(MetricMethod("get"), "other");
  EXPECT_EQ(MetricMethod("BREW"), "other");
  EXPECT_EQ(MetricMethod(""), "other");
  EXPECT_EQ(MetricCode(404), "404");
  EXPECT_EQ(MetricCode(418), "4xx");
  EXPECT_EQ(MetricCode(599), "5xx");
  EXPECT_EQ(MetricCode(1000), "other");
  EXPECT_EQ(MetricCode(-1), "other");
}

TEST_F(JsonHardeningTest, NamesPastTheirBoundAreRefusedOverHttpNamingTheField) {
  const std::string huge(100'000, 'n');
  HttpReply imp =
      Call("POST", "/api/datasets/import", write_, json({{"path", "synth"}, {"name", huge}}).dump());
  EXPECT_EQ(imp.status, 400) << imp.body.substr(0, 300);
  json err = ExpectRefused(imp, "import with a 100,000-character name");
  EXPECT_EQ(err.value("field", ""), "name");
  EXPECT_NE(err.value("message", "").find("at most 128"), std::string::npos) << err.dump();
  EXPECT_LT(imp.body.size(), 2000u) << "the name is not echoed whole";
  HttpReply one_past = Call("POST", "/api/datasets/import", write_,
                            json({{"path", "synth"}, {"name", std::string(kMaxNameChars + 1, 'n')}}).dump());
  EXPECT_EQ(one_past.status, 400) << one_past.body.substr(0, 300);

  // An upload's name is checked before its zip is unpacked.
  const std::string zip = "PK\x03\x04 not really a zip";
  HttpReply up =
      testing::SendRaw(port_, "POST /api/datasets/upload?name=" + std::string(kMaxNameChars + 1, 'u') +
                                  " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                                  "Authorization: Bearer " +
                                  write_ + "\r\nContent-Type: application/zip\r\nContent-Length: " +
                                  std::to_string(zip.size()) + "\r\n\r\n" + zip);
  EXPECT_EQ(up.status, 400) << up.body.substr(0, 300);
  EXPECT_EQ(ExpectRefused(up, "upload with a long name").value("field", ""), "name");

  HttpReply tag = Call("POST", "/api/models/birds/tags", write_,
                       json({{"tag", std::string(kMaxTagChars + 1, 't')}}).dump());
  EXPECT_EQ(tag.status, 400) << tag.body.substr(0, 300);
  json terr = ExpectRefused(tag, "a tag one past its bound");
  EXPECT_EQ(terr.value("field", ""), "tag");
  EXPECT_NE(terr.value("message", "").find("at most 64"), std::string::npos) << terr.dump();

  HttpReply list = testing::Get(port_, "/api/datasets", {"Authorization: Bearer " + write_});
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(list.body.find("nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn"
                           "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn"),
            std::string::npos)
      << "nothing stored under the long name";
}

}  // namespace
}  // namespace kestrel::server
