// Corrected labels back (issue 34): Label Studio JSON exports and CVAT 1.1
// XML read into boxes (data/corrections.h), matched to a version's images
// and merged as a new version (app/dataset_merge.h) — images in the
// corrections take the corrected boxes, absent images keep theirs — and
// every malformed export (missing field, box outside the image, rotated
// box, unknown label, image matching no file) gets a finding naming the
// file and field, with nothing stored. Images the corrections name that
// the version lacks are added from files under images=DIR, in the split
// their folder names or the version's assigned split rule. The same
// exports are `dataset import` sources (ReadDataset's label-studio and
// cvat formats). A synthetic 8-image version at 96 px: well under a second.
#include "app/dataset_merge.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "app/datasets.h"
#include "data/box_diff.h"
#include "data/corrections.h"
#include "data/formats.h"
#include "data/synth.h"
#include "data/version.h"
#include "store/local_artifact_store.h"

namespace kestrel::app {
namespace {

namespace fs = std::filesystem;

class DatasetMergeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kestrel_merge_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const std::string home = (dir_ / "home").string();
    meta_ = std::move(store::MetadataStore::Open("sqlite:" + home + "/kestrel.db")).Value();
    blobs_ = std::make_unique<store::LocalArtifactStore>(home);
    data::SynthOptions o;
    o.images = 8;
    o.classes = 3;
    o.imgsz = 96;
    o.seed = 5;
    ASSERT_TRUE(data::WriteSynthDataset(o, (dir_ / "src").string()).IsOk());
    Datasets ds(*meta_, *blobs_);
    Result<DatasetImport> imp = ds.Import((dir_ / "src").string(), "shapes", {});
    ASSERT_TRUE(imp.IsOk()) << imp.GetStatus().ToString();
    Result<data::VersionView> v = data::LoadVersion(*meta_, *blobs_, "shapes@v1");
    ASSERT_TRUE(v.IsOk());
    v1_ = v->manifest;
    ASSERT_GE(v1_.entries.size(), 3u);
    ASSERT_GE(v1_.names.size(), 2u);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string WriteFile(const std::string& name, const std::string& text) {
    const std::string p = (dir_ / name).string();
    std::ofstream(p) << text;
    return p;
  }
  static MergeOptions Opts(const std::string& corrections, const std::string& images = "", int64_t seed = 0) {
    MergeOptions o;
    o.corrections = corrections;
    o.images = images;
    o.seed = seed;
    return o;
  }
  // Copies a synthetic image of another seed (so not one of v1's) to `rel`
  // under dir_; returns its sha256 source bytes' path.
  std::string NewImage(const std::string& rel, int index = 0) {
    const fs::path other = dir_ / "other";
    if (!fs::exists(other)) {
      data::SynthOptions o;
      o.images = 8;
      o.classes = 3;
      o.imgsz = 96;
      o.seed = 77;
      EXPECT_TRUE(data::WriteSynthDataset(o, other.string()).IsOk());
    }
    std::vector<fs::path> files;
    for (const auto& e : fs::recursive_directory_iterator(other / "images"))
      if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    const fs::path to = dir_ / rel;
    fs::create_directories(to.parent_path());
    fs::copy_file(files.at(size_t(index)), to, fs::copy_options::overwrite_existing);
    return to.string();
  }
  std::string Key(size_t i) const {
    return std::string(data::SplitName(v1_.entries[i].split)) + "/" + v1_.entries[i].path;
  }
  int64_t Versions() {
    auto all = meta_->ListDatasets();
    return all.IsOk() && !all->empty() ? (*all)[0].num_versions : 0;
  }
  // A Label Studio task with one annotation of `result`.
  nlohmann::json Task(const std::string& image, nlohmann::json result) {
    return {{"id", 1},
            {"data", {{"image", image}}},
            {"annotations", nlohmann::json::array({{{"id", 7}, {"result", std::move(result)}}})},
            {"predictions", nlohmann::json::array()}};
  }
  nlohmann::json Rect(double x, double y, double w, double h, const std::string& label) {
    return {{"type", "rectanglelabels"},
            {"from_name", "label"},
            {"to_name", "image"},
            {"original_width", 96},
            {"original_height", 96},
            {"value",
             {{"x", x},
              {"y", y},
              {"width", w},
              {"height", h},
              {"rotation", 0},
              {"rectanglelabels", nlohmann::json::array({label})}}}};
  }

  fs::path dir_;
  std::unique_ptr<store::MetadataStore> meta_;
  std::unique_ptr<store::ArtifactStore> blobs_;
  data::Manifest v1_;
};

TEST_F(DatasetMergeTest, LabelStudioCorrectionsReplaceOnlyTheirImagesBoxes) {
  // Image 0 by a local-files URL of the `dataset predict` layout, image 1
  // by an upload name with Label Studio's 8-hex prefix and every box
  // deleted; image 2 has no annotation (keeps its boxes); the rest absent.
  nlohmann::json tasks = nlohmann::json::array(
      {Task("/data/local-files/?d=runs/p/images/" + Key(0),
            {Rect(10, 20, 30, 40, v1_.names[1]),
             Rect(50, 50, 25.5, 10, v1_.names[0]),
             {{"type", "choices"}, {"value", {{"choices", {"ok"}}}}}}),
       Task("/data/upload/3/0a1b2c3d-" + fs::path(v1_.entries[1].path).filename().string(),
            nlohmann::json::array()),
       {{"data", {{"image", "http://h/" + Key(2)}}}, {"annotations", nlohmann::json::array()}}});
  // The upload name matches by file name alone: only if it is unique.
  const std::string path = WriteFile("ls.json", tasks.dump());
  data::ValidationReport report;
  Result<DatasetMerge> m =
      MergeCorrections(*meta_, *blobs_, "shapes@v1", Opts(path), Env::Default(), &report);
  ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
  EXPECT_TRUE(m->created);
  EXPECT_EQ(m->record.seq, 2);
  EXPECT_EQ(m->images_corrected, 2);
  EXPECT_EQ(report.findings.Count(data::Severity::kInfo, "corrections.not_annotated"), 1);
  Result<data::VersionView> v2 = data::LoadVersion(*meta_, *blobs_, "shapes@v2");
  ASSERT_TRUE(v2.IsOk());
  ASSERT_EQ(v2->manifest.entries.size(), v1_.entries.size());
  const std::vector<data::Box>& b0 = v2->manifest.entries[0].boxes;
  ASSERT_EQ(b0.size(), 2u);
  // Percent, top-left -> normalized centre (canonical order: class 0 first).
  EXPECT_EQ(b0[0].cls, 0);
  EXPECT_NEAR(b0[0].cx, 0.6275, 1e-6);
  EXPECT_NEAR(b0[0].w, 0.255, 1e-6);
  EXPECT_EQ(b0[1].cls, 1);
  EXPECT_NEAR(b0[1].cx, 0.25, 1e-6);
  EXPECT_NEAR(b0[1].cy, 0.40, 1e-6);
  EXPECT_NEAR(b0[1].h, 0.40, 1e-6);
  EXPECT_TRUE(v2->manifest.entries[1].boxes.empty()) << "every box deleted: a background";
  for (size_t i = 2; i < v1_.entries.size(); ++i)
    EXPECT_EQ(v2->manifest.entries[i].boxes, v1_.entries[i].boxes) << "absent images keep their boxes";
  EXPECT_EQ(v2->manifest.entries[0].image_sha, v1_.entries[0].image_sha);
  // The same corrections again: identical content, no third version.
  Result<DatasetMerge> again = MergeCorrections(*meta_, *blobs_, "shapes@v1", Opts(path));
  ASSERT_TRUE(again.IsOk());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(Versions(), 2);
}

TEST_F(DatasetMergeTest, CvatXmlCorrectionsInPixels) {
  const data::ManifestEntry& e = v1_.entries[1];
  const std::string xml =
      "<?xml version=\"1.0\"?><annotations><version>1.1</version><image id=\"0\" name=\"" + Key(1) +
      "\" width=\"" + std::to_string(e.width) + "\" height=\"" + std::to_string(e.height) +
      "\"><box label=\"" + v1_.names[1] +
      "\" source=\"manual\" occluded=\"0\" xtl=\"0\" ytl=\"12\" xbr=\"48\" ybr=\"36\" "
      "z_order=\"0\"/></image></annotations>";
  Result<DatasetMerge> m = MergeCorrections(*meta_, *blobs_, "shapes@v1", Opts(WriteFile("c.xml", xml)));
  ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
  Result<data::VersionView> v2 = data::LoadVersion(*meta_, *blobs_, "shapes@v2");
  ASSERT_TRUE(v2.IsOk());
  const std::vector<data::Box>& b = v2->manifest.entries[1].boxes;
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].cls, 1);
  EXPECT_NEAR(b[0].cx, 24.0 / e.width, 1e-6);
  EXPECT_NEAR(b[0].cy, 24.0 / e.height, 1e-6);
  EXPECT_NEAR(b[0].w, 48.0 / e.width, 1e-6);
  EXPECT_EQ(v2->manifest.entries[0].boxes, v1_.entries[0].boxes);
}

TEST_F(DatasetMergeTest, MalformedExportsGetFindingsNamingTheFieldAndStoreNothing) {
  struct Case {
    std::string check, field;
    nlohmann::json tasks;
  };
  nlohmann::json no_x = Rect(1, 1, 5, 5, v1_.names[0]);
  no_x["value"].erase("x");
  nlohmann::json rotated = Rect(1, 1, 5, 5, v1_.names[0]);
  rotated["value"]["rotation"] = 30;
  const std::vector<Case> cases = {
      {"corrections.missing_field", "tasks[0].annotations[0].result[0].value.x",
       nlohmann::json::array({Task(Key(0), {no_x})})},
      {"corrections.missing_field", "tasks[0].data.image",
       nlohmann::json::array(
           {{{"data", nlohmann::json::object()}, {"annotations", nlohmann::json::array()}}})},
      {"corrections.out_of_bounds", "tasks[0].annotations[0].result[0].value",
       nlohmann::json::array({Task(Key(0), {Rect(90, 10, 20, 5, v1_.names[0])})})},
      {"corrections.rotated_box", "tasks[0].annotations[0].result[0].value.rotation",
       nlohmann::json::array({Task(Key(0), {rotated})})},
      {"corrections.unknown_label", "tasks[0].annotations[0].result[0].value",
       nlohmann::json::array({Task(Key(0), {Rect(1, 1, 5, 5, "zebra")})})},
      {"corrections.unmatched_image", "tasks[0].data.image",
       nlohmann::json::array({Task("http://h/nowhere/x.jpg", {Rect(1, 1, 5, 5, v1_.names[0])})})},
      {"corrections.duplicate_image", "tasks[1].data.image",
       nlohmann::json::array({Task(Key(0), nlohmann::json::array()), Task(Key(0), nlohmann::json::array())})},
  };
  for (const Case& c : cases) {
    const std::string path = WriteFile("bad.json", c.tasks.dump());
    data::ValidationReport report;
    Result<DatasetMerge> m =
        MergeCorrections(*meta_, *blobs_, "shapes@v1", Opts(path), Env::Default(), &report);
    ASSERT_FALSE(m.IsOk()) << c.check;
    EXPECT_EQ(m.GetStatus().Code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(report.findings.Count(data::Severity::kError, c.check), 1) << c.check << "\n"
                                                                         << report.ToText();
    bool named = false;
    for (const data::Finding& f : report.findings)
      if (f.check == c.check) named = f.file == path && f.field == c.field;
    EXPECT_TRUE(named) << c.check << " should name " << c.field << "\n" << report.ToText();
    EXPECT_EQ(Versions(), 1) << c.check << ": nothing stored";
  }
  // CVAT: a box without ybr, a box past the right border.
  const std::string xml = "<annotations><image name=\"" + Key(0) +
                          "\" width=\"96\" height=\"96\"><box label=\"" + v1_.names[0] +
                          "\" xtl=\"1\" ytl=\"1\" xbr=\"5\"/><box label=\"" + v1_.names[0] +
                          "\" xtl=\"50\" ytl=\"1\" xbr=\"120\" ybr=\"9\"/></image></annotations>";
  data::ValidationReport report;
  Result<DatasetMerge> m = MergeCorrections(*meta_, *blobs_, "shapes@v1", Opts(WriteFile("bad.xml", xml)),
                                            Env::Default(), &report);
  ASSERT_FALSE(m.IsOk());
  EXPECT_EQ(report.findings.Count(data::Severity::kError, "corrections.missing_field"), 1);
  EXPECT_EQ(report.findings.Count(data::Severity::kError, "corrections.out_of_bounds"), 1);
  EXPECT_EQ(report.findings[0].field, "image[0].box[0].ybr");
  // Neither JSON nor XML.
  Result<DatasetMerge> junk =
      MergeCorrections(*meta_, *blobs_, "shapes@v1", Opts(WriteFile("j.txt", "hello")));
  ASSERT_FALSE(junk.IsOk());
  EXPECT_EQ(junk.GetStatus().Where().field, "corrections");
  EXPECT_EQ(Versions(), 1);
}

TEST_F(DatasetMergeTest, NewImagesAreAddedInTheSplitTheirFolderNames) {
  // One new image by a local-files path under images/val/, one new image in
  // a sub-folder of the split, one existing image corrected alongside.
  NewImage("exp/images/val/new_a.jpg", 0);
  NewImage("exp/images/train/extra/new_b.jpg", 1);
  nlohmann::json tasks = nlohmann::json::array(
      {Task("/data/local-files/?d=exp/images/val/new_a.jpg", {Rect(10, 10, 20, 30, v1_.names[2])}),
       Task("/data/local-files/?d=exp/images/train/extra/new_b.jpg", nlohmann::json::array()),
       Task(Key(0), {Rect(5, 5, 10, 10, v1_.names[0])})});
  data::ValidationReport report;
  Result<DatasetMerge> m = MergeCorrections(
      *meta_, *blobs_, "shapes@v1", Opts(WriteFile("ls.json", tasks.dump())), Env::Default(), &report);
  ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
  EXPECT_EQ(m->images_added, 2);
  EXPECT_EQ(m->images_corrected, 1);
  Result<data::VersionView> v2 = data::LoadVersion(*meta_, *blobs_, "shapes@v2");
  ASSERT_TRUE(v2.IsOk());
  ASSERT_EQ(v2->manifest.entries.size(), v1_.entries.size() + 2);
  const data::ManifestEntry* a = nullptr;
  const data::ManifestEntry* b = nullptr;
  for (const data::ManifestEntry& e : v2->manifest.entries) {
    if (e.path == "new_a.jpg") a = &e;
    if (e.path == "extra/new_b.jpg") b = &e;
  }
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->split, data::Split::kVal);
  EXPECT_EQ(b->split, data::Split::kTrain);
  EXPECT_EQ(a->width, 96);
  ASSERT_EQ(a->boxes.size(), 1u);
  EXPECT_EQ(a->boxes[0].cls, 2);
  EXPECT_NEAR(a->boxes[0].cy, 0.25, 1e-6);
  EXPECT_TRUE(b->boxes.empty()) << "an empty annotation: a background";
  // The image is stored: its blob reads back with its sha.
  Result<std::string> bytes = blobs_->Get(a->image_sha);
  ASSERT_TRUE(bytes.IsOk());
  std::ifstream in((dir_ / "exp/images/val/new_a.jpg").string(), std::ios::binary);
  EXPECT_EQ(*bytes, std::string(std::istreambuf_iterator<char>(in), {}));
}

TEST_F(DatasetMergeTest, NewImagesThatCannotBeAddedAreFindingsAndStoreNothing) {
  NewImage("exp/plain/new_c.jpg", 2);
  WriteFile("broken.jpg", "not a jpeg at all");
  fs::create_directories(dir_ / "sub");
  struct Case {
    std::string check, field, ref;
  };
  const std::vector<Case> cases = {
      // v1's splits came from its source's folders: a new image must name one.
      {"corrections.no_split", "tasks[0].data.image", "exp/plain/new_c.jpg"},
      {"image.decode", "tasks[0].data.image", "http://host/x/broken.jpg"},
      {"corrections.unmatched_image", "tasks[0].data.image", "exp/plain/nope.jpg"},
      // A tail with ".." is never tried: nothing outside the folder is read.
      {"corrections.unmatched_image", "tasks[0].data.image",
       "../" + dir_.filename().string() + "/broken.jpg"},
  };
  for (const Case& c : cases) {
    const std::string path = WriteFile(
        "sub/bad.json", nlohmann::json::array({Task(c.ref, {Rect(1, 1, 5, 5, v1_.names[0])})}).dump());
    data::ValidationReport report;
    // images= the test folder (the export sits in sub/, so ".." would escape it).
    Result<DatasetMerge> m =
        MergeCorrections(*meta_, *blobs_, "shapes@v1",
                         Opts(path, c.ref.rfind("..", 0) == 0 ? (dir_ / "sub").string() : dir_.string()),
                         Env::Default(), &report);
    ASSERT_FALSE(m.IsOk()) << c.check;
    EXPECT_EQ(report.findings.Count(data::Severity::kError), 1) << c.check << "\n" << report.ToText();
    bool named = false;
    for (const data::Finding& f : report.findings)
      if (f.check == c.check) named = f.file == path && f.field == c.field;
    EXPECT_TRUE(named) << c.check << " should name " << c.field << "\n" << report.ToText();
    EXPECT_EQ(Versions(), 1) << c.check << ": nothing stored";
  }
}

TEST_F(DatasetMergeTest, NewImagesFollowTheAssignedSplitOfAFlatImport) {
  // A flat source (no split folders) split with seed 3 at import.
  fs::create_directories(dir_ / "flat/images");
  fs::create_directories(dir_ / "flat/labels");
  for (const char* split : {"train", "val"}) {
    for (const auto& e : fs::directory_iterator(dir_ / "src/images" / split))
      fs::copy_file(e.path(), dir_ / "flat/images" / e.path().filename());
    for (const auto& e : fs::directory_iterator(dir_ / "src/labels" / split))
      fs::copy_file(e.path(), dir_ / "flat/labels" / e.path().filename());
  }
  Datasets ds(*meta_, *blobs_);
  data::ImportOptions io;
  io.seed = 3;
  io.val_ratio = 0.5;
  ASSERT_TRUE(ds.Import((dir_ / "flat").string(), "flat", io).IsOk());
  Result<data::VersionView> v1 = data::LoadVersion(*meta_, *blobs_, "flat@v1");
  ASSERT_TRUE(v1.IsOk());
  nlohmann::json tasks = nlohmann::json::array();
  for (int i = 0; i < 8; ++i) {
    NewImage("more/n" + std::to_string(i) + ".jpg", i);
    tasks.push_back(Task("n" + std::to_string(i) + ".jpg", {Rect(1, 1, 5, 5, v1->manifest.names[0])}));
  }
  const std::string path = WriteFile("more/ls.json", tasks.dump());
  // Another seed than the import's: v1's split is not its order.
  data::ValidationReport report;
  Result<DatasetMerge> wrong =
      MergeCorrections(*meta_, *blobs_, "flat@v1", Opts(path, "", 4), Env::Default(), &report);
  ASSERT_FALSE(wrong.IsOk());
  EXPECT_EQ(report.findings.Count(data::Severity::kError, "corrections.no_split"), 8) << report.ToText();
  Result<DatasetMerge> m = MergeCorrections(*meta_, *blobs_, "flat@v1", Opts(path, "", 3));
  ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
  EXPECT_EQ(m->images_added, 8);
  Result<data::VersionView> v2 = data::LoadVersion(*meta_, *blobs_, "flat@v2");
  ASSERT_TRUE(v2.IsOk());
  int val = 0;
  for (const data::ManifestEntry& e : v2->manifest.entries) {
    if (e.path.rfind('n', 0) != 0) continue;
    // The rule: AssignSplits' key against v1's val/train boundary.
    Result<data::Split> expected = data::AssignedSplitOf(v1->manifest, e, 3);
    ASSERT_TRUE(expected.IsOk());
    EXPECT_EQ(e.split, *expected) << e.path;
    val += e.split == data::Split::kVal ? 1 : 0;
  }
  EXPECT_GT(val, 0) << "about half of the new images go to val";
  EXPECT_LT(val, 8);
  for (const data::ManifestEntry& e : v1->manifest.entries) {
    auto it = std::find_if(v2->manifest.entries.begin(), v2->manifest.entries.end(),
                           [&e](const data::ManifestEntry& x) { return x.path == e.path; });
    ASSERT_NE(it, v2->manifest.entries.end());
    EXPECT_EQ(it->split, e.split) << "v1's images keep their split";
  }
}

TEST(CorrectionsSplitTest, ANewImageTakesItsPlaceInTheAssignedOrder) {
  data::Manifest m;
  for (int i = 0; i < 20; ++i) {
    data::ManifestEntry e;
    e.path = "img" + std::to_string(i) + ".jpg";
    e.image_sha = std::string(64, char('a' + i % 6));
    m.entries.push_back(e);
  }
  data::AssignSplits(m, 0.3, 11);
  // Every entry of m, taken out and added back, lands in its own split —
  // but the last val one, which leaves the val/train boundary with it.
  int moved = 0;
  for (size_t i = 0; i < m.entries.size(); ++i) {
    data::Manifest rest = m;
    rest.entries.erase(rest.entries.begin() + int64_t(i));
    Result<data::Split> s = data::AssignedSplitOf(rest, m.entries[i], 11);
    ASSERT_TRUE(s.IsOk());
    moved += *s != m.entries[i].split ? 1 : 0;
  }
  EXPECT_EQ(moved, 1);
  EXPECT_EQ(data::AssignedSplitOf(m, m.entries[0], 12).GetStatus().Code(), StatusCode::kFailedPrecondition);
  m.entries[0].split = data::Split::kTest;
  EXPECT_FALSE(data::AssignedSplitOf(m, m.entries[1], 11).IsOk());
}

// `dataset import` of a Label Studio export and a CVAT file: the images
// under the export's folder, the usual policy (errors: nothing stored).
TEST_F(DatasetMergeTest, ExportsImportAsDatasets) {
  NewImage("ls/images/train/a.jpg", 0);
  NewImage("ls/images/val/b.jpg", 1);
  nlohmann::json tasks = nlohmann::json::array(
      {Task("/data/local-files/?d=ls/images/train/a.jpg",
            {Rect(10, 10, 20, 20, "zebra"), Rect(50, 50, 10, 10, "ant")}),
       Task("http://ls:8080/data/local-files/?d=images%2Fval%2Fb.jpg", {Rect(0, 0, 50, 50, "zebra")})});
  const std::string ls = WriteFile("ls/export.json", tasks.dump());
  Result<std::string> detected = data::DetectFormat(ls);
  ASSERT_TRUE(detected.IsOk());
  EXPECT_EQ(*detected, "label-studio");
  Datasets ds(*meta_, *blobs_);
  Result<DatasetImport> imp = ds.Import(ls, "ls", {});
  ASSERT_TRUE(imp.IsOk()) << imp.GetStatus().ToString();
  Result<data::VersionView> v = data::LoadVersion(*meta_, *blobs_, "ls@v1");
  ASSERT_TRUE(v.IsOk());
  EXPECT_EQ(v->manifest.names, (std::vector<std::string>{"ant", "zebra"})) << "every label used, sorted";
  ASSERT_EQ(v->manifest.entries.size(), 2u);
  EXPECT_EQ(v->manifest.entries[0].path, "a.jpg");
  EXPECT_EQ(v->manifest.entries[0].split, data::Split::kTrain);
  EXPECT_EQ(v->manifest.entries[0].boxes.size(), 2u);
  EXPECT_EQ(v->manifest.entries[1].split, data::Split::kVal) << "%2F decoded, found under images/val";
  ASSERT_EQ(v->manifest.entries[1].boxes.size(), 1u);
  EXPECT_NEAR(v->manifest.entries[1].boxes[0].cx, 0.25, 1e-6);

  // CVAT: the <meta> label order; no split folders: split at import.
  NewImage("cvat/p.jpg", 2);
  NewImage("cvat/q.jpg", 3);
  auto cvat = [](const std::string& images) {
    return "<annotations><version>1.1</version><meta><task><labels><label><name>zebra</name></label>"
           "<label><name>ant</name></label></labels></task></meta>" +
           images + "</annotations>";
  };
  const std::string ok_xml = cvat(
      "<image id='0' name='p.jpg' width='96' height='96'><box label='ant' xtl='0' ytl='0' "
      "xbr='48' ybr='48'/></image><image id='1' name='q.jpg' width='96' height='96'></image>");
  const std::string xml_path = WriteFile("cvat/annotations.xml", ok_xml);
  detected = data::DetectFormat(xml_path);
  ASSERT_TRUE(detected.IsOk());
  EXPECT_EQ(*detected, "cvat");
  imp = ds.Import(xml_path, "cv", {});
  ASSERT_TRUE(imp.IsOk()) << imp.GetStatus().ToString();
  v = data::LoadVersion(*meta_, *blobs_, "cv@v1");
  ASSERT_TRUE(v.IsOk());
  EXPECT_EQ(v->manifest.names, (std::vector<std::string>{"zebra", "ant"}));
  ASSERT_EQ(v->manifest.entries.size(), 2u);
  EXPECT_EQ(v->manifest.entries[0].boxes.at(0).cls, 1);
  EXPECT_TRUE(v->manifest.entries[1].boxes.empty());

  // Malformed: each an error finding naming the field, nothing stored.
  struct Case {
    std::string check, field, xml;
  };
  const std::vector<Case> cases = {
      {"corrections.unmatched_image", "image[1].name",
       cvat("<image name='p.jpg' width='96' height='96'/><image name='gone.jpg' width='96' "
            "height='96'/>")},
      {"corrections.unknown_label", "image[0].box[0]",
       cvat("<image name='p.jpg' width='96' height='96'><box label='cat' xtl='0' ytl='0' xbr='9' "
            "ybr='9'/></image>")},
      {"corrections.missing_field", "image[0].box[0].xbr",
       cvat("<image name='p.jpg' width='96' height='96'><box label='ant' xtl='0' ytl='0' "
            "ybr='9'/></image>")},
      {"corrections.duplicate_image", "image[1].name",
       cvat("<image name='p.jpg' width='96' height='96'/><image name='x/p.jpg' width='96' "
            "height='96'/>")},
  };
  for (const Case& c : cases) {
    const std::string path = WriteFile("cvat/bad.xml", c.xml);
    data::ValidationReport report;
    Result<DatasetImport> bad = ds.Import(path, "bad", {}, &report);
    ASSERT_FALSE(bad.IsOk()) << c.check;
    bool named = false;
    for (const data::Finding& f : report.findings)
      if (f.check == c.check) named = f.file == path && f.field == c.field;
    EXPECT_TRUE(named) << c.check << " should name " << c.field << "\n" << report.ToText();
    auto stored = meta_->ListVersions("bad");
    EXPECT_TRUE(!stored.IsOk() || stored->empty()) << c.check << ": nothing stored";
  }
  // format= that is not the file's.
  data::ImportOptions wrong;
  wrong.format = "label-studio";
  Result<DatasetImport> mism = ds.Import(xml_path, "bad", wrong);
  ASSERT_FALSE(mism.IsOk());
  EXPECT_EQ(mism.GetStatus().Where().field, "format");
}

TEST_F(DatasetMergeTest, ImageFilesResolveByTheLongestTailUnderTheFolder) {
  NewImage("root/images/train/sub/a.jpg", 0);
  NewImage("root/b.jpg", 1);
  NewImage("outside.jpg", 2);
  const std::string root = (dir_ / "root").string();
  std::optional<data::ImageFile> f = data::ResolveImageFile(root, "/srv/data/images/train/sub/a.jpg");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->path, root + "/images/train/sub/a.jpg");
  EXPECT_EQ(f->rel_path, "sub/a.jpg");
  EXPECT_EQ(f->split, data::Split::kTrain);
  f = data::ResolveImageFile(root, "/data/upload/4/deadbeef-b.jpg");
  ASSERT_TRUE(f.has_value()) << "Label Studio's upload prefix";
  EXPECT_EQ(f->rel_path, "b.jpg");
  EXPECT_EQ(f->split, data::Split::kUnassigned);
  EXPECT_FALSE(data::ResolveImageFile(root, "../outside.jpg").has_value()) << "never outside the folder";
  EXPECT_FALSE(data::ResolveImageFile(root, "images/train").has_value()) << "a folder is not an image file";
  EXPECT_FALSE(data::ResolveImageFile(root, "").has_value());
}

TEST(CorrectionsMatchTest, ReferencesMatchByTheLongestTailAndTiesAreAmbiguous) {
  data::Manifest m;
  data::ManifestEntry a, b, c, d;
  a.path = "x.jpg";
  a.split = data::Split::kTrain;
  b.path = "x.jpg";
  b.split = data::Split::kVal;
  c.path = "sub/y.png";
  c.split = data::Split::kTrain;
  d.path = "z.jpg";
  m.entries = {a, b, c, d};
  EXPECT_EQ(data::MatchCorrectedImage(m, "x.jpg"), -2);
  EXPECT_EQ(data::MatchCorrectedImage(m, "/abs/images/val/x.jpg"), 1);
  EXPECT_EQ(data::MatchCorrectedImage(m, "sub/y.png"), 2);
  EXPECT_EQ(data::MatchCorrectedImage(m, "/data/upload/1/deadbeef-y.png"), -1)
      << "y.png alone is not sub/y.png";
  EXPECT_EQ(data::MatchCorrectedImage(m, "/data/upload/1/deadbeef-z.jpg"), 3)
      << "Label Studio's upload prefix";
  EXPECT_EQ(data::MatchCorrectedImage(m, "xx.jpg"), -1) << "a tail starts at a '/'";
}

// The box-level diff: per image, boxes matched by IoU across classes.
TEST(BoxDiffTest, AddedRemovedMovedRelabelledPerClassAndPerImage) {
  data::Manifest a, b;
  a.names = {"cat", "dog"};
  b.names = {"cat", "dog", "fox"};
  data::ManifestEntry e1, e2, e3;
  e1.path = "one.jpg";
  e2.path = "two.jpg";
  e3.path = "gone.jpg";
  e1.boxes = {{0, 0.2, 0.2, 0.2, 0.2}, {0, 0.7, 0.7, 0.2, 0.2}, {1, 0.5, 0.2, 0.1, 0.1}};
  e2.boxes = {{1, 0.5, 0.5, 0.4, 0.4}};
  e3.boxes = {{0, 0.5, 0.5, 0.2, 0.2}};
  a.entries = {e1, e2, e3};
  data::ManifestEntry f1 = e1, f2 = e2, f4;
  // one.jpg: box 0 unchanged, box 1 shifted by half its width (IoU 1/3:
  // moved), box 2 relabelled dog -> fox, plus a new box; two.jpg same.
  f1.boxes = {
      {0, 0.2, 0.2, 0.2, 0.2}, {0, 0.8, 0.7, 0.2, 0.2}, {2, 0.5, 0.2, 0.1, 0.1}, {1, 0.9, 0.1, 0.05, 0.05}};
  f4.path = "new.jpg";
  f4.boxes = {{2, 0.5, 0.5, 0.1, 0.1}};
  b.entries = {f1, f2, f4};
  EXPECT_NEAR(data::BoxIoU(e1.boxes[1], f1.boxes[1]), 1.0 / 3, 1e-9);
  const data::BoxDiff d = data::DiffBoxes(a, b);
  EXPECT_EQ(d.total.added, 2);    // one.jpg's new box, new.jpg's
  EXPECT_EQ(d.total.removed, 1);  // gone.jpg's
  EXPECT_EQ(d.total.moved, 1);
  EXPECT_EQ(d.total.relabelled, 1);
  EXPECT_EQ(d.total.unchanged, 2);  // one.jpg box 0, two.jpg
  EXPECT_EQ(d.by_class.at("cat").removed, 1);
  EXPECT_EQ(d.by_class.at("cat").moved, 1);
  EXPECT_EQ(d.by_class.at("fox").relabelled, 1);
  EXPECT_EQ(d.by_class.at("fox").added, 1);
  EXPECT_EQ(d.by_class.at("dog").added, 1);
  ASSERT_EQ(d.images.size(), 3u);  // two.jpg unchanged: not listed
  EXPECT_EQ(d.images[0].key, "train/gone.jpg");
  EXPECT_EQ(d.images[1].key, "train/new.jpg");
  EXPECT_EQ(d.images[2].key, "train/one.jpg");
  EXPECT_EQ(d.images[2].counts.added, 1);
  EXPECT_EQ(d.images[2].counts.moved, 1);
  const nlohmann::json j = d.ToJson();
  EXPECT_EQ(j["total"]["moved"], 1);
  EXPECT_EQ(j["images_changed"], 3);
}

TEST_F(DatasetMergeTest, DiffOfAMergeCountsTheCorrectedBoxes) {
  ASSERT_FALSE(v1_.entries[0].boxes.empty());
  const data::Box first = v1_.entries[0].boxes[0];
  nlohmann::json tasks = nlohmann::json::array(
      {Task(Key(0), {Rect((first.cx - first.w / 2) * 100, (first.cy - first.h / 2) * 100, first.w * 100,
                          first.h * 100, v1_.names[size_t(first.cls + 1) % v1_.names.size()])})});
  Result<DatasetMerge> m =
      MergeCorrections(*meta_, *blobs_, "shapes@v1", Opts(WriteFile("ls.json", tasks.dump())));
  ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
  Datasets ds(*meta_, *blobs_);
  Result<DatasetDiff> d = ds.Diff("shapes@v1", "shapes@v2");
  ASSERT_TRUE(d.IsOk());
  EXPECT_EQ(d->boxes.total.relabelled, 1);
  EXPECT_EQ(d->boxes.total.removed, int64_t(v1_.entries[0].boxes.size()) - 1);
  EXPECT_EQ(d->boxes.total.added, 0);
  ASSERT_EQ(d->boxes.images.size(), 1u);
  EXPECT_EQ(d->boxes.images[0].key, Key(0));
  EXPECT_EQ(DatasetDiffJson(*d)["boxes"]["total"]["relabelled"], 1);
}

}  // namespace
}  // namespace kestrel::app
