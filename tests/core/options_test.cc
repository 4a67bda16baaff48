#include "core/options.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace kestrel {
namespace {

struct DemoOptions {
  int epochs = 100;
  double lr0 = 0.01;
  bool cos_lr = false;
  std::string optimizer = "auto";
  void Bind(OptionSet& s) {
    s.Int("epochs", &epochs, "epochs", 1, 100000)
        .Float("lr0", &lr0, "initial lr", 0.0, 10.0)
        .Bool("cos_lr", &cos_lr, "cosine")
        .Choice("optimizer", &optimizer, {"auto", "SGD", "AdamW"}, "optimizer");
  }
};

TEST(OptionsTest, ArgsOverrideDefaults) {
  DemoOptions o;
  OptionSet s;
  o.Bind(s);
  ASSERT_TRUE(s.ApplyArgs({"epochs=3", "lr0=0.5", "cos_lr=true", "optimizer=SGD"}).IsOk());
  EXPECT_EQ(o.epochs, 3);
  EXPECT_DOUBLE_EQ(o.lr0, 0.5);
  EXPECT_TRUE(o.cos_lr);
  EXPECT_EQ(o.optimizer, "SGD");
}

TEST(OptionsTest, UnknownKeySuggestsClosest) {
  DemoOptions o;
  OptionSet s;
  o.Bind(s);
  Status st = s.ApplyArgs({"epoch=3"});
  ASSERT_FALSE(st.IsOk());
  EXPECT_NE(st.Message().find("did you mean 'epochs'"), std::string::npos) << st.ToString();
}

TEST(OptionsTest, RangeAndTypeErrorsNameField) {
  DemoOptions o;
  OptionSet s;
  o.Bind(s);
  Status st = s.Set("epochs", "0");
  EXPECT_EQ(st.Where().field, "epochs");
  EXPECT_FALSE(s.Set("lr0", "abc").IsOk());
  EXPECT_FALSE(s.Set("lr0", "nan").IsOk());
  EXPECT_FALSE(s.Set("optimizer", "sgd").IsOk());
  EXPECT_EQ(o.epochs, 100);  // untouched by failed sets
}

TEST(OptionsTest, YamlErrorsCarryLine) {
  DemoOptions o;
  OptionSet s;
  o.Bind(s);
  Status st = s.ApplyYamlText("epochs: 5\nlr0: 0.1\nbogus_key: 1\n", "cfg.yaml");
  ASSERT_FALSE(st.IsOk());
  EXPECT_EQ(st.Where().file, "cfg.yaml");
  EXPECT_EQ(st.Where().line, 3);
  EXPECT_EQ(o.epochs, 5);
  Status bad = s.ApplyYamlText("epochs: [1,\n", "bad.yaml");
  EXPECT_FALSE(bad.IsOk());
  EXPECT_EQ(bad.Where().file, "bad.yaml");
}

TEST(OptionsTest, JsonRoundTripIsCanonical) {
  DemoOptions a, b;
  OptionSet sa, sb;
  a.Bind(sa);
  b.Bind(sb);
  ASSERT_TRUE(sa.ApplyArgs({"epochs=7"}).IsOk());
  ASSERT_TRUE(sb.ApplyJson(sa.ToJson(), "stored").IsOk());
  EXPECT_EQ(b.epochs, 7);
  EXPECT_EQ(sa.ToJson().dump(), sb.ToJson().dump());
}

}  // namespace
}  // namespace kestrel
