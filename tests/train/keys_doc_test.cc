// The key tables in docs/ are generated from the bindings: each key once,
// with the type, range and default the OptionSet enforces. This test fails
// when a table is stale; run it with KESTREL_UPDATE_DOCS=1 to rewrite the
// table between its markers (<!-- keys:NAME --> ... <!-- /keys:NAME -->).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/options.h"
#include "eval/inference.h"
#include "eval/postprocess.h"
#include "train/train_config.h"

namespace kestrel::train {
namespace {

std::string DocPath(const std::string& name) { return std::string(KESTREL_SOURCE_DIR) + "/docs/" + name; }

void CheckTable(const std::string& doc, const std::string& marker, const std::string& table) {
  std::ifstream in(DocPath(doc));
  ASSERT_TRUE(in) << DocPath(doc);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  const std::string open = "<!-- keys:" + marker + " -->\n", close = "<!-- /keys:" + marker + " -->";
  const size_t b = text.find(open), e = text.find(close);
  ASSERT_NE(b, std::string::npos) << doc << " lacks " << open;
  ASSERT_NE(e, std::string::npos) << doc << " lacks " << close;
  const std::string current = text.substr(b + open.size(), e - b - open.size());
  if (current == table) return;
  const char* update = std::getenv("KESTREL_UPDATE_DOCS");
  if (update != nullptr && std::string(update) == "1") {
    text.replace(b + open.size(), e - b - open.size(), table);
    std::ofstream(DocPath(doc)) << text;
    return;
  }
  ADD_FAILURE() << "docs/" << doc << "'s '" << marker
                << "' key table is not the one the bindings generate; rerun with KESTREL_UPDATE_DOCS=1.\n"
                << "generated:\n"
                << table << "\ndocument:\n"
                << current;
}

TEST(KeysDocTest, TrainingKeyTableIsGenerated) {
  TrainConfig c;
  OptionSet s;
  c.Bind(s);
  CheckTable("training.md", "train", MarkdownKeyTable(s.Describe()));
}

// The inference group's ranges are those eval::NmsOptions::Validate applies
// to the float copies: an edge value the command line takes passes there too.
TEST(KeysDocTest, InferenceKeysAgreeWithNmsOptions) {
  double conf = 0.25, iou = 0.7;
  int imgsz = 640, max_det = 300, batch = 1;
  OptionSet s;
  BindInferenceKeys(s, &conf, &iou, &imgsz, &max_det, &batch);
  for (const char* c : {"0", "0.999"}) {
    ASSERT_TRUE(s.Set("conf", c).IsOk()) << c;
    eval::NmsOptions n;
    n.conf = static_cast<float>(conf);
    EXPECT_TRUE(n.Validate().IsOk()) << "conf=" << c;
  }
  EXPECT_FALSE(s.Set("conf", "1").IsOk());
  for (const char* i : {"0", "1"}) {
    ASSERT_TRUE(s.Set("iou", i).IsOk()) << i;
    eval::NmsOptions n;
    n.iou = static_cast<float>(iou);
    EXPECT_TRUE(n.Validate().IsOk()) << "iou=" << i;
  }
  ASSERT_TRUE(s.Set("max_det", "1").IsOk());
  eval::NmsOptions n;
  n.max_det = max_det;
  EXPECT_TRUE(n.Validate().IsOk());
  EXPECT_FALSE(s.Set("max_det", "0").IsOk());
  // imgsz 0 is "not given" (the weights' training size, app/imgsz.h); an
  // explicit size the network cannot take passes the key and is refused,
  // naming imgsz, by InferenceOptions::Validate when the run starts.
  ASSERT_TRUE(s.Set("imgsz", "0").IsOk());
  ASSERT_TRUE(s.Set("imgsz", "16").IsOk());
  eval::InferenceOptions io;
  io.imgsz = imgsz;
  const Status bad = io.Validate();
  EXPECT_FALSE(bad.IsOk());
  EXPECT_EQ(bad.Where().field, "imgsz");
  ASSERT_TRUE(s.Set("imgsz", "32").IsOk());
  io.imgsz = imgsz;
  EXPECT_TRUE(io.Validate().IsOk());
  EXPECT_FALSE(s.Set("imgsz", "8192").IsOk());
}

}  // namespace
}  // namespace kestrel::train
