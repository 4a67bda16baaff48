// The dataset gallery's routes over real HTTP on loopback (docs/server.md
// "Dataset images"): pages of images with their boxes against the stored
// manifest, split and class filters, bounded limits naming the field, an
// image's bytes only by a SHA of that version (another dataset's image is
// a 404), cache headers and 304, findings with the image they are about,
// read auth; and the finding -> image resolution on a hand-built manifest.
#include "server/api_dataset_images.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "app/dataset_audits.h"
#include "app/datasets.h"
#include "app/tokens.h"
#include "birds_home.h"
#include "core/hash.h"
#include "data/synth.h"
#include "http_client.h"
#include "server/api.h"

namespace kestrel::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::Get;
using testing::HttpReply;

class DatasetImagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::OpenHomeWithBirds("kestrel_dsimg_", 6, &dir_, &home_, &meta_, &blobs_);
    if (HasFatalFailure()) return;
    // A second dataset with other pixels and one out-of-bounds box (a
    // label.out_of_bounds warning in labels/train/synth_00001.txt).
    data::SynthOptions so;
    so.images = 4;
    so.imgsz = 48;
    so.classes = 2;
    so.seed = 7;
    so.write_threads = 1;
    const fs::path fish = dir_ / "fish";
    ASSERT_TRUE(data::WriteSynthDataset(so, fish.string()).IsOk());
    const fs::path label = fish / "labels" / "train" / "synth_00001.txt";
    ASSERT_TRUE(fs::exists(label));
    std::ofstream(label, std::ios::app) << "1 0.95 0.5 0.3 0.2\n";
    auto imported = app::Datasets(*meta_, *blobs_).Import(fish.string(), "fish", {});
    ASSERT_TRUE(imported.IsOk()) << imported.GetStatus().ToString();

    auto birds = app::Datasets(*meta_, *blobs_).Show("birds");
    ASSERT_TRUE(birds.IsOk());
    birds_ = birds->manifest;
    auto f = app::Datasets(*meta_, *blobs_).Show("fish");
    ASSERT_TRUE(f.IsOk());
    fish_ = f->manifest;
    port_ = Start(true);
  }
  void TearDown() override {
    servers_.clear();
    meta_.reset();
    fs::remove_all(dir_);
  }

  int Start(bool public_read) {
    ServerOptions o;
    o.port = 0;
    o.request_timeout_ms = 2000;
    o.public_read = public_read;
    auto srv = ApiServer::Start(home_, o);
    EXPECT_TRUE(srv.IsOk()) << srv.GetStatus().ToString();
    if (!srv.IsOk()) return 0;
    servers_.push_back(std::move(srv).Value());
    return servers_.back()->Port();
  }
  json GetJson(const std::string& target, int status = 200) {
    HttpReply r = Get(port_, target);
    EXPECT_EQ(r.status, status) << target << ": " << r.body;
    auto j = json::parse(r.body, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << target << ": " << r.body;
    return j;
  }
  // A 400 whose error names `field`.
  void ExpectBad(const std::string& target, const std::string& field) {
    json doc = GetJson(target, 400);
    EXPECT_EQ(doc["error"]["code"], "invalid_argument") << target;
    EXPECT_EQ(doc["error"]["field"], field) << target << ": " << doc.dump();
  }

  fs::path dir_;
  std::string home_;
  std::unique_ptr<store::MetadataStore> meta_;
  std::unique_ptr<store::ArtifactStore> blobs_;
  std::vector<std::unique_ptr<ApiServer>> servers_;
  data::Manifest birds_, fish_;
  int port_ = 0;
};

TEST_F(DatasetImagesTest, PagesListTheManifestWithItsBoxes) {
  ASSERT_EQ(birds_.entries.size(), 6u);
  json first = GetJson("/api/datasets/birds/images?limit=4");
  EXPECT_EQ(first["total"], 6);
  EXPECT_EQ(first["names"], json(birds_.names));
  EXPECT_EQ(first["version"]["version"], "v1");
  ASSERT_EQ(first["images"].size(), 4u);
  EXPECT_EQ(first["next_offset"], 4);
  json second = GetJson("/api/datasets/birds@v1/images?limit=4&offset=4");
  ASSERT_EQ(second["images"].size(), 2u);
  EXPECT_TRUE(second["next_offset"].is_null());
  std::vector<json> all;
  for (const auto& im : first["images"]) all.push_back(im);
  for (const auto& im : second["images"]) all.push_back(im);
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& e = birds_.entries[i];
    EXPECT_EQ(all[i], app::DatasetImageJson(e)) << i;
    EXPECT_EQ(all[i]["sha"], e.image_sha);
    EXPECT_EQ(all[i]["width"], 32);
    ASSERT_EQ(all[i]["boxes"].size(), e.boxes.size());
    ASSERT_FALSE(e.boxes.empty());
    EXPECT_DOUBLE_EQ(all[i]["boxes"][0]["cx"].get<double>(), e.boxes[0].cx);
  }
  // The default page holds them all.
  EXPECT_EQ(GetJson("/api/datasets/birds/images")["images"].size(), 6u);
  // Past the end: an empty page, not an error.
  json past = GetJson("/api/datasets/birds/images?offset=100");
  EXPECT_TRUE(past["images"].empty());
  EXPECT_EQ(past["total"], 6);
}

TEST_F(DatasetImagesTest, SplitAndClassFilters) {
  int64_t val = 0;
  for (const auto& e : birds_.entries) val += e.split == data::Split::kVal ? 1 : 0;
  ASSERT_GT(val, 0);
  json v = GetJson("/api/datasets/birds/images?split=val");
  EXPECT_EQ(v["total"], val);
  for (const auto& im : v["images"]) EXPECT_EQ(im["split"], "val");

  for (int cls = 0; cls < 2; ++cls) {
    int64_t want = 0;
    for (const auto& e : birds_.entries) {
      bool has = false;
      for (const auto& b : e.boxes) has = has || b.cls == cls;
      want += has ? 1 : 0;
    }
    json by_name = GetJson("/api/datasets/birds/images?class=" + birds_.names[static_cast<size_t>(cls)]);
    EXPECT_EQ(by_name["total"], want) << cls;
    for (const auto& im : by_name["images"]) {
      bool has = false;
      for (const auto& b : im["boxes"]) has = has || b["cls"] == cls;
      EXPECT_TRUE(has) << im.dump();
    }
    EXPECT_EQ(GetJson("/api/datasets/birds/images?class=" + std::to_string(cls)), by_name);
  }
  json unknown = GetJson("/api/datasets/birds/images?class=dog", 400);
  EXPECT_EQ(unknown["error"]["field"], "class");
  EXPECT_NE(unknown["error"]["message"].get<std::string>().find(birds_.names[0]), std::string::npos)
      << unknown.dump();
  ExpectBad("/api/datasets/birds/images?class=2", "class");
  ExpectBad("/api/datasets/birds/images?split=valid", "split");
}

TEST_F(DatasetImagesTest, BadPagesNameTheField) {
  ExpectBad("/api/datasets/birds/images?limit=0", "limit");
  ExpectBad("/api/datasets/birds/images?limit=201", "limit");
  ExpectBad("/api/datasets/birds/images?limit=abc", "limit");
  ExpectBad("/api/datasets/birds/images?limit=99999999999999999999", "limit");
  ExpectBad("/api/datasets/birds/images?offset=-1", "offset");
  ExpectBad("/api/datasets/birds/findings?limit=501", "limit");
  ExpectBad("/api/datasets/birds/findings?severity=fatal", "severity");
}

// The audit page's routes (api_dataset_audits.h, issue 34): an audit
// stored on fish@v1 as `dataset audit` stores it, listed and paged with
// the version's labels and the audit's predictions of each shown image.
TEST_F(DatasetImagesTest, StoredAuditsAreListedAndPagedWithTheirImagesBoxes) {
  EXPECT_EQ(GetJson("/api/datasets/fish/audits")["audits"].size(), 0u);
  EXPECT_EQ(GetJson("/api/datasets/fish/audits/latest", 404)["error"]["code"], "not_found");
  const data::ManifestEntry& e = fish_.entries[0];
  const std::string split = data::SplitName(e.split);
  auto item = [&](const char* kind, double score, int pred) {
    json it = {{"kind", kind},   {"score", score},   {"image", e.path},
               {"split", split}, {"width", e.width}, {"height", e.height}};
    if (pred >= 0)
      it["prediction"] = {{"index", pred}, {"class", 1}, {"score", 0.8}, {"box", {0, 0, 6, 6 + pred}}};
    return it;
  };
  json items = {item("missing", 0.8, 0), item("spurious", 0.9, -1), item("ok", 0.1, 1)};
  for (size_t i = 0; i < items.size(); ++i) items[i]["rank"] = i + 1;
  const json doc = {{"data", "fish@v1"},
                    {"model", "m.safetensors"},
                    {"images", 1},
                    {"items_total", 3},
                    {"counts", {{"missing", 1}, {"spurious", 1}, {"ok", 1}}},
                    {"items", items}};
  auto version = meta_->GetVersion("fish", "v1");
  ASSERT_TRUE(version.IsOk());
  auto stored = app::RecordAudit(*meta_, *blobs_, *version, doc, "all", 1000);
  ASSERT_TRUE(stored.IsOk()) << stored.GetStatus().ToString();
  EXPECT_EQ(stored->number, 1);
  json list = GetJson("/api/datasets/fish@v1/audits");
  ASSERT_EQ(list["audits"].size(), 1u);
  EXPECT_EQ(list["audits"][0]["model"], "m.safetensors");
  EXPECT_EQ(list["audits"][0]["items"], 3);

  json page = GetJson("/api/datasets/fish/audits/1?sort=-score");
  EXPECT_EQ(page["total"], 2) << "errors: ok left out";
  ASSERT_EQ(page["items"].size(), 2u);
  EXPECT_EQ(page["items"][0]["kind"], "missing");
  const std::string key = split + "/" + e.path;
  EXPECT_EQ(page["items"][0]["image"], key);
  const json& im = page["images"][key];
  EXPECT_EQ(im["sha"], e.image_sha);
  EXPECT_EQ(im["labels"].size(), e.boxes.size());
  EXPECT_EQ(im["predictions"].size(), 2u) << "both predictions of the image, the ok item's too";
  // The image route serves the sha the page names.
  EXPECT_EQ(Get(port_, "/api/datasets/fish/images/" + im["sha"].get<std::string>()).status, 200);
  EXPECT_EQ(GetJson("/api/datasets/fish/audits/latest?kind=ok&limit=1")["items"].size(), 1u);
  ExpectBad("/api/datasets/fish/audits/1?kind=wrong", "kind");
  ExpectBad("/api/datasets/fish/audits/1?sort=size", "sort");
  ExpectBad("/api/datasets/fish/audits/1?limit=501", "limit");
  ExpectBad("/api/datasets/fish/audits/zero", "n");
  EXPECT_EQ(GetJson("/api/datasets/fish/audits/2", 404)["error"]["code"], "not_found");
  EXPECT_EQ(GetJson("/api/datasets/birds/audits/latest", 404)["error"]["code"], "not_found");
}

TEST_F(DatasetImagesTest, UnknownVersionsAndDatasetsAre404) {
  EXPECT_EQ(GetJson("/api/datasets/birds@v9/images", 404)["error"]["code"], "not_found");
  EXPECT_EQ(GetJson("/api/datasets/nope/images", 404)["error"]["code"], "not_found");
  EXPECT_EQ(GetJson("/api/datasets/nope/findings", 404)["error"]["code"], "not_found");
  EXPECT_EQ(GetJson("/api/datasets/birds@v9/images/" + birds_.entries[0].image_sha, 404)["error"]["code"],
            "not_found");
}

TEST_F(DatasetImagesTest, ImageBytesOnlyByAShaOfThatVersion) {
  const std::string sha = birds_.entries[0].image_sha;
  HttpReply r = Get(port_, "/api/datasets/birds/images/" + sha);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers["content-type"], "image/jpeg");
  EXPECT_EQ(Sha256Hex(r.body), sha);
  EXPECT_EQ(r.headers["etag"], "\"" + sha + "\"");
  EXPECT_NE(r.headers["cache-control"].find("immutable"), std::string::npos) << r.headers["cache-control"];
  EXPECT_NE(r.headers["cache-control"].find("private"), std::string::npos) << r.headers["cache-control"];
  EXPECT_EQ(r.headers["x-content-type-options"], "nosniff");
  // The browser's revalidation: same ETag, no body.
  HttpReply again = Get(port_, "/api/datasets/birds/images/" + sha, {"If-None-Match: \"" + sha + "\""});
  EXPECT_EQ(again.status, 304);
  EXPECT_TRUE(again.body.empty());

  // fish's image is in the store, but not in birds: 404, and no bytes.
  const std::string other = fish_.entries[0].image_sha;
  ASSERT_TRUE(blobs_->Has(other));
  json doc = GetJson("/api/datasets/birds/images/" + other, 404);
  EXPECT_EQ(doc["error"]["field"], "sha");
  EXPECT_EQ(Get(port_, "/api/datasets/fish/images/" + other).status, 200);
  // A blob that is not an image of any version (the manifest) is not served either.
  auto show = app::Datasets(*meta_, *blobs_).Show("birds");
  ASSERT_TRUE(show.IsOk());
  GetJson("/api/datasets/birds/images/" + show->record.manifest_sha, 404);

  // Only a SHA, never a path or anything else.
  std::string upper = sha;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  ExpectBad("/api/datasets/birds/images/" + upper, "sha");
  ExpectBad("/api/datasets/birds/images/kestrel.db", "sha");
  ExpectBad("/api/datasets/birds/images/..%2e", "sha");
  for (const char* evil : {"..%2F..%2Fkestrel.db", "%2Fetc%2Fpasswd", "../kestrel.db"}) {
    HttpReply e = Get(port_, std::string("/api/datasets/birds/images/") + evil);
    EXPECT_NE(e.status, 200) << evil;
    EXPECT_EQ(e.body.find("SQLite"), std::string::npos) << evil;
  }
}

TEST_F(DatasetImagesTest, FindingsNameTheirImage) {
  json doc = GetJson("/api/datasets/fish/findings");
  ASSERT_TRUE(doc["findings"].is_array());
  EXPECT_NE(std::find(doc["checks"].begin(), doc["checks"].end(), "label.out_of_bounds"), doc["checks"].end())
      << doc["checks"].dump();
  json oob = GetJson("/api/datasets/fish/findings?check=label.out_of_bounds");
  ASSERT_EQ(oob["total"], 1) << oob.dump();
  const json& f = oob["findings"][0];
  EXPECT_EQ(f["severity"], "warning");
  EXPECT_NE(f["file"].get<std::string>().find("synth_00001.txt"), std::string::npos) << f.dump();
  ASSERT_TRUE(f["image"].is_object()) << f.dump();
  EXPECT_EQ(f["image"]["path"], "synth_00001.jpg");
  EXPECT_EQ(f["image"]["split"], "train");
  // The clipped box is among the image's boxes; the image route serves it.
  EXPECT_GE(f["image"]["boxes"].size(), 2u);
  EXPECT_EQ(Get(port_, "/api/datasets/fish/images/" + f["image"]["sha"].get<std::string>()).status, 200);

  json warnings = GetJson("/api/datasets/fish/findings?severity=warning");
  EXPECT_GE(warnings["total"], 1);
  for (const auto& w : warnings["findings"]) EXPECT_EQ(w["severity"], "warning");
  json none = GetJson("/api/datasets/fish/findings?severity=error");
  EXPECT_EQ(none["total"], 0);
  EXPECT_TRUE(none["findings"].empty());
  json paged = GetJson("/api/datasets/fish/findings?limit=1");
  EXPECT_EQ(paged["findings"].size(), 1u);
  EXPECT_EQ(paged["next_offset"].is_null(), paged["total"] == 1);
}

TEST_F(DatasetImagesTest, ReadsNeedATokenWithoutPublicRead) {
  auto tok = app::CreateToken(*meta_, "reader", true, 1000);
  ASSERT_TRUE(tok.IsOk()) << tok.GetStatus().ToString();
  const int port = Start(false);
  const std::string sha = birds_.entries[0].image_sha;
  for (const std::string& target :
       std::vector<std::string>{"/api/datasets/birds/images", "/api/datasets/birds/images/" + sha,
                                "/api/datasets/birds/findings"}) {
    HttpReply no = Get(port, target);
    EXPECT_EQ(no.status, 401) << target;
    EXPECT_EQ(no.body.find("\xFF\xD8"), std::string::npos) << target << ": no image bytes without a token";
    EXPECT_EQ(Get(port, target, {"Authorization: Bearer " + tok->token}).status, 200) << target;
  }
}

TEST_F(DatasetImagesTest, OpenApiListsTheRoutes) {
  json doc = GetJson("/api/openapi.json");
  for (const char* p : {"/api/datasets/{name}/images", "/api/datasets/{name}/images/{sha}",
                        "/api/datasets/{name}/findings"}) {
    ASSERT_TRUE(doc["paths"].contains(p)) << p;
    EXPECT_FALSE(doc["paths"][p]["get"]["security"].empty()) << p << " is a read route";
  }
}

data::ManifestEntry Entry(const std::string& path, data::Split split) {
  data::ManifestEntry e;
  e.path = path;
  e.split = split;
  e.image_sha = std::string(64, 'a');
  return e;
}

// A finding with only a file (the reader's label findings, reports stored
// before findings had an image) and a message.
data::Finding ByFile(const std::string& file, const std::string& message = "") {
  data::Finding f;
  f.file = file;
  f.message = message;
  return f;
}

TEST(ResolveFindingImage, TypedImageElseFileNeverTheMessage) {
  data::Manifest m;
  m.entries = {Entry("a.jpg", data::Split::kTrain), Entry("a.jpg", data::Split::kVal),
               Entry("sub/b.png", data::Split::kTrain), Entry("c.d.jpg", data::Split::kVal)};
  // An image path: the entry of the split folder it is in.
  EXPECT_EQ(app::ResolveFindingImage(m, ByFile("/data/images/val/a.jpg")), 1);
  EXPECT_EQ(app::ResolveFindingImage(m, ByFile("/data/images/train/a.jpg")), 0);
  EXPECT_EQ(app::ResolveFindingImage(m, ByFile("/data/images/sub/b.png")), 2);
  // A YOLO or VOC label file: same stem.
  EXPECT_EQ(app::ResolveFindingImage(m, ByFile("/data/labels/train/sub/b.txt")), 2);
  EXPECT_EQ(app::ResolveFindingImage(m, ByFile("/data/labels/val/c.d.txt")), 3);
  EXPECT_EQ(app::ResolveFindingImage(m, ByFile("/data/Annotations/a.xml")), 0);
  // COCO's one annotation file: the typed image (path and split), whatever
  // the file and the message say.
  data::Finding coco = ByFile("/data/annotations/instances_val.json", "box of c.d.jpg extends outside");
  coco.image = {"sub/b.png", data::Split::kTrain};
  EXPECT_EQ(app::ResolveFindingImage(m, coco), 2);
  coco.image = {"a.jpg", data::Split::kVal};
  EXPECT_EQ(app::ResolveFindingImage(m, coco), 1);
  coco.image = {"a.jpg", data::Split::kUnassigned};  // split assigned after the finding: the first
  EXPECT_EQ(app::ResolveFindingImage(m, coco), 0);
  coco.image = {"gone.jpg", data::Split::kTrain};  // an excluded image is in no entry
  EXPECT_EQ(app::ResolveFindingImage(m, coco), -1);
  // Without a typed image, a path in the message names nothing (it used to).
  EXPECT_EQ(app::ResolveFindingImage(m, ByFile("/data/annotations/instances_val.json",
                                               "box of sub/b.png extends outside the image")),
            -1);
  EXPECT_EQ(app::ResolveFindingImage(m, ByFile("/data/x/instances.json", "image 'c.d.jpg': truncated")), -1);
  // Nothing to name: dataset-wide findings, other files.
  EXPECT_EQ(app::ResolveFindingImage(m, ByFile("", "20% of the images were assigned to val")), -1);
  EXPECT_EQ(app::ResolveFindingImage(m, ByFile("/data/images/train/zz.jpg", "unreadable")), -1);
  EXPECT_EQ(app::ResolveFindingImage(m, ByFile("/data/bsub/b.png")), -1) << "suffixes end at a '/'";
}

TEST(ImageContentType, FromTheSignature) {
  EXPECT_EQ(app::ImageContentType("\xFF\xD8\xFF\xE0rest"), "image/jpeg");
  EXPECT_EQ(app::ImageContentType("\x89PNG\r\n\x1A\n...."), "image/png");
  EXPECT_EQ(app::ImageContentType("GIF89a.."), "image/gif");
  EXPECT_EQ(app::ImageContentType("BM......"), "image/bmp");
  EXPECT_EQ(app::ImageContentType(std::string("RIFF\x10\0\0\0WEBPVP8 ", 16)), "image/webp");
  EXPECT_EQ(app::ImageContentType(std::string("II*\0\x08\0\0\0", 8)), "image/tiff");
  EXPECT_EQ(app::ImageContentType("<html>"), "application/octet-stream");
  EXPECT_EQ(app::ImageContentType(""), "application/octet-stream");
}

}  // namespace
}  // namespace kestrel::server
