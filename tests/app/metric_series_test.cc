// The metric series behind GET /api/jobs/{id}/metrics (app/metric_series.h):
// downsampling keeps every spike with at most 2 points per pixel column,
// returns raw points when they fit; the builder keeps one point per (series,
// x) from the latest attempt; the event payloads and the attempt's writer
// (app/metric_events.h) on a real SQLite store.
#include "app/metric_series.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <set>

#include "app/metric_events.h"
#include "store/artifact_store.h"
#include "store/job_types.h"

namespace kestrel::app {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<SeriesPoint> Noise(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.9, 1.1);
  std::vector<SeriesPoint> pts(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) pts[static_cast<size_t>(i)] = {i + 1, u(rng)};
  return pts;
}

// Points per column of the window [lo, hi] cut into `width` buckets.
std::map<int64_t, int> PerColumn(const std::vector<SeriesPoint>& pts, int64_t lo, int64_t hi, int64_t width) {
  std::map<int64_t, int> per;
  const long double span = static_cast<long double>(hi - lo) + 1.0L;
  for (const auto& p : pts) ++per[static_cast<int64_t>((p.x - lo) * static_cast<long double>(width) / span)];
  return per;
}

TEST(Downsample, AMillionPointsKeepEveryOneOfTenSingleStepSpikes) {
  std::vector<SeriesPoint> pts = Noise(1'000'000, 7);
  // Five up and five down, one step each, spread over the run.
  std::set<int64_t> spikes;
  for (int k = 0; k < 10; ++k) {
    const int64_t x = 12'345 + k * 98'765;
    pts[static_cast<size_t>(x - 1)].y = k % 2 == 0 ? 50.0 + k : -50.0 - k;
    spikes.insert(x);
  }
  for (int64_t width : {1, 7, 100, 800, 1920}) {
    const Downsampled d = Downsample(pts, width);
    EXPECT_TRUE(d.downsampled);
    EXPECT_EQ(d.in_window, 1'000'000);
    EXPECT_LE(static_cast<int64_t>(d.points.size()), 2 * width) << "width " << width;
    std::set<int64_t> seen;
    for (const auto& p : d.points) {
      if (spikes.count(p.x) != 0) seen.insert(p.x);
    }
    // With one column the two extremes are the highest and lowest spike.
    if (width == 1) {
      EXPECT_EQ(seen, (std::set<int64_t>{12'345 + 8 * 98'765, 12'345 + 9 * 98'765}));
      continue;
    }
    EXPECT_EQ(seen, spikes) << "width " << width;
    for (const auto& [col, n] : PerColumn(d.points, 1, 1'000'000, width)) {
      EXPECT_LE(n, 2) << "width " << width << " column " << col;
      EXPECT_LT(col, width);
    }
    for (size_t i = 1; i < d.points.size(); ++i) ASSERT_LT(d.points[i - 1].x, d.points[i].x);
  }
}

TEST(Downsample, AZoomedWindowKeepsItsSpikesAndOnlyItsPoints) {
  std::vector<SeriesPoint> pts = Noise(1'000'000, 11);
  pts[500'000 - 1].y = 99;
  pts[500'123 - 1].y = -99;
  pts[10 - 1].y = 1000;  // outside the window: must not appear
  const Downsampled d = Downsample(pts, 300, 400'000, 600'000);
  EXPECT_EQ(d.in_window, 200'001);
  EXPECT_TRUE(d.downsampled);
  EXPECT_LE(d.points.size(), 600u);
  bool up = false, down = false;
  for (const auto& p : d.points) {
    EXPECT_GE(p.x, 400'000);
    EXPECT_LE(p.x, 600'000);
    up = up || (p.x == 500'000 && p.y == 99);
    down = down || (p.x == 500'123 && p.y == -99);
  }
  EXPECT_TRUE(up);
  EXPECT_TRUE(down);
  for (const auto& [col, n] : PerColumn(d.points, 400'000, 600'000, 300)) EXPECT_LE(n, 2) << col;
}

TEST(Downsample, ReturnsEveryRawPointWhenTheWindowHoldsAtMostTwicePerColumn) {
  const std::vector<SeriesPoint> pts = Noise(2'000, 3);
  Downsampled d = Downsample(pts, 1000);
  EXPECT_FALSE(d.downsampled);
  ASSERT_EQ(d.points.size(), 2000u);
  for (size_t i = 0; i < pts.size(); ++i) {
    EXPECT_EQ(d.points[i].x, pts[i].x);
    EXPECT_EQ(d.points[i].y, pts[i].y);
  }
  // One more point than 2 * width: downsampled.
  d = Downsample(Noise(2'001, 3), 1000);
  EXPECT_TRUE(d.downsampled);
  EXPECT_LE(d.points.size(), 2000u);
  // A window: only its points, raw.
  d = Downsample(pts, 10, 101, 120);
  EXPECT_FALSE(d.downsampled);
  ASSERT_EQ(d.points.size(), 20u);
  EXPECT_EQ(d.points.front().x, 101);
  EXPECT_EQ(d.points.back().x, 120);
  EXPECT_TRUE(Downsample(pts, 10, 5000, 6000).points.empty());
  EXPECT_TRUE(Downsample(pts, 10, 50, 40).points.empty());
  EXPECT_TRUE(Downsample({}, 10).points.empty());
}

store::EventRecord Ev(int64_t id, int64_t attempt, const std::string& kind, const json& payload) {
  store::EventRecord ev;
  ev.id = id;
  ev.job_id = 1;
  ev.attempt = attempt;
  ev.kind = kind;
  ev.payload_json = payload.dump();
  ev.created_ms = 1000 + id;
  return ev;
}

TEST(MetricSeriesBuilder, TheLatestAttemptWinsFromWhereItStarts) {
  MetricSeriesBuilder b;
  int64_t id = 0;
  auto step = [&](int64_t attempt, int64_t x, double y) {
    b.Add(Ev(++id, attempt, kMetricEventKind, StepMetricsPayload({1, x, y, 0, 0})));
  };
  auto epoch = [&](int64_t attempt, int e, double map50) {
    EpochMetrics m;
    m.epoch = e;
    m.map50 = map50;
    b.Add(Ev(++id, attempt, kMetricEventKind, EpochMetricsPayload(m)));
  };
  b.Add(Ev(++id, 1, "state", {{"state", "running"}}));
  step(1, 10, 1.0);
  step(1, 20, 2.0);
  epoch(1, 1, 0.1);
  step(1, 30, 3.0);
  step(1, 40, 4.0);
  epoch(1, 2, 0.2);
  // Attempt 2 resumed from the checkpoint after iteration 25: its points replace 30 and 40.
  step(2, 28, 30.0);
  epoch(2, 2, 0.25);  // a re-reported epoch: the newer value
  step(1, 50, 5.0);   // a stale child of attempt 1, still writing: ignored
  epoch(1, 3, 0.9);
  step(2, 35, 35.0);
  // A NaN-policy rollback inside attempt 2 re-runs 33..: 35 is replaced.
  step(2, 33, 33.0);
  b.Add(Ev(++id, 2, kProgressEventKind, ProgressPayload({2, 3, 4, 10, 33, 100, 5.5, 12.0})));
  b.Add(Ev(++id, 1, kProgressEventKind, ProgressPayload({9, 9, 9, 9, 9, 9, 9, 9})));

  std::map<std::string, MetricSeries> by_name;
  for (auto& s : b.Series()) by_name[s.name] = s;
  ASSERT_EQ(by_name.count("iter/box_loss"), 1u);
  const auto& loss = by_name["iter/box_loss"];
  EXPECT_EQ(loss.axis, "step");
  std::vector<std::pair<int64_t, double>> got;
  for (const auto& p : loss.points) got.emplace_back(p.x, p.y);
  EXPECT_EQ(got, (std::vector<std::pair<int64_t, double>>{{10, 1}, {20, 2}, {28, 30}, {33, 33}}));
  const auto& map = by_name["metrics/mAP50(B)"];
  EXPECT_EQ(map.axis, "epoch");
  got.clear();
  for (const auto& p : map.points) got.emplace_back(p.x, p.y);
  EXPECT_EQ(got, (std::vector<std::pair<int64_t, double>>{{1, 0.1}, {2, 0.25}}));
  EXPECT_EQ(b.Progress()["attempt"], 2);
  EXPECT_EQ(b.Progress()["iteration"], 33);
  EXPECT_EQ(b.Progress()["eta_s"], 12.0);
  EXPECT_EQ(by_name.count("state"), 0u);
  EXPECT_EQ(by_name.size(), 14u + 3u) << "14 epoch columns and 3 step losses";
}

// The worker's usage samples (docs/jobs.md "System usage"): x counts the
// seconds since each attempt's child started, so a newer attempt's series
// starts afresh instead of keeping the older attempt's points before its
// first x; a stale child's samples are ignored as for every series.
TEST(MetricSeriesBuilder, UsageSamplesAreATimeSeriesOfTheNewestAttemptOnly) {
  MetricSeriesBuilder b;
  int64_t id = 0;
  auto sample = [&](int64_t attempt, int64_t x, double cpu) {
    b.Add(
        Ev(++id, attempt, kMetricEventKind,
           {{"type", "time"}, {"x", x}, {"values", {{"sys/cpu_percent", cpu}, {"sys/rss_mb", 100.0 + x}}}}));
  };
  sample(1, 5, 90);
  sample(1, 10, 95);
  sample(1, 15, 97);
  sample(2, 6, 40);   // attempt 2's first sample: 5 is not kept before it
  sample(1, 20, 99);  // the old child, still sampled: ignored
  sample(2, 11, 45);
  const auto& by_name = b.SeriesByName();
  ASSERT_EQ(by_name.count("sys/cpu_percent"), 1u);
  const auto& cpu = by_name.at("sys/cpu_percent");
  EXPECT_EQ(cpu.axis, "time");
  EXPECT_EQ(cpu.attempt, 2);
  std::vector<std::pair<int64_t, double>> got;
  for (const auto& p : cpu.points) got.emplace_back(p.x, p.y);
  EXPECT_EQ(got, (std::vector<std::pair<int64_t, double>>{{6, 40}, {11, 45}}));
  EXPECT_EQ(by_name.at("sys/rss_mb").points.size(), 2u);
  const json doc = JobMetricsJson(7, b, {});
  EXPECT_EQ(doc["names"][0], json({{"name", "sys/cpu_percent"}, {"x", "time"}}));
}

TEST(MetricSeriesBuilder, MalformedPayloadsAndNonFiniteValuesAreSkipped) {
  MetricSeriesBuilder b;
  b.Add(Ev(1, 1, kMetricEventKind, json("not an object")));
  b.Add(Ev(2, 1, kMetricEventKind, {{"type", "epoch"}, {"x", "3"}, {"values", {{"a", 1}}}}));
  b.Add(Ev(3, 1, kMetricEventKind, {{"type", "other"}, {"x", 3}, {"values", {{"a", 1}}}}));
  b.Add(Ev(4, 1, kMetricEventKind, {{"type", "step"}, {"x", 3}, {"values", {{"a", "1"}, {"b", 2.5}}}}));
  store::EventRecord raw = Ev(5, 1, kMetricEventKind, json::object());
  raw.payload_json = R"({"type":"step","x":4,"values":{"b":1e999}})";  // parses as inf
  b.Add(raw);
  const auto series = b.Series();
  ASSERT_EQ(series.size(), 1u);
  EXPECT_EQ(series[0].name, "b");
  ASSERT_EQ(series[0].points.size(), 1u);
  EXPECT_EQ(series[0].points[0].x, 3);
  EXPECT_TRUE(b.Progress().is_null());
}

TEST(JobMetricsJson, ListsNamesAndDownsamplesEachRequestedSeries) {
  MetricSeriesBuilder b;
  for (int64_t i = 1; i <= 5000; ++i)
    b.Add(Ev(i, 1, kMetricEventKind, StepMetricsPayload({1, i, i == 2500 ? 100.0 : 1.0, 0, 0})));
  MetricsQuery q;
  q.width = 50;
  q.names = {"iter/box_loss", "metrics/mAP50(B)"};
  const json doc = JobMetricsJson(7, b, q);
  EXPECT_EQ(doc["ok"], true);
  EXPECT_EQ(doc["job_id"], 7);
  EXPECT_EQ(doc["names"].size(), 3u);
  EXPECT_EQ(doc["names"][0], (json{{"name", "iter/box_loss"}, {"x", "step"}}));
  ASSERT_EQ(doc["series"].size(), 2u);
  const json& s = doc["series"][0];
  EXPECT_EQ(s["name"], "iter/box_loss");
  EXPECT_EQ(s["points"], 5000);
  EXPECT_EQ(s["downsampled"], true);
  EXPECT_LE(s["data"].size(), 100u);
  bool spike = false;
  for (const auto& p : s["data"]) spike = spike || (p[0] == 2500 && p[1] == 100.0);
  EXPECT_TRUE(spike) << s.dump();
  EXPECT_EQ(doc["series"][1]["name"], "metrics/mAP50(B)");
  EXPECT_TRUE(doc["series"][1]["data"].empty()) << "a series the job has not reported yet is empty";
  EXPECT_TRUE(doc["progress"].is_null());
  EXPECT_EQ(doc["last_event_id"], 5000) << "a page follows the stream from here, replaying nothing";
  EXPECT_EQ(doc["event_count"], 5000);
}

// The document says up to which event the series go (the newest event of
// any kind folded), and the builder keeps a bounded tail of the newest
// events for a job page's table.
TEST(MetricSeriesBuilder, KnowsItsNewestEventAndKeepsABoundedTail) {
  MetricSeriesBuilder b;
  EXPECT_EQ(JobMetricsJson(1, b, {})["last_event_id"], 0);
  const auto n = static_cast<int64_t>(MetricSeriesBuilder::kRecentEvents) + 50;
  for (int64_t i = 1; i <= n; ++i)
    b.Add(Ev(10 * i, 1, kMetricEventKind, StepMetricsPayload({1, i, 1.0, 0, 0})));
  b.Add(Ev(10 * n + 3, 1, "state", {{"state", "succeeded"}}));
  EXPECT_EQ(b.LastEventId(), 10 * n + 3);
  EXPECT_EQ(b.EventCount(), n + 1);
  ASSERT_EQ(b.RecentEvents().size(), MetricSeriesBuilder::kRecentEvents);
  EXPECT_EQ(b.RecentEvents().back().kind, "state");
  EXPECT_EQ(b.RecentEvents().front().id,
            10 * (n - static_cast<int64_t>(MetricSeriesBuilder::kRecentEvents) + 2));
}

class MetricEventsStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    home_ = (fs::temp_directory_path() / ("kestrel_metric_events_" + std::to_string(::getpid()) + "_" + name))
                .string();
    fs::remove_all(home_);
    fs::create_directories(home_);
    auto m = store::MetadataStore::Open(store::MetadataUrl(home_));
    ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
    meta_ = std::move(m).Value();
  }
  void TearDown() override {
    meta_.reset();
    fs::remove_all(home_);
  }
  std::string home_;
  std::unique_ptr<store::MetadataStore> meta_;
};

TEST_F(MetricEventsStoreTest, TheWriterAppendsEveryEpochInOrderAndReportedEpochsReadsThemBack) {
  const std::string url = store::MetadataUrl(home_);
  MetricEventWriter w([url] { return store::MetadataStore::Open(url); }, 42, 2, [] { return int64_t{1234}; });
  for (int e = 1; e <= 3; ++e) {
    EpochMetrics m;
    m.epoch = e;
    m.map50 = 0.1 * e;
    w.Post(kMetricEventKind, EpochMetricsPayload(m), false);
  }
  w.Post(kProgressEventKind, ProgressPayload({3, 3, 1, 1, 3, 3, 1, 0}), true);
  EXPECT_EQ(w.Finish(10'000), 4);
  EXPECT_EQ(w.Dropped(), 0);
  w.Post(kMetricEventKind, json::object(), false);  // after Finish: nothing
  auto events = meta_->ReadEvents(0, 42, 100);
  ASSERT_TRUE(events.IsOk()) << events.GetStatus().ToString();
  ASSERT_EQ(events->size(), 4u);
  for (size_t i = 0; i < 3; ++i) {
    const auto& ev = (*events)[i];
    EXPECT_EQ(ev.kind, "metric");
    EXPECT_EQ(ev.attempt, 2);
    EXPECT_EQ(ev.created_ms, 1234);
    const json p = json::parse(ev.payload_json);
    EXPECT_EQ(p["epoch"], static_cast<int>(i) + 1);
    EXPECT_DOUBLE_EQ(p["values"]["metrics/mAP50(B)"].get<double>(), 0.1 * static_cast<double>(i + 1));
  }
  EXPECT_EQ((*events)[3].kind, "progress");
  auto reported = ReportedEpochs(*meta_, 42);
  ASSERT_TRUE(reported.IsOk()) << reported.GetStatus().ToString();
  EXPECT_EQ(*reported, (std::set<int>{1, 2, 3}));
  auto none = ReportedEpochs(*meta_, 43);
  ASSERT_TRUE(none.IsOk());
  EXPECT_TRUE(none->empty());
}

TEST_F(MetricEventsStoreTest, AnUnavailableStoreNeverBlocksPostAndStepsAreDroppedPastTheBacklog) {
  int opens = 0;
  MetricEventWriter w(
      [&opens]() -> Result<std::unique_ptr<store::MetadataStore>> {
        ++opens;
        return Status::Unavailable("store down");
      },
      1, 1, [] { return int64_t{0}; });
  for (size_t i = 0; i < MetricEventWriter::kMaxQueued + 10; ++i)
    w.Post(kMetricEventKind, StepMetricsPayload({1, static_cast<int64_t>(i) + 1, 1, 1, 1}), true);
  w.Post(kMetricEventKind, EpochMetricsPayload({}), false);  // never dropped
  EXPECT_GE(w.Dropped(), 10);
  EXPECT_LE(w.Dropped(), 11);
  EXPECT_EQ(w.Finish(300), 0);
  EXPECT_GE(opens, 1);
}

}  // namespace
}  // namespace kestrel::app
