// The read-route tests' shared fixture (job list, job media, evaluations,
// dataset diff): a test folder dir_ with a Kestrel home home_ holding
// "birds" (birds_home.h), its stores meta_ and blobs_, a read-only token
// read_ and one ApiServer server_ on port 0 over home_, all gone after the
// test.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/tokens.h"
#include "birds_home.h"
#include "http_client.h"
#include "server/api.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::server::testing {

class ReadRouteTest : public ::testing::Test {
 protected:
  // The home (`images` birds images, folder named after `prefix`), read_
  // and server_ (5 s request timeout). Call from the derived SetUp; check
  // HasFatalFailure() after the call.
  void OpenHomeAndServe(const std::string& prefix, int images) {
    OpenHomeWithBirds(prefix, images, &dir_, &home_, &meta_, &blobs_);
    if (::testing::Test::HasFatalFailure()) return;
    auto c = app::CreateToken(*meta_, "reader", true, 1000);
    ASSERT_TRUE(c.IsOk()) << c.GetStatus().ToString();
    read_ = c->token;
    ServerOptions o;
    o.port = 0;
    o.request_timeout_ms = 5000;
    auto srv = ApiServer::Start(home_, o);
    ASSERT_TRUE(srv.IsOk()) << srv.GetStatus().ToString();
    server_ = std::move(srv).Value();
  }
  void TearDown() override {
    server_.reset();
    meta_.reset();
    std::filesystem::remove_all(dir_);
  }
  // GET `target` with read_ (none: !with_token), expecting `status`; the
  // body parsed (a failure when it is not JSON).
  nlohmann::json Doc(const std::string& target, int status = 200, bool with_token = true) {
    std::vector<std::string> headers;
    if (with_token) headers.push_back("Authorization: Bearer " + read_);
    HttpReply r = Get(server_->Port(), target, headers);
    EXPECT_EQ(r.status, status) << target << ": " << r.body;
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << target << ": " << r.body;
    return j;
  }

  std::filesystem::path dir_;
  std::string home_, read_;
  std::unique_ptr<store::MetadataStore> meta_;
  std::unique_ptr<store::ArtifactStore> blobs_;
  std::unique_ptr<ApiServer> server_;
};

}  // namespace kestrel::server::testing
