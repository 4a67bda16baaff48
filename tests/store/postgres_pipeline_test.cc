// PgConn holds BEGIN and ExecLater() writes back and sends them with the next
// statement or the COMMIT as one pipeline (src/store/postgres_store.cc).
// These tests pin what that must not change: a transaction reads its own
// deferred writes, a failing deferred write fails the COMMIT naming its SQL
// and leaves nothing behind, the connection is usable afterwards, and an
// empty transaction costs nothing. Runs when KESTREL_TEST_PG holds a libpq URL.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "store/internal/sql_conn.h"
#include "store/postgres_store.h"

namespace kestrel::store {
namespace {

class PostgresPipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* url = std::getenv("KESTREL_TEST_PG");
    if (url == nullptr || *url == '\0') GTEST_SKIP() << "KESTREL_TEST_PG not set";
    auto c = ConnectPostgres(url);
    ASSERT_TRUE(c.IsOk()) << c.GetStatus().ToString();
    conn_ = std::move(c).Value();
    ASSERT_TRUE(conn_->ExecScript("CREATE TEMP TABLE p (k INTEGER PRIMARY KEY, v TEXT NOT NULL)").IsOk());
  }

  int64_t Count() {
    auto rows = conn_->Query("SELECT COUNT(*) FROM p", {});
    EXPECT_TRUE(rows.IsOk()) << rows.GetStatus().ToString();
    return rows.IsOk() ? rows->at(0).Int(0) : -1;
  }

  std::unique_ptr<SqlConn> conn_;
};

TEST_F(PostgresPipelineTest, DeferredWritesAreVisibleToTheTransactionAndCommitted) {
  ASSERT_TRUE(conn_->Begin().IsOk());
  ASSERT_TRUE(conn_->ExecLater("INSERT INTO p VALUES ($1, $2)", {int64_t{1}, std::string("a")}).IsOk());
  ASSERT_TRUE(conn_->ExecLater("INSERT INTO p VALUES ($1, $2)", {int64_t{2}, std::string("b")}).IsOk());
  // A read in the same transaction sees both (they go first, same round trip).
  auto rows = conn_->Query("SELECT v FROM p ORDER BY k", {});
  ASSERT_TRUE(rows.IsOk()) << rows.GetStatus().ToString();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ(rows->at(1).Text(0), "b");
  ASSERT_TRUE(conn_->ExecLater("UPDATE p SET v = $1 WHERE k = $2", {std::string("c"), int64_t{2}}).IsOk());
  ASSERT_TRUE(conn_->Commit().IsOk());
  auto after = conn_->Query("SELECT v FROM p WHERE k = 2", {});
  ASSERT_TRUE(after.IsOk());
  EXPECT_EQ(after->at(0).Text(0), "c");
}

TEST_F(PostgresPipelineTest, AFailingDeferredWriteFailsTheCommitAndLeavesNothing) {
  ASSERT_TRUE(conn_->Begin().IsOk());
  ASSERT_TRUE(conn_->ExecLater("INSERT INTO p VALUES ($1, $2)", {int64_t{7}, std::string("x")}).IsOk());
  ASSERT_TRUE(conn_->ExecLater("INSERT INTO p VALUES ($1, $2)", {int64_t{7}, std::string("dup")}).IsOk());
  ASSERT_TRUE(conn_->ExecLater("INSERT INTO p VALUES ($1, $2)", {int64_t{8}, std::string("y")}).IsOk());
  Status c = conn_->Commit();
  ASSERT_FALSE(c.IsOk());
  EXPECT_NE(c.Message().find("INSERT INTO p"), std::string::npos) << c.ToString();
  EXPECT_NE(c.Message().find("duplicate key"), std::string::npos) << c.ToString();
  ASSERT_TRUE(conn_->Rollback().IsOk());
  EXPECT_EQ(Count(), 0);  // neither the write before the error nor the one after
  // Out of pipeline mode and out of the aborted transaction: plain use works.
  ASSERT_TRUE(conn_->Exec("INSERT INTO p VALUES ($1, $2)", {int64_t{9}, std::string("z")}).IsOk());
  EXPECT_EQ(Count(), 1);
}

TEST_F(PostgresPipelineTest, AFailingStatementAfterDeferredWritesReportsItsOwnError) {
  ASSERT_TRUE(conn_->Begin().IsOk());
  ASSERT_TRUE(conn_->ExecLater("INSERT INTO p VALUES ($1, $2)", {int64_t{1}, std::string("a")}).IsOk());
  auto bad = conn_->Query("SELECT no_such_column FROM p", {});
  ASSERT_FALSE(bad.IsOk());
  EXPECT_NE(bad.GetStatus().Message().find("no_such_column"), std::string::npos)
      << bad.GetStatus().ToString();
  ASSERT_TRUE(conn_->Rollback().IsOk());
  EXPECT_EQ(Count(), 0);
}

TEST_F(PostgresPipelineTest, EmptyAndReadOnlyTransactionsWork) {
  ASSERT_TRUE(conn_->Begin().IsOk());
  ASSERT_TRUE(conn_->Commit().IsOk());
  ASSERT_TRUE(conn_->Begin().IsOk());
  ASSERT_TRUE(conn_->Rollback().IsOk());
  ASSERT_TRUE(conn_->Begin().IsOk());
  EXPECT_EQ(Count(), 0);
  ASSERT_TRUE(conn_->Commit().IsOk());
  // Outside a transaction ExecLater runs at once.
  ASSERT_TRUE(conn_->ExecLater("INSERT INTO p VALUES ($1, $2)", {int64_t{3}, std::string("now")}).IsOk());
  ASSERT_TRUE(conn_->Begin().IsOk());
  ASSERT_TRUE(conn_->Rollback().IsOk());
  EXPECT_EQ(Count(), 1);
}

}  // namespace
}  // namespace kestrel::store
