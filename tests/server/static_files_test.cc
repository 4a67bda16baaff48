// The web UI's static files (server/static_files.h): content types, the
// directory check, and that no request path leaves the directory — "..",
// percent-encoded "%2e%2e" (decoded by ParseTarget, as the transport
// does), absolute-looking "//" paths, backslashes, hidden names, symlinks
// pointing out — both on StaticFiles directly and over real HTTP through
// the router's fallback.
#include "server/static_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "http_client.h"
#include "server/http_server.h"
#include "server/metrics.h"

namespace kestrel::server {
namespace {

namespace fs = std::filesystem;

void WriteFile(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

Request Get(const std::string& target) {
  Request r;
  r.method = "GET";
  EXPECT_TRUE(ParseTarget(target, &r.path, &r.query)) << target;
  return r;
}

class StaticFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::temp_directory_path() / ("kestrel_static_" + std::to_string(::getpid()) + "_" + name);
    fs::remove_all(dir_);
    root_ = dir_ / "dist";
    WriteFile(root_ / "index.html", "<!doctype html><title>k</title>");
    WriteFile(root_ / "assets" / "index-abc.js", "console.log(1)");
    WriteFile(root_ / "assets" / "index-abc.css", "body{}");
    WriteFile(root_ / "assets" / "logo.svg", "<svg/>");
    WriteFile(root_ / ".env", "hidden");
    WriteFile(root_ / "api" / "jobs", "not an api");
    WriteFile(dir_ / "secret.txt", "outside");
    fs::create_symlink(dir_ / "secret.txt", root_ / "assets" / "out.txt");
    fs::create_symlink(dir_, root_ / "up");
    fs::create_symlink(root_ / "assets" / "logo.svg", root_ / "assets" / "alias.svg");
    auto f = StaticFiles::Open(root_.string());
    ASSERT_TRUE(f.IsOk()) << f.GetStatus().ToString();
    files_ = std::make_unique<StaticFiles>(std::move(f).Value());
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_, root_;
  std::unique_ptr<StaticFiles> files_;
};

TEST(ContentTypeTest, ByExtensionCaseInsensitive) {
  EXPECT_EQ(ContentTypeFor("index.html"), "text/html; charset=utf-8");
  EXPECT_EQ(ContentTypeFor("a.JS"), "text/javascript; charset=utf-8");
  EXPECT_EQ(ContentTypeFor("a.css"), "text/css; charset=utf-8");
  EXPECT_EQ(ContentTypeFor("a.svg"), "image/svg+xml");
  EXPECT_EQ(ContentTypeFor("a.woff2"), "font/woff2");
  EXPECT_EQ(ContentTypeFor("a.png"), "image/png");
  EXPECT_EQ(ContentTypeFor("ort-wasm-simd-threaded-AbC1.wasm"), "application/wasm");
  EXPECT_EQ(ContentTypeFor("Makefile"), "application/octet-stream");
  EXPECT_EQ(ContentTypeFor("a.exe"), "application/octet-stream");
}

TEST_F(StaticFilesTest, OpenNamesAMissingDirectoryOrIndex) {
  auto missing = StaticFiles::Open((dir_ / "nope").string());
  ASSERT_FALSE(missing.IsOk());
  EXPECT_EQ(missing.GetStatus().Code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.GetStatus().Where().field, "web-dir");
  EXPECT_NE(missing.GetStatus().Message().find("nope"), std::string::npos);
  auto no_index = StaticFiles::Open((root_ / "assets").string());
  ASSERT_FALSE(no_index.IsOk());
  EXPECT_NE(no_index.GetStatus().Message().find("index.html"), std::string::npos);
}

TEST_F(StaticFilesTest, ServesIndexAndAssetsWithTheirTypes) {
  Response index = files_->Serve(Get("/"));
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.body, "<!doctype html><title>k</title>");
  EXPECT_EQ(index.content_type, "text/html; charset=utf-8");
  for (const auto& [k, v] : index.headers) EXPECT_NE(k, "Cache-Control") << "index.html is never cached";
  EXPECT_EQ(files_->Serve(Get("/index.html")).status, 200);

  Response js = files_->Serve(Get("/assets/index-abc.js"));
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.body, "console.log(1)");
  EXPECT_EQ(js.content_type, "text/javascript; charset=utf-8");
  bool immutable = false;
  for (const auto& [k, v] : js.headers) immutable |= k == "Cache-Control" && v.find("immutable") != v.npos;
  EXPECT_TRUE(immutable);
  EXPECT_EQ(files_->Serve(Get("/assets/index-abc.css")).content_type, "text/css; charset=utf-8");
  // A symlink that stays inside the directory is fine.
  EXPECT_EQ(files_->Serve(Get("/assets/alias.svg")).body, "<svg/>");
  // Percent-encoded names decode to the file.
  EXPECT_EQ(files_->Serve(Get("/assets/index%2Dabc.js")).status, 200);
}

TEST_F(StaticFilesTest, NoPathLeavesTheDirectory) {
  for (const char* target :
       {"/../secret.txt", "/assets/../../secret.txt", "/%2e%2e/secret.txt", "/%2E%2E/secret.txt",
        "/assets/%2e%2e/%2e%2e/secret.txt", "/assets%2f..%2f..%2fsecret.txt", "/./index.html", "//etc/passwd",
        "/etc/passwd", "/..%5csecret.txt", "/assets/out.txt", "/up/secret.txt", "/up", "/.env", "/assets/",
        "/assets", "/missing.js", "/index.html%00.js"}) {
    Response r = files_->Serve(Get(target));
    EXPECT_EQ(r.status, 404) << target;
    EXPECT_EQ(r.body.find("outside"), std::string::npos) << target;
    EXPECT_NE(r.body.find("\"not_found\""), std::string::npos) << target;
  }
}

TEST_F(StaticFilesTest, ApiPathsAreNeverFiles) {
  EXPECT_EQ(files_->Serve(Get("/api/jobs")).status, 404);
  EXPECT_EQ(files_->Serve(Get("/api")).status, 404);
}

TEST_F(StaticFilesTest, RouterFallsBackOnlyForUnroutedGetAndHead) {
  Router router;
  ASSERT_TRUE(router
                  .Add("GET", "/api/things", {"things"},
                       [](const Request&, const PathParams&) {
                         return JsonResponse({{"ok", true}});
                       })
                  .IsOk());
  const StaticFiles files = *files_;
  router.SetFallback([files](const Request& req, const PathParams&) { return files.Serve(req); });
  EXPECT_EQ(router.Dispatch(Get("/")).content_type, "text/html; charset=utf-8");
  Request head = Get("/assets/logo.svg");
  head.method = "HEAD";
  EXPECT_EQ(router.Dispatch(head).status, 200);
  Request post = Get("/");
  post.method = "POST";
  EXPECT_EQ(router.Dispatch(post).status, 404);
  post.path = "/api/things";
  EXPECT_EQ(router.Dispatch(post).status, 405) << "a routed path keeps its 405";
  EXPECT_EQ(router.Dispatch(Get("/api/things")).body, "{\n  \"ok\": true\n}\n");
  EXPECT_EQ(router.Dispatch(Get("/api/nothing")).status, 404);
}

TEST_F(StaticFilesTest, OverHttpTraversalIsRefused) {
  Router router;
  const StaticFiles files = *files_;
  router.SetFallback([files](const Request& req, const PathParams&) { return files.Serve(req); });
  HttpMetrics metrics;
  ServerOptions options;
  options.port = 0;
  auto server = HttpServer::Start(options, router, metrics);
  ASSERT_TRUE(server.IsOk()) << server.GetStatus().ToString();
  const int port = (*server)->Port();

  testing::HttpReply index = testing::Get(port, "/");
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.headers["content-type"], "text/html; charset=utf-8");
  EXPECT_EQ(index.headers["x-content-type-options"], "nosniff");
  EXPECT_EQ(testing::Get(port, "/assets/index-abc.js").headers["content-type"],
            "text/javascript; charset=utf-8");
  for (const char* target : {"/../secret.txt", "/%2e%2e/secret.txt", "/assets/..%2f..%2fsecret.txt",
                             "/assets/out.txt", "/up/secret.txt", "//secret.txt"}) {
    testing::HttpReply r = testing::SendRaw(
        port, std::string("GET ") + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(r.status, 404) << target;
    EXPECT_EQ(r.body.find("outside"), std::string::npos) << target;
  }
  (*server)->Stop();
}

}  // namespace
}  // namespace kestrel::server
