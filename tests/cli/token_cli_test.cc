// `kestrel token create|list|revoke` as a process (docs/server.md "Auth"):
// create prints the token once (text and --json), list never shows a
// secret or a hash, revoke by name and by id, the store holds only hashes,
// and bad names / unknown tokens fail with the usual exit codes.
#include "app/tokens.h"
#include "cli_fixture.h"
#include "core/hash.h"
#include "store/metadata_store.h"

namespace kestrel::testing {
namespace {

class TokenCliTest : public KestrelCliTest {};

TEST_F(TokenCliTest, CreateShowsTheTokenOnceListNeverAndRevokeEndsIt) {
  auto ci = Json(Kestrel("--json token create --name ci --read-only"));
  ASSERT_EQ(ci["ok"], true) << ci.dump();
  const std::string token = ci["token"].get<std::string>();
  EXPECT_EQ(token.rfind("kst_" + ci["id"].get<std::string>() + "_", 0), 0u) << token;
  EXPECT_EQ(ci["read_only"], true);
  CliRun deploy_text = Kestrel("token create --name deploy");
  ASSERT_EQ(deploy_text.code, 0);
  const size_t at = deploy_text.out.find("kst_");
  ASSERT_NE(at, std::string::npos) << deploy_text.out;
  const std::string deploy_token = deploy_text.out.substr(at, 4 + 12 + 1 + 64);
  EXPECT_NE(deploy_text.out.find("not shown again"), std::string::npos) << deploy_text.out;
  EXPECT_NE(deploy_text.out.find("read-write"), std::string::npos) << deploy_text.out;

  CliRun list_text = Kestrel("token list");
  ASSERT_EQ(list_text.code, 0);
  auto list = Json(Kestrel("--json token list"));
  ASSERT_EQ(list["tokens"].size(), 2u) << list.dump();
  EXPECT_EQ(list["tokens"][0]["name"], "ci");
  EXPECT_EQ(list["tokens"][1]["read_only"], false);

  // The store holds hashes only; neither list shows a secret or a hash.
  auto meta = store::MetadataStore::Open("sqlite:" + (dir_ / "home" / "kestrel.db").string());
  ASSERT_TRUE(meta.IsOk()) << meta.GetStatus().ToString();
  auto stored = (*meta)->ListApiTokens();
  ASSERT_TRUE(stored.IsOk());
  ASSERT_EQ(stored->size(), 2u);
  for (const std::string& secret : {token.substr(17), deploy_token.substr(17)}) {
    EXPECT_EQ(list_text.out.find(secret), std::string::npos);
    EXPECT_EQ(list.dump().find(secret), std::string::npos);
    for (const auto& rec : *stored) {
      EXPECT_NE(rec.secret_sha, secret);
      EXPECT_EQ(list_text.out.find(rec.secret_sha), std::string::npos);
      EXPECT_EQ(list.dump().find(rec.secret_sha), std::string::npos);
    }
  }
  EXPECT_EQ(list["tokens"][0], app::TokenJson((*stored)[0])) << "the app view, unchanged";
  EXPECT_TRUE(app::AuthenticateToken(**meta, token, 1).IsOk()) << "what create printed is the token";
  EXPECT_TRUE(app::AuthenticateToken(**meta, deploy_token, 1).IsOk()) << "the text mode printed it whole";

  auto by_name = Json(Kestrel("--json token revoke ci"));
  EXPECT_EQ(by_name["revoked"], true) << by_name.dump();
  EXPECT_FALSE(by_name["token"]["revoked_ms"].is_null());
  auto by_id = Json(Kestrel("--json token revoke " + list["tokens"][1]["id"].get<std::string>()));
  EXPECT_EQ(by_id["revoked"], true);
  EXPECT_EQ(by_id["token"]["name"], "deploy");
  CliRun again = Kestrel("token revoke ci");
  EXPECT_EQ(again.code, 0);
  EXPECT_NE(again.out.find("already revoked"), std::string::npos) << again.out;
  auto after = app::AuthenticateToken(**meta, token, 2);
  ASSERT_FALSE(after.IsOk());
  EXPECT_EQ(after.GetStatus().Code(), StatusCode::kFailedPrecondition);

  // A revoked name may be given to a new token; the list keeps all three.
  EXPECT_EQ(Kestrel("token create --name ci").code, 0);
  EXPECT_EQ(Json(Kestrel("--json token list"))["tokens"].size(), 3u);
}

TEST_F(TokenCliTest, BadNamesAndUnknownTokensFail) {
  auto bad = Json(Kestrel("--json token create --name 'a/b'"));
  EXPECT_EQ(bad["error"]["code"], "usage") << bad.dump();
  EXPECT_EQ(bad["error"]["field"], "name");
  EXPECT_EQ(Kestrel("token create --name 'a/b'").code, 2);
  EXPECT_EQ(Kestrel("token create").code, 2) << "--name is required";
  ASSERT_EQ(Kestrel("token create --name ci").code, 0);
  auto twin = Json(Kestrel("--json token create --name ci"));
  EXPECT_EQ(twin["error"]["code"], "already_exists") << twin.dump();
  auto unknown = Json(Kestrel("--json token revoke nope"));
  EXPECT_EQ(unknown["error"]["code"], "not_found") << unknown.dump();
  EXPECT_EQ(Kestrel("token revoke nope").code, 1);
  EXPECT_EQ(Json(Kestrel("--json token list"))["tokens"].size(), 1u);
}

// Names past their bound (core/names.h, issue 26), from the command line:
// exit 2, one JSON error naming the field and the bound, nothing stored.
TEST_F(TokenCliTest, NamesPastTheirBoundAreRefusedNamingTheFieldAndTheBound) {
  const std::string long_name(129, 'n');
  CliRun token = Kestrel("--json token create --name " + long_name);
  EXPECT_EQ(token.code, 2) << token.out;
  auto t = Json(token);
  EXPECT_EQ(t["error"]["field"], "name") << t.dump();
  EXPECT_NE(t["error"]["message"].get<std::string>().find("at most 128"), std::string::npos) << t.dump();
  EXPECT_EQ(Json(Kestrel("--json token list"))["tokens"].size(), 0u);

  ASSERT_EQ(Kestrel("dataset synth data --images 4 --imgsz 32").code, 0);
  CliRun imp = Kestrel("--json dataset import data --name " + std::string(1000, 'd'));
  EXPECT_NE(imp.code, 0) << imp.out;
  auto d = Json(imp);
  EXPECT_EQ(d["error"]["field"], "name") << d.dump();
  EXPECT_NE(d["error"]["message"].get<std::string>().find("at most 128"), std::string::npos) << d.dump();
  EXPECT_LT(imp.out.size(), 1000u) << "the name is quoted cut";
  EXPECT_EQ(Json(Kestrel("--json dataset list"))["datasets"].size(), 0u);
}

}  // namespace
}  // namespace kestrel::testing
