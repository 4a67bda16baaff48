// What keeping event ids in commit order costs on PostgreSQL (docs/jobs.md
// "Event ids are monotonic in commit order").
//
// W writer threads (one connection each) append N events each while one
// reader follows the log every 50 ms, as the event streams' shared reader
// does (server/event_feed.h). Four designs, each in a fresh schema, in
// rounds (A B C A B C ...), median of the rounds:
//   none      the sequence alone: BEGIN, INSERT ... nextval() RETURNING id,
//             COMMIT; the reader reads "id > cursor" (can skip an event:
//             tests/store/postgres_event_order_test.cc);
//   store     MetadataStore::AppendEvent and ReadEvents, the shipped code:
//             writers hold an advisory lock shared from before their id to
//             their end, a read takes it exclusively for one statement;
//   held_lock the store before the bench: writers as `store`, but the
//             reader held the exclusive lock through its page read and
//             COMMIT (three round trips, every append waiting meanwhile);
//   exclusive writers take the advisory lock exclusively before their id:
//             appends are serialized from id to COMMIT (the other exact way).
// Prints appends/s, each design's ratio to `none`, append latency p50/p99,
// and the reader's read latency p50/p99. Every design must store W*N events
// with distinct ids, and the reader must have read them all, in order
// (exit 1 otherwise; `none` is only reported when it skipped some).
//
// Usage: kestrel_bench_event_order [events_per_writer=500] [writers=4] [rounds=3]
// Needs KESTREL_TEST_PG (eval "export $(scripts/pg-test-server.sh start | grep '^KESTREL_TEST_PG=')").
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "store/internal/sql_conn.h"
#include "store/metadata_store.h"
#include "store/postgres_store.h"

using namespace kestrel;
using Clock = std::chrono::steady_clock;

namespace {

// The store's advisory lock key for event ids (src/store/job_store.cc).
constexpr const char* kEventLock = "4242424243";

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }
double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

[[noreturn]] void Die(const std::string& what, const Status& s) {
  std::fprintf(stderr, "%s: %s\n", what.c_str(), s.ToString().c_str());
  std::exit(1);
}

struct Schema {
  std::string admin, name, url;
  ~Schema() { (void)store::ExecPostgres(admin, "DROP SCHEMA " + name + " CASCADE"); }  // best effort
};

std::unique_ptr<Schema> FreshSchema(const std::string& admin, const std::string& tag) {
  auto s = std::make_unique<Schema>();
  std::random_device rd;
  s->admin = admin;
  s->name = "eventbench_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(rd() % 100000);
  Status st = store::ExecPostgres(admin, "CREATE SCHEMA " + s->name);
  if (!st.IsOk()) Die("create schema", st);
  s->url = admin + (admin.find('?') == std::string::npos ? "?" : "&") + "options=-csearch_path%3D" + s->name;
  // Creates the tables (migrations) in the schema.
  auto m = store::MetadataStore::Open(s->url);
  if (!m.IsOk()) Die("open", m.GetStatus());
  return s;
}

// One writer's append and one reader's read, per design.
using Append = std::function<Status(int64_t job)>;
using Read = std::function<Result<std::vector<int64_t>>(int64_t after)>;

struct Design {
  std::string name;
  std::function<Append(const std::string& url)> writer;
  std::function<Read(const std::string& url)> reader;
};

std::unique_ptr<store::SqlConn> Conn(const std::string& url) {
  auto c = store::ConnectPostgres(url);
  if (!c.IsOk()) Die("connect", c.GetStatus());
  return std::move(c).Value();
}

// A raw-SQL writer: the store's AppendEvent statement, with `lock_cte`
// (empty: none) taken before nextval().
Append RawWriter(const std::string& url, const std::string& lock_cte) {
  std::shared_ptr<store::SqlConn> c = Conn(url);
  const std::string sql = (lock_cte.empty() ? "" : "WITH l AS MATERIALIZED (" + lock_cte + ") ") +
                          "INSERT INTO events(id, job_id, attempt, kind, payload_json, created_at) "
                          "SELECT nextval('event_ids'), $1, 1, 'metric', '{}', 0" +
                          (lock_cte.empty() ? "" : " FROM l") + " RETURNING id";
  return [c, sql](int64_t job) -> Status {
    KESTREL_RETURN_IF_ERROR(c->Begin());
    auto r = c->Query(sql, {job});
    if (!r.IsOk()) {
      (void)c->Rollback();  // the failure above is what is reported
      return r.GetStatus();
    }
    return c->Commit();
  };
}

Read RawReader(const std::string& url) {
  std::shared_ptr<store::SqlConn> c = Conn(url);
  return [c](int64_t after) -> Result<std::vector<int64_t>> {
    KESTREL_ASSIGN_OR_RETURN(auto rows,
                             c->Query("SELECT id FROM events WHERE id > $1 ORDER BY id LIMIT 500", {after}));
    std::vector<int64_t> ids;
    for (const auto& r : rows) ids.push_back(r.Int(0));
    return ids;
  };
}

// The reader before this bench's commit: the exclusive lock taken in a
// transaction and held through the page read and the COMMIT.
Read HeldLockReader(const std::string& url) {
  std::shared_ptr<store::SqlConn> c = Conn(url);
  return [c](int64_t after) -> Result<std::vector<int64_t>> {
    KESTREL_RETURN_IF_ERROR(c->Begin());
    auto rows = c->Query(std::string("SELECT pg_advisory_xact_lock(") + kEventLock + ")", {});
    if (rows.IsOk()) rows = c->Query("SELECT id FROM events WHERE id > $1 ORDER BY id LIMIT 500", {after});
    if (!rows.IsOk()) {
      (void)c->Rollback();  // the failure above is what is reported
      return rows.GetStatus();
    }
    KESTREL_RETURN_IF_ERROR(c->Commit());
    std::vector<int64_t> ids;
    for (const auto& r : *rows) ids.push_back(r.Int(0));
    return ids;
  };
}

Read StoreReader(const std::string& url) {
  auto m = store::MetadataStore::Open(url);
  if (!m.IsOk()) Die("open", m.GetStatus());
  std::shared_ptr<store::MetadataStore> s = std::move(m).Value();
  return [s](int64_t after) -> Result<std::vector<int64_t>> {
    KESTREL_ASSIGN_OR_RETURN(auto evs, s->ReadEvents(after, 0, 500));
    std::vector<int64_t> ids;
    for (const auto& e : evs) ids.push_back(e.id);
    return ids;
  };
}

struct RunResult {
  double per_sec = 0;
  std::vector<double> append_ms, read_ms;
  int64_t stored = 0, read = 0;
  bool in_order = true;
};

RunResult RunOnce(const std::string& admin, const Design& d, int n, int writers) {
  auto schema = FreshSchema(admin, d.name);
  std::vector<Append> appends;
  for (int w = 0; w < writers; ++w) appends.push_back(d.writer(schema->url));
  Read read = d.reader(schema->url);
  RunResult out;
  std::atomic<bool> done{false};
  std::vector<int64_t> seen;
  std::vector<double> read_ms;
  std::thread reader([&] {
    int64_t cursor = 0;
    while (true) {
      const bool last = done.load();
      auto t0 = Clock::now();
      auto got = read(cursor);
      read_ms.push_back(Ms(Clock::now() - t0));
      if (!got.IsOk()) Die("read", got.GetStatus());
      for (int64_t id : *got) seen.push_back(id);
      if (!got->empty()) cursor = got->back();
      if (last && got->empty()) return;
      if (got->size() < 500) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  std::vector<std::vector<double>> lat(static_cast<size_t>(writers));
  const auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int w = 0; w < writers; ++w) {
    ts.emplace_back([&, w] {
      for (int i = 0; i < n; ++i) {
        auto a0 = Clock::now();
        Status s = appends[static_cast<size_t>(w)](w + 1);
        if (!s.IsOk()) Die("append", s);
        lat[static_cast<size_t>(w)].push_back(Ms(Clock::now() - a0));
      }
    });
  }
  for (auto& t : ts) t.join();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  done = true;
  reader.join();
  out.per_sec = static_cast<double>(writers * n) / secs;
  for (auto& l : lat) out.append_ms.insert(out.append_ms.end(), l.begin(), l.end());
  out.read_ms = read_ms;
  auto c = Conn(schema->url);
  auto all = c->Query("SELECT id FROM events ORDER BY id", {});
  if (!all.IsOk()) Die("count", all.GetStatus());
  std::vector<int64_t> ids;
  for (const auto& r : *all) ids.push_back(r.Int(0));
  out.stored = static_cast<int64_t>(ids.size());
  out.read = static_cast<int64_t>(seen.size());
  out.in_order = seen == ids;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 500;
  const int writers = argc > 2 ? std::atoi(argv[2]) : 4;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 3;
  const char* pg = std::getenv("KESTREL_TEST_PG");
  if (pg == nullptr || *pg == '\0' || n <= 0 || writers <= 0 || rounds <= 0) {
    std::fprintf(
        stderr, "usage: KESTREL_TEST_PG=postgresql://... %s [events_per_writer=500] [writers=4] [rounds=3]\n",
        argv[0]);
    return 2;
  }
  const std::vector<Design> designs = {
      {"none", [](const std::string& u) { return RawWriter(u, ""); }, RawReader},
      {"store",
       [](const std::string& u) -> Append {
         auto m = store::MetadataStore::Open(u);
         if (!m.IsOk()) Die("open", m.GetStatus());
         std::shared_ptr<store::MetadataStore> s = std::move(m).Value();
         return [s](int64_t job) { return s->AppendEvent({0, job, 1, "metric", "{}", 0}).GetStatus(); };
       },
       StoreReader},
      {"held_lock",
       [](const std::string& u) {
         return RawWriter(u, std::string("SELECT pg_advisory_xact_lock_shared(") + kEventLock + ")");
       },
       HeldLockReader},
      {"exclusive",
       [](const std::string& u) {
         return RawWriter(u, std::string("SELECT pg_advisory_xact_lock(") + kEventLock + ")");
       },
       RawReader},
  };
  std::vector<std::vector<RunResult>> res(designs.size());
  for (int r = 0; r < rounds; ++r)
    for (size_t d = 0; d < designs.size(); ++d) res[d].push_back(RunOnce(pg, designs[d], n, writers));
  std::printf("%d writers x %d appends, a reader every 50 ms, median of %d rounds\n", writers, n, rounds);
  std::printf("%-10s %10s %7s %9s %9s %9s %9s  %s\n", "design", "appends/s", "ratio", "app p50", "app p99",
              "read p50", "read p99", "reader");
  auto median = [](std::vector<double> v) { return Pct(std::move(v), 0.5); };
  std::vector<double> rates0;
  for (const auto& x : res[0]) rates0.push_back(x.per_sec);
  const double base = median(rates0);
  int fail = 0;
  for (size_t d = 0; d < designs.size(); ++d) {
    std::vector<double> rates, app, rd;
    int64_t missed = 0;
    bool order = true;
    for (const auto& x : res[d]) {
      rates.push_back(x.per_sec);
      app.insert(app.end(), x.append_ms.begin(), x.append_ms.end());
      rd.insert(rd.end(), x.read_ms.begin(), x.read_ms.end());
      missed += x.stored - x.read;
      order = order && x.in_order;
      if (x.stored != static_cast<int64_t>(n) * writers) ++fail;
    }
    const double rate = median(rates);
    const std::string reader = order ? "read every event in order"
                                     : "skipped " + std::to_string(missed) + " event(s) or their order";
    std::printf("%-10s %10.0f %7.2f %9.2f %9.2f %9.2f %9.2f  %s\n", designs[d].name.c_str(), rate,
                rate / base, Pct(app, 0.5), Pct(app, 0.99), Pct(rd, 0.5), Pct(rd, 0.99), reader.c_str());
    if (d > 0 && !order) ++fail;
  }
  return fail == 0 ? 0 : 1;
}
