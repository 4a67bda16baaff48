// Export records of registered models in the store (migration 12) on both
// backends: recorded against an existing model only, listed with the model
// (oldest first, every field kept, across reopening), malformed records and
// taken ids refused, the same file recorded twice kept as one record
// (updated), and removed with the model.
#include "job_store_fixture.h"

namespace kestrel::store {
namespace {

class ModelExportStoreTest : public JobStoreTest {
 protected:
  ModelRecord AddModelNamed(const std::string& name) {
    ModelRecord m;
    m.id = Sha256Hex("model-" + name);
    m.name = name;
    m.created_ms = 100;
    m.weights_sha = Sha256Hex("weights-" + name);
    m.weights_bytes = 10;
    m.format = "safetensors";
    m.kestrel_version = "test";
    bool created = false;
    auto r = store_->AddModel(m, &created);
    EXPECT_TRUE(r.IsOk()) << r.GetStatus().ToString();
    return r.IsOk() ? *r : m;
  }
  static ModelExportRecord Export(const std::string& model_id, const std::string& path, int64_t at) {
    ModelExportRecord e;
    e.id = Sha256Hex("export-" + path + std::to_string(at));
    e.model_id = model_id;
    e.created_ms = at;
    e.format = "onnx";
    e.path = path;
    e.sha256 = Sha256Hex("file-" + path);
    e.bytes = 12345;
    e.options_json = R"({"imgsz":[320,256],"batch":1,"opset":17,"dynamic":true,"half":false})";
    e.verified = true;
    e.verification_json = R"({"verified":true,"runtimes":[{"runtime":"opencv-dnn","passed":true}]})";
    e.kestrel_version = "v-test";
    return e;
  }
  std::optional<ModelRecord> Find(const std::string& id) {
    ModelFilter f;
    f.id_prefix = id;
    auto r = store_->ListModels(f);
    EXPECT_TRUE(r.IsOk()) << r.GetStatus().ToString();
    if (!r.IsOk() || r->size() != 1) return std::nullopt;
    return (*r)[0];
  }
};

TEST_P(ModelExportStoreTest, RecordedExportsAreListedWithTheirModelOldestFirst) {
  const ModelRecord birds = AddModelNamed("birds");
  const ModelRecord cats = AddModelNamed("cats");
  ModelExportRecord second = Export(birds.id, "b2.onnx", 3000);
  second.verified = false;
  second.verification_json = R"({"verified":false,"error":"over tolerance"})";
  ASSERT_TRUE(store_->AddModelExport(second, nullptr).IsOk());
  ASSERT_TRUE(store_->AddModelExport(Export(birds.id, "b1.onnx", 2000), nullptr).IsOk());
  ASSERT_TRUE(store_->AddModelExport(Export(cats.id, "c1.onnx", 2500), nullptr).IsOk());

  store_ = Open();  // kept across reopening
  auto b = Find(birds.id);
  ASSERT_TRUE(b.has_value());
  ASSERT_EQ(b->exports.size(), 2u);
  const ModelExportRecord& first = b->exports[0];
  const ModelExportRecord want = Export(birds.id, "b1.onnx", 2000);
  EXPECT_EQ(first.id, want.id);
  EXPECT_EQ(first.model_id, birds.id);
  EXPECT_EQ(first.created_ms, 2000);
  EXPECT_EQ(first.format, "onnx");
  EXPECT_EQ(first.path, "b1.onnx");
  EXPECT_EQ(first.sha256, want.sha256);
  EXPECT_EQ(first.bytes, 12345);
  EXPECT_EQ(first.options_json, want.options_json);
  EXPECT_TRUE(first.verified);
  EXPECT_EQ(first.verification_json, want.verification_json);
  EXPECT_EQ(first.kestrel_version, "v-test");
  EXPECT_EQ(b->exports[1].path, "b2.onnx");
  EXPECT_FALSE(b->exports[1].verified);

  // Listing every model attaches each model's own exports.
  auto all = store_->ListModels(ModelFilter{});
  ASSERT_TRUE(all.IsOk()) << all.GetStatus().ToString();
  ASSERT_EQ(all->size(), 2u);
  for (const ModelRecord& m : *all) {
    ASSERT_EQ(m.exports.size(), m.id == birds.id ? 2u : 1u) << m.name;
    for (const ModelExportRecord& e : m.exports) EXPECT_EQ(e.model_id, m.id);
  }
}

TEST_P(ModelExportStoreTest, UnknownModelsMalformedAndDuplicateRecordsAreRefused) {
  const ModelRecord birds = AddModelNamed("birds");
  Status orphan =
      store_->AddModelExport(Export(Sha256Hex("no such model"), "x.onnx", 1), nullptr).GetStatus();
  ASSERT_FALSE(orphan.IsOk());
  EXPECT_EQ(orphan.Code(), StatusCode::kNotFound);
  EXPECT_EQ(orphan.Where().field, "model");

  ModelExportRecord bad_id = Export(birds.id, "a.onnx", 1);
  bad_id.id = "abc";
  ModelExportRecord bad_sha = Export(birds.id, "a.onnx", 1);
  bad_sha.sha256 = "not-a-digest";
  for (const auto& [rec, field] :
       std::vector<std::pair<ModelExportRecord, std::string>>{{bad_id, "id"}, {bad_sha, "sha256"}}) {
    Status s = store_->AddModelExport(rec, nullptr).GetStatus();
    ASSERT_FALSE(s.IsOk()) << field;
    EXPECT_EQ(s.Code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.Where().field, field);
  }

  ASSERT_TRUE(store_->AddModelExport(Export(birds.id, "a.onnx", 1), nullptr).IsOk());
  // Its id on another file is taken.
  ModelExportRecord twin = Export(birds.id, "a.onnx", 1);
  twin.path = "other.onnx";
  Status taken = store_->AddModelExport(twin, nullptr).GetStatus();
  ASSERT_FALSE(taken.IsOk());
  EXPECT_EQ(taken.Code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(taken.Where().field, "id");
  EXPECT_EQ(Find(birds.id)->exports.size(), 1u);
}

// An export job retried after a crash between its record and its end
// records the same file again: the first record is updated (id and created
// time kept), not duplicated. Another file at the same path, or the same
// file of another model, is a record of its own.
TEST_P(ModelExportStoreTest, TheSameFileRecordedAgainUpdatesItsRecord) {
  const ModelRecord birds = AddModelNamed("birds");
  const ModelRecord cats = AddModelNamed("cats");
  bool created = false;
  auto first = store_->AddModelExport(Export(birds.id, "a.onnx", 1000), &created);
  ASSERT_TRUE(first.IsOk()) << first.GetStatus().ToString();
  EXPECT_TRUE(created);
  ModelExportRecord retry = Export(birds.id, "a.onnx", 5000);  // a new id and time, the same path and sha256
  retry.verified = false;
  retry.verification_json = R"({"verified":false,"error":"retried"})";
  retry.options_json = R"({"imgsz":[64,64]})";
  retry.kestrel_version = "v-retry";
  auto again = store_->AddModelExport(retry, &created);
  ASSERT_TRUE(again.IsOk()) << again.GetStatus().ToString();
  EXPECT_FALSE(created);
  EXPECT_EQ(again->id, first->id);
  EXPECT_EQ(again->created_ms, 1000);
  EXPECT_FALSE(again->verified);
  store_ = Open();
  auto b = Find(birds.id);
  ASSERT_TRUE(b.has_value());
  ASSERT_EQ(b->exports.size(), 1u);
  const ModelExportRecord& e = b->exports[0];
  EXPECT_EQ(e.id, first->id);
  EXPECT_EQ(e.created_ms, 1000);
  EXPECT_FALSE(e.verified);
  EXPECT_EQ(e.verification_json, retry.verification_json);
  EXPECT_EQ(e.options_json, retry.options_json);
  EXPECT_EQ(e.kestrel_version, "v-retry");
  // The file rewritten (another sha256) at the same path: a second record.
  ModelExportRecord rewritten = Export(birds.id, "a.onnx", 6000);
  rewritten.sha256 = Sha256Hex("other bytes");
  ASSERT_TRUE(store_->AddModelExport(rewritten, &created).IsOk());
  EXPECT_TRUE(created);
  // The same path and sha256 on another model: that model's own record.
  ASSERT_TRUE(store_->AddModelExport(Export(cats.id, "a.onnx", 7000), &created).IsOk());
  EXPECT_TRUE(created);
  EXPECT_EQ(Find(birds.id)->exports.size(), 2u);
  EXPECT_EQ(Find(cats.id)->exports.size(), 1u);
}

TEST_P(ModelExportStoreTest, DeletingAModelRemovesItsExports) {
  const ModelRecord birds = AddModelNamed("birds");
  ASSERT_TRUE(store_->AddModelExport(Export(birds.id, "a.onnx", 1), nullptr).IsOk());
  Status del = store_->DeleteModel(birds.id, false);
  ASSERT_TRUE(del.IsOk()) << del.ToString();
  EXPECT_TRUE(store_->ListModels(ModelFilter{})->empty());
  // The same model registered again starts without the old export.
  const ModelRecord again = AddModelNamed("birds");
  EXPECT_TRUE(Find(again.id)->exports.empty());
}

INSTANTIATE_TEST_SUITE_P(Backends, ModelExportStoreTest, ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kestrel::store
