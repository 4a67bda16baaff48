// server::EventFeed, the event streams' one reader of the store, over a
// temporary SQLite store: streams of different jobs (and of every job) get
// exactly their events in id order, one store read per freshness interval
// serves them all, and a stream behind the window (an old Last-Event-ID)
// still gets every event from the store. On PostgreSQL (KESTREL_TEST_PG),
// the feed must not pass an event that commits after one with a higher id.
#include "server/event_feed.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "../store/pg_event_race.h"
#include "store/artifact_store.h"

namespace kestrel::server {
namespace {

namespace fs = std::filesystem;

class EventFeedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kestrel_event_feed_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto m = store::MetadataStore::Open(store::MetadataUrl(dir_.string()));
    ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
    meta_ = std::move(m).Value();
  }
  void TearDown() override {
    meta_.reset();
    fs::remove_all(dir_);
  }
  int64_t Append(int64_t job) {
    store::EventRecord ev;
    ev.job_id = job;
    ev.attempt = 1;
    ev.kind = "state";
    ev.payload_json = "{}";
    ev.created_ms = 1;
    auto id = meta_->AppendEvent(ev);
    EXPECT_TRUE(id.IsOk()) << id.GetStatus().ToString();
    return id.IsOk() ? *id : 0;
  }
  static std::vector<int64_t> Ids(const Result<std::vector<store::EventRecord>>& got) {
    EXPECT_TRUE(got.IsOk()) << got.GetStatus().ToString();
    std::vector<int64_t> out;
    if (got.IsOk())
      for (const auto& ev : *got) out.push_back(ev.id);
    return out;
  }

  fs::path dir_;
  std::unique_ptr<store::MetadataStore> meta_;
};

TEST_F(EventFeedTest, OneStoreReadPerIntervalServesEveryStreamItsOwnEvents) {
  const int64_t a0 = Append(1);  // before any stream: the history
  EventFeed feed(*meta_, 3, 50, 100);
  EXPECT_TRUE(Ids(feed.Since(a0, 1, 1000)).empty());
  const int64_t reads = feed.StoreReads();
  const int64_t a1 = Append(1), b1 = Append(2), a2 = Append(1), b2 = Append(2);
  // Within the interval: nothing read yet, nothing new.
  EXPECT_TRUE(Ids(feed.Since(a0, 1, 1020)).empty());
  EXPECT_EQ(feed.StoreReads(), reads);
  // The next interval: one refresh (two pages of 3) answers all three streams.
  EXPECT_EQ(Ids(feed.Since(a0, 1, 1050)), (std::vector<int64_t>{a1, a2}));
  const int64_t after_refresh = feed.StoreReads();
  EXPECT_EQ(after_refresh, reads + 2) << "4 new events in pages of 3";
  EXPECT_EQ(Ids(feed.Since(a0, 2, 1060)), (std::vector<int64_t>{b1, b2}));
  EXPECT_EQ(Ids(feed.Since(a0, 0, 1070)), (std::vector<int64_t>{a1, b1, a2}));  // at most a page
  EXPECT_EQ(Ids(feed.Since(a2, 0, 1080)), (std::vector<int64_t>{b2}));
  EXPECT_EQ(feed.StoreReads(), after_refresh);
  // The history before the first stream's start comes from the store.
  EXPECT_EQ(Ids(feed.Since(0, 1, 1090)), (std::vector<int64_t>{a0, a1, a2}));
  EXPECT_EQ(feed.StoreReads(), after_refresh + 1);
}

TEST_F(EventFeedTest, AStreamBehindTheWindowReadsTheStoreUntilItCatchesUp) {
  EventFeed feed(*meta_, 500, 50, 4);  // keeps 4 events
  EXPECT_TRUE(Ids(feed.Since(0, 0, 0)).empty());
  std::vector<int64_t> all;
  for (int i = 0; i < 10; ++i) all.push_back(Append(1 + i % 2));
  const auto newest = Ids(feed.Since(0, 0, 100));  // the refresh evicts all but 4: from the store
  EXPECT_EQ(newest, all);
  EXPECT_EQ(feed.Floor(), all[5]);
  EXPECT_EQ(feed.Cursor(), all[9]);
  const int64_t reads = feed.StoreReads();
  EXPECT_EQ(Ids(feed.Since(all[5], 0, 110)), (std::vector<int64_t>(all.begin() + 6, all.end())));
  EXPECT_EQ(Ids(feed.Since(all[5], 2, 120)), (std::vector<int64_t>{all[7], all[9]}));
  EXPECT_EQ(feed.StoreReads(), reads) << "inside the window: no store read";
  EXPECT_EQ(Ids(feed.Since(all[2], 1, 130)), (std::vector<int64_t>{all[4], all[6], all[8]}));
  EXPECT_EQ(feed.StoreReads(), reads + 1);
}

TEST_F(EventFeedTest, AStreamStartedPastEveryEventDoesNotHoldTheWindow) {
  const int64_t a = Append(1);
  EventFeed feed(*meta_, 500, 50, 100);
  EXPECT_TRUE(Ids(feed.Since(1'000'000, 0, 0)).empty());  // a made-up Last-Event-ID
  EXPECT_EQ(Ids(feed.Since(0, 1, 10)), (std::vector<int64_t>{a}));
  const int64_t b = Append(1);
  EXPECT_EQ(Ids(feed.Since(a, 1, 100)), (std::vector<int64_t>{b}));
  EXPECT_EQ(feed.Floor(), 0) << "the window moved down to the second stream";
}

// The lost-event race of tests/store/pg_event_race.h read through the feed:
// the streams' shared reader gets both events, once each, in id order.
TEST(EventFeedPostgresTest, AnEventCommittedAfterAHigherIdStillReachesTheStreams) {
  const char* pg = std::getenv("KESTREL_TEST_PG");
  if (pg == nullptr || *pg == '\0') GTEST_SKIP() << "KESTREL_TEST_PG not set";
  std::random_device rd;
  const std::string schema = "feed" + std::to_string(::getpid()) + "_" + std::to_string(rd() % 1000000);
  ASSERT_TRUE(store::ExecPostgres(pg, "CREATE SCHEMA " + schema).IsOk());
  struct Drop {
    std::string pg, schema;
    ~Drop() { EXPECT_TRUE(store::ExecPostgres(pg, "DROP SCHEMA " + schema + " CASCADE").IsOk()); }
  } drop{pg, schema};
  store::EventRace race(store::WithParam(pg, "options=-csearch_path%3D" + schema));
  auto a = race.Open("a");
  auto b = race.Open("b");
  auto r = race.Open("r");
  ASSERT_TRUE(a && b && r);
  EventFeed feed(*r, 100, 50, 1000);
  int64_t now_ms = 0;
  ASSERT_TRUE(feed.Since(0, 0, now_ms).IsOk());  // the window starts before the race
  auto got = race.Run(
      *a, *b,
      [](store::MetadataStore& s) {
        return s.AppendEvent({0, 7, 1, "metric", "{}", 1}).GetStatus();
      },
      [&](int64_t after) {
        now_ms += 50;  // a refresh per read
        return feed.Since(after, 0, now_ms);
      });
  ASSERT_GT(got.n, 0);
  ASSERT_EQ(got.stored, (std::vector<int64_t>{got.n, got.n + 1}));
  EXPECT_EQ(got.read, got.stored) << "first read: " << ::testing::PrintToString(got.first);
}

}  // namespace
}  // namespace kestrel::server
