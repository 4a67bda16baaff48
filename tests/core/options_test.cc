#include "core/options.h"

#include <gtest/gtest.h>

#include <limits>
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

// issue 28: `time=` (before it was a key) got "did you mean 'name'?" — two
// edits apart, as any two four-letter words are. Short keys get one edit.
TEST(OptionsTest, ShortKeysAreNotMatchedToUnrelatedWords) {
  const std::vector<std::string> keys = {"name", "data", "epochs", "lr0", "list", "iou"};
  EXPECT_EQ(ClosestMatch("time", keys), "");
  EXPECT_EQ(ClosestMatch("half", keys), "");
  EXPECT_EQ(ClosestMatch("cls", keys), "");
  EXPECT_EQ(ClosestMatch("lr", keys), "lr0");
  EXPECT_EQ(ClosestMatch("lst", keys), "list");
  EXPECT_EQ(ClosestMatch("nmae", keys), "name");  // a swap of two letters is one edit
  EXPECT_EQ(ClosestMatch("lsit", keys), "list");
  EXPECT_EQ(ClosestMatch("nme", keys), "name");
  EXPECT_EQ(ClosestMatch("epoch", keys), "epochs");
  EXPECT_EQ(ClosestMatch("epoks", keys), "epochs");  // longer keys keep two edits
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

TEST(RangeTest, OpenAndClosedEnds) {
  EXPECT_TRUE(Range::Closed(0, 0.5).Contains(0.5));
  EXPECT_FALSE(Range::ClosedOpen(0, 0.5).Contains(0.5));
  EXPECT_TRUE(Range::ClosedOpen(0, 0.5).Contains(0));
  EXPECT_FALSE(Range::OpenClosed(0, 10).Contains(0));
  EXPECT_TRUE(Range::OpenClosed(0, 10).Contains(10));
  EXPECT_FALSE(Range::Open(0, 1).Contains(0));
  EXPECT_FALSE(Range::Open(0, 1).Contains(1));
  EXPECT_TRUE(Range::Above(0).Contains(1e300));
  EXPECT_FALSE(Range::Above(0).Contains(0));
  for (double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                     -std::numeric_limits<double>::infinity()}) {
    EXPECT_FALSE(Range::Any().Contains(bad));
    EXPECT_FALSE(Range::AtLeast(0).Contains(bad));
  }
  EXPECT_EQ(Range::ClosedOpen(0, 0.5).ToString(), "[0, 0.5)");
  EXPECT_EQ(Range::OpenClosed(0, 10).ToString(), "(0, 10]");
  EXPECT_EQ(Range::AtLeast(1).ToString(), ">= 1");
  EXPECT_EQ(Range::Above(0).ToString(), "> 0");
  EXPECT_EQ(Range::Any().ToString(), "");
}

struct RangedOptions {
  double translate = 0.1;
  double lr0 = 0.01;
  int retries = 3;
  int64_t big = 0;
  std::string mode = "a";
  void Bind(OptionSet& s) {
    s.Float("translate", &translate, "t", Range::ClosedOpen(0, 0.5))
        .Float("lr0", &lr0, "lr", Range::OpenClosed(0, 10))
        .Int("retries", &retries, "r", 0, 100)
        .Int("big", &big, "b")
        .Choice("mode", &mode, {"a", "b"}, "m");
  }
};

TEST(OptionsTest, SetEnforcesOpenAndClosedEnds) {
  RangedOptions o;
  OptionSet s;
  o.Bind(s);
  EXPECT_TRUE(s.Set("translate", "0").IsOk());
  EXPECT_TRUE(s.Set("translate", "0.4999").IsOk());
  Status st = s.Set("translate", "0.5");
  ASSERT_FALSE(st.IsOk());
  EXPECT_EQ(st.Where().field, "translate");
  EXPECT_NE(st.Message().find("[0, 0.5)"), std::string::npos) << st.Message();
  EXPECT_FALSE(s.Set("lr0", "0").IsOk());
  EXPECT_TRUE(s.Set("lr0", "10").IsOk());
  EXPECT_FALSE(s.Set("lr0", "10.000001").IsOk());
  EXPECT_FALSE(s.Set("lr0", "-0").IsOk());
}

TEST(OptionsTest, SetRejectsNanInfAndOverflow) {
  RangedOptions o;
  OptionSet s;
  o.Bind(s);
  for (const char* bad :
       {"nan", "NaN", "inf", "-inf", "infinity", "1e999", "-1e999", "0x10", "", " ", "1.5.2"}) {
    Status st = s.Set("lr0", bad);
    EXPECT_FALSE(st.IsOk()) << bad;
    EXPECT_EQ(st.Where().field, "lr0") << bad;
  }
  for (const char* bad :
       {"1e9", "nan", "2147483648", "-2147483649", "99999999999999999999", "3.0", "1 2", "101", "-1"}) {
    Status st = s.Set("retries", bad);
    EXPECT_FALSE(st.IsOk()) << bad;
    EXPECT_EQ(st.Where().field, "retries") << bad;
  }
  EXPECT_TRUE(s.Set("big", "9223372036854775807").IsOk());
  EXPECT_EQ(o.big, std::numeric_limits<int64_t>::max());
  Status over = s.Set("big", "9223372036854775808");
  ASSERT_FALSE(over.IsOk());
  EXPECT_NE(over.Message().find("outside the allowed range"), std::string::npos) << over.Message();
  EXPECT_EQ(o.big, std::numeric_limits<int64_t>::max());  // untouched
  EXPECT_EQ(o.retries, 3);
  EXPECT_DOUBLE_EQ(o.lr0, 0.01);
}

TEST(OptionsTest, CheckValuesAppliesTheBindingToValuesSetInCode) {
  RangedOptions o;
  EXPECT_TRUE(CheckBoundValues(o).IsOk());
  o.translate = 0.5;  // the open end
  Status st = CheckBoundValues(o);
  ASSERT_FALSE(st.IsOk());
  EXPECT_EQ(st.Where().field, "translate");
  o.translate = 0;
  o.lr0 = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(CheckBoundValues(o).Where().field, "lr0");
  o.lr0 = 0;  // the open lower end
  EXPECT_EQ(CheckBoundValues(o).Where().field, "lr0");
  o.lr0 = 1;
  o.retries = 101;
  EXPECT_EQ(CheckBoundValues(o).Where().field, "retries");
  o.retries = 0;
  o.mode = "c";
  EXPECT_EQ(CheckBoundValues(o).Where().field, "mode");
  o.mode = "b";
  EXPECT_TRUE(CheckBoundValues(o).IsOk());
}

TEST(OptionsTest, DescribeAndTablesListEachKeyOnceWithTypeRangeDefault) {
  RangedOptions o;
  OptionSet s;
  o.Bind(s);
  auto keys = s.Describe();
  ASSERT_EQ(keys.size(), 5u);
  EXPECT_EQ(keys[0].key, "translate");
  EXPECT_EQ(keys[0].type, "float");
  EXPECT_EQ(keys[0].range, "[0, 0.5)");
  EXPECT_EQ(keys[0].default_text, "0.1");
  EXPECT_EQ(keys[2].type, "int");
  EXPECT_EQ(keys[2].range, "[0, 100]");
  EXPECT_EQ(keys[3].range, "");
  EXPECT_EQ(keys[4].type, "choice");
  EXPECT_EQ(keys[4].range, "a|b");
  const std::string table = MarkdownKeyTable(keys);
  EXPECT_NE(table.find("| `translate` | float | `[0, 0.5)` | `0.1` | t |"), std::string::npos) << table;
  EXPECT_NE(table.find("| `mode` | choice | `a\\|b` | `a` | m |"), std::string::npos) << table;
  EXPECT_NE(s.HelpText().find("translate=0.1  (float [0, 0.5))"), std::string::npos) << s.HelpText();
}

TEST(OptionsTest, FloatListIsCheckedItemByItem) {
  std::vector<double> backoff = {300, 900};
  OptionSet s;
  s.FloatList("backoff", &backoff, "b", Range::Closed(0, 1e9));
  EXPECT_EQ(s.Describe()[0].default_text, "300,900");
  EXPECT_EQ(s.Describe()[0].type, "floats");
  ASSERT_TRUE(s.Set("backoff", "0.5, 1").IsOk());
  EXPECT_EQ(backoff, (std::vector<double>{0.5, 1}));
  for (const char* bad : {"", "1,,2", "1,", "abc", "1,-1", "1,nan", "1,inf", "1e10"}) {
    Status st = s.Set("backoff", bad);
    EXPECT_FALSE(st.IsOk()) << bad;
    EXPECT_EQ(st.Where().field, "backoff");
  }
  EXPECT_EQ(backoff, (std::vector<double>{0.5, 1}));
  EXPECT_TRUE(s.ApplyJson(nlohmann::json{{"backoff", {1, 2, 3}}}, "stored").IsOk());
  EXPECT_EQ(backoff.size(), 3u);
  backoff.clear();
  EXPECT_EQ(s.CheckValues().Where().field, "backoff");
}

}  // namespace
}  // namespace kestrel
