// The lost-event race on PostgreSQL, played out step by step with the
// store's own code: event ids come from a sequence when the INSERT runs, so
// a transaction A can draw id N, a transaction B draw N+1 and commit first;
// a reader that moved its cursor to N+1 before A committed would never see
// N. RunEventRace makes that interleaving happen every time:
//   1. a blocker connection inserts an event row with id N (the sequence's
//      next value) and keeps its transaction open;
//   2. writer A (a store operation that writes an event) draws N and waits
//      on the blocker's uncommitted key, inside its own transaction;
//   3. writer B (AppendEvent) draws N+1 and commits (or waits, if the store
//      makes it);
//   4. the reader reads after the cursor (it may return or wait);
//   5. the blocker rolls back, so A's insert goes through and A commits;
//   6. the reader reads again from where its first read left it.
// The ids the reader got over both reads must be A's and B's, each once,
// in id order. Each step waits until the connection it started has either
// finished or is waiting on a lock (pg_stat_activity, by the
// application_name each connection gets), so nothing depends on sleeps.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "store/internal/sql_conn.h"
#include "store/metadata_store.h"
#include "store/postgres_store.h"

namespace kestrel::store {

// `url` with one more libpq connection parameter.
inline std::string WithParam(const std::string& url, const std::string& param) {
  return url + (url.find('?') == std::string::npos ? "?" : "&") + param;
}

struct EventRaceResult {
  int64_t n = 0;                // the id the blocker held: A's
  std::vector<int64_t> stored;  // the events after the start, as stored at the end
  std::vector<int64_t> read;    // what the reader got over its two reads
  std::vector<int64_t> first;   // ... in its first read (before A committed)
};

class EventRace {
 public:
  using Reader = std::function<Result<std::vector<EventRecord>>(int64_t after_id)>;

  // `url`: the store (a schema of its own, nothing else writing events in it).
  explicit EventRace(std::string url) : url_(std::move(url)) {
    static std::atomic<int> races{0};
    tag_ = "race" + std::to_string(::getpid()) + "_" + std::to_string(++races) + "_";
    auto a = ConnectPostgres(url_);
    auto w = ConnectPostgres(url_);
    EXPECT_TRUE(a.IsOk()) << a.GetStatus().ToString();
    EXPECT_TRUE(w.IsOk()) << w.GetStatus().ToString();
    if (a.IsOk() && w.IsOk()) {
      admin_ = std::move(a).Value();
      watch_ = std::move(w).Value();
    }
  }

  // A store on `url` (the race's when empty) with its own application_name
  // (`role`: "a", "b", "r").
  std::unique_ptr<MetadataStore> Open(const std::string& role, const std::string& url = "") {
    auto s = MetadataStore::Open(WithParam(url.empty() ? url_ : url, "application_name=" + tag_ + role));
    EXPECT_TRUE(s.IsOk()) << s.GetStatus().ToString();
    return s.IsOk() ? std::move(s).Value() : nullptr;
  }

  // Plays the race: `writer_a` runs on `a` (opened with Open("a")), B's
  // append on `b` (Open("b")), `reader` reads with a store opened as "r".
  EventRaceResult Run(MetadataStore& a, MetadataStore& b,
                      const std::function<Status(MetadataStore&)>& writer_a, const Reader& reader) {
    EventRaceResult out;
    if (admin_ == nullptr) return out;
    auto start = a.ReadEvents(0, 0, 1'000'000);
    EXPECT_TRUE(start.IsOk()) << start.GetStatus().ToString();
    const int64_t cursor0 = start.IsOk() && !start->empty() ? start->back().id : 0;
    // 1. The blocker holds the sequence's next value.
    auto next = admin_->Query(
        "SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END FROM event_ids", {});
    EXPECT_TRUE(next.IsOk()) << next.GetStatus().ToString();
    if (!next.IsOk()) return out;
    out.n = next->at(0).Int(0);
    EXPECT_TRUE(admin_->Begin().IsOk());
    auto held = admin_->Exec(
        "INSERT INTO events(id, job_id, attempt, kind, payload_json, created_at) VALUES ($1, 0, 0, "
        "'blocker', '{}', 0)",
        {out.n});
    EXPECT_TRUE(held.IsOk()) << held.GetStatus().ToString();
    // 2. A draws N and waits on the blocker's key (wait_event transactionid:
    //    not the event lock, so it has its id).
    auto fa = std::async(std::launch::async, [&] { return writer_a(a); });
    EXPECT_TRUE(WaitFor(fa, "a", "transactionid")) << "writer A never reached the blocker's id " << out.n;
    // 3. B commits an event with a higher id (or waits on a lock).
    auto fb = std::async(std::launch::async, [&] {
      EventRecord ev{0, 0, 1, "log", R"({"b":1})", 1};
      return b.AppendEvent(ev).GetStatus();
    });
    WaitFor(fb, "b", "");
    // 4. The reader's first read.
    auto fr = std::async(std::launch::async, [&] { return reader(cursor0); });
    WaitFor(fr, "r", "");
    // 5. A goes through.
    EXPECT_TRUE(admin_->Rollback().IsOk());
    Status sa = fa.get();
    EXPECT_TRUE(sa.IsOk()) << sa.ToString();
    Status sb = fb.get();
    EXPECT_TRUE(sb.IsOk()) << sb.ToString();
    auto r1 = fr.get();
    EXPECT_TRUE(r1.IsOk()) << r1.GetStatus().ToString();
    int64_t cursor = cursor0;
    if (r1.IsOk()) {
      for (const auto& ev : *r1) {
        out.first.push_back(ev.id);
        out.read.push_back(ev.id);
        cursor = ev.id;
      }
    }
    // 6. The reader follows from its cursor.
    auto r2 = reader(cursor);
    EXPECT_TRUE(r2.IsOk()) << r2.GetStatus().ToString();
    if (r2.IsOk())
      for (const auto& ev : *r2) out.read.push_back(ev.id);
    auto all = a.ReadEvents(cursor0, 0, 1'000'000);
    EXPECT_TRUE(all.IsOk()) << all.GetStatus().ToString();
    if (all.IsOk())
      for (const auto& ev : *all) out.stored.push_back(ev.id);
    return out;
  }

 private:
  // Waits until `f` is done, or the connection named `role` waits on a lock
  // (of wait event `event`, any when empty). False after 10 s.
  template <typename T>
  bool WaitFor(std::future<T>& f, const std::string& role, const std::string& event) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < until) {
      if (f.wait_for(std::chrono::milliseconds(2)) == std::future_status::ready) return event.empty();
      // The blocker's connection is inside its transaction: watch with another.
      auto w = watch_->Query(
          "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'"
          " AND ($2 = '' OR wait_event = $2)",
          {tag_ + role, event});
      if (w.IsOk() && w->at(0).Int(0) > 0) return true;
    }
    return false;
  }

  std::string url_, tag_;
  std::unique_ptr<SqlConn> admin_, watch_;
};

}  // namespace kestrel::store
