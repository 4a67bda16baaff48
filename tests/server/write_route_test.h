// The shared fixture of the server tests that write or send tokens (auth
// and writes, the System page, hostile JSON bodies, uploads, imports): a
// test folder dir_ with a Kestrel home home_ and its stores meta_ and blobs_
// (the derived fixture's SetUp makes them, usually with OpenHomeWithBirds),
// a read-write and a read-only token, ApiServers started on port 0, and
// requests with a token and a JSON body; all gone after the test.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/tokens.h"
#include "http_client.h"
#include "server/api.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::server::testing {

class WriteRouteTest : public ::testing::Test {
 protected:
  // A token named `name` in meta_ (created at 1000 ms); "" and a failure
  // when it cannot be made.
  std::string Token(const std::string& name, bool read_only) {
    auto c = app::CreateToken(*meta_, name, read_only, 1000);
    EXPECT_TRUE(c.IsOk()) << c.GetStatus().ToString();
    return c.IsOk() ? c->token : std::string();
  }
  // write_ ("writer", read-write) and read_ ("reader", read-only). Check
  // HasFatalFailure() after the call.
  void CreateTokens() {
    write_ = Token("writer", false);
    read_ = Token("reader", true);
    ASSERT_FALSE(write_.empty() || read_.empty());
  }
  void TearDown() override {
    servers_.clear();
    meta_.reset();
    blobs_.reset();
    std::filesystem::remove_all(dir_);
  }
  // A server over home_ with `o` on a free port (5 s request timeout): its
  // port, 0 (and a failure) when it does not start.
  int StartServer(ServerOptions o = {}) {
    o.port = 0;
    o.request_timeout_ms = 5000;
    auto srv = ApiServer::Start(home_, o);
    EXPECT_TRUE(srv.IsOk()) << srv.GetStatus().ToString();
    if (!srv.IsOk()) return 0;
    servers_.push_back(std::move(srv).Value());
    return servers_.back()->Port();
  }
  // testing::Call on `port` (0: port_).
  HttpReply Call(const std::string& method, const std::string& target, const std::string& token = "",
                 const std::string& body = "", int port = 0) {
    return testing::Call(port == 0 ? port_ : port, method, target, token, body);
  }
  // The reply's JSON document, checking the status (`what` names the
  // request in failures).
  nlohmann::json Doc(const HttpReply& r, int status, const std::string& what) {
    EXPECT_EQ(r.status, status) << what << ": " << r.body;
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << what << ": " << r.body;
    return j;
  }

  std::filesystem::path dir_;
  std::string home_, write_, read_;
  std::unique_ptr<store::MetadataStore> meta_;
  std::unique_ptr<store::ArtifactStore> blobs_;
  std::vector<std::unique_ptr<ApiServer>> servers_;
  int port_ = 0;  // Call's server when it names none (the derived SetUp sets it)
};

}  // namespace kestrel::server::testing
