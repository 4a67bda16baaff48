// Black-box tests of the `kestrel` program: the user's contract (exit codes,
// one JSON document with --json, errors naming file/line/field).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_fixture.h"

namespace {

namespace fs = std::filesystem;

using kestrel::testing::CliRun;
class CliTest : public kestrel::testing::KestrelCliTest {};

TEST_F(CliTest, DatasetWorkflowEndToEnd) {
  ASSERT_EQ(Kestrel("dataset synth data --images 16 --imgsz 64 --seed 1").code, 0);
  CliRun v = Kestrel("--json dataset validate data");
  EXPECT_EQ(v.code, 0);
  auto vj = Json(v);
  EXPECT_TRUE(vj["ok"].get<bool>());
  std::string id = vj["version_id"];

  CliRun imp = Kestrel("--json dataset import data --name shapes");
  ASSERT_EQ(imp.code, 0) << imp.out;
  auto ij = Json(imp);
  EXPECT_TRUE(ij["created"].get<bool>());
  EXPECT_EQ(ij["version"]["version_id"], id) << "validate and import disagree on the version id";

  CliRun again = Kestrel("--json dataset import data --name shapes");
  EXPECT_FALSE(Json(again)["created"].get<bool>());

  auto list = Json(Kestrel("--json dataset list"));
  ASSERT_EQ(list["datasets"].size(), 1u);
  EXPECT_EQ(list["datasets"][0]["version"], "v1");

  auto show = Json(Kestrel("--json dataset show shapes@v1"));
  EXPECT_EQ(show["version"]["num_images"].get<int>(), 16);
  EXPECT_EQ(show["summary"]["splits"]["train"]["images"].get<int>() +
                show["summary"]["splits"]["val"]["images"].get<int>(),
            16);

  EXPECT_EQ(Kestrel("dataset preview shapes out=preview.png images=4 imgsz=64").code, 0);
  EXPECT_GT(fs::file_size(dir_ / "preview.png"), 1000u);
  EXPECT_EQ(Kestrel("dataset preview shapes mosaik=1").code, 2)
      << "typo in an augmentation key must be a usage error";

  EXPECT_EQ(Kestrel("dataset export shapes@v1 out --format yolo").code, 0);
  auto back = Json(Kestrel("--json dataset import out --name shapes_copy"));
  EXPECT_EQ(back["version"]["version_id"], id) << "export/import round trip changed the id";
  auto diff = Json(Kestrel("--json dataset diff shapes@v1 shapes_copy@v1"));
  EXPECT_TRUE(diff["added"].empty());
  EXPECT_TRUE(diff["labels_changed"].empty());
}

TEST_F(CliTest, ExitCodesAndErrors) {
  // Usage errors: 2.
  EXPECT_EQ(Kestrel("").code, 2);
  EXPECT_EQ(Kestrel("dataset frobnicate").code, 2);
  ASSERT_EQ(Kestrel("dataset synth data --images 8 --imgsz 64").code, 0);
  CliRun typo = Kestrel("--json dataset import data --name x val_ratoi=0.1");
  EXPECT_EQ(typo.code, 2);
  auto tj = Json(typo);
  EXPECT_FALSE(tj["ok"].get<bool>());
  EXPECT_EQ(tj["error"]["field"], "val_ratoi");
  EXPECT_NE(tj["error"]["message"].get<std::string>().find("val_ratio"), std::string::npos);
  EXPECT_EQ(Kestrel("dataset import data --name x --val-ratio 7").code, 2);
  // Operation failures: 1.
  CliRun missing = Kestrel("--json dataset show nosuch");
  EXPECT_EQ(missing.code, 1);
  EXPECT_EQ(Json(missing)["error"]["code"], "not_found");
  EXPECT_EQ(Kestrel("dataset import nowhere --name x").code, 1);
  // A label error: validate exits 1 and names file and line; import stores nothing.
  {
    std::ofstream f(dir_ / "data" / "labels" / "train" / "synth_00000.txt", std::ios::app);
    f << "0 0.5 0.5 0.1\n";
  }
  CliRun bad = Kestrel("--json dataset validate data");
  EXPECT_EQ(bad.code, 1);
  bool found = false;
  const auto bad_json = Json(bad);
  for (const auto& f : bad_json["report"]["findings"]) {
    if (f["check"] == "label.syntax") {
      found = true;
      EXPECT_NE(f["file"].get<std::string>().find("synth_00000.txt"), std::string::npos);
      EXPECT_GT(f["line"].get<int>(), 0);
    }
  }
  EXPECT_TRUE(found) << bad.out;
  CliRun bad_import = Kestrel("--json dataset import data --name x");
  EXPECT_EQ(bad_import.code, 1);
  EXPECT_TRUE(Json(Kestrel("--json dataset list"))["datasets"].empty());
  EXPECT_EQ(Kestrel("dataset import data --name x --allow-errors").code, 0);
}

}  // namespace
