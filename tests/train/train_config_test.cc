// TrainConfig's keys: the binding is the one place a key's type, range and
// default are written. These tests hold Validate() to that: every value the
// binding accepts at the edge of a range passes Validate(), and every value
// just outside fails both, with the key named.
#include "train/train_config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "train/loss_options.h"

namespace kestrel::train {
namespace {

std::string Text(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, end);
}

// Parses a Describe() range text ("[0, 0.5)", ">= 1", "> 0", "<= 3").
Range ParseRange(const std::string& text) {
  if (text.empty()) return Range::Any();
  if (text.rfind(">= ", 0) == 0) return Range::AtLeast(std::stod(text.substr(3)));
  if (text.rfind("> ", 0) == 0) return Range::Above(std::stod(text.substr(2)));
  const size_t comma = text.find(',');
  Range r;
  r.lo_open = text.front() == '(';
  r.hi_open = text.back() == ')';
  r.lo = std::stod(text.substr(1, comma - 1));
  r.hi = std::stod(text.substr(comma + 1, text.size() - comma - 2));
  return r;
}

TrainConfig Base() {
  TrainConfig c;
  c.data = "d";
  return c;
}

// The values just inside each finite end of `r` (the end itself when closed).
std::vector<double> EdgesInside(const Range& r, bool integer) {
  std::vector<double> v;
  if (std::isfinite(r.lo)) v.push_back(r.lo_open ? (integer ? r.lo + 1 : std::nextafter(r.lo, r.hi)) : r.lo);
  if (std::isfinite(r.hi)) v.push_back(r.hi_open ? (integer ? r.hi - 1 : std::nextafter(r.hi, r.lo)) : r.hi);
  return v;
}
std::vector<double> EdgesOutside(const Range& r, bool integer) {
  std::vector<double> v;
  if (std::isfinite(r.lo))
    v.push_back(r.lo_open ? r.lo : (integer ? r.lo - 1 : std::nextafter(r.lo, -1e300)));
  if (std::isfinite(r.hi)) v.push_back(r.hi_open ? r.hi : (integer ? r.hi + 1 : std::nextafter(r.hi, 1e300)));
  return v;
}

TEST(TrainConfigTest, EveryRangeEdgeTheBindingAcceptsPassesValidate) {
  TrainConfig probe = Base();
  OptionSet keys;
  probe.Bind(keys);
  int checked = 0;
  for (const OptionInfo& k : keys.Describe()) {
    if (k.type != "int" && k.type != "float") continue;
    const Range r = ParseRange(k.range);
    const bool integer = k.type == "int";
    for (double v : EdgesInside(r, integer)) {
      if (k.key == "imgsz" && static_cast<int>(v) % 32 != 0) continue;  // a rule, not a range
      TrainConfig c = Base();
      OptionSet s;
      c.Bind(s);
      const std::string text = integer ? std::to_string(static_cast<int64_t>(v)) : Text(v);
      ASSERT_TRUE(s.Set(k.key, text).IsOk()) << k.key << "=" << text << " range " << k.range;
      Status valid = c.Validate();
      EXPECT_TRUE(valid.IsOk()) << k.key << "=" << text << " is accepted by the binding (" << k.range
                                << ") but Validate() says: " << valid.ToString()
                                << " -- a second, different range is written somewhere";
      ++checked;
    }
    for (double v : EdgesOutside(r, integer)) {
      if (integer && (v < -9.2e18 || v > 9.2e18)) continue;
      TrainConfig c = Base();
      OptionSet s;
      c.Bind(s);
      const std::string text = integer ? std::to_string(static_cast<int64_t>(v)) : Text(v);
      Status st = s.Set(k.key, text);
      EXPECT_FALSE(st.IsOk()) << k.key << "=" << text << " range " << k.range;
      EXPECT_EQ(st.Where().field, k.key);
    }
  }
  EXPECT_GT(checked, 40);  // the augmentation, optimizer, loader and loss keys are all probed
}

TEST(TrainConfigTest, ValidateAppliesTheBoundRangesToValuesSetInCode) {
  struct Case {
    const char* key;
    void (*set)(TrainConfig&);
  };
  const Case cases[] = {
      {"translate",
       [](TrainConfig& c) { c.augment.translate = 0.5; }},  // [0, 0.5): the old Bind said 0.5 was fine
      {"scale", [](TrainConfig& c) { c.augment.scale = 1.0; }},
      {"shear", [](TrainConfig& c) { c.augment.shear = 90; }},
      {"lr0", [](TrainConfig& c) { c.optimizer.lr0 = 0; }},  // (0, 10]: the old Bind allowed 0
      {"momentum", [](TrainConfig& c) { c.optimizer.momentum = 1; }},
      {"label_smoothing", [](TrainConfig& c) { c.label_smoothing = 1; }},
      {"box", [](TrainConfig& c) { c.box = std::numeric_limits<double>::quiet_NaN(); }},
      {"cls", [](TrainConfig& c) { c.cls = std::numeric_limits<double>::infinity(); }},
      {"imgsz", [](TrainConfig& c) { c.loader.imgsz = 8192; }},
      {"epochs", [](TrainConfig& c) { c.epochs = 0; }},
      {"workers", [](TrainConfig& c) { c.loader.workers = -2; }},  // -1: the budget's share
  };
  ASSERT_TRUE(Base().Validate().IsOk()) << Base().Validate().ToString();
  for (const Case& k : cases) {
    TrainConfig c = Base();
    k.set(c);
    Status st = c.Validate();
    EXPECT_FALSE(st.IsOk()) << k.key;
    EXPECT_EQ(st.Where().field, k.key) << st.ToString();
    OptionSet s;
    TrainConfig fresh = Base();
    fresh.Bind(s);
    // The same value typed on the command line is refused by the binding.
    const nlohmann::json j = [&] {
      OptionSet out;
      c.Bind(out);
      return out.ToJson()[k.key];
    }();
    const std::string text = j.is_number_integer() ? std::to_string(j.get<int64_t>()) : Text(j.get<double>());
    EXPECT_FALSE(s.Set(k.key, text).IsOk()) << k.key << "=" << text;
  }
}

TEST(TrainConfigTest, OptimizerNameInAnyCaseInCodeButCanonicalOnTheCommandLine) {
  TrainConfig c = Base();
  c.optimizer.optimizer = "sgd";
  EXPECT_TRUE(c.Validate().IsOk());
  c.optimizer.optimizer = "lion";
  EXPECT_EQ(c.Validate().Where().field, "optimizer");
}

TEST(TrainConfigTest, LossOptionsAndTrainConfigShareTheLossKeys) {
  TrainConfig c;
  OptionSet a;
  c.Bind(a);
  LossOptions l;
  OptionSet b;
  l.Bind(b);
  for (const OptionInfo& k : b.Describe()) {
    bool found = false;
    for (const OptionInfo& t : a.Describe()) {
      if (t.key != k.key) continue;
      found = true;
      EXPECT_EQ(t.range, k.range) << k.key;
      EXPECT_EQ(t.default_text, k.default_text) << k.key;
    }
    EXPECT_TRUE(found) << k.key;
  }
}

// model=yolo11n.pt as the reference framework takes it (it would download
// the file): no network here, so the error says what it looked for, where,
// and how to bring the file — never a download attempt.
TEST(TrainConfigTest, MissingReferenceWeightsSayHowToBringThem) {
  TrainConfig c;
  c.model = "no_such_dir_h7/yolo11n.pt";
  Status s = c.ValidateFiles();
  EXPECT_EQ(s.Code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_EQ(s.Where().field, "model");
  for (const char* want : {"no such file", "no_such_dir_h7/yolo11n.pt'", "no network", "models register",
                           "from scratch use model=yolo11n"}) {
    EXPECT_NE(s.Message().find(want), std::string::npos) << want << ": " << s.ToString();
  }
}

TEST(TrainConfigTest, EachKeyIsBoundOnce) {
  TrainConfig c;
  OptionSet s;
  c.Bind(s);
  std::vector<std::string> keys = s.Keys();
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(std::adjacent_find(keys.begin(), keys.end()), keys.end());
}

}  // namespace
}  // namespace kestrel::train
