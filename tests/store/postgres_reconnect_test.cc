// A PostgreSQL connection whose server went away (restart, admin kill) must
// come back by itself for the next statement outside a transaction, and must
// never silently continue a transaction that died with the connection. Runs
// when KESTREL_TEST_PG holds a libpq URL (scripts/pg-test-server.sh).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "store/postgres_store.h"
#include "store/sql_conn.h"

namespace kestrel::store {
namespace {

class PostgresReconnectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* url = std::getenv("KESTREL_TEST_PG");
    if (url == nullptr || *url == '\0') GTEST_SKIP() << "KESTREL_TEST_PG not set";
    url_ = url;
    auto a = ConnectPostgres(url_);
    auto b = ConnectPostgres(url_);
    ASSERT_TRUE(a.IsOk()) << a.GetStatus().ToString();
    ASSERT_TRUE(b.IsOk()) << b.GetStatus().ToString();
    conn_ = std::move(a).Value();
    admin_ = std::move(b).Value();
  }

  int64_t BackendPid() {
    auto rows = conn_->Query("SELECT pg_backend_pid()", {});
    EXPECT_TRUE(rows.IsOk()) << rows.GetStatus().ToString();
    return rows.IsOk() ? std::stoll(rows->at(0).Text(0)) : 0;
  }

  // What a server restart does to our session, without restarting the server.
  void KillBackend(int64_t pid) {
    auto r = admin_->Query("SELECT pg_terminate_backend($1)", {pid});
    ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  }

  std::string url_;
  std::unique_ptr<SqlConn> conn_, admin_;
};

TEST_F(PostgresReconnectTest, AutocommitStatementsRecoverAfterTheBackendDies) {
  const int64_t before = BackendPid();
  ASSERT_GT(before, 0);
  KillBackend(before);
  // The statement that discovers the loss may fail (Unavailable); at most one.
  auto first = conn_->Query("SELECT 1", {});
  if (!first.IsOk()) {
    EXPECT_EQ(first.GetStatus().Code(), StatusCode::kUnavailable) << first.GetStatus().ToString();
  }
  for (int i = 0; i < 3; ++i) {
    auto again = conn_->Query("SELECT 41 + 1", {});
    ASSERT_TRUE(again.IsOk()) << "statement " << i << " after the loss: " << again.GetStatus().ToString();
    EXPECT_EQ(again->at(0).Text(0), "42");
  }
  EXPECT_NE(BackendPid(), before);  // a new session
  // Exec and Begin recover too.
  KillBackend(BackendPid());
  (void)conn_->Exec("SELECT 1", {});
  EXPECT_TRUE(conn_->Exec("SELECT 1", {}).IsOk());
  KillBackend(BackendPid());
  (void)conn_->Query("SELECT 1", {});
  ASSERT_TRUE(conn_->Begin().IsOk());
  EXPECT_TRUE(conn_->Commit().IsOk());
}

TEST_F(PostgresReconnectTest, ADeadTransactionIsNeverContinuedOnANewConnection) {
  ASSERT_TRUE(conn_->ExecScript("CREATE TEMP TABLE t (v INTEGER)").IsOk());
  ASSERT_TRUE(conn_->Begin().IsOk());
  ASSERT_TRUE(conn_->Exec("INSERT INTO t VALUES (1)", {}).IsOk());
  KillBackend(BackendPid());
  // Every further statement of the transaction fails; none runs in autocommit
  // on a fresh session (where it would commit half a transaction).
  auto in_tx = conn_->Exec("INSERT INTO t VALUES (2)", {});
  EXPECT_FALSE(in_tx.IsOk());
  auto in_tx2 = conn_->Query("SELECT 1", {});
  EXPECT_FALSE(in_tx2.IsOk());
  EXPECT_FALSE(conn_->Commit().IsOk());
  // After the transaction ended (here: the failed COMMIT) the next one works.
  ASSERT_TRUE(conn_->Begin().IsOk());
  EXPECT_TRUE(conn_->Commit().IsOk());
}

}  // namespace
}  // namespace kestrel::store
