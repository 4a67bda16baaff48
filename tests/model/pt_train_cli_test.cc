// `kestrel train` writes weights/best.pt and last.pt (save_pt=true, the
// default; issue 28 item 2), black box: val of best.pt equals val of
// best.safetensors and defaults to the training imgsz its train_args
// record; save_pt=false writes none.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_fixture.h"

namespace {

using kestrel::testing::CliRun;

class PtTrainCliTest : public kestrel::testing::KestrelCliTest {};

#ifdef KESTREL_CLI_WITH_TORCH
// Issue 28 item 2: training writes weights/best.pt and last.pt beside the
// safetensors (save_pt=true, the default); val of best.pt equals val of
// best.safetensors and defaults to the training imgsz its train_args
// record. save_pt=false writes none.
TEST_F(PtTrainCliTest, TrainWritesBestAndLastPt) {
  ASSERT_EQ(Kestrel("dataset synth ds --images 12 --imgsz 64 --seed 5").code, 0);
  const std::string args =
      "data=ds/data.yaml model=t imgsz=64 batch=4 workers=1 threads=1 epochs=1 warmup_epochs=0 plots=false "
      "project=runs ";
  CliRun train = Kestrel("--json train " + args + "name=withpt");
  ASSERT_EQ(train.code, 0) << train.out;
  std::filesystem::path weights;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir_)) {
    if (e.path().filename() == "best.safetensors" && e.path().string().find("withpt") != std::string::npos)
      weights = e.path().parent_path();
  }
  ASSERT_FALSE(weights.empty()) << train.out;
  ASSERT_TRUE(std::filesystem::exists(weights / "best.pt"));
  ASSERT_TRUE(std::filesystem::exists(weights / "last.pt"));
  CliRun pt = Kestrel("--json val model=" + (weights / "best.pt").string() + " data=ds/data.yaml split=val");
  ASSERT_EQ(pt.code, 0) << pt.out;
  CliRun st = Kestrel("--json val model=" + (weights / "best.safetensors").string() +
                      " data=ds/data.yaml split=val imgsz=64");
  ASSERT_EQ(st.code, 0) << st.out;
  EXPECT_EQ(Json(pt)["result"]["provenance"]["extra"]["imgsz"], 64) << "train_args.imgsz of best.pt";
  EXPECT_EQ(Json(pt)["result"]["metrics"], Json(st)["result"]["metrics"]);

  CliRun off = Kestrel("--json train " + args + "name=nopt save_pt=false");
  ASSERT_EQ(off.code, 0) << off.out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir_)) {
    if (e.path().string().find("nopt") != std::string::npos) {
      EXPECT_NE(e.path().extension(), ".pt") << e.path();
    }
  }
}
#endif

}  // namespace
