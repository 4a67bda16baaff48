// A training job's per-epoch prediction samples over real HTTP on loopback
// (docs/server.md "Epoch samples"): GET /api/jobs/{id}/samples lists the
// epochs with a samples file over every attempt (the latest attempt wins an
// epoch both have; temp files and odd names are not epochs);
// GET /api/jobs/{id}/samples/{epoch} serves that attempt's file, whose image
// SHA the dataset image route serves; both are the views `kestrel jobs
// samples` prints (app/job_media.h). Bad ids and epochs are 400s naming the
// field, a missing epoch a 404 naming the epochs there are, a file of the
// wrong epoch an error naming the file, no token a 401.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "app/job_media.h"
#include "app/jobs.h"
#include "read_route_test.h"

namespace kestrel::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HttpReply;

class ApiJobMediaTest : public testing::ReadRouteTest {
 protected:
  void SetUp() override { OpenHomeAndServe("kestrel_server_job_media_", 4); }
  // A samples file as the trainer writes it (docs/formats.md "Epoch samples").
  void WriteSamples(int64_t job, int attempt, const std::string& name, int epoch, const json& image) {
    const fs::path d =
        fs::path(home_) / "jobs" / std::to_string(job) / ("attempt-" + std::to_string(attempt)) / "samples";
    fs::create_directories(d);
    json doc = {{"format", "kestrel-epoch-samples"},
                {"format_version", 1},
                {"epoch", epoch},
                {"dataset", "birds"},
                {"version", 1},
                {"version_id", "x"},
                {"conf", 0.25},
                {"names", {"a", "b"}},
                {"images", {image}},
                {"written_by", attempt}};
    std::ofstream(d / name) << doc.dump();
  }
};

TEST_F(ApiJobMediaTest, ListsEpochsOverAttemptsAndServesTheLatest) {
  auto d = app::DraftJob({"data=birds", "epochs=4"}, nullptr);
  ASSERT_TRUE(d.IsOk()) << d.GetStatus().ToString();
  auto s = app::SubmitJob(*meta_, std::move(d).Value(), 1000);
  ASSERT_TRUE(s.IsOk()) << s.GetStatus().ToString();
  const int64_t id = s->job.id;
  const std::string base = "/api/jobs/" + std::to_string(id) + "/samples";
  // Queued, never run: no epochs.
  EXPECT_EQ(Doc(base)["epochs"], json::array());

  // Attempt 1 runs and fails retryably; attempt 2 runs.
  store::ClaimRequest req;
  req.worker = "w";
  req.host = "h";
  req.devices = {store::DeviceOffer{"cpu", 0, 0}};
  req.now_ms = 2000;
  req.lease_ms = 3'600'000;
  ASSERT_TRUE(meta_->ClaimJob(req).IsOk());
  store::AttemptOutcome fail;
  fail.exit_code = 1;
  fail.stage = store::FailureStage::kTrain;
  fail.reason = FailureReason::kError;
  ASSERT_TRUE(meta_->CompleteAttempt(id, 1, "w", fail, 3000).IsOk());
  req.now_ms = 10'000'000;
  auto c2 = meta_->ClaimJob(req);
  ASSERT_TRUE(c2.IsOk()) << c2.GetStatus().ToString();
  ASSERT_EQ(c2->job.attempt, 2);

  const json image = Doc("/api/datasets/birds/images?limit=1")["images"][0];
  const json sample = {
      {"sha", image["sha"]},     {"path", image["path"]},
      {"width", image["width"]}, {"height", image["height"]},
      {"labels", json::array()}, {"detections", {{{"class_id", 1}, {"score", 0.5}, {"box", {1, 2, 3, 4}}}}}};
  for (int e = 1; e <= 3; ++e) WriteSamples(id, 1, "epoch-" + std::to_string(e) + ".json", e, sample);
  WriteSamples(id, 2, "epoch-3.json", 3, sample);  // attempt 1 died before its epoch-3 checkpoint
  WriteSamples(id, 2, "epoch-4.json", 4, sample);
  WriteSamples(id, 2, "epoch-5.json.tmp-77", 5, sample);  // a write in flight
  WriteSamples(id, 2, "epoch-05.json", 5, sample);
  WriteSamples(id, 3, "epoch-6.json", 6, sample);  // no such attempt yet

  const json list = Doc(base);
  EXPECT_EQ(list["job"], id);
  EXPECT_EQ(list["epochs"], json::parse(R"([{"epoch":1,"attempt":1},{"epoch":2,"attempt":1},)"
                                        R"({"epoch":3,"attempt":2},{"epoch":4,"attempt":2}])"));
  Env& env = Env::Default();
  app::JobMedia media(*meta_, env, home_);
  EXPECT_EQ(list, app::JobSampleEpochsJson(*media.Epochs(id)));  // the CLI's view

  const json panel = Doc(base + "/3");
  EXPECT_EQ(panel["epoch"], 3);
  EXPECT_EQ(panel["attempt"], 2);
  EXPECT_EQ(panel["dataset"], "birds");
  EXPECT_EQ(panel["version"], 1);
  EXPECT_EQ(panel["images"][0]["detections"][0]["box"], json({1, 2, 3, 4}));
  EXPECT_FALSE(panel.contains("written_by"));
  EXPECT_EQ(panel, app::JobSamplePanelJson(*media.Panel(id, 3)));
  EXPECT_EQ(Doc(base + "/1")["attempt"], 1);
  // The image identity is one the dataset image route serves.
  std::vector<std::string> auth = {"Authorization: Bearer " + read_};
  EXPECT_EQ(
      testing::Get(server_->Port(),
                   "/api/datasets/birds@v1/images/" + panel["images"][0]["sha"].get<std::string>(), auth)
          .status,
      200);

  // Errors.
  json e = Doc(base + "/5", 404);
  EXPECT_EQ(e["error"]["field"], "epoch");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("epochs with samples: 1-4"), std::string::npos)
      << e.dump();
  for (const char* bad : {"/0", "/-1", "/abc", "/1.5", "/%2e%2e", "/99999999999999999999"})
    EXPECT_EQ(Doc(base + bad, 400)["error"]["field"], "epoch") << bad;
  EXPECT_EQ(Doc("/api/jobs/abc/samples", 400)["error"]["field"], "id");
  EXPECT_EQ(Doc("/api/jobs/0/samples/1", 400)["error"]["field"], "id");
  Doc("/api/jobs/999/samples", 404);
  Doc("/api/jobs/999/samples/1", 404);
  Doc(base, 401, false);
  // A file that is not that epoch's samples: an error naming the file, never its content as a panel.
  WriteSamples(id, 2, "epoch-4.json", 7, sample);
  HttpReply bad = testing::Get(server_->Port(), base + "/4", auth);
  EXPECT_GE(bad.status, 500) << bad.body;
  EXPECT_NE(bad.body.find("epoch-4.json"), std::string::npos) << bad.body;
}

}  // namespace
}  // namespace kestrel::server
