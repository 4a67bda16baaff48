// A PostgreSQL connection whose server went away (restart, admin kill) must
// come back by itself for the next statement outside a transaction, and must
// never silently continue a transaction that died with the connection. Runs
// when KESTREL_TEST_PG holds a libpq URL (scripts/pg-test-server.sh).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "store/internal/sql_conn.h"
#include "store/postgres_store.h"

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
    // pg_terminate_backend only signals; wait until the session is gone so
    // the next statement meets a dead connection, not a dying one.
    for (int i = 0; i < 500; ++i) {
      auto left = admin_->Query("SELECT COUNT(*) FROM pg_stat_activity WHERE pid = $1", {pid});
      ASSERT_TRUE(left.IsOk()) << left.GetStatus().ToString();
      if (left->at(0).Int(0) == 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    FAIL() << "backend " << pid << " still alive 5 s after pg_terminate_backend";
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

TEST_F(PostgresReconnectTest, APipelinedCommitOnADeadConnectionFailsAndTheNextTransactionWorks) {
  // The COMMIT that carries deferred writes goes out as one libpq pipeline;
  // losing the server under it must fail cleanly (not commit half, not leave
  // the connection stuck in pipeline mode) and the next transaction must
  // reconnect.
  ASSERT_TRUE(conn_->ExecScript("CREATE TABLE IF NOT EXISTS reconnect_pipe (v INTEGER)").IsOk());
  ASSERT_TRUE(conn_->ExecScript("DELETE FROM reconnect_pipe").IsOk());
  ASSERT_TRUE(conn_->Begin().IsOk());
  ASSERT_TRUE(conn_->ExecLater("INSERT INTO reconnect_pipe VALUES ($1)", {int64_t{1}}).IsOk());
  auto pid = conn_->Query("SELECT pg_backend_pid()", {});  // flushes BEGIN + the insert
  ASSERT_TRUE(pid.IsOk()) << pid.GetStatus().ToString();
  ASSERT_TRUE(conn_->ExecLater("INSERT INTO reconnect_pipe VALUES ($1)", {int64_t{2}}).IsOk());
  KillBackend(std::stoll(pid->at(0).Text(0)));
  Status c = conn_->Commit();
  EXPECT_FALSE(c.IsOk());
  EXPECT_EQ(c.Code(), StatusCode::kUnavailable) << c.ToString();
  (void)conn_->Rollback();
  ASSERT_TRUE(conn_->Begin().IsOk());
  ASSERT_TRUE(conn_->ExecLater("INSERT INTO reconnect_pipe VALUES ($1)", {int64_t{3}}).IsOk());
  Status c2 = conn_->Commit();
  ASSERT_TRUE(c2.IsOk()) << c2.ToString();
  auto rows = admin_->Query("SELECT v FROM reconnect_pipe ORDER BY v", {});
  ASSERT_TRUE(rows.IsOk()) << rows.GetStatus().ToString();
  ASSERT_EQ(rows->size(), 1u);  // neither 1 nor 2: that transaction died whole
  EXPECT_EQ(rows->at(0).Text(0), "3");
  ASSERT_TRUE(admin_->ExecScript("DROP TABLE reconnect_pipe").IsOk());
}

}  // namespace
}  // namespace kestrel::store
