#include "core/hash.h"

#include <gtest/gtest.h>

namespace kestrel {
namespace {

TEST(HashTest, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // RFC 4231 test case 2.
  EXPECT_EQ(HmacSha256Hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(HashTest, IncrementalEqualsOneShot) {
  Sha256 h;
  h.Update("a");
  h.Update("bc");
  EXPECT_EQ(h.HexDigest(), Sha256Hex("abc"));
  EXPECT_TRUE(IsSha256Hex(Sha256Hex("x")));
  EXPECT_FALSE(IsSha256Hex("ABC"));
}

TEST(HashTest, RandomHexHasTheLengthAndAlphabetAndDiffers) {
  const std::string a = RandomHex(32);
  const std::string b = RandomHex(32);
  ASSERT_EQ(a.size(), 64u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, b);  // 2^-256 chance of a false failure
  EXPECT_EQ(RandomHex(8).size(), 16u);
  EXPECT_EQ(RandomHex(0), "");
}

}  // namespace
}  // namespace kestrel
