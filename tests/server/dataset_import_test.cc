// POST /api/datasets/import over real HTTP on loopback (docs/server.md
// "Data roots"): an in-process ApiServer on port 0 with `--data-root`
// folders over a temporary SQLite home. A synthetic dataset imported by root
// name, relative to the only root and by an absolute path shows up in GET
// /api/datasets; traversal (`..`, absolute paths elsewhere, percent escapes,
// NUL, a symlinked folder or image leading out of the root) is refused with
// nothing stored; no data root and a read-only token are refused; options
// are checked as on the command line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/env.h"
#include "data/synth.h"
#include "http_client.h"
#include "server/api.h"
#include "server/data_roots.h"
#include "write_route_test.h"

namespace kestrel::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HttpReply;

class DatasetImportTest : public testing::WriteRouteTest {
 protected:
  void SetUp() override {
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::temp_directory_path() / ("kestrel_server_import_" + std::to_string(::getpid()) + "_" + name);
    fs::remove_all(dir_);
    home_ = (dir_ / "home").string();
    root_ = dir_ / "lake";
    fs::create_directories(home_);
    fs::create_directories(root_);
    auto m = store::MetadataStore::Open(store::MetadataUrl(home_));
    ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
    meta_ = std::move(m).Value();
    Synth(root_ / "birds");
    Synth(dir_ / "outside");
    CreateTokens();
  }

  static void Synth(const fs::path& out) {
    data::SynthOptions so;
    so.images = 4;
    so.imgsz = 32;
    so.classes = 2;
    so.write_threads = 1;
    ASSERT_TRUE(data::WriteSynthDataset(so, out.string()).IsOk());
  }
  int Start(const std::vector<std::string>& roots) {
    ServerOptions o;
    o.data_roots = roots;
    return StartServer(o);
  }
  HttpReply Post(int port, const json& body, const std::string& token) {
    const std::string text = body.dump();
    return testing::SendRaw(port,
                            "POST /api/datasets/import HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: "
                            "close\r\nAuthorization: Bearer " +
                                token + "\r\nContent-Type: application/json\r\nContent-Length: " +
                                std::to_string(text.size()) + "\r\n\r\n" + text,
                            30000);
  }
  json Doc(const HttpReply& r, int status, const std::string& what) {
    EXPECT_EQ(r.status, status) << what << ": " << r.body;
    auto j = json::parse(r.body, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << what << ": " << r.body;
    return j;
  }
  size_t Stored() {
    auto all = meta_->ListDatasets();
    EXPECT_TRUE(all.IsOk());
    return all.IsOk() ? all->size() : 0;
  }

  fs::path root_;
};

TEST_F(DatasetImportTest, ImportsUnderARootAndListsIt) {
  const int port = Start({root_.string(), (dir_ / "home").string()});
  json doc = Doc(Post(port, {{"path", "lake/birds"}, {"name", "birds"}, {"seed", 3}}, write_), 201, "import");
  EXPECT_EQ(doc["ok"], true);
  EXPECT_EQ(doc["created"], true);
  EXPECT_EQ(doc["version"]["dataset"], "birds");
  EXPECT_EQ(doc["version"]["num_images"], 4);
  EXPECT_EQ(doc["version"]["source"], "yolo:" + fs::canonical(root_ / "birds").string());
  // Identical content again, by an absolute path inside the root: 200, not a new version.
  doc = Doc(Post(port, {{"path", (root_ / "birds").string()}, {"name", "birds"}, {"seed", 3}}, write_), 200,
            "again");
  EXPECT_EQ(doc["created"], false);
  EXPECT_EQ(doc["version"]["version"], "v1");
  HttpReply list = testing::Get(port, "/api/datasets", {"Authorization: Bearer " + read_});
  json all = Doc(list, 200, "list");
  ASSERT_EQ(all["datasets"].size(), 1u);
  EXPECT_EQ(all["datasets"][0]["dataset"], "birds");
  // With two roots a path must name its root.
  doc = Doc(Post(port, {{"path", "birds"}, {"name", "birds"}}, write_), 400, "no root name");
  EXPECT_EQ(doc["error"]["field"], "path");
  EXPECT_NE(doc["error"]["message"].get<std::string>().find("lake, home"), std::string::npos);
}

TEST_F(DatasetImportTest, APathRelativeToTheOnlyRootAndItsOptions) {
  const int port = Start({root_.string()});
  json doc = Doc(Post(port, {{"path", "birds/data.yaml"}, {"name", "birds"}, {"val_ratio", 0.5}}, write_),
                 201, "import data.yaml");
  EXPECT_EQ(doc["version"]["dataset"], "birds");
  doc = Doc(Post(port, {{"path", "birds"}, {"name", "birds2"}, {"val_ratio", 2}}, write_), 400, "val_ratio");
  EXPECT_EQ(doc["error"]["field"], "val_ratio");
  EXPECT_EQ(doc["error"]["file"], "request");
  doc = Doc(Post(port, {{"path", "birds"}, {"name", "birds2"}, {"colour", "red"}}, write_), 400, "unknown");
  EXPECT_EQ(doc["error"]["field"], "colour");
  doc = Doc(Post(port, {{"path", "birds"}}, write_), 400, "no name");
  EXPECT_EQ(doc["error"]["field"], "name");
  doc = Doc(Post(port, {{"path", "nothing-here"}, {"name", "birds2"}}, write_), 404, "missing folder");
  EXPECT_EQ(doc["error"]["file"], (fs::canonical(root_) / "nothing-here").string());
  EXPECT_EQ(Stored(), 1u);
}

TEST_F(DatasetImportTest, TraversalIsRefusedAndNothingIsStored) {
  // A folder symlinked out of the root, and a dataset inside the root whose
  // one image is a symlink to a file outside it.
  fs::create_directory_symlink(dir_ / "outside", root_ / "link");
  fs::create_directories(root_ / "mixed");
  fs::copy(root_ / "birds", root_ / "mixed", fs::copy_options::recursive);
  const fs::path victim = *fs::directory_iterator(root_ / "mixed" / "images" / "train");
  fs::remove(victim);
  fs::create_symlink(dir_ / "outside" / "images" / "train" / victim.filename(), victim);
  const int port = Start({root_.string()});
  const std::string outside = (dir_ / "outside").string();
  const std::vector<std::string> paths = {"../outside",
                                          "lake/../outside",
                                          "birds/../../outside",
                                          "/etc",
                                          outside,
                                          "%2e%2e/outside",
                                          "lake/%2E%2e/outside",
                                          "birds%2f..%2f..%2foutside",
                                          "link",
                                          "lake/link/data.yaml",
                                          "mixed",
                                          std::string("birds\0/x", 8),
                                          ""};
  for (const std::string& path : paths) {
    json doc = Doc(Post(port, {{"path", path}, {"name", "evil"}, {"allow_errors", true}}, write_), 400, path);
    EXPECT_EQ(doc["ok"], false) << path;
    EXPECT_EQ(doc["error"]["code"], "invalid_argument") << path;
    EXPECT_EQ(doc["error"]["field"], "path") << path;
    if (path == "link" || path == "lake/link/data.yaml" || path == "mixed") {
      EXPECT_NE(doc["error"]["message"].get<std::string>().find("symlink"), std::string::npos) << path;
    }
  }
  EXPECT_EQ(Stored(), 0u);
}

TEST_F(DatasetImportTest, RefusedWithoutADataRootOrWithAReadOnlyToken) {
  int port = Start({});
  json doc = Doc(Post(port, {{"path", "birds"}, {"name", "birds"}}, write_), 403, "no root");
  EXPECT_EQ(doc["error"]["code"], "permission_denied");
  EXPECT_NE(doc["error"]["message"].get<std::string>().find("--data-root"), std::string::npos);
  port = Start({root_.string()});
  doc = Doc(Post(port, {{"path", "birds"}, {"name", "birds"}}, read_), 403, "read-only");
  EXPECT_EQ(doc["error"]["field"], "Authorization");
  EXPECT_EQ(Stored(), 0u);
  ServerOptions o;
  o.port = 0;
  o.data_roots = {(dir_ / "no-such-folder").string()};
  auto bad = ApiServer::Start(home_, o);
  ASSERT_FALSE(bad.IsOk());
  EXPECT_EQ(bad.GetStatus().Where().field, "data-root");
}

TEST(ConfinedEnvTest, ReadsOnlyInsideTheRootsAndTheHome) {
  const fs::path dir = fs::temp_directory_path() / ("kestrel_confined_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "root");
  fs::create_directories(dir / "home");
  std::ofstream(dir / "root" / "a.txt") << "a";
  std::ofstream(dir / "home" / "h.txt") << "h";
  std::ofstream(dir / "secret.txt") << "s";
  fs::create_symlink(dir / "secret.txt", dir / "root" / "s.txt");
  auto roots = DataRoots::Open({(dir / "root").string()});
  ASSERT_TRUE(roots.IsOk()) << roots.GetStatus().ToString();
  ConfinedEnv env(Env::Default(), *roots, (dir / "home").string());
  EXPECT_EQ(*env.ReadFile((dir / "root" / "a.txt").string(), 100), "a");
  EXPECT_EQ(*env.ReadFile((dir / "home" / "h.txt").string(), 100), "h");
  EXPECT_FALSE(env.ReadFile((dir / "secret.txt").string(), 100).IsOk());
  auto via_link = env.ReadFile((dir / "root" / "s.txt").string(), 100);
  ASSERT_FALSE(via_link.IsOk());
  EXPECT_EQ(via_link.GetStatus().Where().field, "path");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kestrel::server
