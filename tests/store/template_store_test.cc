// Config templates in the store (migration 9) on both backends: versions per
// name, "same content as the newest version" adds nothing, filters and
// order, name rules, concurrent saves of one name.
#include <thread>

#include "job_store_fixture.h"

namespace kestrel::store {
namespace {

class TemplateStoreTest : public JobStoreTest {
 protected:
  TemplateRecord Save(const std::string& name, const std::string& keys_json, bool* created = nullptr) {
    TemplateRecord r;
    r.name = name;
    r.created_ms = Now();
    r.keys_json = keys_json;
    r.content_sha = Sha256Hex(keys_json);
    bool c = false;
    auto t = store_->AddTemplate(r, &c);
    EXPECT_TRUE(t.IsOk()) << t.GetStatus().ToString();
    if (created != nullptr) *created = c;
    return t.IsOk() ? *t : TemplateRecord{};
  }
};

TEST_P(TemplateStoreTest, VersionsCountPerNameAndTheNewestContentIsNotSavedTwice) {
  bool created = false;
  auto v1 = Save("fast", R"({"epochs":"10"})", &created);
  EXPECT_TRUE(created);
  EXPECT_EQ(v1.seq, 1);
  auto again = Save("fast", R"({"epochs":"10"})", &created);
  EXPECT_FALSE(created) << "identical to the newest version";
  EXPECT_EQ(again.seq, 1);
  EXPECT_EQ(again.created_ms, v1.created_ms);
  auto v2 = Save("fast", R"({"epochs":"20"})", &created);
  EXPECT_TRUE(created);
  EXPECT_EQ(v2.seq, 2);
  // Back to v1's content: a new version (the newest is what template=fast means).
  auto v3 = Save("fast", R"({"epochs":"10"})", &created);
  EXPECT_TRUE(created);
  EXPECT_EQ(v3.seq, 3);
  auto other = Save("slow", R"({"epochs":"10"})", &created);
  EXPECT_TRUE(created);
  EXPECT_EQ(other.seq, 1) << "versions count per name";

  auto all = store_->ListTemplates({});
  ASSERT_TRUE(all.IsOk()) << all.GetStatus().ToString();
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ((*all)[0].name, "fast");
  EXPECT_EQ((*all)[0].seq, 1);
  EXPECT_EQ((*all)[2].seq, 3);
  EXPECT_EQ((*all)[3].name, "slow");
  EXPECT_EQ((*all)[1].keys_json, R"({"epochs":"20"})");
  EXPECT_EQ((*all)[1].content_sha, Sha256Hex(R"({"epochs":"20"})"));

  TemplateFilter f;
  f.name = "fast";
  f.seq = 2;
  auto one = store_->ListTemplates(f);
  ASSERT_TRUE(one.IsOk());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].keys_json, R"({"epochs":"20"})");
  f.seq = 9;
  EXPECT_TRUE(store_->ListTemplates(f)->empty());
  f.name = "nope";
  f.seq = 0;
  EXPECT_TRUE(store_->ListTemplates(f)->empty());

  // Kept across reopening.
  store_ = Open();
  f.name = "fast";
  EXPECT_EQ(store_->ListTemplates(f)->size(), 3u);
}

TEST_P(TemplateStoreTest, NamesThatWouldBreakReferencesAreRefused) {
  for (const std::string& bad :
       std::vector<std::string>{"", "a@v1", "job:1", "a/b", ".hidden", "-x", std::string(129, 'a')}) {
    TemplateRecord r;
    r.name = bad;
    r.keys_json = "{}";
    r.content_sha = Sha256Hex("{}");
    auto t = store_->AddTemplate(r, nullptr);
    ASSERT_FALSE(t.IsOk()) << bad;
    EXPECT_EQ(t.GetStatus().Code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(store_->ListTemplates({})->empty());
}

TEST_P(TemplateStoreTest, ConcurrentSavesOfOneNameGetDistinctVersions) {
  constexpr int kThreads = 4, kEach = 5;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto s = MetadataStore::Open(url_);
      if (!s.IsOk()) {
        ++failures;
        return;
      }
      for (int i = 0; i < kEach; ++i) {
        TemplateRecord r;
        r.name = "shared";
        r.keys_json = "{\"seed\":\"" + std::to_string(t * 100 + i) + "\"}";
        r.content_sha = Sha256Hex(r.keys_json);
        if (!(*s)->AddTemplate(r, nullptr).IsOk()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  TemplateFilter f;
  f.name = "shared";
  auto all = store_->ListTemplates(f);
  ASSERT_TRUE(all.IsOk());
  ASSERT_EQ(all->size(), static_cast<size_t>(kThreads * kEach));
  for (size_t i = 0; i < all->size(); ++i) EXPECT_EQ((*all)[i].seq, static_cast<int64_t>(i + 1));
}

INSTANTIATE_TEST_SUITE_P(Backends, TemplateStoreTest, ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kestrel::store
