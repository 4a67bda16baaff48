// val=false end to end (issue 26, item 16): `kestrel train` says the run was
// not validated instead of printing "mAP50 0.000000"; a job's result carries
// "validated": false and no map50; the quality gate passes it only without a
// min_map50 (and fails it with a reason naming val=false otherwise); the
// registered model has no metrics (null, "-"), is never chosen as a baseline
// by mAP and its comparison gives no verdict. Tiny trainings (model t, imgsz
// 64, one epoch: about a second each).
#include <filesystem>
#include <regex>
#include <string>

#include "cli_fixture.h"

namespace kestrel::testing {
namespace {

class NotValidatedCliTest : public KestrelCliTest {
 protected:
  void SetUp() override {
    KestrelCliTest::SetUp();
    ASSERT_EQ(Kestrel("dataset synth data --images 12 --imgsz 64 --seed 3").code, 0);
    ASSERT_EQ(Kestrel("dataset import data --name tiny").code, 0);
  }
  static std::string TinyKeys(const std::string& extra) {
    return "data=tiny model=t imgsz=64 batch=4 workers=1 threads=1 plots=false optimizer=AdamW lr0=0.01 "
           "warmup_epochs=0 epochs=1 " +
           extra;
  }
  int64_t Submit(const std::string& extra) {
    CliRun r = Kestrel("--json submit " + TinyKeys(extra));
    EXPECT_EQ(r.code, 0) << r.out;
    return Json(r).value("job_id", int64_t{0});
  }
  void RunJobs() { ASSERT_EQ(Kestrel("worker --exit-when-idle --poll-s 0.1").code, 0); }
  nlohmann::json Show(int64_t id) { return Json(Kestrel("--json jobs show " + std::to_string(id))); }
};

#ifdef KESTREL_CLI_WITH_TORCH
TEST_F(NotValidatedCliTest, TrainWithValFalseSaysNotValidatedInsteadOfMapZero) {
  CliRun text = Kestrel("train " + TinyKeys("val=false project=runs name=nv"));
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("best epoch: not validated (val=false)"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("mAP50 0.000000"), std::string::npos) << text.out;

  CliRun js = Kestrel("--json train " + TinyKeys("val=false project=runs name=nvj"));
  ASSERT_EQ(js.code, 0) << js.out;
  const nlohmann::json j = Json(js);
  EXPECT_EQ(j["validated"], false);
  EXPECT_TRUE(j["best"]["map50"].is_null()) << j["best"].dump();
  EXPECT_TRUE(j["best"]["map50_95"].is_null());
  EXPECT_NE(j["best"]["chosen_by"].get<std::string>().find("val=false"), std::string::npos);
  ASSERT_EQ(j["epochs"].size(), 1u);
  EXPECT_TRUE(j["epochs"][0]["map50"].is_null());
  EXPECT_TRUE(j["epochs"][0]["box"].is_number());

  // Validated: the numbers, and "validated": true.
  const nlohmann::json v = Json(Kestrel("--json train " + TinyKeys("project=runs name=v")));
  EXPECT_EQ(v["validated"], true);
  EXPECT_TRUE(v["best"]["map50"].is_number()) << v.dump();
}

TEST_F(NotValidatedCliTest, JobGateAndRegistryTreatAnUnvalidatedModelAsHavingNoMetrics) {
  const int64_t validated = Submit("");
  RunJobs();
  ASSERT_EQ(Show(validated)["job"]["state"], "succeeded");

  // No gate: succeeds, not validated; its result has no mAP.
  const int64_t plain = Submit("val=false");
  RunJobs();
  const nlohmann::json shown = Show(plain);
  ASSERT_EQ(shown["job"]["state"], "succeeded") << shown.dump(2);
  const nlohmann::json& result = shown["job"]["result"];
  EXPECT_EQ(result["validated"], false);
  EXPECT_EQ(result["not_validated"], "val=false");
  EXPECT_FALSE(result.contains("map50")) << result.dump();
  EXPECT_FALSE(result.contains("map50_95"));

  // Registered without metrics; compared with the validated model, no verdict.
  const nlohmann::json model = Json(Kestrel("--json models show tiny@v2"))["model"];
  EXPECT_EQ(model["job_id"], plain);
  EXPECT_TRUE(model["metrics"]["map50"].is_null()) << model["metrics"].dump();
  EXPECT_TRUE(model["metrics"]["map50_95"].is_null());
  EXPECT_EQ(model["evaluation"]["validated"], false);
  EXPECT_FALSE(model["evaluation"]["metrics"].contains("map50"));
  const nlohmann::json& cmp = model["comparison"];
  EXPECT_EQ(cmp["baseline"]["ref"], "tiny@v1") << cmp.dump(2);
  EXPECT_TRUE(cmp["better"].is_null()) << cmp.dump(2);
  EXPECT_TRUE(cmp["metrics"].empty()) << cmp.dump(2);
  EXPECT_NE(cmp["notes"].dump().find("this model has no measured mAP"), std::string::npos) << cmp.dump(2);
  CliRun text = Kestrel("models show tiny@v2");
  EXPECT_NE(text.out.find("metrics: none (not validated)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("no verdict"), std::string::npos) << text.out;
  // `models list`: "-" in both mAP columns of its row, not 0.000.
  const std::string listed = Kestrel("models list").out;
  const size_t at = listed.find("tiny@v2");
  ASSERT_NE(at, std::string::npos) << listed;
  const std::string row = listed.substr(at, listed.find('\n', at) - at);
  EXPECT_EQ(row.find("0.000"), std::string::npos) << row;
  EXPECT_TRUE(std::regex_search(row, std::regex(R"( -\s+-\s+\d+$)"))) << row;

  // A third, validated model: the unvalidated one is never its baseline by mAP.
  const int64_t third = Submit("seed=5");
  RunJobs();
  ASSERT_EQ(Show(third)["job"]["state"], "succeeded");
  const nlohmann::json c3 = Json(Kestrel("--json models show tiny@v3"))["model"]["comparison"];
  EXPECT_EQ(c3["baseline"]["ref"], "tiny@v1") << c3.dump(2);
  EXPECT_TRUE(c3["better"].is_boolean());

  // A gate it cannot check: failed for good, the reason says why.
  const int64_t gated = Submit("val=false min_map50=0.1");
  RunJobs();
  const nlohmann::json g = Show(gated);
  EXPECT_EQ(g["job"]["state"], "failed_permanent") << g.dump(2);
  ASSERT_EQ(g["attempts"].size(), 1u);
  EXPECT_EQ(g["attempts"][0]["reason"], "quality_gate");
  EXPECT_NE(g.dump().find("not validated (val=false)"), std::string::npos) << g.dump(2);
}
#endif

}  // namespace
}  // namespace kestrel::testing
