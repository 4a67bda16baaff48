// The dataset use cases over a real store (app::Datasets): import with every
// defect seeded, versioning rules, round-trip export, blob dedup and crash
// safety (data::CommitVersion's order, killed mid-import).
#include "app/datasets.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <random>

#include "data/synth.h"
#include "store/local_artifact_store.h"

namespace kestrel::data {
namespace {

namespace fs = std::filesystem;

void WriteFile(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << bytes;
}

std::string Encode(const cv::Mat& m, const std::string& ext) {
  std::vector<uchar> buf;
  EXPECT_TRUE(cv::imencode(ext, m, buf));
  return std::string(buf.begin(), buf.end());
}

// A textured image unlike any other seed (so near-dup search stays quiet).
cv::Mat Noise(int seed, int w = 96, int h = 80) {
  cv::Mat small(6, 6, CV_8UC3);
  cv::RNG rng(static_cast<uint64_t>(seed) * 7919 + 13);
  rng.fill(small, cv::RNG::UNIFORM, 0, 255);
  cv::Mat m;
  cv::resize(small, m, cv::Size(w, h), 0, 0, cv::INTER_CUBIC);
  return m;
}

class DatasetsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kestrel_reg_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    home_ = (dir_ / "home").string();
    OpenStores();
  }
  void TearDown() override { fs::remove_all(dir_); }

  void OpenStores() {
    meta_ = std::move(store::MetadataStore::Open("sqlite:" + home_ + "/kestrel.db")).Value();
    blobs_ = std::make_unique<store::LocalArtifactStore>(home_);
    reg_ = std::make_unique<app::Datasets>(*meta_, *blobs_);
  }

  std::string Synth(const std::string& name, int images = 24, uint64_t seed = 1) {
    SynthOptions o;
    o.images = images;
    o.classes = 3;
    o.imgsz = 96;
    o.seed = seed;
    std::string out = (dir_ / name).string();
    EXPECT_TRUE(WriteSynthDataset(o, out).IsOk());
    return out;
  }

  size_t CountObjects() {
    size_t n = 0;
    if (!fs::exists(fs::path(home_) / "objects")) return 0;
    for (auto& e : fs::recursive_directory_iterator(fs::path(home_) / "objects")) n += e.is_regular_file();
    return n;
  }

  fs::path dir_;
  std::string home_;
  std::unique_ptr<store::MetadataStore> meta_;
  std::unique_ptr<store::ArtifactStore> blobs_;
  std::unique_ptr<app::Datasets> reg_;
};

const Finding* FindCheck(const ValidationReport& r, const std::string& check, const std::string& file_suffix,
                         int line = -1) {
  for (const auto& f : r.findings) {
    if (f.check != check) continue;
    if (!file_suffix.empty() &&
        (f.file.size() < file_suffix.size() ||
         f.file.compare(f.file.size() - file_suffix.size(), file_suffix.size(), file_suffix) != 0)) {
      continue;
    }
    if (line >= 0 && f.line != line) continue;
    return &f;
  }
  return nullptr;
}

TEST_F(DatasetsTest, ImportOfEveryDefectReportsEachWithFileAndLine) {
  fs::path root = dir_ / "defects";
  auto img = [&](const std::string& split, const std::string& stem, const std::string& bytes,
                 const std::string& ext = ".jpg") {
    WriteFile(root / "images" / split / (stem + ext), bytes);
  };
  auto lbl = [&](const std::string& split, const std::string& stem, const std::string& text) {
    WriteFile(root / "labels" / split / (stem + ".txt"), text);
  };
  WriteFile(root / "data.yaml", "path: .\ntrain: images/train\nval: images/val\nnames: [bird, cat, dog]\n");
  // Healthy samples, enough of each class to avoid an imbalance warning
  // except for 'dog' (1 instance vs many birds).
  for (int i = 0; i < 8; ++i) {
    img("train", "ok" + std::to_string(i), Encode(Noise(i), ".jpg"));
    lbl("train", "ok" + std::to_string(i),
        "0 0.5 0.5 0.3 0.3\n1 0.25 0.25 0.2 0.2\n0 0.7 0.7 0.2 0.2\n0 0.3 0.7 0.1 0.1\n");
  }
  img("val", "v0", Encode(Noise(100), ".jpg"));
  lbl("val", "v0", "2 0.5 0.5 0.3 0.3\n");
  // Image defects.
  img("train", "garbage", "this is not an image at all");
  lbl("train", "garbage", "0 0.5 0.5 0.2 0.2\n");
  std::string full = Encode(Noise(200), ".jpg");
  img("train", "truncated", full.substr(0, full.size() / 2));
  lbl("train", "truncated", "0 0.5 0.5 0.2 0.2\n");
  img("train", "zero", "");
  cv::Mat gray;
  cv::cvtColor(Noise(300), gray, cv::COLOR_BGR2GRAY);
  img("train", "gray", Encode(gray, ".png"), ".png");
  lbl("train", "gray", "0 0.5 0.5 0.2 0.2\n");
  cv::Mat rgba;
  cv::cvtColor(Noise(301), rgba, cv::COLOR_BGR2BGRA);
  img("train", "alpha", Encode(rgba, ".png"), ".png");
  lbl("train", "alpha", "0 0.5 0.5 0.2 0.2\n");
  cv::Mat deep;
  Noise(302).convertTo(deep, CV_16UC3, 256.0);
  img("train", "deep", Encode(deep, ".png"), ".png");
  lbl("train", "deep", "0 0.5 0.5 0.2 0.2\n");
  // CMYK JPEG and an EXIF-rotated JPEG (orientation 6, stored 80x40), made
  // once with ImageMagick and a hand-written APP1 segment.
  auto fixture = [](const std::string& name) {
    std::ifstream f(std::string(KESTREL_SOURCE_DIR) + "/tests/data/fixtures/" + name, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  img("train", "cmyk", fixture("cmyk.jpg"));
  lbl("train", "cmyk", "0 0.5 0.5 0.2 0.2\n");
  img("train", "rotated", fixture("exif_rotated.jpg"));
  lbl("train", "rotated", "0 0.5 0.25 0.5 0.25\n");
  // Decompression bomb: a valid PNG whose IHDR claims 60000 x 60000.
  std::string bomb = Encode(Noise(303), ".png");
  auto put32 = [&](size_t off, uint32_t v) {
    for (int k = 0; k < 4; ++k)
      bomb[off + static_cast<size_t>(k)] = static_cast<char>((v >> (24 - 8 * k)) & 0xff);
  };
  put32(16, 60000);
  put32(20, 60000);
  img("train", "bomb", bomb, ".png");
  // Label defects (line numbers matter).
  img("train", "syntax", Encode(Noise(400), ".jpg"));
  lbl("train", "syntax",
      "0 0.5 0.5 0.2 0.2\n0 0.5 0.5 0.2\n0 abc 0.5 0.2 0.2\n0 0\xEF\xBC\x8C"
      "5 0.5 0.2 0.2\n0 nan 0.5 0.2 0.2\n");
  img("train", "range", Encode(Noise(401), ".jpg"));
  lbl("train", "range", "7 0.5 0.5 0.2 0.2\n");
  img("train", "bounds", Encode(Noise(402), ".jpg"));
  lbl("train", "bounds", "0 0.95 0.5 0.2 0.2\n0 1.5 0.5 0.2 0.2\n");
  img("train", "dup", Encode(Noise(403), ".jpg"));
  lbl("train", "dup", "1 0.5 0.5 0.2 0.2\n1 0.5 0.5 0.2 0.2\n");
  img("train", "empty", Encode(Noise(404), ".jpg"));
  lbl("train", "empty", "");
  img("train", "nolabel", Encode(Noise(405), ".jpg"));
  lbl("train", "orphan", "0 0.5 0.5 0.2 0.2\n");
  img("train", "tiny", Encode(Noise(406), ".jpg"));
  lbl("train", "tiny", "1 0.5 0.5 0.001 0.001\n");
  // Near duplicates: the same picture re-encoded within train, and across splits.
  cv::Mat pic = Noise(500);
  img("train", "nd_a", Encode(pic, ".jpg"));
  lbl("train", "nd_a", "1 0.5 0.5 0.2 0.2\n");
  img("train", "nd_b", Encode(pic, ".png"), ".png");
  lbl("train", "nd_b", "1 0.5 0.5 0.2 0.2\n");
  cv::Mat pic2 = Noise(501);
  img("train", "leak", Encode(pic2, ".jpg"));
  lbl("train", "leak", "1 0.5 0.5 0.2 0.2\n");
  cv::Mat pic2_small;
  cv::resize(pic2, pic2_small, cv::Size(48, 40), 0, 0, cv::INTER_AREA);
  img("val", "leak_copy", Encode(pic2_small, ".jpg"));
  lbl("val", "leak_copy", "1 0.5 0.5 0.2 0.2\n");

  ImportOptions opts;
  opts.imbalance_ratio = 10;
  ValidationReport rep;
  auto r = reg_->Import(root.string(), "defects", opts, &rep);
  ASSERT_FALSE(r.IsOk()) << "errors must block the import";
  EXPECT_NE(r.GetStatus().Message().find("nothing imported"), std::string::npos);
  EXPECT_TRUE(meta_->ListDatasets()->empty()) << "failed import stored a version";
  EXPECT_EQ(CountObjects(), 0u) << "failed import stored blobs";

  struct Want {
    std::string check, file;
    int line;
    Severity sev;
  };
  std::vector<Want> wants = {
      {"image.decode", "garbage.jpg", 0, Severity::kError},
      {"image.truncated", "truncated.jpg", 0, Severity::kError},
      {"image.empty", "zero.jpg", 0, Severity::kError},
      {"image.too_large", "bomb.png", 0, Severity::kError},
      {"image.grayscale", "gray.png", 0, Severity::kInfo},
      {"image.alpha", "alpha.png", 0, Severity::kInfo},
      {"image.16bit", "deep.png", 0, Severity::kInfo},
      {"image.cmyk", "cmyk.jpg", 0, Severity::kInfo},
      {"image.exif_orientation", "rotated.jpg", 0, Severity::kInfo},
      {"label.syntax", "syntax.txt", 2, Severity::kError},
      {"label.syntax", "syntax.txt", 3, Severity::kError},
      {"label.syntax", "syntax.txt", 4, Severity::kError},
      {"label.nonfinite", "syntax.txt", 5, Severity::kError},
      {"label.class_range", "range.txt", 1, Severity::kError},
      {"label.out_of_bounds", "bounds.txt", 1, Severity::kWarning},
      {"label.duplicate", "dup.txt", 2, Severity::kWarning},
      {"label.empty", "empty.txt", -1, Severity::kInfo},
      {"label.missing", "", -1, Severity::kWarning},
      {"label.orphan", "orphan.txt", -1, Severity::kWarning},
      {"class.tiny_objects", "", -1, Severity::kInfo},
      {"class.imbalance", "", -1, Severity::kWarning},
      {"image.near_duplicate", "", -1, Severity::kWarning},
      {"split.leakage", "", -1, Severity::kWarning},
  };
  for (const auto& w : wants) {
    const Finding* f = FindCheck(rep, w.check, w.file, w.line);
    ASSERT_NE(f, nullptr) << "missing finding " << w.check << " " << w.file << ":" << w.line << "\n"
                          << rep.ToText(50);
    EXPECT_EQ(f->severity, w.sev) << w.check;
    EXPECT_FALSE(f->message.empty());
  }
  // Box leaving the image through clipping to nothing is dropped (line 2).
  const Finding* degenerate = FindCheck(rep, "label.degenerate", "bounds.txt", 2);
  const Finding* oob2 = FindCheck(rep, "label.out_of_bounds", "bounds.txt", 2);
  EXPECT_TRUE(degenerate != nullptr || oob2 != nullptr) << rep.ToText(50);
  // Leakage names both files.
  const Finding* leak = FindCheck(rep, "split.leakage", "");
  EXPECT_NE(leak->message.find("leak"), std::string::npos);
  EXPECT_NE(leak->message.find("leak_copy"), std::string::npos);

  // With --allow-errors: bad samples excluded and listed, the rest imported.
  opts.allow_errors = true;
  auto ok = reg_->Import(root.string(), "defects", opts);
  ASSERT_TRUE(ok.IsOk()) << ok.GetStatus().ToString();
  const auto& a = ok->analysis;
  for (const char* bad :
       {"garbage.jpg", "truncated.jpg", "zero.jpg", "bomb.png", "syntax.jpg", "range.jpg"}) {
    bool listed = false;
    for (const auto& e : a.report.excluded) listed |= e.find(bad) != std::string::npos;
    EXPECT_TRUE(listed) << bad << " not listed as excluded";
    for (const auto& e : a.manifest.entries)
      EXPECT_EQ(e.path.find(bad), std::string::npos) << bad << " imported";
  }
  for (const auto& e : a.manifest.entries) {
    if (e.path == "dup.jpg") {
      EXPECT_EQ(e.boxes.size(), 1u);
    }
    if (e.path == "bounds.jpg") {
      ASSERT_EQ(e.boxes.size(), 1u);
      EXPECT_NEAR(e.boxes[0].cx + e.boxes[0].w / 2, 1.0, 1e-6);  // clipped at the right edge
    }
    if (e.path == "rotated.jpg") {  // sizes are of the oriented image
      EXPECT_EQ(e.width, 40);
      EXPECT_EQ(e.height, 80);
    }
    if (e.path == "cmyk.jpg") {
      EXPECT_EQ(e.width, 64);
    }
    if (e.path == "nolabel.jpg" || e.path == "empty.jpg") {
      EXPECT_TRUE(e.boxes.empty());
    }
  }
  int normalized_kept = 0;
  for (const auto& e : a.manifest.entries)
    normalized_kept += (e.path == "rotated.jpg" || e.path == "cmyk.jpg");
  EXPECT_EQ(normalized_kept, 2) << "CMYK / EXIF images must be normalized and kept, not excluded";
  auto loaded = reg_->Show("defects@v1");
  ASSERT_TRUE(loaded.IsOk()) << loaded.GetStatus().ToString();
  EXPECT_EQ(loaded->report["images_excluded"].get<int64_t>(), a.report.images_excluded);
}

TEST_F(DatasetsTest, SameContentSameIdAnyByteChangedNewId) {
  std::string a = Synth("a");
  std::string b = (dir_ / "copy").string();
  fs::copy(a, b, fs::copy_options::recursive);
  auto ra = reg_->Import(a, "shapes", {});
  ASSERT_TRUE(ra.IsOk()) << ra.GetStatus().ToString();
  EXPECT_TRUE(ra->created);
  size_t objects = CountObjects();
  auto rb = reg_->Import(b, "shapes", {});
  ASSERT_TRUE(rb.IsOk());
  EXPECT_FALSE(rb->created);
  EXPECT_EQ(rb->record.version_id, ra->record.version_id);
  EXPECT_EQ(CountObjects(), objects) << "importing the same content twice duplicated blobs";
  // Reordering label lines is not a change.
  fs::path some_label;
  for (auto& e : fs::recursive_directory_iterator(fs::path(b) / "labels")) {
    if (e.is_regular_file() && fs::file_size(e.path()) > 40) {
      some_label = e.path();
      break;
    }
  }
  ASSERT_FALSE(some_label.empty());
  std::ifstream in(some_label);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  in.close();
  ASSERT_GE(lines.size(), 2u);
  std::reverse(lines.begin(), lines.end());
  std::string text;
  for (auto& l : lines) text += l + "\n";
  WriteFile(some_label, text);
  EXPECT_EQ(reg_->Import(b, "shapes", {})->record.version_id, ra->record.version_id);
  // One coordinate changed -> new version.
  lines[0][lines[0].size() - 1] = lines[0].back() == '1' ? '2' : '1';
  text.clear();
  for (auto& l : lines) text += l + "\n";
  WriteFile(some_label, text);
  auto rc = reg_->Import(b, "shapes", {});
  ASSERT_TRUE(rc.IsOk());
  EXPECT_NE(rc->record.version_id, ra->record.version_id);
  EXPECT_EQ(rc->record.seq, 2);
  auto d = DiffManifests(reg_->Show("shapes@v1")->manifest, reg_->Show("shapes@v2")->manifest);
  EXPECT_EQ(d.labels_changed.size(), 1u);
  EXPECT_TRUE(d.added.empty());
  EXPECT_TRUE(d.removed.empty());
}

TEST_F(DatasetsTest, SplitIsDeterministicAndReSplittingMakesANewVersion) {
  std::string src = Synth("s", 30);
  // Flatten into a bare tree without splits.
  fs::path flat = dir_ / "flat";
  for (const char* kind : {"images", "labels"}) {
    for (auto& e : fs::recursive_directory_iterator(fs::path(src) / kind)) {
      if (!e.is_regular_file()) continue;
      fs::create_directories(flat / kind);
      fs::copy_file(e.path(), flat / kind / e.path().filename());
    }
  }
  WriteFile(flat / "classes.txt", "circle\nrectangle\ntriangle\n");
  ImportOptions o;
  o.val_ratio = 0.2;
  o.seed = 3;
  auto r1 = reg_->Import(flat.string(), "flat", o);
  ASSERT_TRUE(r1.IsOk()) << r1.GetStatus().ToString();
  int val = 0;
  for (const auto& e : r1->analysis.manifest.entries) val += e.split == Split::kVal;
  EXPECT_EQ(val, 6);
  auto again = AnalyzeDataset(flat.string(), o);
  EXPECT_EQ(VersionId(again->manifest), r1->record.version_id);
  o.seed = 4;
  auto r2 = reg_->Import(flat.string(), "flat", o);
  ASSERT_TRUE(r2.IsOk());
  EXPECT_NE(r2->record.version_id, r1->record.version_id);
  EXPECT_EQ(r2->record.seq, 2);
  EXPECT_EQ(reg_->Show("flat@v1")->record.version_id, r1->record.version_id) << "old version mutated";
}

TEST_F(DatasetsTest, ExportRoundTripKeepsTheVersionId) {
  std::string src = Synth("rt", 20, 5);
  auto r = reg_->Import(src, "rt", {});
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  for (const char* format : {"yolo", "coco"}) {
    std::string out = (dir_ / (std::string("export_") + format)).string();
    Status s = reg_->Export("rt@v1", format, out).GetStatus();
    ASSERT_TRUE(s.IsOk()) << s.ToString();
    auto back = reg_->Import(out, std::string("rt_") + format, {});
    ASSERT_TRUE(back.IsOk()) << format << ": " << back.GetStatus().ToString();
    EXPECT_EQ(back->record.version_id, r->record.version_id) << format << " round trip changed the version";
    EXPECT_FALSE(reg_->Export("rt@v1", format, out).IsOk()) << "export overwrote a non-empty folder";
  }
}

TEST_F(DatasetsTest, CorruptedBlobIsReportedOnLoad) {
  std::string src = Synth("c", 8);
  auto r = reg_->Import(src, "c", {});
  ASSERT_TRUE(r.IsOk());
  std::string path = blobs_->PathFor(r->record.manifest_sha);
  WriteFile(path, "garbage");
  auto v = reg_->Show("c");
  ASSERT_FALSE(v.IsOk());
  EXPECT_EQ(v.GetStatus().Code(), StatusCode::kCorruption);
}

TEST_F(DatasetsTest, BadInputIsAClearErrorAndStoresNothing) {
  EXPECT_EQ(reg_->Import((dir_ / "nope").string(), "x", {}).GetStatus().Code(), StatusCode::kNotFound);
  fs::create_directories(dir_ / "empty");
  EXPECT_FALSE(reg_->Import((dir_ / "empty").string(), "x", {}).IsOk());
  WriteFile(dir_ / "badyaml" / "data.yaml", "train: [images/train\nnames: {0: a\n");
  auto r = reg_->Import((dir_ / "badyaml").string(), "x", {});
  ASSERT_FALSE(r.IsOk());
  EXPECT_NE(r.GetStatus().Where().file.find("data.yaml"), std::string::npos) << r.GetStatus().ToString();
  std::string src = Synth("n", 4);
  EXPECT_FALSE(reg_->Import(src, "bad name", {}).IsOk());
  EXPECT_TRUE(meta_->ListDatasets()->empty());
}

// kill -9 at random points of an import: afterwards the store holds either
// no version or a complete one whose every blob verifies.
TEST_F(DatasetsTest, ImportKilledMidwayLeavesNoPartialVersion) {
  std::string src = Synth("k", 60, 9);
  // Time one whole import so the kills land before, during and after commit.
  auto t0 = std::chrono::steady_clock::now();
  {
    auto meta =
        std::move(store::MetadataStore::Open("sqlite:" + (dir_ / "timing").string() + "/kestrel.db")).Value();
    store::LocalArtifactStore blobs((dir_ / "timing").string());
    app::Datasets reg(*meta, blobs);
    ImportOptions o;
    o.threads = 1;
    ASSERT_TRUE(reg.Import(src, "k", o).IsOk());
  }
  const int full_ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count());
  std::mt19937 rng(42);
  int complete = 0, none = 0;
  for (int trial = 0; trial < 8; ++trial) {
    std::string home = (dir_ / ("home" + std::to_string(trial))).string();
    { ASSERT_TRUE(store::MetadataStore::Open("sqlite:" + home + "/kestrel.db").IsOk()); }
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto meta = store::MetadataStore::Open("sqlite:" + home + "/kestrel.db");
      if (!meta.IsOk()) _exit(3);
      store::LocalArtifactStore blobs(home);
      app::Datasets reg(**meta, blobs);
      ImportOptions o;
      o.threads = 1;
      _exit(reg.Import(src, "k", o).IsOk() ? 0 : 4);
    }
    // Spread over the whole import, ending a bit past it.
    int delay_ms = 2 + (full_ms * 13 / 10) * trial / 7 + std::uniform_int_distribution<int>(0, 5)(rng);
    usleep(static_cast<useconds_t>(delay_ms) * 1000);
    kill(pid, SIGKILL);
    int st = 0;
    waitpid(pid, &st, 0);
    auto meta = std::move(store::MetadataStore::Open("sqlite:" + home + "/kestrel.db")).Value();
    store::LocalArtifactStore blobs(home);
    app::Datasets reg(*meta, blobs);
    auto versions = *meta->ListVersions("k");
    ASSERT_LE(versions.size(), 1u);
    if (versions.empty()) {
      ++none;
      continue;
    }
    ++complete;
    auto v = reg.Show("k");
    ASSERT_TRUE(v.IsOk()) << "trial " << trial << ": " << v.GetStatus().ToString();
    for (const auto& e : v->manifest.entries) ASSERT_TRUE(blobs.Get(e.image_sha).IsOk()) << e.path;
  }
  // A fresh import after the crashes always completes.
  auto r = reg_->Import(src, "k", {});
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  std::cout << "[kill -9 trials over a " << full_ms << " ms import] complete versions: " << complete
            << ", no version: " << none << std::endl;
  EXPECT_GT(none, 0) << "no kill landed before the commit";
}

}  // namespace
}  // namespace kestrel::data
