// `kestrel models`, black box (issue 12's registry round trip): a tiny job
// trained by a worker registers a model with lineage; tagging it production;
// a second job's model is compared with it automatically and the stored
// comparison is readable; model=NAME@v1 works in `val`; the --json documents
// carry the application layer's views.
#include <filesystem>

#include "cli_fixture.h"

namespace kestrel::testing {
namespace {

class ModelsCliTest : public KestrelCliTest {
 protected:
  void SetUp() override {
    KestrelCliTest::SetUp();
    ASSERT_EQ(Kestrel("dataset synth data --images 12 --imgsz 64 --seed 3").code, 0);
    ASSERT_EQ(Kestrel("dataset import data --name tiny").code, 0);
  }
  // A job that trains in about a second on one core.
  static std::string TinyJob(const std::string& extra) {
    return "submit data=tiny model=t imgsz=64 batch=4 workers=1 threads=1 plots=false optimizer=AdamW "
           "lr0=0.01 "
           "warmup_epochs=0 epochs=1 " +
           extra;
  }
  void RunJobs() { ASSERT_EQ(Kestrel("worker --exit-when-idle --poll-s 0.1").code, 0); }
};

#ifdef KESTREL_CLI_WITH_TORCH
TEST_F(ModelsCliTest, JobsRegisterModelsWithLineageProductionIsComparedAndRefsWorkInVal) {
  auto submitted = Json(Kestrel("--json " + TinyJob("")));
  RunJobs();
  auto list = Json(Kestrel("--json models list"));
  ASSERT_EQ(list["models"].size(), 1u) << list.dump(2);
  const auto& m = list["models"][0];
  EXPECT_EQ(m["ref"], "tiny@v1");
  EXPECT_EQ(m["job_id"], submitted["job_id"]);
  EXPECT_EQ(m["attempt"], 1);
  const auto version_id = Json(Kestrel("--json dataset show tiny"))["version"]["version_id"];
  EXPECT_EQ(m["dataset_version"], version_id);
  EXPECT_EQ(m["config_hash"].get<std::string>().size(), 64u);
  EXPECT_FALSE(m["kestrel_version"].get<std::string>().empty());
  EXPECT_FALSE(m["host"].get<std::string>().empty());

  auto show = Json(Kestrel("--json models show tiny@v1"));
  const auto& lineage = show["model"]["lineage"];
  EXPECT_EQ(lineage["dataset"], "tiny");
  EXPECT_EQ(lineage["dataset_version"], m["dataset_version"]);
  EXPECT_EQ(lineage["config_hash"], m["config_hash"]);
  EXPECT_EQ(lineage["config"]["imgsz"], 64);
  EXPECT_EQ(lineage["job_id"], submitted["job_id"]);
  EXPECT_TRUE(show["model"]["comparison"]["baseline"].is_null())
      << "the first model has nothing to compare with";
  EXPECT_TRUE(std::filesystem::exists(show["model"]["weights"]["path"].get<std::string>()));
  CliRun text = Kestrel("models show tiny@v1");
  EXPECT_EQ(text.code, 0);
  EXPECT_NE(text.out.find(m["dataset_version"].get<std::string>()), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("config hash: " + m["config_hash"].get<std::string>()), std::string::npos)
      << text.out;

  // Production, then a second job: compared with it automatically.
  auto tagged = Json(Kestrel("--json models tag tiny@v1 production"));
  EXPECT_EQ(tagged["model"]["tags"], nlohmann::json::array({"production"}));
  EXPECT_TRUE(tagged["previous"].is_null());
  Kestrel(TinyJob("seed=5"));
  RunJobs();
  auto second = Json(Kestrel("--json models show tiny@v2"));
  const auto& cmp = second["model"]["comparison"];
  ASSERT_TRUE(cmp.is_object()) << second.dump(2);
  EXPECT_EQ(cmp["baseline"]["ref"], "tiny@v1");
  EXPECT_EQ(cmp["baseline"]["chosen_as"], "production");
  const auto& d = cmp["metrics"]["map50_95"];
  EXPECT_NEAR(d["delta"].get<double>(), d["new"].get<double>() - d["baseline"].get<double>(), 1e-12);
  EXPECT_NE(Kestrel("models show tiny@v2").out.find("comparison with tiny@v1 (production)"),
            std::string::npos);

  // Promotion moves production; one holder per dataset.
  auto promoted = Json(Kestrel("--json models promote tiny@v2"));
  EXPECT_EQ(promoted["previous"]["ref"], "tiny@v1");
  auto holders = Json(Kestrel("--json models list --tag production"));
  ASSERT_EQ(holders["models"].size(), 1u);
  EXPECT_EQ(holders["models"][0]["ref"], "tiny@v2");
  EXPECT_EQ(Kestrel("models delete tiny@v2").code, 1) << "the production model needs --force";

  // References where weights paths are accepted.
  auto val = Json(Kestrel("--json val data=tiny model=tiny@v1"));
  EXPECT_EQ(val["ok"], true) << val.dump(2);
  auto by_tag = Json(Kestrel("--json val data=tiny model=tiny@production"));
  EXPECT_EQ(by_tag["ok"], true);
  CliRun missing = Kestrel("--json val data=tiny model=tiny@v9");
  EXPECT_NE(missing.code, 0);
  EXPECT_EQ(Json(missing)["ok"], false);
  // A hand registration of the same weights under another name: a new model.
  const std::string weights = show["model"]["weights"]["path"].get<std::string>();
  std::filesystem::copy_file(weights, dir_ / "w.safetensors");
  auto reg = Json(Kestrel("--json models register w.safetensors --name imported data=tiny"));
  EXPECT_EQ(reg["created"], true) << reg.dump(2);
  EXPECT_EQ(reg["model"]["ref"], "imported@v1");
  EXPECT_EQ(reg["model"]["weights"]["sha256"], show["model"]["weights"]["sha256"]);
}
#endif

TEST_F(ModelsCliTest, EmptyRegistryAndBadReferencesAreClearErrors) {
  auto list = Json(Kestrel("--json models list"));
  EXPECT_EQ(list["ok"], true);
  EXPECT_TRUE(list["models"].empty());
  CliRun show = Kestrel("--json models show nope@v1");
  EXPECT_EQ(show.code, 1);
  EXPECT_EQ(Json(show)["error"]["code"], "not_found") << show.out;
  EXPECT_EQ(Kestrel("models register missing.safetensors --name x").code, 1);
  EXPECT_EQ(Kestrel("models register").code, 2);
}

}  // namespace
}  // namespace kestrel::testing
