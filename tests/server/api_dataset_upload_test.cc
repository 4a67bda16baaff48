// POST /api/datasets/upload over real HTTP on loopback (docs/server.md
// "Uploads"), with zips built here by libarchive's writer: a zip of a
// dataset folder imports to the version a path import of that folder gets;
// the size limit answers 413 (from Content-Length, before a byte is stored);
// entries with '..', absolute paths and symlinks are 400 with
// nothing written outside; a zip bomb (expanding past 4x the limit) is 413;
// no token 401, a read-only token 403 (before the body is read); a wrong
// Content-Type 415; the unpacked folder and the body's file are gone after
// every request; device and socket entries and a bomb whose headers claim
// a small size, in zips written byte by byte (zip_bytes.h), are refused
// too. ExtractZip's entry cap and its FIFO entries (plain files) directly.
#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "app/datasets.h"
#include "birds_home.h"
#include "http_client.h"
#include "server/api.h"
#include "server/upload_archive.h"
#include "write_route_test.h"
#include "zip_bytes.h"

namespace kestrel::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HttpReply;

struct ZipEntry {
  std::string name;
  std::string data;
  unsigned type = AE_IFREG;
  std::string link;  // symlink target (AE_IFLNK)
};

// The zip of `entries`, as bytes.
std::string MakeZip(const std::vector<ZipEntry>& entries) {
  struct archive* a = archive_write_new();
  archive_write_set_format_zip(a);
  std::vector<char> buf(size_t{8} << 20);  // the zips here are at most a few hundred KB
  size_t used = 0;
  EXPECT_EQ(archive_write_open_memory(a, buf.data(), buf.size(), &used), ARCHIVE_OK);
  for (const auto& z : entries) {
    struct archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, z.name.c_str());
    archive_entry_set_filetype(e, z.type);
    archive_entry_set_perm(e, z.type == AE_IFDIR ? 0755 : 0644);
    if (z.type == AE_IFLNK) archive_entry_set_symlink(e, z.link.c_str());
    if (z.type == AE_IFREG) archive_entry_set_size(e, static_cast<la_int64_t>(z.data.size()));
    EXPECT_EQ(archive_write_header(a, e), ARCHIVE_OK) << z.name << ": " << archive_error_string(a);
    if (!z.data.empty()) archive_write_data(a, z.data.data(), z.data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return std::string(buf.data(), used);
}

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every file of `dir`, named "<prefix>/<relative path>".
std::vector<ZipEntry> FolderEntries(const fs::path& dir, const std::string& prefix) {
  std::vector<ZipEntry> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    out.push_back({prefix + "/" + fs::relative(e.path(), dir).string(), ReadAll(e.path())});
  }
  return out;
}

class DatasetUploadTest : public testing::WriteRouteTest {
 protected:
  void SetUp() override {
    testing::OpenHomeWithBirds("kestrel_dsup_", 6, &dir_, &home_, &meta_, &blobs_);
    if (HasFatalFailure()) return;
    CreateTokens();
  }
  int Start(int64_t limit = int64_t{512} << 20) {
    ServerOptions o;
    o.upload_limit_bytes = limit;
    return StartServer(o);
  }
  static HttpReply Upload(int port, const std::string& query, const std::string& zip,
                          const std::string& token, const std::string& type = "application/zip") {
    return testing::SendRaw(
        port, "POST /api/datasets/upload?" + query + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" +
                  (token.empty() ? "" : "Authorization: Bearer " + token + "\r\n") + "Content-Type: " + type +
                  "\r\nContent-Length: " + std::to_string(zip.size()) + "\r\n\r\n" + zip);
  }
  // Nothing of any request is left in the uploads folder.
  void ExpectNoUploadLeft() {
    const fs::path up = fs::path(home_) / "uploads";
    if (!fs::exists(up)) return;
    for (const auto& e : fs::directory_iterator(up)) ADD_FAILURE() << "left behind: " << e.path();
  }
  static json Parse(const HttpReply& r) {
    auto j = json::parse(r.body, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.body;
    return j;
  }
};

TEST_F(DatasetUploadTest, ZipImportsAsThePathImportDoes) {
  const int port = Start();
  const std::string zip = MakeZip(FolderEntries(dir_ / "synth", "birds"));
  HttpReply r = Upload(port, "name=uploaded&filename=birds.zip", zip, write_);
  ASSERT_EQ(r.status, 201) << r.body;
  json doc = Parse(r);
  EXPECT_EQ(doc["ok"], true);
  EXPECT_EQ(doc["created"], true);
  auto path_import = app::Datasets(*meta_, *blobs_).Show("birds");  // the same folder, by path
  ASSERT_TRUE(path_import.IsOk());
  EXPECT_EQ(doc["version"]["dataset"], "uploaded");
  EXPECT_EQ(doc["version"]["version_id"], path_import->record.version_id);
  EXPECT_EQ(doc["version"]["num_images"], path_import->record.num_images);
  EXPECT_EQ(doc["version"]["num_boxes"], path_import->record.num_boxes);
  EXPECT_EQ(doc["report"]["images_total"], 6);
  EXPECT_EQ(doc["version"]["source"], "yolo:upload:birds.zip");  // not the removed temporary folder
  // Again: the same content is already the dataset's (200), as for a path.
  HttpReply again = Upload(port, "name=uploaded&val_ratio=0.2", zip, write_);
  EXPECT_EQ(again.status, 200) << again.body;
  // An option the importer does not know names itself, as on the command line.
  HttpReply bad = Upload(port, "name=uploaded&val_ratoi=0.2", zip, write_);
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(Parse(bad)["error"]["field"], "val_ratoi");
  // The unpacked folder is removed after the request: a version referencing
  // its files would name nothing (data_mode=reference, issue 28).
  HttpReply ref = Upload(port, "name=referenced&data_mode=reference", zip, write_);
  EXPECT_EQ(ref.status, 400) << ref.body;
  EXPECT_EQ(Parse(ref)["error"]["field"], "data_mode");
  EXPECT_FALSE(meta_->GetVersion("referenced", "").IsOk());
  ExpectNoUploadLeft();
}

// A zip with a bad label line: the finding, in the answer and in the
// stored report, names the file under the upload's label, never the
// unpacked folder that is removed when the request ends.
TEST_F(DatasetUploadTest, FindingsNameTheUploadNotItsTemporaryFolder) {
  const int port = Start();
  std::vector<ZipEntry> entries = FolderEntries(dir_ / "synth", "birds");
  std::string bad_label;
  for (auto& e : entries) {
    if (e.name.find("/labels/") == std::string::npos || e.name.size() < 4 ||
        e.name.compare(e.name.size() - 4, 4, ".txt") != 0)
      continue;
    e.data += "99 0.5 0.5 0.1 0.1\n";  // a class the dataset does not have
    bad_label = e.name.substr(std::string("birds/").size());
    break;
  }
  ASSERT_FALSE(bad_label.empty());
  HttpReply r = Upload(port, "name=flawed&filename=flawed.zip&allow_errors=true", MakeZip(entries), write_);
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string uploads = (fs::path(home_) / "uploads").string();
  EXPECT_EQ(r.body.find(uploads), std::string::npos) << r.body;
  bool named = false;
  const json doc = Parse(r);
  for (const auto& f : doc["report"]["findings"]) {
    if (f["file"] == "upload:flawed.zip/" + bad_label) named = true;
  }
  EXPECT_TRUE(named) << r.body;
  auto shown = app::Datasets(*meta_, *blobs_).Show("flawed");
  ASSERT_TRUE(shown.IsOk()) << shown.GetStatus().ToString();
  const std::string stored = shown->report.dump() + shown->record.summary_json;
  EXPECT_EQ(stored.find(uploads), std::string::npos) << stored;
  EXPECT_NE(stored.find("upload:flawed.zip/" + bad_label), std::string::npos) << stored;
  ExpectNoUploadLeft();
}

TEST_F(DatasetUploadTest, OverTheLimitIs413AndNothingIsStored) {
  const std::string zip = MakeZip(FolderEntries(dir_ / "synth", "birds"));
  const int port = Start(static_cast<int64_t>(zip.size()) - 1);
  HttpReply r = Upload(port, "name=big", zip, write_);
  EXPECT_EQ(r.status, 413) << r.body;
  EXPECT_EQ(Parse(r)["error"]["code"], "body_too_large");
  EXPECT_FALSE(app::Datasets(*meta_, *blobs_).Show("big").IsOk());
  // A zip bomb: 4 MB of zeros is a few KB zipped, past 4x a 512 KB limit.
  const int small = Start(512 * 1024);
  HttpReply bomb =
      Upload(small, "name=bomb", MakeZip({{"zeros.bin", std::string(size_t{4} << 20, '\0')}}), write_);
  EXPECT_EQ(bomb.status, 413) << bomb.body;
  EXPECT_EQ(Parse(bomb)["error"]["field"], "body");
  ExpectNoUploadLeft();
}

TEST_F(DatasetUploadTest, EntriesThatLeaveTheFolderAreRefused) {
  const int port = Start();
  auto entries = FolderEntries(dir_ / "synth", "birds");
  const std::vector<std::pair<ZipEntry, std::string>> evil{
      {{"birds/../../../evil.txt", "x"}, "'..'"},
      {{"/tmp/kestrel_evil_abs.txt", "x"}, "absolute"},
      {{"birds/images/train/link.jpg", "", AE_IFLNK, "/etc/passwd"}, "symlink"},
  };
  for (const auto& [entry, why] : evil) {
    auto with = entries;
    with.push_back(entry);
    HttpReply r = Upload(port, "name=evil", MakeZip(with), write_);
    EXPECT_EQ(r.status, 400) << entry.name << ": " << r.body;
    json doc = Parse(r);
    EXPECT_EQ(doc["error"]["field"], "body") << r.body;
    EXPECT_NE(doc["error"]["message"].get<std::string>().find(why), std::string::npos) << r.body;
  }
  EXPECT_FALSE(fs::exists("/tmp/kestrel_evil_abs.txt"));
  EXPECT_FALSE(fs::exists(fs::path(home_) / "evil.txt"));
  EXPECT_FALSE(fs::exists(dir_ / "evil.txt"));
  EXPECT_FALSE(app::Datasets(*meta_, *blobs_).Show("evil").IsOk());
  // Not a zip at all.
  HttpReply junk = Upload(port, "name=evil", "this is not a zip", write_);
  EXPECT_EQ(junk.status, 400) << junk.body;
  ExpectNoUploadLeft();
}

// Entries libarchive's zip writer will not make, written byte by byte
// (zip_bytes.h: the type is the st_mode in the central directory, made by
// Unix): character and block devices, a socket and a type no file system
// has are each a 400 naming the entry as the upload's findings name files
// (upload:FILE/ENTRY), with no dataset stored and nothing left in the
// uploads folder. The same zip without the odd entry imports, so the
// refusals are the types', not the byte builder's. A FIFO entry is
// ExtractZipTest.FifoEntryIsUnpackedAsAPlainFile; no hardlink case: a zip
// cannot carry one (upload_archive.h says why).
TEST_F(DatasetUploadTest, DeviceAndSocketEntriesAreRefusedByName) {
  const int port = Start();
  std::vector<kestrel::testing::RawZipEntry> base;
  for (auto& e : FolderEntries(dir_ / "synth", "birds")) base.push_back({e.name, e.data});
  const std::vector<std::pair<uint32_t, std::string>> kinds{
      {S_IFCHR | 0644, "is a character device"},
      {S_IFBLK | 0644, "is a block device"},
      {S_IFSOCK | 0644, "is a socket"},
      {S_IFMT | 0644, "is not a file or a folder (file type 170000)"},
  };
  for (const auto& [mode, why] : kinds) {
    auto with = base;
    with.push_back({"birds/images/train/odd.jpg", "", mode});
    HttpReply r = Upload(port, "name=odd&filename=odd.zip", kestrel::testing::RawZip(with), write_);
    EXPECT_EQ(r.status, 400) << why << ": " << r.body;
    const json doc = Parse(r);
    EXPECT_EQ(doc["error"]["field"], "body") << why << ": " << r.body;
    const std::string message =
        doc["error"]["message"].is_string() ? doc["error"]["message"].get<std::string>() : "";
    EXPECT_NE(message.find("'upload:odd.zip/birds/images/train/odd.jpg' " + why), std::string::npos)
        << why << ": " << r.body;
  }
  EXPECT_FALSE(app::Datasets(*meta_, *blobs_).Show("odd").IsOk());
  ExpectNoUploadLeft();
  HttpReply plain = Upload(port, "name=plain", kestrel::testing::RawZip(base), write_);
  EXPECT_EQ(plain.status, 201) << plain.body;
  ExpectNoUploadLeft();
}

// A zip bomb whose headers lie: 4 MiB of zeros deflated, claiming 100
// bytes. The expanded-size cap (4x a 512 KiB limit) counts inflated bytes,
// so it stops the entry at 2 MiB: 413, nothing stored or left.
TEST_F(DatasetUploadTest, BombThatClaimsASmallSizeStopsAtTheExpandedCap) {
  const int port = Start(512 * 1024);
  const std::string zip =
      kestrel::testing::RawZip({{"zeros.bin", std::string(size_t{4} << 20, '\0'), S_IFREG | 0644,
                                 /*deflate=*/true, /*declared_size=*/100}});
  ASSERT_LT(zip.size(), size_t{64} << 10);  // a few KB on the wire
  HttpReply r = Upload(port, "name=liar", zip, write_);
  EXPECT_EQ(r.status, 413) << r.body;
  const json doc = Parse(r);
  EXPECT_EQ(doc["error"]["field"], "body") << r.body;
  EXPECT_NE(r.body.find("expands to more than 2097152 bytes"), std::string::npos) << r.body;
  EXPECT_FALSE(app::Datasets(*meta_, *blobs_).Show("liar").IsOk());
  ExpectNoUploadLeft();
}

TEST_F(DatasetUploadTest, WritesNeedAWriteTokenAndAZip) {
  const int port = Start();
  const std::string zip = MakeZip(FolderEntries(dir_ / "synth", "birds"));
  EXPECT_EQ(Upload(port, "name=x", zip, "").status, 401);
  EXPECT_EQ(Upload(port, "name=x", zip, read_).status, 403);
  HttpReply type = Upload(port, "name=x", zip, write_, "application/json");
  EXPECT_EQ(type.status, 415) << type.body;
  HttpReply noname = Upload(port, "", zip, write_);
  EXPECT_EQ(noname.status, 400) << noname.body;
  EXPECT_EQ(Parse(noname)["error"]["field"], "name");
  EXPECT_FALSE(app::Datasets(*meta_, *blobs_).Show("x").IsOk());
  ExpectNoUploadLeft();
}

TEST(ExtractZipTest, EntryCapAndDuplicates) {
  const fs::path dir = fs::temp_directory_path() / ("kestrel_extract_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "out");
  std::ofstream(dir / "a.zip", std::ios::binary) << MakeZip({{"a", "1"}, {"b", "2"}, {"c", "3"}});
  ExtractLimits limits;
  limits.max_entries = 2;
  Status s = ExtractZip((dir / "a.zip").string(), (dir / "out").string(), limits);
  EXPECT_EQ(s.Code(), StatusCode::kResourceExhausted) << s.ToString();
  fs::remove_all(dir / "out");
  fs::create_directories(dir / "out");
  std::ofstream(dir / "b.zip", std::ios::binary) << MakeZip({{"d/a", "1"}, {"d/./a", "2"}});
  s = ExtractZip((dir / "b.zip").string(), (dir / "out").string(), {});
  EXPECT_EQ(s.Code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.Message().find("twice"), std::string::npos) << s.ToString();
  fs::remove_all(dir);
}

// libarchive's zip reader reads a FIFO mode as a regular file (Info-ZIP's
// `zip -FI` stores what came through a pipe with the pipe's own mode), so a
// FIFO entry is unpacked as a plain file holding its bytes: no FIFO is
// ever made in the folder.
TEST(ExtractZipTest, FifoEntryIsUnpackedAsAPlainFile) {
  const fs::path dir = fs::temp_directory_path() / ("kestrel_extract_fifo_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "out");
  std::ofstream(dir / "f.zip", std::ios::binary)
      << kestrel::testing::RawZip({{"d/pipe", "piped", S_IFIFO | 0644}});
  Status s = ExtractZip((dir / "f.zip").string(), (dir / "out").string(), {});
  EXPECT_TRUE(s.IsOk()) << s.ToString();
  EXPECT_EQ(fs::status(dir / "out" / "d" / "pipe").type(), fs::file_type::regular);
  EXPECT_EQ(ReadAll(dir / "out" / "d" / "pipe"), "piped");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kestrel::server
