// The write-route tests' shared fixture (uploads, imports): a test folder
// dir_ with a Kestrel home home_ and its metadata store meta_ (the derived
// fixture's SetUp makes them), a read-write and a read-only token, and
// ApiServers started on port 0, all gone after the test.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "app/tokens.h"
#include "server/api.h"
#include "store/metadata_store.h"

namespace kestrel::server::testing {

class WriteRouteTest : public ::testing::Test {
 protected:
  // write_ (read-write) and read_ (read-only) tokens in meta_. Check
  // HasFatalFailure() after the call.
  void CreateTokens() {
    auto w = app::CreateToken(*meta_, "writer", false, 1000);
    auto r = app::CreateToken(*meta_, "reader", true, 1000);
    ASSERT_TRUE(w.IsOk() && r.IsOk());
    write_ = w->token;
    read_ = r->token;
  }
  void TearDown() override {
    servers_.clear();
    meta_.reset();
    std::filesystem::remove_all(dir_);
  }
  // A server over home_ with `o` on a free port (5 s request timeout): its
  // port, 0 (and a failure) when it does not start.
  int StartServer(ServerOptions o) {
    o.port = 0;
    o.request_timeout_ms = 5000;
    auto srv = ApiServer::Start(home_, o);
    EXPECT_TRUE(srv.IsOk()) << srv.GetStatus().ToString();
    if (!srv.IsOk()) return 0;
    servers_.push_back(std::move(srv).Value());
    return servers_.back()->Port();
  }

  std::filesystem::path dir_;
  std::string home_, write_, read_;
  std::unique_ptr<store::MetadataStore> meta_;
  std::vector<std::unique_ptr<ApiServer>> servers_;
};

}  // namespace kestrel::server::testing
