// The dataset findings use case (app::Datasets::Findings, behind GET
// /api/datasets/{name}/findings) reads what it shows from the stored
// findings' typed fields (data::Finding::image, other, distance), never from
// their messages (STYLE.md 16). Each version is copied under another name
// with every stored message replaced (nonsense, or another finding's
// plausible text naming other images) and must answer the same: images,
// near-duplicate and leakage pairs, counts, checks. A report stored before
// the typed fields shows its findings without pairs, and a COCO box finding
// without its image, rather than guessing them from the text.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "app/datasets.h"
#include "data/synth.h"
#include "store/local_artifact_store.h"
#include "stored_report.h"

namespace kestrel::app {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string ReadBytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void WriteBytes(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << bytes;
}

class FindingFieldsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kestrel_findfields_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    const std::string home = (dir_ / "home").string();
    fs::create_directories(home);
    auto m = store::MetadataStore::Open(store::MetadataUrl(home));
    ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
    meta_ = std::move(m).Value();
    blobs_ = std::make_unique<store::LocalArtifactStore>(home);

    // YOLO: a synthetic set plus a near duplicate in train, a train image
    // copied into val (leakage) and a truncated JPEG (excluded).
    const fs::path yolo = dir_ / "yolo";
    data::SynthOptions so;
    so.images = 6;
    so.imgsz = 32;
    so.classes = 2;
    so.write_threads = 1;
    ASSERT_TRUE(data::WriteSynthDataset(so, yolo.string()).IsOk());
    std::vector<std::string> train;
    for (const auto& e : fs::directory_iterator(yolo / "images" / "train"))
      train.push_back(e.path().filename().string());
    std::sort(train.begin(), train.end());
    ASSERT_GE(train.size(), 3u);
    auto stem = [](const std::string& name) { return name.substr(0, name.rfind('.')); };
    auto copy = [&](const std::string& from, const std::string& split, const std::string& to) {
      fs::create_directories((yolo / "images" / split / to).parent_path());
      fs::create_directories((yolo / "labels" / split / to).parent_path());
      fs::copy_file(yolo / "images" / "train" / from, yolo / "images" / split / to);
      fs::copy_file(yolo / "labels" / "train" / (stem(from) + ".txt"),
                    yolo / "labels" / split / (stem(to) + ".txt"));
    };
    copy(train[0], "train", "zz/dup.jpg");
    copy(train[1], "val", "leak.jpg");
    dup_of_ = train[0];
    leak_of_ = train[1];
    const std::string whole = ReadBytes(yolo / "images" / "train" / train[2]);
    WriteBytes(yolo / "images" / "train" / "cut.jpg", whole.substr(0, whole.size() / 2));
    WriteBytes(yolo / "labels" / "train" / "cut.txt", "0 0.5 0.5 0.2 0.2\n");
    data::ImportOptions opts;
    opts.allow_errors = true;
    opts.threads = 1;
    auto y = Datasets(*meta_, *blobs_).Import(yolo.string(), "yolo", opts);
    ASSERT_TRUE(y.IsOk()) << y.GetStatus().ToString();

    // COCO without declared sizes: the boxes are checked against the
    // decoded images, so their findings' file is the annotation file.
    const fs::path coco = dir_ / "coco";
    fs::create_directories(coco / "train");
    fs::copy_file(yolo / "images" / "train" / train[0], coco / "train" / "a.jpg");
    fs::copy_file(yolo / "images" / "val" / "leak.jpg", coco / "train" / "b.jpg");
    WriteBytes(coco / "annotations" / "instances_train.json",
               R"({"images": [{"id": 1, "file_name": "a.jpg"}, {"id": 2, "file_name": "b.jpg"}],
                   "categories": [{"id": 1, "name": "x"}],
                   "annotations": [{"id": 1, "image_id": 2, "category_id": 1, "bbox": [20, 20, 30, 5]},
                                   {"id": 2, "image_id": 1, "category_id": 1, "bbox": [-6, 2, 10, 5]}]})");
    auto c = Datasets(*meta_, *blobs_).Import(coco.string(), "coco", opts);
    ASSERT_TRUE(c.IsOk()) << c.GetStatus().ToString();
  }
  void TearDown() override {
    meta_.reset();
    fs::remove_all(dir_);
  }

  json Page(const std::string& spec) {
    DatasetFindingsRequest r;
    r.spec = spec;
    r.limit = DatasetFindingsRequest::kMaxLimit;
    auto p = Datasets(*meta_, *blobs_).Findings(r);
    EXPECT_TRUE(p.IsOk()) << spec << ": " << p.GetStatus().ToString();
    if (!p.IsOk()) return json();
    json doc = DatasetFindingsPageJson(*p);
    doc.erase("version");  // names the dataset
    return doc;
  }
  // The page with every finding's message left out.
  static json WithoutMessages(json page) {
    for (auto& f : page["findings"]) f.erase("message");
    return page;
  }
  static const json* Row(const json& page, const std::string& check, const std::string& file_end = "") {
    for (const auto& f : page["findings"]) {
      const std::string file = f["file"].get<std::string>();
      if (f["check"] == check && file.size() >= file_end.size() &&
          file.compare(file.size() - file_end.size(), file_end.size(), file_end) == 0)
        return &f;
    }
    return nullptr;
  }
  static std::set<std::string> PairPaths(const json& row) {
    return {row["pair"]["a"]["split"].get<std::string>() + "/" + row["pair"]["a"]["path"].get<std::string>(),
            row["pair"]["b"]["split"].get<std::string>() + "/" + row["pair"]["b"]["path"].get<std::string>()};
  }

  fs::path dir_;
  std::unique_ptr<store::MetadataStore> meta_;
  std::unique_ptr<store::ArtifactStore> blobs_;
  std::string dup_of_, leak_of_;
};

TEST_F(FindingFieldsTest, PairsAndImagesComeFromTypedFields) {
  const json page = Page("yolo");
  const json* dup = Row(page, "image.near_duplicate");
  ASSERT_NE(dup, nullptr) << page.dump(1);
  ASSERT_TRUE((*dup)["pair"].is_object()) << dup->dump();
  EXPECT_EQ(PairPaths(*dup), (std::set<std::string>{"train/" + dup_of_, "train/zz/dup.jpg"}));
  EXPECT_EQ((*dup)["pair"]["distance"], 0);
  EXPECT_EQ((*dup)["image"], (*dup)["pair"]["a"]);
  const json* leak = Row(page, "split.leakage");
  ASSERT_NE(leak, nullptr) << page.dump(1);
  ASSERT_TRUE((*leak)["pair"].is_object()) << leak->dump();
  EXPECT_EQ(PairPaths(*leak), (std::set<std::string>{"train/" + leak_of_, "val/leak.jpg"}));
  // The truncated image was excluded: its finding names no manifest image.
  const json* cut = Row(page, "image.truncated", "cut.jpg");
  ASSERT_NE(cut, nullptr) << page.dump(1);
  EXPECT_TRUE((*cut)["image"].is_null());
  EXPECT_EQ((*cut)["severity"], "error");
  // COCO: the box findings' file is the annotation file, their image typed.
  const json coco = Page("coco");
  std::set<std::string> images;
  for (const auto& f : coco["findings"]) {
    if (f["check"] != "label.out_of_bounds") continue;
    ASSERT_TRUE(f["image"].is_object()) << f.dump();
    images.insert(f["image"]["path"].get<std::string>());
  }
  EXPECT_EQ(images, (std::set<std::string>{"a.jpg", "b.jpg"})) << coco.dump(1);
}

TEST_F(FindingFieldsTest, SameAnswerWhateverTheMessagesSay) {
  for (const std::string spec : {"yolo", "coco"}) {
    const json real = Page(spec);
    ASSERT_GT(real["total"].get<int64_t>(), 0) << spec;
    for (const auto& [suffix, edit] : std::vector<std::pair<std::string, void (*)(json&)>>{
             {"-nonsense", &kestrel::testing::ScrambleMessages},
             {"-rotated", &kestrel::testing::RotateMessages}}) {
      const std::string copy = spec + suffix;
      ASSERT_TRUE(kestrel::testing::AddVersionWithEditedFindings(*meta_, *blobs_, spec, copy, edit).IsOk());
      const json edited = Page(copy);
      EXPECT_NE(edited["findings"], real["findings"]) << copy << ": the messages were not replaced";
      EXPECT_EQ(WithoutMessages(edited), WithoutMessages(real)) << copy;
      // Filters by check and severity count the same.
      DatasetFindingsRequest r;
      r.spec = copy;
      r.severity = "warning";
      auto w = Datasets(*meta_, *blobs_).Findings(r);
      ASSERT_TRUE(w.IsOk());
      r.spec = spec;
      EXPECT_EQ(w->total, Datasets(*meta_, *blobs_).Findings(r)->total) << copy;
    }
  }
  // show and diff of the copy: the same version, the same typed fields.
  auto shown = Datasets(*meta_, *blobs_).Show("yolo-nonsense");
  ASSERT_TRUE(shown.IsOk());
  const json view = DatasetShowJson(*shown);
  const json original = DatasetShowJson(*Datasets(*meta_, *blobs_).Show("yolo"));
  EXPECT_EQ(view["summary"], original["summary"]);
  ASSERT_EQ(view["report"]["findings"].size(), original["report"]["findings"].size());
  for (size_t i = 0; i < view["report"]["findings"].size(); ++i) {
    const data::Finding a = data::FindingFromJson(view["report"]["findings"][i]);
    const data::Finding b = data::FindingFromJson(original["report"]["findings"][i]);
    EXPECT_EQ(a.image, b.image);
    EXPECT_EQ(a.other, b.other);
    EXPECT_EQ(a.distance, b.distance);
  }
  auto d = Datasets(*meta_, *blobs_).Diff("yolo", "yolo-nonsense");
  ASSERT_TRUE(d.IsOk());
  const json diff = d->diff.ToJson();
  for (const char* k : {"added", "removed", "image_changed", "labels_changed", "split_moved"})
    EXPECT_TRUE(diff[k].empty()) << k;
}

TEST_F(FindingFieldsTest, OldReportsShowFindingsWithoutPairsNotGuessedFromText) {
  ASSERT_TRUE(kestrel::testing::AddVersionWithEditedFindings(*meta_, *blobs_, "yolo", "yolo-old",
                                                             &kestrel::testing::DropTypedFields)
                  .IsOk());
  ASSERT_TRUE(kestrel::testing::AddVersionWithEditedFindings(*meta_, *blobs_, "coco", "coco-old",
                                                             &kestrel::testing::DropTypedFields)
                  .IsOk());
  const json real = Page("yolo");
  const json old = Page("yolo-old");
  EXPECT_EQ(old["total"], real["total"]);
  EXPECT_EQ(old["checks"], real["checks"]);
  for (const char* check : {"image.near_duplicate", "split.leakage"}) {
    const json* row = Row(old, check);
    ASSERT_NE(row, nullptr) << check;
    EXPECT_TRUE((*row)["pair"].is_null()) << row->dump();
    // Its file is the first image's path: that still names the image.
    EXPECT_EQ((*row)["image"], (*Row(real, check))["image"]) << check;
  }
  // A COCO box finding's message names its image; an old report's finding
  // is shown without it.
  const json coco_old = Page("coco-old");
  int boxes = 0;
  for (const auto& f : coco_old["findings"]) {
    if (f["check"] != "label.out_of_bounds") continue;
    ++boxes;
    EXPECT_NE(f["message"].get<std::string>().find(".jpg"), std::string::npos) << f.dump();
    EXPECT_TRUE(f["image"].is_null()) << f.dump();
  }
  EXPECT_EQ(boxes, 2);
}

}  // namespace
}  // namespace kestrel::app
