// Event ids in commit order on PostgreSQL, shown on the one interleaving
// that loses an event when they are not (pg_event_race.h): a transaction
// holds the lower id while a later one commits a higher id and a reader
// passes it. Each writer that inserts events is played as transaction A: a
// plain AppendEvent, a submit (its state event rides with the COMMIT:
// SqlConn::ExecLater) and the one-statement claim. The reader must get both
// events, each once, in id order, also on a session whose default isolation
// is REPEATABLE READ or SERIALIZABLE (a database or role may set that).
// SQLite serializes write transactions, so the race cannot happen there.
// Runs when KESTREL_TEST_PG holds a libpq URL.
#include <map>

#include "job_store_fixture.h"
#include "pg_event_race.h"

namespace kestrel::store {
namespace {

class PostgresEventOrderTest : public JobStoreTest {
 protected:
  void TearDown() override {  // the connections end before the schema goes
    readers_.clear();
    a_.reset();
    b_.reset();
    race_.reset();
    JobStoreTest::TearDown();
  }

  // The fixture's URL with a default isolation level for the session.
  std::string WithIsolation(const std::string& level) const {
    std::string u = url_;
    const std::string opt = "options=-csearch_path%3D" + schema_;
    const size_t at = u.find(opt);
    EXPECT_NE(at, std::string::npos) << u;
    if (at != std::string::npos) u.insert(at + opt.size(), "%20-cdefault_transaction_isolation%3D" + level);
    return u;
  }

  // Plays the race with `writer_a` as A and a plain ReadEvents reader on a
  // session opened on `reader_url` (the fixture's when empty); expects every
  // event once, in order. Races of one test share their connections.
  void ExpectNoEventSkipped(const std::function<Status(MetadataStore&)>& writer_a,
                            const std::string& reader_url = "") {
    if (race_ == nullptr) {
      race_ = std::make_unique<EventRace>(url_);
      a_ = race_->Open("a");
      b_ = race_->Open("b");
    }
    auto& r = readers_[reader_url];
    if (r == nullptr) r = race_->Open("r", reader_url);
    ASSERT_TRUE(a_ && b_ && r);
    EventRaceResult got =
        race_->Run(*a_, *b_, writer_a, [&](int64_t after) { return r->ReadEvents(after, 0, 100); });
    ASSERT_GT(got.n, 0);
    // A drew the lower id and B the next one; both are stored.
    ASSERT_EQ(got.stored, (std::vector<int64_t>{got.n, got.n + 1}));
    EXPECT_EQ(got.read, got.stored) << "first read: " << ::testing::PrintToString(got.first);
  }

  std::unique_ptr<EventRace> race_;
  std::unique_ptr<MetadataStore> a_, b_;
  std::map<std::string, std::unique_ptr<MetadataStore>> readers_;
};

// One schema for the three writers (a schema and its migrations cost more
// than a race): each race starts after the events of the one before.
TEST_P(PostgresEventOrderTest, NoEventWriterLetsAReaderPassAnEventThatCommitsLate) {
  {
    SCOPED_TRACE("A: AppendEvent");
    ExpectNoEventSkipped([](MetadataStore& s) {
      return s.AppendEvent({0, 7, 1, "log", R"({"a":1})", 1}).GetStatus();
    });
  }
  {
    SCOPED_TRACE("A: SubmitJob (its state event rides with the COMMIT)");
    ExpectNoEventSkipped([this](MetadataStore& s) {
      bool created = false;
      return s.SubmitJob(Spec(R"({"late":1})"), Now(), &created).GetStatus();
    });
  }
  {
    SCOPED_TRACE("A: ClaimJob (one autocommit statement)");
    Submit(Spec(R"({"claim":1})"));  // its queued event comes before the race
    ExpectNoEventSkipped([this](MetadataStore& s) {
      ClaimRequest r;
      r.worker = "w";
      r.devices = {{"cpu", 0, 0}};
      r.now_ms = Now();
      r.lease_ms = 90'000;
      auto c = s.ClaimJob(r);
      if (c.IsOk() && c->job.state != JobState::kRunning) return Status::Internal("claimed job not running");
      return c.GetStatus();
    });
  }
}

TEST_P(PostgresEventOrderTest, AReaderWhoseSessionDefaultsToSnapshotIsolationSkipsNothing) {
  for (const char* level : {"repeatable%5C%20read", "serializable"}) {
    SCOPED_TRACE(level);
    ExpectNoEventSkipped(
        [](MetadataStore& s) {
          return s.AppendEvent({0, 7, 1, "log", "{}", 1}).GetStatus();
        },
        WithIsolation(level));
  }
}

// PostgreSQL only: SQLite cannot interleave two write transactions.
INSTANTIATE_TEST_SUITE_P(Backends, PostgresEventOrderTest, ::testing::Values("postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kestrel::store
