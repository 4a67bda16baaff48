#include "store/metadata_store.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>
#include <vector>

#include "core/hash.h"

namespace kestrel::store {
namespace {

class MetadataStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            ("kestrel_ms_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::remove_all(dir_);
    url_ = "sqlite:" + dir_ + "/kestrel.db";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static DatasetVersionRecord Rec(const std::string& name, const std::string& content) {
    DatasetVersionRecord r;
    r.dataset = name;
    r.version_id = Sha256Hex(content);
    r.manifest_sha = Sha256Hex("m" + content);
    r.report_sha = Sha256Hex("r" + content);
    r.created_at = 1000;
    r.num_images = 10;
    r.num_boxes = 20;
    r.num_classes = 3;
    r.source = "yolo:/tmp/x";
    r.summary_json = "{}";
    return r;
  }

  std::string dir_, url_;
};

TEST_F(MetadataStoreTest, MigratesToLatest) {
  auto s = MetadataStore::Open(url_);
  ASSERT_TRUE(s.IsOk()) << s.GetStatus().ToString();
  EXPECT_EQ(*(*s)->SchemaVersion(), LatestSchemaVersion());
  // Re-opening an up-to-date database applies nothing and still works.
  auto again = MetadataStore::Open(url_);
  ASSERT_TRUE(again.IsOk());
  EXPECT_EQ(*(*again)->SchemaVersion(), LatestSchemaVersion());
}

TEST_F(MetadataStoreTest, VersionsAreNumberedAndDeduplicated) {
  auto s = std::move(MetadataStore::Open(url_)).Value();
  bool created = false;
  auto v1 = s->AddDatasetVersion(Rec("birds", "a"), &created);
  ASSERT_TRUE(v1.IsOk());
  EXPECT_TRUE(created);
  EXPECT_EQ(v1->seq, 1);
  auto v2 = s->AddDatasetVersion(Rec("birds", "b"), &created);
  EXPECT_EQ(v2->seq, 2);
  auto again = s->AddDatasetVersion(Rec("birds", "a"), &created);
  EXPECT_FALSE(created);
  EXPECT_EQ(again->seq, 1);
  auto list = *s->ListDatasets();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].num_versions, 2);
  EXPECT_EQ(list[0].latest.seq, 2);

  EXPECT_EQ(s->GetVersion("birds", "")->seq, 2);
  EXPECT_EQ(s->GetVersion("birds", "v1")->version_id, Sha256Hex("a"));
  EXPECT_EQ(s->GetVersion("birds", Sha256Hex("b").substr(0, 8))->seq, 2);
  EXPECT_EQ(s->GetVersion("birds", "v9").GetStatus().Code(), StatusCode::kNotFound);
  // "birds@" is a typo, not "the latest".
  std::string name, ref;
  SplitDatasetRef("birds@", &name, &ref);
  EXPECT_EQ(name, "birds");
  auto empty = s->GetVersion(name, ref);
  EXPECT_EQ(empty.GetStatus().Code(), StatusCode::kInvalidArgument);
  EXPECT_NE(empty.GetStatus().Message().find("names no version"), std::string::npos)
      << empty.GetStatus().ToString();
  SplitDatasetRef("birds", &name, &ref);
  EXPECT_EQ(s->GetVersion(name, ref)->seq, 2);
  EXPECT_EQ(s->GetVersion("fish", "").GetStatus().Code(), StatusCode::kNotFound);
  EXPECT_EQ(s->GetVersion("birds", "abc").GetStatus().Code(), StatusCode::kInvalidArgument);
}

TEST_F(MetadataStoreTest, ConcurrentIdenticalAddsCreateOneVersion) {
  { ASSERT_TRUE(MetadataStore::Open(url_).IsOk()); }
  std::atomic<int> created_count{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      auto s = std::move(MetadataStore::Open(url_)).Value();
      bool created = false;
      auto r = s->AddDatasetVersion(Rec("birds", "same"), &created);
      ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
      if (created) ++created_count;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(created_count.load(), 1);
  auto s = std::move(MetadataStore::Open(url_)).Value();
  EXPECT_EQ(s->ListVersions("birds")->size(), 1u);
}

TEST_F(MetadataStoreTest, ConcurrentProcessesShareTheDatabase) {
  { ASSERT_TRUE(MetadataStore::Open(url_).IsOk()); }
  std::vector<pid_t> kids;
  for (int i = 0; i < 4; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      auto s = MetadataStore::Open(url_);
      if (!s.IsOk()) _exit(3);
      bool created = false;
      auto r = (*s)->AddDatasetVersion(Rec("birds", "v" + std::to_string(i)), &created);
      _exit(r.IsOk() && created ? 0 : 4);
    }
    kids.push_back(pid);
  }
  for (pid_t k : kids) {
    int st = 0;
    waitpid(k, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  auto s = std::move(MetadataStore::Open(url_)).Value();
  auto versions = *s->ListVersions("birds");
  ASSERT_EQ(versions.size(), 4u);
  for (size_t i = 0; i < versions.size(); ++i) EXPECT_EQ(versions[i].seq, static_cast<int64_t>(i + 1));
}

TEST(DatasetRefTest, Split) {
  std::string n, r;
  SplitDatasetRef("birds@v2", &n, &r);
  EXPECT_EQ(n, "birds");
  EXPECT_EQ(r, "v2");
  SplitDatasetRef("birds", &n, &r);
  EXPECT_EQ(r, "");
}

}  // namespace
}  // namespace kestrel::store
