// API tokens in the store (migration 11) on both backends: only the hash is
// kept, live names are unique while a revoked token's name may be reused,
// revoke is recorded once, last-used moves forward only, malformed records
// are refused, and everything survives reopening.
#include "core/hash.h"
#include "job_store_fixture.h"

namespace kestrel::store {
namespace {

class TokenStoreTest : public JobStoreTest {
 protected:
  static ApiTokenRecord Token(const std::string& id, const std::string& name, bool read_only = false) {
    ApiTokenRecord t;
    t.id = id;
    t.name = name;
    t.secret_sha = Sha256Hex("secret-of-" + id);
    t.read_only = read_only;
    t.created_ms = 1000;
    return t;
  }
};

TEST_P(TokenStoreTest, AddListGetKeepOnlyTheHash) {
  auto a = store_->AddApiToken(Token("0123456789ab", "ci", true));
  ASSERT_TRUE(a.IsOk()) << a.GetStatus().ToString();
  EXPECT_EQ(a->last_used_ms, 0);
  EXPECT_EQ(a->revoked_ms, 0);
  auto b = Token("ba9876543210", "deploy");
  b.created_ms = 2000;
  b.last_used_ms = 77;  // ignored: a new token was never used
  ASSERT_TRUE(store_->AddApiToken(b).IsOk());

  store_ = Open();  // kept across reopening
  auto all = store_->ListApiTokens();
  ASSERT_TRUE(all.IsOk()) << all.GetStatus().ToString();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].name, "ci") << "oldest first";
  EXPECT_TRUE((*all)[0].read_only);
  EXPECT_EQ((*all)[0].secret_sha, Sha256Hex("secret-of-0123456789ab"));
  EXPECT_EQ((*all)[0].created_ms, 1000);
  EXPECT_EQ((*all)[1].name, "deploy");
  EXPECT_FALSE((*all)[1].read_only);
  EXPECT_EQ((*all)[1].last_used_ms, 0);

  auto got = store_->GetApiToken("ba9876543210");
  ASSERT_TRUE(got.IsOk());
  EXPECT_EQ(got->name, "deploy");
  auto missing = store_->GetApiToken("ffffffffffff");
  ASSERT_FALSE(missing.IsOk());
  EXPECT_EQ(missing.GetStatus().Code(), StatusCode::kNotFound);
}

TEST_P(TokenStoreTest, LiveNamesAreUniqueAndARevokedNameMayBeReused) {
  ASSERT_TRUE(store_->AddApiToken(Token("aaaaaaaaaaaa", "ci")).IsOk());
  auto twin = store_->AddApiToken(Token("bbbbbbbbbbbb", "ci"));
  ASSERT_FALSE(twin.IsOk());
  EXPECT_EQ(twin.GetStatus().Code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(twin.GetStatus().Where().field, "name");
  EXPECT_NE(twin.GetStatus().Message().find("aaaaaaaaaaaa"), std::string::npos) << "names the live one";
  auto same_id = store_->AddApiToken(Token("aaaaaaaaaaaa", "other"));
  ASSERT_FALSE(same_id.IsOk());
  EXPECT_EQ(same_id.GetStatus().Code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(same_id.GetStatus().Where().field, "id");

  bool revoked = false;
  auto r = store_->RevokeApiToken("aaaaaaaaaaaa", 5000, &revoked);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_TRUE(revoked);
  EXPECT_EQ(r->revoked_ms, 5000);
  auto again = store_->RevokeApiToken("aaaaaaaaaaaa", 9000, &revoked);
  ASSERT_TRUE(again.IsOk());
  EXPECT_FALSE(revoked) << "revoked once";
  EXPECT_EQ(again->revoked_ms, 5000) << "the first revocation's time stays";
  EXPECT_EQ(store_->GetApiToken("aaaaaaaaaaaa")->revoked_ms, 5000);

  auto reuse = store_->AddApiToken(Token("bbbbbbbbbbbb", "ci"));
  ASSERT_TRUE(reuse.IsOk()) << reuse.GetStatus().ToString();
  EXPECT_EQ(store_->ListApiTokens()->size(), 2u) << "the revoked token stays listed";
  auto unknown = store_->RevokeApiToken("cccccccccccc", 1, &revoked);
  ASSERT_FALSE(unknown.IsOk());
  EXPECT_EQ(unknown.GetStatus().Code(), StatusCode::kNotFound);
}

TEST_P(TokenStoreTest, LastUsedOnlyMovesForward) {
  ASSERT_TRUE(store_->AddApiToken(Token("aaaaaaaaaaaa", "ci")).IsOk());
  ASSERT_TRUE(store_->TouchApiToken("aaaaaaaaaaaa", 3000).IsOk());
  EXPECT_EQ(store_->GetApiToken("aaaaaaaaaaaa")->last_used_ms, 3000);
  ASSERT_TRUE(store_->TouchApiToken("aaaaaaaaaaaa", 2000).IsOk());
  EXPECT_EQ(store_->GetApiToken("aaaaaaaaaaaa")->last_used_ms, 3000) << "an older time never wins";
  ASSERT_TRUE(store_->TouchApiToken("aaaaaaaaaaaa", 4000).IsOk());
  EXPECT_EQ(store_->GetApiToken("aaaaaaaaaaaa")->last_used_ms, 4000);
}

TEST_P(TokenStoreTest, MalformedRecordsAreRefused) {
  auto bad_name = Token("aaaaaaaaaaaa", "a/b");
  auto bad_id = Token("AAAAAAAAAAAA", "ci");
  auto short_id = Token("abc", "ci");
  auto bad_sha = Token("aaaaaaaaaaaa", "ci");
  bad_sha.secret_sha = "plain-secret";
  for (const auto& [rec, field] : std::vector<std::pair<ApiTokenRecord, std::string>>{
           {bad_name, "name"}, {bad_id, "id"}, {short_id, "id"}, {bad_sha, "secret_sha"}}) {
    auto r = store_->AddApiToken(rec);
    ASSERT_FALSE(r.IsOk()) << rec.name << " " << rec.id;
    EXPECT_EQ(r.GetStatus().Code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.GetStatus().Where().field, field);
  }
  EXPECT_TRUE(store_->ListApiTokens()->empty());
}

INSTANTIATE_TEST_SUITE_P(Backends, TokenStoreTest, ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kestrel::store
