// The /api/studies routes over real HTTP on loopback (docs/server.md
// "Studies", issue 32): POST creates a study and queues its coordinator
// (201; the same body again attaches, 200), a bad key is 400 naming it,
// another space under the name 409 naming both hashes; the reads return
// the documents of `kestrel tune show|list` (app views) unchanged, 404 for
// an unknown study; writes need a read-write token; stop moves the study to
// stopping.
#include <gtest/gtest.h>

#include <filesystem>

#include "app/tokens.h"
#include "app/tune_study.h"
#include "birds_home.h"
#include "http_client.h"
#include "server/api.h"

namespace kestrel::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::Call;
using testing::HttpReply;

class ApiStudiesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::OpenHomeWithBirds("kestrel_studies_", 4, &dir_, &home_, &meta_, &blobs_);
    if (HasFatalFailure()) return;
    auto rw = app::CreateToken(*meta_, "rw", false, 1000);
    auto ro = app::CreateToken(*meta_, "ro", true, 1000);
    ASSERT_TRUE(rw.IsOk() && ro.IsOk());
    rw_ = rw->token;
    ro_ = ro->token;
    ServerOptions o;
    o.port = 0;
    o.request_timeout_ms = 2000;
    auto srv = ApiServer::Start(home_, o);
    ASSERT_TRUE(srv.IsOk()) << srv.GetStatus().ToString();
    server_ = std::move(srv).Value();
  }
  void TearDown() override {
    server_.reset();
    meta_.reset();
    fs::remove_all(dir_);
  }
  json Doc(const HttpReply& r, int status) {
    EXPECT_EQ(r.status, status) << r.body;
    auto j = json::parse(r.body, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.body;
    return j;
  }

  fs::path dir_;
  std::string home_, rw_, ro_;
  std::unique_ptr<store::MetadataStore> meta_;
  std::unique_ptr<store::ArtifactStore> blobs_;
  std::unique_ptr<ApiServer> server_;
};

TEST_F(ApiStudiesTest, CreateAttachReadStopAndTheErrors) {
  const int port = server_->Port();
  const std::string body =
      R"({"space": "lr0: {low: 0.001, high: 0.1, log: true}\n", "keys": {"data": "birds", "model": "n",
          "imgsz": 64, "trials": 3, "parallel": 1, "epochs": 2, "name": "lr", "seed": 4}})";
  EXPECT_EQ(Call(port, "POST", "/api/studies", ro_, body).status, 403) << "a read-only token cannot create";
  json made = Doc(Call(port, "POST", "/api/studies", rw_, body), 201);
  EXPECT_EQ(made["created"], true);
  EXPECT_EQ(made["study"]["name"], "lr");
  EXPECT_EQ(made["study"]["state"], "running");
  EXPECT_GT(made["job_id"].get<int64_t>(), 0);
  json again = Doc(Call(port, "POST", "/api/studies", rw_, body), 200);
  EXPECT_EQ(again["created"], false);
  EXPECT_EQ(again["job_id"], made["job_id"]) << "the live coordinator is reused";

  json bad = Doc(Call(port, "POST", "/api/studies", rw_,
                      R"({"keys": {"data": "birds", "model": "n", "sampler": "grid"}})"),
                 400);
  EXPECT_EQ(bad["error"]["field"], "sampler") << bad.dump();
  json other = Doc(Call(port, "POST", "/api/studies", rw_,
                        R"({"space": "mosaic: {low: 0, high: 1}\n", "keys": {"data": "birds", "model": "n",
                            "imgsz": 64, "trials": 3, "parallel": 1, "epochs": 2, "name": "lr", "seed": 4}})"),
                   409);
  EXPECT_NE(other["error"]["message"].get<std::string>().find(made["study"]["space_hash"].get<std::string>()),
            std::string::npos)
      << other.dump();

  json show = Doc(Call(port, "GET", "/api/studies/lr", ro_), 200);
  EXPECT_EQ(show, *app::StudyShowJson(*meta_, "lr")) << "the document of `kestrel tune show lr --json`";
  json list = Doc(Call(port, "GET", "/api/studies", ro_), 200);
  EXPECT_EQ(list, *app::StudyListJson(*meta_));
  ASSERT_EQ(list["studies"].size(), 1u);
  json trials = Doc(Call(port, "GET", "/api/studies/lr/trials", ro_), 200);
  EXPECT_EQ(trials["study"], "lr");
  EXPECT_TRUE(trials["trials"].is_array());
  json missing = Doc(Call(port, "GET", "/api/studies/nope", ro_), 404);
  EXPECT_EQ(missing["error"]["field"], "study");
  EXPECT_EQ(Call(port, "GET", "/api/studies", "").status, 401) << "reads need a token without --public-read";

  EXPECT_EQ(Call(port, "POST", "/api/studies/lr/stop", ro_).status, 403);
  json stopped = Doc(Call(port, "POST", "/api/studies/lr/stop", rw_), 200);
  EXPECT_EQ(stopped["study"]["state"], "stopping");
}

}  // namespace
}  // namespace kestrel::server
