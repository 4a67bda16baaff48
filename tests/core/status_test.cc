#include "core/status.h"

#include <gtest/gtest.h>

namespace kestrel {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return Status::InvalidArgument("odd", {"f.txt", 3, "x"});
  return x / 2;
}

Status UseHalf(int x, int* out) {
  KESTREL_ASSIGN_OR_RETURN(*out, Half(x));
  return {};
}

TEST(StatusTest, OkByDefault) {
  Status s;
  EXPECT_TRUE(s.IsOk());
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, ToStringNamesFileLineField) {
  Status s = Status::InvalidArgument("bad value", {"labels/a.txt", 7, "class"});
  EXPECT_EQ(s.ToString(), "labels/a.txt:7: field 'class': bad value");
  EXPECT_EQ(s.WithContext("import").ToString(), "labels/a.txt:7: field 'class': import: bad value");
}

TEST(StatusTest, ResultPropagates) {
  int v = 0;
  EXPECT_TRUE(UseHalf(4, &v).IsOk());
  EXPECT_EQ(v, 2);
  Status s = UseHalf(3, &v);
  EXPECT_EQ(s.Code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Where().line, 3);
}

}  // namespace
}  // namespace kestrel
