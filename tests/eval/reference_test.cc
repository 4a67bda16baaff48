// Reproduces the reference validator's numbers for coco128 val predictions
// (/work/shared/reference/metrics_coco128). Skips when ../shared is absent.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <sstream>

#include "core/env.h"
#include "eval/metrics.h"
#include "eval/plots.h"
#include "eval/prediction_io.h"

namespace kestrel::eval {
namespace {

const std::string kShared = KESTREL_SHARED_DIR;

std::vector<GroundTruth> ReadLabels(const std::string& path, ImageSize size) {
  std::vector<GroundTruth> out;
  std::ifstream in(path);
  int c;
  double cx, cy, w, h;
  while (in >> c >> cx >> cy >> w >> h) {
    out.push_back(
        GroundTruth{BoxFromCxCyWh(cx * size.width, cy * size.height, w * size.width, h * size.height), c});
  }
  return out;
}

TEST(ReferenceMetrics, Coco128ValMatchesReferenceValidator) {
  const std::string root = kShared + "/datasets/coco128";
  const std::string ref = kShared + "/reference/metrics_coco128";
  Env& env = Env::Default();
  if (!env.Stat(ref + "/expected.json").exists || !env.Stat(root + "/images/val").is_dir) {
    GTEST_SKIP() << "shared reference data not present";
  }
  auto names = env.ListDir(root + "/images/val");
  ASSERT_TRUE(names.IsOk()) << names.GetStatus().ToString();
  std::map<std::string, ImageSize> sizes;
  for (const std::string& n : *names) {
    cv::Mat img = cv::imread(JoinPath(root + "/images/val", n), cv::IMREAD_UNCHANGED);
    ASSERT_FALSE(img.empty()) << n;
    sizes[Stem(n)] = ImageSize{img.cols, img.rows};
  }
  ASSERT_EQ(sizes.size(), 26u);
  auto preds = ReadYoloPredictionDir(env, ref + "/predictions", sizes, 80);
  ASSERT_TRUE(preds.IsOk()) << preds.GetStatus().ToString();

  EvalOptions opts;
  opts.num_classes = 80;
  {  // class names from data.yaml ("  3: motorcycle" lines)
    std::ifstream yaml(root + "/data.yaml");
    std::string line;
    while (std::getline(yaml, line)) {
      const size_t colon = line.find(": ");
      if (line.rfind("  ", 0) == 0 && colon != std::string::npos) {
        opts.class_names.push_back(line.substr(colon + 2));
      }
    }
    if (opts.class_names.size() != 80) opts.class_names.clear();
  }
  DetectionEvaluator ev(opts);
  for (const auto& [stem, size] : sizes) {
    const auto gt = ReadLabels(root + "/labels/val/" + stem + ".txt", size);
    ASSERT_TRUE(ev.AddImage(gt, preds->at(stem)).IsOk());
  }
  auto res = ev.Finalize();
  ASSERT_TRUE(res.IsOk()) << res.GetStatus().ToString();

  auto text = env.ReadFile(ref + "/expected.json");
  ASSERT_TRUE(text.IsOk());
  const nlohmann::json expected = nlohmann::json::parse(*text);
  EXPECT_NEAR(res->map50, expected["map50"].get<double>(), 1e-9);      // brief asks 1e-4; we match to ~1e-10
  EXPECT_NEAR(res->map5095, expected["map5095"].get<double>(), 1e-9);  // brief asks 1e-4; we match to ~1e-10
  EXPECT_NEAR(res->precision, expected["p"].get<double>(), 1e-9);      // brief asks 1e-4; we match to ~1e-10
  EXPECT_NEAR(res->recall, expected["r"].get<double>(), 1e-9);         // brief asks 1e-4; we match to ~1e-10
  EXPECT_EQ(res->instances, 145);
  EXPECT_EQ(res->images, 26);
  EXPECT_NEAR(res->fitness, 0.1 * res->map50 + 0.9 * res->map5095, 1e-12);
  // Plots of a real run, for looking at (build-eval/eval_plots_coco128/).
  EvalResult named = *res;
  EXPECT_TRUE(WritePlots(env, std::string(KESTREL_BINARY_DIR) + "/eval_plots_coco128", named).IsOk());
  // Print all digits so docs/metrics.md can quote how close we are.
  std::printf(
      "map50 %.10f (ref %.10f)\nmap5095 %.10f (ref %.10f)\np %.10f (ref %.10f)\n"
      "r %.10f (ref %.10f)\nbest_conf %.4f classes %zu predictions %lld\n",
      res->map50, expected["map50"].get<double>(), res->map5095, expected["map5095"].get<double>(),
      res->precision, expected["p"].get<double>(), res->recall, expected["r"].get<double>(), res->best_conf,
      res->classes.size(), static_cast<long long>(res->predictions));
}

}  // namespace
}  // namespace kestrel::eval
