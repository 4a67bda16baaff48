// Job keys that name files, submitted over real HTTP on loopback
// (docs/server.md "Job keys that name files", issue 26 item 6): an
// in-process ApiServer on port 0 with one --data-root folder over a
// temporary SQLite home holding the dataset "birds" and the registered model
// "birds". pretrained= (and train model=X.pt, val model=, export model=)
// may name a registered model, a file under the data root or under the
// home; /etc/passwd, a missing path, ".." out of the root, a symlink out of
// the root, a relative path that is no root's and a folder all get the same
// message, with nothing stored; no file byte is echoed as a number.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "app/jobs.h"
#include "app/models.h"
#include "app/tokens.h"
#include "birds_home.h"
#include "core/env.h"
#include "core/safetensors.h"
#include "http_client.h"
#include "server/api.h"
#include "server/job_paths.h"

namespace kestrel::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HttpReply;

class JobKeyPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::OpenHomeWithBirds("kestrel_server_job_paths_", 4, &dir_, &home_, &meta_, &blobs_);
    if (HasFatalFailure()) return;
    root_ = dir_ / "lake";
    fs::create_directories(root_ / "models");
    std::ofstream(root_ / "models" / "w.safetensors", std::ios::binary) << testing::TinyWeightsBytes();
    // Valid weights outside the root, reachable only by ".." or a symlink.
    std::ofstream(dir_ / "outside.safetensors", std::ios::binary) << testing::TinyWeightsBytes();
    fs::create_symlink(dir_ / "outside.safetensors", root_ / "models" / "link.safetensors");
    // A file under the home (a job's weights).
    fs::create_directories(fs::path(home_) / "jobs" / "7");
    std::ofstream(fs::path(home_) / "jobs" / "7" / "best.safetensors", std::ios::binary)
        << testing::TinyWeightsBytes();

    store::ModelRecord model;
    testing::RegisterBirdsModel(*meta_, *blobs_, dir_, 2000, &model);
    if (HasFatalFailure()) return;
    blob_path_ = blobs_->PathFor(model.weights_sha);

    auto w = app::CreateToken(*meta_, "writer", false, 1000);
    ASSERT_TRUE(w.IsOk());
    token_ = w->token;
    ServerOptions o;
    o.port = 0;
    o.request_timeout_ms = 5000;
    o.data_roots = {root_.string()};
    auto srv = ApiServer::Start(home_, o);
    ASSERT_TRUE(srv.IsOk()) << srv.GetStatus().ToString();
    server_ = std::move(srv).Value();
  }
  void TearDown() override {
    server_.reset();
    meta_.reset();
    blobs_.reset();
    fs::remove_all(dir_);
  }

  HttpReply Submit(const json& keys) {
    const std::string body = json({{"keys", keys}}).dump();
    return testing::SendRaw(server_->Port(),
                            "POST /api/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                            "Authorization: Bearer " +
                                token_ + "\r\nContent-Type: application/json\r\nContent-Length: " +
                                std::to_string(body.size()) + "\r\n\r\n" + body);
  }
  int64_t Jobs() {
    auto page = app::ListJobPage(*meta_, {});
    EXPECT_TRUE(page.IsOk());
    return page.IsOk() ? page->total : -1;
  }
  // The stored config of the job a 201/200 reply names.
  json Config(const HttpReply& r) {
    auto doc = json::parse(r.body, nullptr, false);
    if (!doc.contains("job_id")) return json();
    auto job = app::ShowJob(*meta_, doc["job_id"].get<int64_t>());
    EXPECT_TRUE(job.IsOk());
    return job.IsOk() ? app::JobConfigJson(job->job) : json();
  }

  // Every refused value of `key` (with `extra` keys) answers 400 with one
  // identical message naming the key, and stores nothing.
  void ExpectAllRefusedAlike(const std::string& key, const std::vector<std::string>& values,
                             const json& extra) {
    const int64_t before = Jobs();
    std::string first;
    for (const auto& v : values) {
      json keys = extra;
      keys[key] = v;
      HttpReply r = Submit(keys);
      EXPECT_EQ(r.status, 400) << key << "=" << v << ": " << r.body;
      auto doc = json::parse(r.body, nullptr, false);
      ASSERT_FALSE(doc.is_discarded()) << r.body;
      const std::string message = doc["error"]["message"].get<std::string>();
      EXPECT_EQ(message, RefusedJobFile(key).Message()) << key << "=" << v;
      EXPECT_EQ(doc["error"]["field"], key) << v;
      EXPECT_EQ(r.body.find("root:"), std::string::npos) << r.body;
      if (first.empty()) first = message;
      EXPECT_EQ(message, first) << "the same text for every refused path: " << v;
    }
    EXPECT_EQ(Jobs(), before) << "nothing stored";
  }

  fs::path dir_, root_;
  std::string home_, token_, blob_path_;
  std::unique_ptr<store::MetadataStore> meta_;
  std::unique_ptr<store::ArtifactStore> blobs_;
  std::unique_ptr<ApiServer> server_;
};

// The values no client may name, whatever the key. `cwd_file` exists in the
// server's working folder: a relative path is never taken from there.
std::vector<std::string> Hostile(const fs::path& dir, const fs::path& root, const std::string& cwd_file,
                                 const std::string& ext) {
  return {"/etc/passwd",
          (dir / ("nothere" + ext)).string(),                       // does not exist
          (root / ".." / ("outside" + ext)).string(),               // ".." out of the root (absolute)
          "lake/../outside" + ext,                                  // ".." out of the root (relative)
          (root / "models" / ("link" + ext)).string(),              // a symlink out of the root
          "lake/models/link" + ext,                                 // the same by the root's name
          cwd_file,                                                 // relative: not the server's cwd
          "etc/passwd",                                             // relative, under no root
          root.string(),                                            // a folder
          (dir / "home" / ".." / "outside.safetensors").string()};  // ".." out of the home
}

TEST_F(JobKeyPathsTest, HostilePretrainedPathsAllGetOneMessageAndNothingIsStored) {
  const std::string cwd_file = "kestrel_job_paths_" + std::to_string(::getpid()) + ".safetensors";
  std::ofstream(fs::current_path() / cwd_file, std::ios::binary) << testing::TinyWeightsBytes();
  ExpectAllRefusedAlike("pretrained", Hostile(dir_, root_, cwd_file, ".safetensors"),
                        {{"data", "birds"}, {"epochs", 1}, {"imgsz", 64}});
  fs::remove(fs::current_path() / cwd_file);
}

TEST_F(JobKeyPathsTest, EveryKeyThatNamesAFileIsConfined) {
  // train model=X.pt names a weights file (model=/etc/passwd is no scale
  // or yaml and is refused as such, without a look at the disk).
  std::vector<std::string> pt;
  for (const auto& v : Hostile(dir_, root_, "w.pt", ".pt")) {
    if (v.size() > 3 && v.compare(v.size() - 3, 3, ".pt") == 0) pt.push_back(v);
  }
  ASSERT_GE(pt.size(), 6u);
  ExpectAllRefusedAlike("model", pt, {{"data", "birds"}, {"epochs", 1}});
  // val and export model= name weights files or registered models.
  ExpectAllRefusedAlike("model", Hostile(dir_, root_, "w.safetensors", ".safetensors"),
                        {{"kind", "val"}, {"data", "birds"}});
  ExpectAllRefusedAlike("model", Hostile(dir_, root_, "w.safetensors", ".safetensors"),
                        {{"kind", "export"}, {"imgsz", 64}});
}

TEST_F(JobKeyPathsTest, RegisteredModelsAndFilesUnderTheRootOrHomeAreAllowed) {
  const json base = {{"data", "birds"}, {"epochs", 1}, {"imgsz", 64}};
  json keys = base;
  keys["pretrained"] = "birds@v1";
  HttpReply r = Submit(keys);
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(Config(r)["pretrained"], blob_path_) << "a registered model: its verified blob";
  const std::string canon = fs::canonical(root_ / "models" / "w.safetensors").string();
  keys = base;
  keys["epochs"] = 2;
  keys["pretrained"] = "lake/models/w.safetensors";
  r = Submit(keys);
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(Config(r)["pretrained"], canon) << "stored as the canonical path";
  keys["epochs"] = 3;
  keys["pretrained"] = "models/w.safetensors";  // relative to the only root
  r = Submit(keys);
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(Config(r)["pretrained"], canon);
  keys["epochs"] = 4;
  keys["pretrained"] = (root_ / "models" / "w.safetensors").string();
  r = Submit(keys);
  ASSERT_EQ(r.status, 201) << r.body;
  keys["epochs"] = 5;
  keys["pretrained"] = (fs::path(home_) / "jobs" / "7" / "best.safetensors").string();
  r = Submit(keys);
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(Config(r)["pretrained"], fs::canonical(keys["pretrained"].get<std::string>()).string());
  // val and export jobs of an allowed file.
  r = Submit({{"kind", "val"}, {"data", "birds"}, {"model", "lake/models/w.safetensors"}});
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(Config(r)["model"], canon);
  r = Submit({{"kind", "export"}, {"model", "lake/models/w.safetensors"}, {"imgsz", 64}});
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(Config(r)["model"], canon);
}

// The safetensors header length is a file's first 8 bytes: an allowed file
// that is not weights gets a message without the number (it used to say
// "header length 3475222254926655346" for "root:x:0").
TEST_F(JobKeyPathsTest, ANonWeightsFileIsRefusedWithoutEchoingItsBytes) {
  const std::string text = "root:x:0:0:root:/root:/bin/bash\n";
  std::ofstream(root_ / "passwd.safetensors", std::ios::binary) << text;
  HttpReply r = Submit({{"data", "birds"}, {"epochs", 1}, {"pretrained", "lake/passwd.safetensors"}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("header length out of range"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find("3475222254926655346"), std::string::npos) << r.body;
  // The reader itself, on any file: no number taken from the bytes.
  auto h = ReadSafeTensorsHeader((root_ / "passwd.safetensors").string());
  ASSERT_FALSE(h.IsOk());
  EXPECT_EQ(h.GetStatus().Message().find("3475222254926655346"), std::string::npos)
      << h.GetStatus().ToString();
  auto p = ParseSafeTensors(text, "passwd");
  ASSERT_FALSE(p.IsOk());
  EXPECT_EQ(p.GetStatus().Message().find("3475222254926655346"), std::string::npos);
  // A header that is not JSON: the parser's quote of the bytes is not passed on.
  std::string bad(8, '\0');
  bad[0] = 12;
  bad += "root:x:0:0:a";
  auto j = ParseSafeTensors(bad, "bad");
  ASSERT_FALSE(j.IsOk());
  EXPECT_EQ(j.GetStatus().Message().find("root"), std::string::npos) << j.GetStatus().ToString();
}

}  // namespace
}  // namespace kestrel::server
