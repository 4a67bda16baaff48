#include "store/artifact_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/fault_env.h"
#include "core/hash.h"
#include "store/local_artifact_store.h"

namespace kestrel::store {
namespace {

class ArtifactStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = (std::filesystem::temp_directory_path() /
             ("kestrel_as_" + std::to_string(::getpid()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                .string();
    std::filesystem::remove_all(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string root_;
};

TEST_F(ArtifactStoreTest, PutGetDeduplicates) {
  LocalArtifactStore store(root_);
  auto a = store.Put("hello");
  ASSERT_TRUE(a.IsOk());
  EXPECT_EQ(*a, Sha256Hex("hello"));
  EXPECT_EQ(store.PathFor(*a), root_ + "/objects/" + a->substr(0, 2) + "/" + *a);
  auto b = store.Put("hello");
  EXPECT_EQ(*a, *b);
  size_t files = 0;
  for (auto& e : std::filesystem::recursive_directory_iterator(root_)) files += e.is_regular_file();
  EXPECT_EQ(files, 1u);
  EXPECT_EQ(*store.Get(*a), "hello");
}

TEST_F(ArtifactStoreTest, CorruptedBlobIsReportedNotReturned) {
  LocalArtifactStore store(root_);
  std::string sha = *store.Put("precious bytes");
  {
    std::ofstream f(store.PathFor(sha), std::ios::binary | std::ios::trunc);
    f << "precious bytez";
  }
  auto r = store.Get(sha);
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kCorruption);
  EXPECT_NE(r.GetStatus().ToString().find(sha), std::string::npos);
}

TEST_F(ArtifactStoreTest, DamagedBlobIsRewrittenOnPut) {
  // A deferred write cut short (power loss before syncfs) can leave a blob of
  // the right size with the wrong bytes; the next Put must repair it rather
  // than "deduplicate" against it.
  LocalArtifactStore store(root_);
  std::string sha =
      *store.PutWithHash("0123456789", Sha256Hex("0123456789"), ArtifactStore::Durability::kDeferred);
  ASSERT_TRUE(store.SyncDeferred().IsOk());
  {
    std::ofstream f(store.PathFor(sha), std::ios::binary | std::ios::trunc);
    f << std::string(10, '\0');
  }
  EXPECT_EQ(store.Get(sha).GetStatus().Code(), StatusCode::kCorruption);
  ASSERT_TRUE(store.Put("0123456789").IsOk());
  EXPECT_EQ(*store.Get(sha), "0123456789");
}

TEST_F(ArtifactStoreTest, DeferredWritesAreVisibleAndSyncable) {
  FaultInjectionEnv env(Env::Default());
  LocalArtifactStore store(root_, env);
  std::string sha = Sha256Hex("later");
  ASSERT_TRUE(store.PutWithHash("later", sha, ArtifactStore::Durability::kDeferred).IsOk());
  EXPECT_TRUE(store.SyncDeferred().IsOk());
  EXPECT_EQ(*store.Get(sha), "later");
  env.FailWritesAfter(0);
  EXPECT_FALSE(store.PutWithHash("x", Sha256Hex("x"), ArtifactStore::Durability::kDeferred).IsOk());
  EXPECT_FALSE(store.Has(Sha256Hex("x")));
}

TEST_F(ArtifactStoreTest, MissingBlobIsNotFound) {
  LocalArtifactStore store(root_);
  auto r = store.Get(Sha256Hex("never stored"));
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kNotFound);
  EXPECT_FALSE(store.Get("not-a-hash").IsOk());
}

TEST_F(ArtifactStoreTest, FailedWriteLeavesNoBlob) {
  FaultInjectionEnv env(Env::Default());
  LocalArtifactStore store(root_, env);
  env.FailWritesAfter(0);
  auto r = store.Put("data");
  EXPECT_FALSE(r.IsOk());
  EXPECT_FALSE(store.Has(Sha256Hex("data")));
}

}  // namespace
}  // namespace kestrel::store
