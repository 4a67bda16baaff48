// data_mode=reference (issue 28 item 9, docs/datasets.md "Copy or
// reference"): a version that records each image file instead of copying it.
// Over a real store and real files, in-process: no image blobs written, the
// loader reads the files, a changed or missing file is an error naming it and
// the version, a touched but identical file passes, verify hashes every file,
// gc leaves the files alone and du counts them apart.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>

#include "app/dataset_merge.h"
#include "app/datasets.h"
#include "app/gc.h"
#include "core/hash.h"
#include "data/loader.h"
#include "data/synth.h"
#include "data/version_files.h"
#include "scratch_dir_test.h"
#include "store/local_artifact_store.h"

namespace kestrel::data {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

class ReferenceModeTest : public ScratchDirTest {
 protected:
  void SetUp() override {
    ScratchDirTest::SetUp();
    home_ = P("home");
    meta_ = std::move(store::MetadataStore::Open("sqlite:" + home_ + "/kestrel.db")).Value();
    blobs_ = std::make_unique<store::LocalArtifactStore>(home_);
    ds_ = std::make_unique<app::Datasets>(*meta_, *blobs_);
    SynthOptions o;
    o.images = 10;
    o.classes = 2;
    o.imgsz = 64;
    o.seed = 3;
    src_ = P("src");
    ASSERT_TRUE(WriteSynthDataset(o, src_).IsOk());
  }

  ImportOptions Reference() const {
    ImportOptions o;
    o.data_mode = "reference";
    o.threads = 1;
    return o;
  }

  // Image blobs in the store: every blob but the manifests and reports.
  size_t ImageBlobs() {
    auto listed = blobs_->List();
    EXPECT_TRUE(listed.IsOk());
    std::set<std::string> records;
    auto all = meta_->ListDatasets();
    EXPECT_TRUE(all.IsOk());
    for (const auto& d : *all) {
      auto versions = meta_->ListVersions(d.name);
      EXPECT_TRUE(versions.IsOk());
      for (const auto& v : *versions) {
        records.insert(v.manifest_sha);
        records.insert(v.report_sha);
      }
    }
    size_t n = 0;
    for (const auto& b : *listed) n += records.count(b.sha) ? 0 : 1;
    return n;
  }

  VersionView ImportRef(const std::string& name = "ref") {
    auto r = ds_->Import(src_, name, Reference());
    EXPECT_TRUE(r.IsOk()) << r.GetStatus().ToString();
    auto v = LoadVersion(*meta_, *blobs_, name + "@v1");
    EXPECT_TRUE(v.IsOk()) << v.GetStatus().ToString();
    return std::move(v).Value();
  }

  std::string home_, src_;
  std::unique_ptr<store::MetadataStore> meta_;
  std::unique_ptr<store::LocalArtifactStore> blobs_;
  std::unique_ptr<app::Datasets> ds_;
};

TEST_F(ReferenceModeTest, ImportStoresNoImageBlobsAndTheSameVersionIdAsACopy) {
  const VersionView v = ImportRef();
  EXPECT_EQ(ImageBlobs(), 0u);
  EXPECT_EQ(v.record.data_mode, "reference");
  ASSERT_FALSE(v.manifest.entries.empty());
  for (const auto& e : v.manifest.entries) {
    EXPECT_TRUE(fs::path(e.file.path).is_absolute()) << e.file.path;
    EXPECT_EQ(e.file.size, fs::file_size(e.file.path));
    EXPECT_EQ(Sha256Hex(ReadAll(e.file.path)), e.image_sha);
  }
  EXPECT_EQ(app::DatasetVersionJson(v.record)["data_mode"], "reference");

  // The same content copied: the same version id, and now the image blobs.
  auto copy = ds_->Import(src_, "copied", ImportOptions{});
  ASSERT_TRUE(copy.IsOk()) << copy.GetStatus().ToString();
  EXPECT_EQ(copy->record.version_id, v.record.version_id);
  EXPECT_EQ(copy->record.data_mode, "copy");
  EXPECT_EQ(ImageBlobs(), v.manifest.entries.size());
  EXPECT_NE(copy->record.manifest_sha, v.record.manifest_sha);  // one names files, one does not
}

TEST_F(ReferenceModeTest, ManifestNamesFilesOnlyInFormatVersion2) {
  const VersionView v = ImportRef();
  const std::string text = ManifestToJson(v.manifest);
  EXPECT_NE(text.find("\"format_version\":2"), std::string::npos);
  auto back = ManifestFromJson(text, "m");
  ASSERT_TRUE(back.IsOk()) << back.GetStatus().ToString();
  EXPECT_EQ(back->entries.front().file, v.manifest.entries.front().file);
  Manifest plain = v.manifest;
  for (auto& e : plain.entries) e.file = {};
  EXPECT_NE(ManifestToJson(plain).find("\"format_version\":1"), std::string::npos);
  EXPECT_EQ(VersionId(plain), VersionId(v.manifest));
}

TEST_F(ReferenceModeTest, TheLoaderReadsTheFiles) {
  const VersionView v = ImportRef();
  const ImageSource source = VersionImageSource(v, *blobs_);
  const ManifestEntry& e = v.manifest.entries.front();
  auto bytes = source(e);
  ASSERT_TRUE(bytes.IsOk()) << bytes.GetStatus().ToString();
  EXPECT_EQ(*bytes, ReadAll(e.file.path));

  LoaderOptions lo;
  lo.imgsz = 64;
  lo.batch = 2;
  lo.workers = 1;
  lo.augment = false;
  lo.shuffle = false;
  auto loader = Loader::Create(v.manifest, Split::kTrain, source, lo, AugmentOptions{});
  ASSERT_TRUE(loader.IsOk()) << loader.GetStatus().ToString();
  ASSERT_TRUE((*loader)->StartEpoch(0).IsOk());
  auto batch = (*loader)->Next();
  ASSERT_TRUE(batch.IsOk()) << batch.GetStatus().ToString();
  ASSERT_TRUE(batch->has_value());
  EXPECT_EQ((*loader)->Stats().bad_samples, 0);
}

TEST_F(ReferenceModeTest, AChangedFileIsAnErrorNamingItAndTheVersion) {
  const VersionView v = ImportRef();
  const ManifestEntry& e = v.manifest.entries.front();
  {
    std::ofstream f(e.file.path, std::ios::binary | std::ios::app);
    f << "more";
  }
  auto shown = ds_->Show("ref@v1");
  ASSERT_FALSE(shown.IsOk());
  const std::string msg = shown.GetStatus().Message();
  EXPECT_NE(msg.find(e.file.path), std::string::npos) << msg;
  EXPECT_NE(msg.find("ref@v1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("size " + std::to_string(e.file.size) + " -> " + std::to_string(e.file.size + 4)),
            std::string::npos)
      << msg;
  // The loader's source refuses the bytes too (a sample never silently trained on).
  EXPECT_FALSE(VersionImageSource(v, *blobs_)(e).IsOk());
  // Export refuses and writes nothing.
  EXPECT_FALSE(ds_->Export("ref@v1", "yolo", P("out")).IsOk());
  EXPECT_FALSE(fs::exists(P("out")));
}

TEST_F(ReferenceModeTest, SameSizeNewBytesIsAHashMismatchAndAMissingFileSaysSo) {
  const VersionView v = ImportRef();
  const ManifestEntry& a = v.manifest.entries[0];
  const ManifestEntry& b = v.manifest.entries[1];
  std::string bytes = ReadAll(a.file.path);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x5a);
  {
    std::ofstream f(a.file.path, std::ios::binary | std::ios::trunc);
    f << bytes;
  }
  fs::last_write_time(a.file.path, fs::last_write_time(a.file.path) + std::chrono::seconds(5));
  fs::remove(b.file.path);
  const FileCheckReport r = CheckVersionFiles(v, FileCheck::kFast, Env::Default());
  EXPECT_EQ(r.problems, 2);
  ASSERT_EQ(r.examples.size(), 2u);
  const std::string first = r.ToStatus("ref@v1").Message();
  EXPECT_NE(first.find("content hash " + a.image_sha.substr(0, 12)), std::string::npos) << first;
  EXPECT_NE(first.find("2 of the 10 image files of ref@v1"), std::string::npos) << first;
  EXPECT_NE(r.examples[1].Message().find("is missing"), std::string::npos) << r.examples[1].Message();
  EXPECT_EQ(r.examples[1].Where().file, b.file.path);
}

TEST_F(ReferenceModeTest, ATouchedButIdenticalFilePasses) {
  const VersionView v = ImportRef();
  const ManifestEntry& e = v.manifest.entries.front();
  fs::last_write_time(e.file.path, fs::last_write_time(e.file.path) + std::chrono::seconds(30));
  const FileCheckReport r = CheckVersionFiles(v, FileCheck::kFast, Env::Default());
  EXPECT_TRUE(r.Ok()) << r.ToStatus("ref@v1").ToString();
  EXPECT_EQ(r.files, 10);
  EXPECT_EQ(r.hashed, 1);  // only the touched one was read
  EXPECT_TRUE(ds_->Show("ref@v1").IsOk());
  auto bytes = VersionImageSource(v, *blobs_)(e);
  EXPECT_TRUE(bytes.IsOk()) << bytes.GetStatus().ToString();
}

TEST_F(ReferenceModeTest, VerifyHashesEveryFileEvenWhenSizeAndMtimeMatch) {
  const VersionView v = ImportRef();
  auto ok = ds_->Verify("ref@v1");
  ASSERT_TRUE(ok.IsOk()) << ok.GetStatus().ToString();
  EXPECT_TRUE(ok->files.Ok());
  EXPECT_EQ(ok->files.hashed, 10);
  EXPECT_EQ(ok->files.files, 10);
  // Same size and mtime, other bytes: the fast check cannot see it, verify does.
  const ManifestEntry& e = v.manifest.entries.front();
  const auto mtime = fs::last_write_time(e.file.path);
  std::string bytes = ReadAll(e.file.path);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x5a);
  {
    std::ofstream f(e.file.path, std::ios::binary | std::ios::trunc);
    f << bytes;
  }
  fs::last_write_time(e.file.path, mtime);
  EXPECT_TRUE(CheckVersionFiles(v, FileCheck::kFast, Env::Default()).Ok());
  auto bad = ds_->Verify("ref@v1");
  ASSERT_TRUE(bad.IsOk()) << bad.GetStatus().ToString();
  EXPECT_EQ(bad->files.problems, 1);
  const nlohmann::json j = app::DatasetVerifyJson(*bad);
  EXPECT_FALSE(j["ok"].get<bool>());
  EXPECT_EQ(j["examples"][0]["file"], e.file.path);
  EXPECT_NE(app::DatasetVerifyText(*bad).find(e.file.path), std::string::npos);
}

TEST_F(ReferenceModeTest, GcLeavesTheFilesAndDuCountsThemApart) {
  const VersionView v = ImportRef();
  uint64_t sizes = 0;
  for (const auto& e : v.manifest.entries) sizes += e.file.size;
  auto gc = app::CollectGarbage(
      *meta_, *blobs_, app::GcOptions{false, 0},
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
              .count() +
          10);
  ASSERT_TRUE(gc.IsOk()) << gc.GetStatus().ToString();
  for (const auto& e : v.manifest.entries) EXPECT_TRUE(fs::exists(e.file.path)) << e.file.path;
  EXPECT_TRUE(ds_->Show("ref@v1").IsOk());
  auto du = app::DiskUsage(*meta_, *blobs_, Env::Default());
  ASSERT_TRUE(du.IsOk()) << du.GetStatus().ToString();
  ASSERT_EQ(du->versions.size(), 1u);
  EXPECT_EQ(du->versions[0].missing, 0);  // referenced images are not absent blobs
  EXPECT_EQ(du->versions[0].blobs, 2);    // manifest and report
  EXPECT_EQ(du->versions[0].referenced_files, 10);
  EXPECT_EQ(du->versions[0].referenced_bytes, sizes);
  EXPECT_EQ(du->referenced_bytes, sizes);
}

// Analysis stats each file before hashing it; a write between analysis and
// commit is caught (the record would name bytes that were not hashed).
TEST_F(ReferenceModeTest, AFileChangedDuringTheImportAbortsIt) {
  auto a = AnalyzeDataset(src_, Reference());
  ASSERT_TRUE(a.IsOk()) << a.GetStatus().ToString();
  const std::string changed = a->image_paths.front();
  std::ofstream(changed, std::ios::binary | std::ios::app) << "x";
  auto c = CommitVersion(*meta_, *blobs_, "raced", src_, *a, Reference());
  ASSERT_FALSE(c.IsOk());
  EXPECT_EQ(c.GetStatus().Code(), StatusCode::kAborted);
  EXPECT_EQ(c.GetStatus().Where().file, changed);
  EXPECT_FALSE(meta_->GetVersion("raced", "").IsOk());
}

// Export reads the files (checked) and imports back, copied, as the same version.
TEST_F(ReferenceModeTest, ExportRoundTripsToACopyOfTheSameVersion) {
  const VersionView v = ImportRef();
  ASSERT_TRUE(ds_->Export("ref@v1", "yolo", P("out")).IsOk());
  auto back = ds_->Import(P("out"), "back", ImportOptions{});
  ASSERT_TRUE(back.IsOk()) << back.GetStatus().ToString();
  EXPECT_EQ(back->record.version_id, v.record.version_id);
  EXPECT_EQ(back->record.data_mode, "copy");
}

// dataset merge of a reference version: the corrected version keeps the
// files (no image blob written) and says so in its record.
TEST_F(ReferenceModeTest, AMergedReferenceVersionKeepsTheFiles) {
  const VersionView v = ImportRef();
  const ManifestEntry& e = v.manifest.entries[1];
  const std::string xml =
      "<?xml version=\"1.0\"?><annotations><version>1.1</version><image id=\"0\" name=\"" +
      std::string(SplitName(e.split)) + "/" + e.path + "\" width=\"" + std::to_string(e.width) +
      "\" height=\"" + std::to_string(e.height) + "\"><box label=\"" + v.manifest.names[1] +
      "\" occluded=\"0\" xtl=\"0\" ytl=\"12\" xbr=\"48\" ybr=\"36\" z_order=\"0\"/></image>"
      "</annotations>";
  Write("c.xml", xml);
  app::MergeOptions mo;
  mo.corrections = P("c.xml");
  auto m = app::MergeCorrections(*meta_, *blobs_, "ref@v1", mo);
  ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
  auto v2 = ds_->Show("ref@v2");
  ASSERT_TRUE(v2.IsOk()) << v2.GetStatus().ToString();
  EXPECT_EQ(v2->record.data_mode, "reference");
  EXPECT_EQ(v2->manifest.entries[1].file, e.file);
  EXPECT_EQ(ImageBlobs(), 0u);
}

// verify of a copy version reads every blob (verified by its hash) and
// names the image of a damaged one.
TEST_F(ReferenceModeTest, VerifyOfACopyVersionReadsEveryBlob) {
  auto c = ds_->Import(src_, "copied", ImportOptions{});
  ASSERT_TRUE(c.IsOk()) << c.GetStatus().ToString();
  auto ok = ds_->Verify("copied@v1");
  ASSERT_TRUE(ok.IsOk()) << ok.GetStatus().ToString();
  EXPECT_TRUE(ok->files.Ok());
  EXPECT_EQ(ok->files.images, 10);
  EXPECT_EQ(ok->files.files, 0);
  auto v = LoadVersion(*meta_, *blobs_, "copied@v1");
  ASSERT_TRUE(v.IsOk());
  const ManifestEntry& e = v->manifest.entries.front();
  const std::string blob = blobs_->PathFor(e.image_sha);
  fs::permissions(blob, fs::perms::owner_write, fs::perm_options::add);
  std::ofstream(blob, std::ios::binary | std::ios::app) << "x";
  auto bad = ds_->Verify("copied@v1");
  ASSERT_TRUE(bad.IsOk()) << bad.GetStatus().ToString();
  EXPECT_EQ(bad->files.problems, 1);
  ASSERT_EQ(bad->files.examples.size(), 1u);
  EXPECT_NE(bad->files.examples[0].Message().find("copied@v1 image " + e.path), std::string::npos)
      << bad->files.examples[0].Message();
}

TEST_F(ReferenceModeTest, DataPathResolvesByReference) {
  auto r = ds_->Resolve(src_, nullptr, "reference");
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_TRUE(r->created);
  EXPECT_EQ(r->record.data_mode, "reference");
  EXPECT_NE(r->message.find("data_mode=reference"), std::string::npos) << r->message;
  EXPECT_EQ(ImageBlobs(), 0u);
  auto bad = ds_->Resolve(src_, nullptr, "symlink");
  ASSERT_FALSE(bad.IsOk());
  EXPECT_EQ(bad.GetStatus().Where().field, "data_mode");
}

}  // namespace
}  // namespace kestrel::data
