// The S3 store's download cache cap (docs/disk.md "Artifacts on S3"): least
// recently used files go first, the file just handed out never; the cap's
// setting is checked when the store opens. No S3 server: the trim only
// reads the cache folder. Milliseconds.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "store/s3_artifact_store.h"

namespace kestrel::store {
namespace {

namespace fs = std::filesystem;

class S3CacheTrimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    home_ = (fs::temp_directory_path() / ("kestrel_trim_" + std::to_string(::getpid()))).string();
    fs::remove_all(home_);
  }
  void TearDown() override { fs::remove_all(home_); }
  // A cached blob of `bytes` bytes last used `age_s` seconds ago.
  std::string Cached(const std::string& name, size_t bytes, int age_s) {
    const fs::path dir = fs::path(home_) / "cache" / "s3-objects" / name.substr(0, 2);
    fs::create_directories(dir);
    const fs::path p = dir / name;
    std::ofstream(p) << std::string(bytes, 'x');
    fs::last_write_time(p, fs::file_time_type::clock::now() - std::chrono::seconds(age_s));
    return p.string();
  }
  std::string home_;
};

TEST_F(S3CacheTrimTest, LeastRecentlyUsedGoFirstAndTheKeptFileStays) {
  s3::ClientOptions o;
  o.endpoint = "http://127.0.0.1:1";
  s3::Client client(o);
  S3StoreOptions so;
  so.home = home_;
  S3ArtifactStore store(client, {"b", "p"}, so);
  const std::string oldest = Cached("aa01", 100, 400), old = Cached("aa02", 100, 300),
                    kept = Cached("bb03", 100, 500), fresh = Cached("cc04", 100, 10);
  auto r = store.TrimCache(1000);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_EQ(*r, 0) << "under the cap: nothing removed";
  // 400 bytes, cap 200: the two least recently used go, except `kept`
  // (the oldest of all, but just handed out).
  r = store.TrimCache(200, kept);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_EQ(*r, 2);
  EXPECT_FALSE(fs::exists(oldest));
  EXPECT_FALSE(fs::exists(old));
  EXPECT_TRUE(fs::exists(kept));
  EXPECT_TRUE(fs::exists(fresh));
  // No cache folder yet is no error.
  fs::remove_all(home_);
  EXPECT_EQ(*store.TrimCache(0), 0);
}

TEST_F(S3CacheTrimTest, CapSettingIsCheckedWhenTheStoreOpens) {
  ::setenv("KESTREL_ARTIFACTS", "s3://bucket/prefix", 1);
  ::setenv("AWS_ACCESS_KEY_ID", "id", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "secret", 1);
  ::setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1", 1);
  ::setenv("KESTREL_S3_CACHE_GB", "ten", 1);
  auto bad = OpenArtifactStore(home_);
  EXPECT_EQ(bad.GetStatus().Code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.GetStatus().Message().find("KESTREL_S3_CACHE_GB"), std::string::npos);
  ::setenv("KESTREL_S3_CACHE_GB", "0.5", 1);
  EXPECT_TRUE(OpenArtifactStore(home_).IsOk());
  for (const char* v : {"KESTREL_ARTIFACTS", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL",
                        "KESTREL_S3_CACHE_GB"})
    ::unsetenv(v);
}

}  // namespace
}  // namespace kestrel::store
