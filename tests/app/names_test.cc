// The length bound on every name a user gives (core/names.h, issue 26: a
// 100,000-character dataset name was stored, listed and drawn), through the
// application layer the CLI and the server both call, on a SQLite store:
// dataset import, model registration, templates, API tokens and model tags
// each accept a name at the bound, refuse one a character past it and a
// 100,000-character one with kInvalidArgument naming the field and the
// bound in a short message, and store nothing.
#include "core/names.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "app/datasets.h"
#include "app/models.h"
#include "app/templates.h"
#include "app/tokens.h"
#include "core/safetensors.h"
#include "data/synth.h"
#include "store/local_artifact_store.h"

namespace kestrel::app {
namespace {

namespace fs = std::filesystem;

constexpr size_t kHuge = 100'000;

class NameBoundTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::temp_directory_path() / ("kestrel_app_names_" + std::to_string(::getpid()) + "_" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto m = store::MetadataStore::Open("sqlite:" + (dir_ / "kestrel.db").string());
    ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
    meta_ = std::move(m).Value();
    blobs_ = std::make_unique<store::LocalArtifactStore>((dir_ / "home").string());
  }
  void TearDown() override {
    meta_.reset();
    fs::remove_all(dir_);
  }
  // A small valid safetensors file.
  std::string Weights() {
    SafeTensorFile f;
    float v = 1;
    f.tensors["w"] = SafeTensor{"F32", {1}, std::string(reinterpret_cast<const char*>(&v), sizeof v)};
    const std::string path = (dir_ / "w.safetensors").string();
    std::ofstream(path, std::ios::binary) << SerializeSafeTensors(f);
    return path;
  }
  Result<store::ModelRecord> Register(const std::string& name) {
    RegisterRequest r;
    r.weights_path = Weights();
    r.name = name;
    r.dataset = "birds";
    return ModelRegistry(*meta_, *blobs_, Env::Default()).Register(r, 2000);
  }

  fs::path dir_;
  std::unique_ptr<store::MetadataStore> meta_;
  std::unique_ptr<store::ArtifactStore> blobs_;
};

// The refusal of a name `chars` characters long: invalid_argument naming
// `field` and the bound, short whatever the name's length.
void ExpectTooLong(const Status& s, const std::string& field, size_t max, size_t chars) {
  ASSERT_FALSE(s.IsOk()) << field << " of " << chars << " characters was accepted";
  EXPECT_EQ(s.Code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_EQ(s.Where().field, field) << s.ToString();
  EXPECT_NE(s.Message().find("at most " + std::to_string(max)), std::string::npos) << s.Message();
  EXPECT_NE(s.Message().find(std::to_string(chars) + " characters"), std::string::npos) << s.Message();
  EXPECT_LT(s.Message().size(), 300u) << "the name is quoted cut, not whole";
}

TEST_F(NameBoundTest, DatasetNamesAreAtMost128Characters) {
  data::SynthOptions so;
  so.images = 4;
  so.imgsz = 32;
  so.classes = 2;
  so.write_threads = 1;
  ASSERT_TRUE(data::WriteSynthDataset(so, (dir_ / "synth").string()).IsOk());
  Datasets ds(*meta_, *blobs_);
  for (size_t n : {kMaxNameChars + 1, kHuge}) {
    auto r = ds.Import((dir_ / "synth").string(), std::string(n, 'd'), {});
    ExpectTooLong(r.GetStatus(), "name", kMaxNameChars, n);
  }
  // Characters, not bytes: 128 two-byte characters are a valid name, 129 are not.
  std::string umlauts;
  for (size_t i = 0; i < kMaxNameChars + 1; ++i) umlauts += "\xC3\xBC";  // U+00FC
  ExpectTooLong(ds.Import((dir_ / "synth").string(), umlauts, {}).GetStatus(), "name", kMaxNameChars,
                kMaxNameChars + 1);
  auto listed = ds.List();
  ASSERT_TRUE(listed.IsOk());
  EXPECT_TRUE(listed->empty()) << "nothing stored";

  const std::string at_bound(kMaxNameChars, 'd');
  auto ok = ds.Import((dir_ / "synth").string(), at_bound, {});
  ASSERT_TRUE(ok.IsOk()) << ok.GetStatus().ToString();
  umlauts.resize(2 * kMaxNameChars);
  auto ok2 = ds.Import((dir_ / "synth").string(), umlauts, {});
  EXPECT_TRUE(ok2.IsOk()) << ok2.GetStatus().ToString();
}

TEST_F(NameBoundTest, ModelNamesAndTagsAreBounded) {
  for (size_t n : {kMaxNameChars + 1, kHuge})
    ExpectTooLong(Register(std::string(n, 'm')).GetStatus(), "name", kMaxNameChars, n);
  auto none = meta_->ListModels({});
  ASSERT_TRUE(none.IsOk());
  EXPECT_TRUE(none->empty()) << "nothing stored";

  auto m = Register(std::string(kMaxNameChars, 'm'));
  ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
  ModelRegistry reg(*meta_, *blobs_, Env::Default());
  const std::string ref = m->name + "@v1";
  for (size_t n : {kMaxTagChars + 1, kHuge})
    ExpectTooLong(reg.Tag(ref, std::string(n, 't'), 3000).GetStatus(), "tag", kMaxTagChars, n);
  auto tagged = reg.Tag(ref, std::string(kMaxTagChars, 't'), 3000);
  ASSERT_TRUE(tagged.IsOk()) << tagged.GetStatus().ToString();
  auto after = meta_->ListModels({});
  ASSERT_TRUE(after.IsOk());
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ((*after)[0].tags, std::vector<std::string>{std::string(kMaxTagChars, 't')})
      << "only the bounded tag";
}

TEST_F(NameBoundTest, TemplateNamesAreAtMost128Characters) {
  TemplateLibrary lib(*meta_);
  for (size_t n : {kMaxNameChars + 1, kHuge}) {
    ExpectTooLong(lib.Save(std::string(n, 't'), {"epochs=3"}, 1000).GetStatus(), "name", kMaxNameChars, n);
    // Looking one up does not echo it whole either.
    auto found = lib.Resolve(std::string(n, 't') + "@v1");
    ASSERT_FALSE(found.IsOk());
    EXPECT_LT(found.GetStatus().Message().size(), 600u);
  }
  auto all = lib.List("");
  ASSERT_TRUE(all.IsOk());
  EXPECT_TRUE(all->empty()) << "nothing stored";
  auto ok = lib.Save(std::string(kMaxNameChars, 't'), {"epochs=3"}, 1000);
  EXPECT_TRUE(ok.IsOk()) << ok.GetStatus().ToString();
}

TEST_F(NameBoundTest, TokenNamesAreAtMost128Characters) {
  for (size_t n : {kMaxNameChars + 1, kHuge})
    ExpectTooLong(CreateToken(*meta_, std::string(n, 'k'), false, 1000).GetStatus(), "name", kMaxNameChars,
                  n);
  auto all = ListTokens(*meta_);
  ASSERT_TRUE(all.IsOk());
  EXPECT_TRUE(all->empty()) << "nothing stored";
  auto ok = CreateToken(*meta_, std::string(kMaxNameChars, 'k'), false, 1000);
  EXPECT_TRUE(ok.IsOk()) << ok.GetStatus().ToString();
}

TEST_F(NameBoundTest, CharacterRulesStillHoldWithinTheBound) {
  const ErrorLocation where{"request", 0, "name"};
  EXPECT_FALSE(CheckName(NameKind::kDataset, "a/b", where).IsOk());
  EXPECT_FALSE(CheckName(NameKind::kDataset, "a b", where).IsOk());
  EXPECT_FALSE(CheckName(NameKind::kDataset, std::string("a\x01", 2), where).IsOk());
  EXPECT_FALSE(CheckName(NameKind::kDataset, "a\xFF", where).IsOk());
  EXPECT_FALSE(CheckName(NameKind::kModel, ".hidden", where).IsOk());
  EXPECT_FALSE(CheckName(NameKind::kToken, "a@b", where).IsOk());
  EXPECT_FALSE(CheckName(NameKind::kTag, "Upper", where).IsOk());
  EXPECT_FALSE(CheckName(NameKind::kTemplate, "", where).IsOk());
  EXPECT_TRUE(CheckName(NameKind::kDataset, "v\xC3\xB6gel-2024", where).IsOk());
  EXPECT_TRUE(CheckName(NameKind::kTag, "candidate-2.1", where).IsOk());
  const Status s = CheckName(NameKind::kModel, "bad name", where);
  EXPECT_EQ(s.Where().field, "name");
  EXPECT_NE(s.Message().find("1-128 characters"), std::string::npos) << s.Message();
}

}  // namespace
}  // namespace kestrel::app
