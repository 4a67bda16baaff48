// Typed finding fields (STYLE.md 16, "never text back into data"): what code
// needs from a finding (its image, the other image of a pair, the pHash
// distance, why a decode failed) is a typed field, kept through the stored
// report's JSON, never read back out of a message. A decode failure's check
// id comes from DecodeFailure, not from words in the Status message: a WebP
// whose unknown chunk is called 'bomb' or 'zero' used to be filed as
// image.too_large / image.zero_size.
#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "data/analyze.h"
#include "data/image.h"
#include "scratch_dir_test.h"

namespace kestrel::data {
namespace {

std::string Encode(const cv::Mat& m, const std::string& ext) {
  std::vector<uchar> buf;
  EXPECT_TRUE(cv::imencode(ext, m, buf));
  return {buf.begin(), buf.end()};
}

// A textured picture unlike other seeds (pHash far apart).
cv::Mat Picture(int seed, int side = 48) {
  cv::Mat small(6, 6, CV_8UC3);
  cv::RNG rng(static_cast<uint64_t>(seed) * 7919 + 13);
  rng.fill(small, cv::RNG::UNIFORM, 0, 255);
  cv::Mat m;
  cv::resize(small, m, cv::Size(side, side), 0, 0, cv::INTER_CUBIC);
  return m;
}

// A WebP container whose first chunk is `fourcc` (not one Kestrel decodes).
std::string WebpWithChunk(const std::string& fourcc) {
  return std::string("RIFF\x20\0\0\0WEBP", 12) + fourcc + std::string(20, '\0');
}

Finding Pair() {
  Finding f = MakeFinding(Severity::kWarning, "split.leakage", "/d/images/train/a.jpg", 0, "split",
                          "near-duplicate images across splits: ...", "kept; consider removing one");
  f.image = {"a.jpg", Split::kTrain};
  f.other = {"b/c.jpg", Split::kVal};
  f.other_file = "/d/images/val/b/c.jpg";
  f.distance = 4;
  return f;
}

TEST(FindingJson, TypedFieldsRoundTrip) {
  const Finding f = Pair();
  const nlohmann::json j = FindingToJson(f);
  EXPECT_EQ(j["image"], (nlohmann::json{{"path", "a.jpg"}, {"split", "train"}}));
  EXPECT_EQ(j["other"],
            (nlohmann::json{{"path", "b/c.jpg"}, {"split", "val"}, {"file", "/d/images/val/b/c.jpg"}}));
  EXPECT_EQ(j["distance"], 4);
  const Finding back = FindingFromJson(j);
  EXPECT_EQ(back.severity, f.severity);
  EXPECT_EQ(back.check, f.check);
  EXPECT_EQ(back.file, f.file);
  EXPECT_EQ(back.field, f.field);
  EXPECT_EQ(back.message, f.message);
  EXPECT_EQ(back.action, f.action);
  EXPECT_EQ(back.image, f.image);
  EXPECT_EQ(back.other, f.other);
  EXPECT_EQ(back.other_file, f.other_file);
  EXPECT_EQ(back.distance, 4);
  // A finding about no image stores none of the new keys.
  const nlohmann::json plain =
      FindingToJson(MakeFinding(Severity::kInfo, "split.assigned", "", 0, "split", "assigned", "frozen"));
  EXPECT_FALSE(plain.contains("image"));
  EXPECT_FALSE(plain.contains("other"));
  EXPECT_FALSE(plain.contains("distance"));
}

TEST(FindingJson, OldReportReadsWithoutPairAndNothingFromTheMessage) {
  // As reports were stored before the typed fields: the pair is only text.
  const nlohmann::json old = {{"severity", "warning"},
                              {"check", "image.near_duplicate"},
                              {"file", "/d/images/train/a.jpg"},
                              {"line", 0},
                              {"field", ""},
                              {"message",
                               "near-duplicate images: /d/images/train/a.jpg (train) and "
                               "/d/images/train/b.jpg (train), pHash distance 3"},
                              {"action", "kept"}};
  const Finding f = FindingFromJson(old);
  EXPECT_EQ(f.check, "image.near_duplicate");
  EXPECT_EQ(f.severity, Severity::kWarning);
  EXPECT_TRUE(f.image.path.empty());
  EXPECT_TRUE(f.other.path.empty());
  EXPECT_TRUE(f.other_file.empty());
  EXPECT_EQ(f.distance, -1);
}

TEST(FindingJson, OddValuesReadAsDefaultsAndNeverThrow) {
  nlohmann::json j = FindingToJson(Pair());
  j["image"] = "a.jpg";     // not an object
  j["other"]["split"] = 3;  // not a string
  j["distance"] = 65;       // past 64 bits of pHash
  j["line"] = "7";          // not a number
  const Finding f = FindingFromJson(j);
  EXPECT_TRUE(f.image.path.empty());
  EXPECT_EQ(f.other.path, "b/c.jpg");
  EXPECT_EQ(f.other.split, Split::kUnassigned);
  EXPECT_EQ(f.distance, -1);
  EXPECT_EQ(f.line, 0);
  for (const nlohmann::json& odd : {nlohmann::json(nullptr), nlohmann::json::array(), nlohmann::json("x"),
                                    nlohmann::json{{"distance", -3}, {"other", nullptr}}}) {
    const Finding g = FindingFromJson(odd);
    EXPECT_EQ(g.distance, -1);
    EXPECT_TRUE(g.check.empty());
  }
}

TEST(FindingList, EscapesTypedPathsLikeTheOtherText) {
  FindingList list;
  Finding f = Pair();
  f.other_file = "/d/images/val/\xff.jpg";
  list.Add(f);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].other_file, "/d/images/val/\\xFF.jpg");
  EXPECT_NO_THROW(FindingToJson(list[0]).dump());
}

TEST(DecodeFailure, EveryRefusalSaysWhyAsAType) {
  const std::string png = Encode(Picture(1, 64), ".png");
  const std::string jpg = Encode(Picture(2, 64), ".jpg");
  std::string zero_wide = png;
  zero_wide.replace(16, 4, std::string(4, '\0'));  // IHDR width 0
  DecodeOptions small;
  small.max_pixels = 1000;
  struct Case {
    std::string name, bytes;
    DecodeOptions opts;
    DecodeFailure want;
    std::string check;
  };
  const std::vector<Case> cases = {
      {"ok", png, {}, DecodeFailure::kNone, "image.decode"},
      {"bomb", png, small, DecodeFailure::kTooLarge, "image.too_large"},
      {"cut jpeg", jpg.substr(0, jpg.size() / 2), {}, DecodeFailure::kTruncated, "image.truncated"},
      {"no frame header", jpg.substr(0, 4), {}, DecodeFailure::kTruncated, "image.truncated"},
      {"cut png", png.substr(0, png.size() - 12), {}, DecodeFailure::kTruncated, "image.truncated"},
      {"zero width", zero_wide, {}, DecodeFailure::kZeroSize, "image.zero_size"},
      {"empty", "", {}, DecodeFailure::kEmpty, "image.empty"},
      {"unknown", "hello world, not an image", {}, DecodeFailure::kUnknownFormat, "image.decode"},
      {"corrupt png",
       png.substr(0, 12) + "XXXX" + png.substr(16),
       {},
       DecodeFailure::kCorrupt,
       "image.decode"},
      // The words of the message do not decide: these name their chunk
      // 'bomb' and 'zero' and are neither a bomb nor zero-sized.
      {"webp chunk bomb", WebpWithChunk("bomb"), {}, DecodeFailure::kUnsupported, "image.decode"},
      {"webp chunk zero", WebpWithChunk("zero"), {}, DecodeFailure::kUnsupported, "image.decode"},
  };
  for (const auto& c : cases) {
    DecodeFailure got = DecodeFailure::kCorrupt;  // must be overwritten, also on success
    auto img = DecodeImage(c.bytes, c.name, c.opts, nullptr, &got);
    EXPECT_EQ(img.IsOk(), c.want == DecodeFailure::kNone) << c.name;
    EXPECT_EQ(got, c.want) << c.name << ": " << img.GetStatus().ToString();
    if (c.want != DecodeFailure::kNone) {
      EXPECT_EQ(DecodeFailureCheck(got), c.check) << c.name;
    }
  }
  // Without the out-parameter it behaves as before.
  EXPECT_FALSE(DecodeImage(jpg.substr(0, 4), "x.jpg").IsOk());
}

class AnalyzeFindingFields : public ScratchDirTest {
 protected:
  void Image(const std::string& split, const std::string& name, const std::string& bytes) {
    Write("images/" + split + "/" + name, bytes);
    const std::string stem = name.substr(0, name.rfind('.'));
    Write("labels/" + split + "/" + stem + ".txt", "0 0.5 0.5 0.25 0.25\n");
  }
  const Finding* Find(const ValidationReport& r, const std::string& check, const std::string& file_end) {
    for (const Finding& f : r.findings) {
      if (f.check == check && f.file.size() >= file_end.size() &&
          f.file.compare(f.file.size() - file_end.size(), file_end.size(), file_end) == 0)
        return &f;
    }
    return nullptr;
  }
};

TEST_F(AnalyzeFindingFields, PairsAndDecodeFailuresAreTyped) {
  for (int i = 0; i < 4; ++i)
    Image("train", "t" + std::to_string(i) + ".jpg", Encode(Picture(10 + i), ".jpg"));
  for (int i = 0; i < 2; ++i) Image("val", "v" + std::to_string(i) + ".jpg", Encode(Picture(20 + i), ".jpg"));
  Image("train", "u/t0_copy.png", Encode(Picture(10), ".png"));  // near duplicate of t0.jpg, same split
  Image("val", "leak.jpg", Encode(Picture(11), ".jpg"));         // t1.jpg again, in val
  const std::string jpg = Encode(Picture(30), ".jpg");
  Image("train", "cut.jpg", jpg.substr(0, jpg.size() / 2));
  Image("train", "chunk.webp", WebpWithChunk("bomb"));
  Image("train", "big.png", Encode(Picture(31, 64), ".png"));
  ImportOptions opts;
  opts.threads = 1;
  opts.max_pixels = 48 * 48;
  auto a = AnalyzeDataset(root_, opts);
  ASSERT_TRUE(a.IsOk()) << a.GetStatus().ToString();
  const ValidationReport& r = a->report;

  const Finding* dup = Find(r, "image.near_duplicate", "t0.jpg");
  ASSERT_NE(dup, nullptr) << r.ToText(50);
  EXPECT_EQ(dup->image, (ImageRef{"t0.jpg", Split::kTrain}));
  EXPECT_EQ(dup->other, (ImageRef{"u/t0_copy.png", Split::kTrain}));
  EXPECT_EQ(dup->other_file, P("images/train/u/t0_copy.png"));
  EXPECT_GE(dup->distance, 0);
  EXPECT_LE(dup->distance, opts.near_dup_distance);

  const Finding* leak = Find(r, "split.leakage", "leak.jpg");
  if (leak == nullptr) leak = Find(r, "split.leakage", "t1.jpg");
  ASSERT_NE(leak, nullptr) << r.ToText(50);
  std::set<std::pair<std::string, Split>> both = {{leak->image.path, leak->image.split},
                                                  {leak->other.path, leak->other.split}};
  EXPECT_EQ(both,
            (std::set<std::pair<std::string, Split>>{{"leak.jpg", Split::kVal}, {"t1.jpg", Split::kTrain}}));
  EXPECT_EQ(leak->distance, 0);

  // Decode failures: the check from the typed cause, the image typed too.
  const Finding* cut = Find(r, "image.truncated", "cut.jpg");
  ASSERT_NE(cut, nullptr) << r.ToText(50);
  EXPECT_EQ(cut->image, (ImageRef{"cut.jpg", Split::kTrain}));
  ASSERT_NE(Find(r, "image.too_large", "big.png"), nullptr) << r.ToText(50);
  ASSERT_NE(Find(r, "image.decode", "chunk.webp"), nullptr) << r.ToText(50);
  EXPECT_EQ(Find(r, "image.too_large", "chunk.webp"), nullptr) << "a chunk named 'bomb' is no bomb";

  // The stored form keeps all of it.
  const nlohmann::json stored = r.ToJson();
  bool saw_pair = false;
  for (const auto& j : stored["findings"]) {
    const Finding f = FindingFromJson(j);
    if (f.check == "image.near_duplicate" && f.image.path == "t0.jpg") {
      saw_pair = true;
      EXPECT_EQ(f.other, dup->other);
      EXPECT_EQ(f.distance, dup->distance);
    }
  }
  EXPECT_TRUE(saw_pair) << stored.dump(1);
}

TEST_F(AnalyzeFindingFields, CocoBoxFindingsNameTheirImage) {
  Write("train/a.jpg", Encode(Picture(40, 32), ".jpg"));
  Write("train/b.jpg", Encode(Picture(41, 32), ".jpg"));
  Write("annotations/instances_train.json",
        R"({"images": [{"id": 1, "file_name": "a.jpg"}, {"id": 2, "file_name": "b.jpg"}],
           "categories": [{"id": 1, "name": "x"}],
           "annotations": [{"id": 1, "image_id": 2, "category_id": 1, "bbox": [20, 20, 20, 5]}]})");
  ImportOptions opts;
  opts.threads = 1;
  auto a = AnalyzeDataset(root_, opts);
  ASSERT_TRUE(a.IsOk()) << a.GetStatus().ToString();
  // No declared size: the importer checks the box against the decoded image,
  // so the finding's file is the annotation file; its image is typed.
  const Finding* oob = Find(a->report, "label.out_of_bounds", "instances_train.json");
  ASSERT_NE(oob, nullptr) << a->report.ToText(50);
  EXPECT_EQ(oob->image, (ImageRef{"b.jpg", Split::kTrain}));
}

}  // namespace
}  // namespace kestrel::data
