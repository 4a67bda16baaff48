#include "core/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>

namespace kestrel {
namespace {

TEST(SafeTensorsTest, RoundTrip) {
  SafeTensorFile f;
  SafeTensor t;
  t.dtype = "F32";
  t.shape = {2, 2};
  float v[4] = {1, 2, 3, 4};
  t.data.assign(reinterpret_cast<const char*>(v), sizeof(v));
  f.tensors["w"] = t;
  f.metadata["format"] = "pt";
  std::string bytes = SerializeSafeTensors(f);
  auto back = ParseSafeTensors(bytes, "mem");
  ASSERT_TRUE(back.IsOk()) << back.GetStatus().ToString();
  EXPECT_EQ(back->tensors.at("w").shape, t.shape);
  EXPECT_EQ(back->tensors.at("w").data, t.data);
  EXPECT_EQ(back->metadata.at("format"), "pt");
}

TEST(SafeTensorsTest, RejectsTruncated) {
  SafeTensorFile f;
  f.tensors["w"] = SafeTensor{"F32", {4}, std::string(16, '\0')};
  std::string bytes = SerializeSafeTensors(f);
  bytes.resize(bytes.size() - 4);
  auto r = ParseSafeTensors(bytes, "cut.safetensors");
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kCorruption);
  EXPECT_FALSE(ParseSafeTensors("xx", "tiny").IsOk());
}

TEST(SafeTensorsTest, ReadsReferenceWeightsWhenPresent) {
  // One literal (KESTREL_SHARED_DIR is a string literal): GCC 12 at -O1 with
  // the tests' precompiled header reports a false -Warray-bounds on
  // std::string(...) + "..." here.
  const std::string path = KESTREL_SHARED_DIR "/reference/yolov8n_nc3_weights.safetensors";
  auto r = ReadSafeTensorsFile(path);
  if (!r.IsOk() && r.GetStatus().Code() == StatusCode::kNotFound) GTEST_SKIP() << "no reference";
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_EQ(r->tensors.size(), 355u);
  EXPECT_EQ(r->tensors.at("model.0.conv.weight").shape, (std::vector<int64_t>{16, 3, 3, 3}));
}

}  // namespace
}  // namespace kestrel
