// Where the S3 client's endpoint, region and credentials come from
// (s3::OptionsFromEnvironment) and the KESTREL_ARTIFACTS URL (ParseS3Url).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "s3/client.h"

namespace kestrel::s3 {
namespace {

class OptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    home_ =
        (std::filesystem::temp_directory_path() / ("kestrel_s3opt_" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(home_ + "/.aws");
    vars_["HOME"] = home_;
  }
  void TearDown() override { std::filesystem::remove_all(home_); }
  Result<ResolvedOptions> Resolve() {
    return OptionsFromEnvironment([this](const char* n) -> const char* {
      auto it = vars_.find(n);
      return it == vars_.end() ? nullptr : it->second.c_str();
    });
  }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(home_ + "/.aws/" + name) << text;
  }
  std::string home_;
  std::map<std::string, std::string> vars_;
};

TEST_F(OptionsTest, VariablesWinAndTheEndpointIsPathStyle) {
  vars_["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9000/";
  vars_["AWS_REGION"] = "eu-west-1";
  vars_["AWS_ACCESS_KEY_ID"] = "AKID";
  vars_["AWS_SECRET_ACCESS_KEY"] = "secret";
  vars_["AWS_SESSION_TOKEN"] = "tok";
  Write("credentials", "[default]\naws_access_key_id = FROMFILE\naws_secret_access_key = x\n");
  auto r = Resolve();
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_EQ(r->options.endpoint, "http://127.0.0.1:9000");
  EXPECT_EQ(r->options.region, "eu-west-1");
  EXPECT_EQ(r->options.credentials.access_key_id, "AKID");
  EXPECT_EQ(r->options.credentials.session_token, "tok");
}

TEST_F(OptionsTest, ProfileFromTheAwsFiles) {
  vars_["AWS_PROFILE"] = "team";
  Write("credentials",
        "[default]\naws_access_key_id = D\naws_secret_access_key = d\n"
        "[team]\naws_access_key_id = T\naws_secret_access_key = t\n");
  Write("config", "[profile team]\nregion = ap-south-1\nendpoint_url = https://s3.example.test\n");
  auto r = Resolve();
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_EQ(r->options.credentials.access_key_id, "T");
  EXPECT_EQ(r->options.region, "ap-south-1");
  EXPECT_EQ(r->options.endpoint, "https://s3.example.test");
  EXPECT_NE(r->credentials_source.find("profile team"), std::string::npos);
}

TEST_F(OptionsTest, NoCredentialsNamesWhereItLooked) {
  auto r = Resolve();
  ASSERT_FALSE(r.IsOk());
  EXPECT_NE(r.GetStatus().Message().find("AWS_ACCESS_KEY_ID"), std::string::npos);
  EXPECT_NE(r.GetStatus().Message().find(home_ + "/.aws/credentials"), std::string::npos);
  vars_["AWS_ACCESS_KEY_ID"] = "only-the-id";
  EXPECT_FALSE(Resolve().IsOk());
  vars_["AWS_SECRET_ACCESS_KEY"] = "s";
  vars_["AWS_ENDPOINT_URL"] = "ftp://x";
  EXPECT_NE(Resolve().GetStatus().Message().find("AWS_ENDPOINT_URL"), std::string::npos);
}

TEST(S3UrlTest, BucketAndPrefix) {
  auto u = ParseS3Url("s3://my-bucket/team/artifacts/");
  ASSERT_TRUE(u.IsOk());
  EXPECT_EQ(u->bucket, "my-bucket");
  EXPECT_EQ(u->prefix, "team/artifacts");
  EXPECT_EQ(ParseS3Url("s3://b-1")->prefix, "");
  EXPECT_NE(ParseS3Url("http://b/x").GetStatus().Message().find("KESTREL_ARTIFACTS"), std::string::npos);
  EXPECT_FALSE(ParseS3Url("s3://Bad_Bucket/x").IsOk());
}

}  // namespace
}  // namespace kestrel::s3
