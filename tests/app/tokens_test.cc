// API tokens in the application layer (app/tokens.h) on a SQLite store: the
// token text is shown once and only its hash is stored; authentication
// accepts exactly a live token's text and refuses malformed, unknown,
// wrong-secret and revoked ones; last-used is recorded at most once a
// minute; revoke by name or id; the JSON view never carries a secret.
#include "app/tokens.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "app/jobs.h"
#include "core/hash.h"

namespace kestrel::app {
namespace {

namespace fs = std::filesystem;

class TokensTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::temp_directory_path() / ("kestrel_app_tokens_" + std::to_string(::getpid()) + "_" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto m = store::MetadataStore::Open("sqlite:" + (dir_ / "kestrel.db").string());
    ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
    meta_ = std::move(m).Value();
  }
  void TearDown() override {
    meta_.reset();
    fs::remove_all(dir_);
  }
  CreatedToken Create(const std::string& name, bool read_only = false, int64_t now = 1000) {
    auto c = CreateToken(*meta_, name, read_only, now);
    EXPECT_TRUE(c.IsOk()) << c.GetStatus().ToString();
    return c.IsOk() ? *c : CreatedToken{};
  }
  fs::path dir_;
  std::unique_ptr<store::MetadataStore> meta_;
};

TEST_F(TokensTest, TheTokenTextIsShownOnceAndOnlyItsHashIsStored) {
  CreatedToken c = Create("ci", true);
  ASSERT_EQ(c.token.size(), 4u + 12 + 1 + 64) << c.token;
  EXPECT_EQ(c.token.rfind("kst_" + c.record.id + "_", 0), 0u);
  EXPECT_TRUE(c.record.read_only);
  auto all = ListTokens(*meta_);
  ASSERT_TRUE(all.IsOk());
  ASSERT_EQ(all->size(), 1u);
  const std::string secret_hex = c.token.substr(17);
  EXPECT_NE((*all)[0].secret_sha, secret_hex);
  EXPECT_NE((*all)[0].secret_sha, Sha256Hex(secret_hex)) << "the hash of the bytes, not of the hex text";
  EXPECT_EQ((*all)[0].secret_sha.size(), 64u);

  const nlohmann::json view = TokenJson((*all)[0]);
  const std::string text = view.dump();
  EXPECT_EQ(text.find(secret_hex), std::string::npos);
  EXPECT_EQ(text.find((*all)[0].secret_sha), std::string::npos);
  EXPECT_EQ(view["name"], "ci");
  EXPECT_EQ(view["read_only"], true);
  EXPECT_TRUE(view["last_used_ms"].is_null());
  EXPECT_TRUE(view["revoked_ms"].is_null());
  EXPECT_EQ(CreatedTokenJson(c)["token"], c.token);

  CreatedToken other = Create("deploy");
  EXPECT_NE(other.token, c.token);
  EXPECT_NE(other.record.id, c.record.id);
}

TEST_F(TokensTest, AuthenticationAcceptsOnlyALiveTokensText) {
  CreatedToken c = Create("ci");
  auto ok = AuthenticateToken(*meta_, c.token, 5000);
  ASSERT_TRUE(ok.IsOk()) << ok.GetStatus().ToString();
  EXPECT_EQ(ok->id, c.record.id);

  std::string wrong_secret = c.token;
  wrong_secret.back() = wrong_secret.back() == '0' ? '1' : '0';
  std::string unknown_id = c.token;
  unknown_id[4] = unknown_id[4] == 'a' ? 'b' : 'a';
  for (const auto& bad : {wrong_secret, unknown_id}) {
    auto r = AuthenticateToken(*meta_, bad, 5000);
    ASSERT_FALSE(r.IsOk()) << bad;
    EXPECT_EQ(r.GetStatus().Code(), StatusCode::kNotFound) << bad;
    EXPECT_EQ(r.GetStatus().Message(), "unknown token") << "one message: no oracle for the id";
  }
  for (const std::string& bad : {std::string(), std::string("Bearer"), c.token.substr(1), c.token + "0",
                                 "kst_" + c.record.id + "_" + std::string(64, 'Z'), c.token.substr(0, 16)}) {
    auto r = AuthenticateToken(*meta_, bad, 5000);
    ASSERT_FALSE(r.IsOk()) << bad;
    EXPECT_EQ(r.GetStatus().Code(), StatusCode::kInvalidArgument) << bad;
  }

  auto revoked = RevokeToken(*meta_, "ci", 6000);
  ASSERT_TRUE(revoked.IsOk()) << revoked.GetStatus().ToString();
  EXPECT_TRUE(revoked->revoked);
  auto after = AuthenticateToken(*meta_, c.token, 7000);
  ASSERT_FALSE(after.IsOk());
  EXPECT_EQ(after.GetStatus().Code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(after.GetStatus().Message().find("revoked"), std::string::npos);
}

TEST_F(TokensTest, LastUsedIsRecordedAtMostOnceAMinute) {
  CreatedToken c = Create("ci");
  ASSERT_TRUE(AuthenticateToken(*meta_, c.token, 100'000).IsOk());
  EXPECT_EQ(meta_->GetApiToken(c.record.id)->last_used_ms, 100'000);
  ASSERT_TRUE(AuthenticateToken(*meta_, c.token, 130'000).IsOk());
  EXPECT_EQ(meta_->GetApiToken(c.record.id)->last_used_ms, 100'000) << "30 s later: no write";
  ASSERT_TRUE(AuthenticateToken(*meta_, c.token, 160'000).IsOk());
  EXPECT_EQ(meta_->GetApiToken(c.record.id)->last_used_ms, 160'000);
}

TEST_F(TokensTest, RevokeByNameOrIdAndNamesAreChecked) {
  CreatedToken a = Create("ci");
  CreatedToken b = Create("deploy");
  auto by_id = RevokeToken(*meta_, b.record.id, 2000);
  ASSERT_TRUE(by_id.IsOk());
  EXPECT_EQ(by_id->record.name, "deploy");
  EXPECT_TRUE(by_id->revoked);
  auto again = RevokeToken(*meta_, "deploy", 3000);
  ASSERT_TRUE(again.IsOk()) << "the revoked token of that name";
  EXPECT_FALSE(again->revoked);
  EXPECT_EQ(again->record.revoked_ms, 2000);
  EXPECT_TRUE(AuthenticateToken(*meta_, a.token, 3000).IsOk()) << "the other token still works";

  auto unknown = RevokeToken(*meta_, "nope", 3000);
  ASSERT_FALSE(unknown.IsOk());
  EXPECT_EQ(unknown.GetStatus().Code(), StatusCode::kNotFound);
  EXPECT_EQ(unknown.GetStatus().Where().field, "token");

  auto twin = CreateToken(*meta_, "ci", false, 4000);
  ASSERT_FALSE(twin.IsOk());
  EXPECT_EQ(twin.GetStatus().Code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(twin.GetStatus().Where().file, kRequestFile);
  for (const std::string& bad :
       {std::string(), std::string("a b"), std::string("x/y"), std::string("\xFF")}) {
    auto r = CreateToken(*meta_, bad, false, 4000);
    ASSERT_FALSE(r.IsOk()) << bad;
    EXPECT_EQ(r.GetStatus().Code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.GetStatus().Where().field, "name");
  }
  EXPECT_TRUE(CreateToken(*meta_, "deploy", false, 5000).IsOk()) << "a revoked name may be reused";
}

TEST(ConstantTimeEqualsTest, ComparesWholeStrings) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "xbc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_FALSE(ConstantTimeEquals(std::string("a\0b", 3), std::string("a\0c", 3)));
}

}  // namespace
}  // namespace kestrel::app
