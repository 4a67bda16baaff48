// GET /api/models/{ref}/exports/{id}/file over real HTTP (an in-process
// ApiServer on port 0 over a temporary SQLite home; docs/server.md "Export
// files"): the recorded bytes with their content type for a verified export,
// 401 without a token (none needed with --public-read), 404 for an unknown
// export or model, 409 for an unverified export, a file changed or grown
// since it was recorded, and one over the size limit; 404 when it is gone.
#include "server/api_exports.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "app/models.h"
#include "app/tokens.h"
#include "birds_home.h"
#include "core/env.h"
#include "core/hash.h"
#include "core/safetensors.h"
#include "http_client.h"
#include "server/api.h"

namespace kestrel::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HttpReply;

class ApiExportsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::OpenHomeWithBirds("kestrel_server_exports_", 4, &dir_, &home_, &meta_, &blobs_);
    if (HasFatalFailure()) return;
    store::ModelRecord model;
    testing::RegisterBirdsModel(*meta_, *blobs_, dir_, 2000, &model);
    if (HasFatalFailure()) return;
    app::ModelRegistry reg(*meta_, *blobs_, Env::Default());
    // Not a real ONNX graph: the route serves bytes, it does not parse them
    // (binary on purpose: NULs and high bytes must come through).
    for (int i = 0; i < 70000; ++i) onnx_bytes_.push_back(static_cast<char>((i * 7919) & 0xff));
    verified_path_ = (dir_ / "best.onnx").string();
    unverified_path_ = (dir_ / "forced.onnx").string();
    ASSERT_TRUE(Env::Default().WriteFileAtomic(verified_path_, onnx_bytes_).IsOk());
    ASSERT_TRUE(Env::Default().WriteFileAtomic(unverified_path_, onnx_bytes_ + "x").IsOk());
    verified_id_ = Record(reg, model, verified_path_, true, 3000);
    unverified_id_ = Record(reg, model, unverified_path_, false, 3001);
    token_ = app::CreateToken(*meta_, "reader", true, 1000)->token;
    port_ = Start(false);
  }
  void TearDown() override {
    servers_.clear();
    meta_.reset();
    fs::remove_all(dir_);
  }
  std::string Record(app::ModelRegistry& reg, const store::ModelRecord& m, const std::string& path,
                     bool verified, int64_t now) {
    app::ExportRecordRequest req;
    req.path = path;
    req.format = "onnx";
    req.options = {{"imgsz", {64, 64}}, {"batch", 1}, {"dynamic", false}, {"half", false}};
    req.verified = verified;
    req.verification = {{"verified", verified}};
    auto rec = reg.RecordExport(m, req, now);
    EXPECT_TRUE(rec.IsOk()) << rec.GetStatus().ToString();
    return rec.IsOk() ? rec->id : std::string();
  }
  int Start(bool public_read) {
    ServerOptions o;
    o.port = 0;
    o.public_read = public_read;
    auto srv = ApiServer::Start(home_, o);
    EXPECT_TRUE(srv.IsOk()) << srv.GetStatus().ToString();
    if (!srv.IsOk()) return 0;
    servers_.push_back(std::move(srv).Value());
    return servers_.back()->Port();
  }
  HttpReply Fetch(const std::string& target, const std::string& token, int port = 0) {
    std::vector<std::string> h;
    if (!token.empty()) h.push_back("Authorization: Bearer " + token);
    return testing::Get(port == 0 ? port_ : port, target, h);
  }
  // The error code of an error reply with `status`.
  std::string ErrorCode(const HttpReply& r, int status, const std::string& what) {
    EXPECT_EQ(r.status, status) << what << ": " << r.body;
    EXPECT_EQ(r.headers.count("content-type") ? r.headers.at("content-type") : "", "application/json")
        << what;
    auto j = json::parse(r.body, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << what << ": " << r.body;
    if (j.is_discarded()) return "";
    EXPECT_EQ(j["ok"], false) << what;
    return j["error"]["code"].get<std::string>();
  }
  std::string FileUrl(const std::string& ref, const std::string& id) {
    return "/api/models/" + ref + "/exports/" + id + "/file";
  }

  fs::path dir_;
  std::string home_, token_, onnx_bytes_, verified_path_, unverified_path_, verified_id_, unverified_id_;
  std::unique_ptr<store::MetadataStore> meta_;
  std::unique_ptr<store::ArtifactStore> blobs_;
  std::vector<std::unique_ptr<ApiServer>> servers_;
  int port_ = 0;
};

TEST_F(ApiExportsTest, AVerifiedExportIsServedAsRecorded) {
  ASSERT_EQ(verified_id_.size(), 64u);
  HttpReply r = Fetch(FileUrl("birds@v1", verified_id_), token_);
  ASSERT_EQ(r.status, 200) << r.body.substr(0, 300);
  EXPECT_EQ(r.headers["content-type"], "application/octet-stream");
  EXPECT_EQ(r.headers["x-content-type-options"], "nosniff");
  EXPECT_EQ(r.headers["etag"], "\"" + Sha256Hex(onnx_bytes_) + "\"");
  EXPECT_EQ(r.headers["content-disposition"],
            "attachment; filename=\"birds-v1-" + verified_id_.substr(0, 12) + ".onnx\"");
  EXPECT_EQ(r.body.size(), onnx_bytes_.size());
  EXPECT_TRUE(r.body == onnx_bytes_);
  // A unique prefix of 8+ characters, and the model by name or id prefix.
  EXPECT_EQ(Fetch(FileUrl("birds", verified_id_.substr(0, 8)), token_).status, 200);
  // The model JSON lists the export with the id the route takes.
  HttpReply m = Fetch("/api/models/birds@v1", token_);
  ASSERT_EQ(m.status, 200);
  const json exports = json::parse(m.body)["model"]["exports"];
  ASSERT_EQ(exports.size(), 2u);
  EXPECT_EQ(exports[0]["id"], verified_id_);
  EXPECT_EQ(exports[0]["verified"], true);
}

TEST_F(ApiExportsTest, UnknownExportsAndModelsAre404ShortIdsAre400) {
  const std::string other(64, 'a');
  EXPECT_EQ(ErrorCode(Fetch(FileUrl("birds@v1", other), token_), 404, "unknown id"), "not_found");
  EXPECT_EQ(ErrorCode(Fetch(FileUrl("nosuch@v1", verified_id_), token_), 404, "unknown model"), "not_found");
  EXPECT_EQ(ErrorCode(Fetch(FileUrl("birds@v1", "abc"), token_), 400, "short id"), "invalid_argument");
  // Path-looking ids never reach the filesystem: they are ids that match nothing.
  EXPECT_EQ(Fetch(FileUrl("birds@v1", "..%2f..%2fetc%2fpasswd"), token_).status, 404);
  EXPECT_EQ(Fetch(FileUrl("birds@v1", "%2e%2e"), token_).status, 400);
}

TEST_F(ApiExportsTest, ATokenIsNeededUnlessPublicRead) {
  EXPECT_EQ(ErrorCode(Fetch(FileUrl("birds@v1", verified_id_), ""), 401, "no token"), "unauthenticated");
  EXPECT_EQ(ErrorCode(Fetch(FileUrl("birds@v1", verified_id_), "kst_bad_token"), 401, "bad token"),
            "unauthenticated");
  const int open = Start(true);
  HttpReply r = Fetch(FileUrl("birds@v1", verified_id_), "", open);
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.body == onnx_bytes_);
}

TEST_F(ApiExportsTest, AnUnverifiedExportIsRefused) {
  HttpReply r = Fetch(FileUrl("birds@v1", unverified_id_), token_);
  EXPECT_EQ(ErrorCode(r, 409, "unverified"), "failed_precondition");
  EXPECT_NE(r.body.find("not verified"), std::string::npos) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["field"], "id");
}

TEST_F(ApiExportsTest, AChangedOrMissingFileIsNotServed) {
  // Same size, other content: the hash says so.
  std::string changed = onnx_bytes_;
  changed[100] = static_cast<char>(changed[100] ^ 1);
  ASSERT_TRUE(Env::Default().WriteFileAtomic(verified_path_, changed).IsOk());
  HttpReply r = Fetch(FileUrl("birds@v1", verified_id_), token_);
  EXPECT_EQ(ErrorCode(r, 409, "changed"), "failed_precondition");
  EXPECT_NE(r.body.find("SHA-256"), std::string::npos) << r.body;
  // Another size.
  ASSERT_TRUE(Env::Default().WriteFileAtomic(verified_path_, onnx_bytes_ + "more").IsOk());
  EXPECT_EQ(ErrorCode(Fetch(FileUrl("birds@v1", verified_id_), token_), 409, "grown"), "failed_precondition");
  // A symlink to another file in its place is the other file: refused.
  fs::remove(verified_path_);
  fs::create_symlink(unverified_path_, verified_path_);
  EXPECT_EQ(ErrorCode(Fetch(FileUrl("birds@v1", verified_id_), token_), 409, "symlink"),
            "failed_precondition");
  fs::remove(verified_path_);
  EXPECT_EQ(ErrorCode(Fetch(FileUrl("birds@v1", verified_id_), token_), 404, "gone"), "not_found");
}

TEST_F(ApiExportsTest, AFileOverTheLimitIsRefused) {
  HttpMetrics metrics;
  ApiContext ctx{*meta_, *blobs_, metrics, home_};
  ctx.public_read = true;
  ctx.export_file_limit = onnx_bytes_.size() - 1;
  auto router = BuildApiRouter(ctx);
  ASSERT_TRUE(router.IsOk()) << router.GetStatus().ToString();
  Request req;
  req.method = "GET";
  req.path = FileUrl("birds@v1", verified_id_);
  Response r = router->Dispatch(req);
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_NE(r.body.find("over the server's limit"), std::string::npos) << r.body;
  ctx.export_file_limit = onnx_bytes_.size();
  r = router->Dispatch(req);
  EXPECT_EQ(r.status, 200) << r.body.substr(0, 300);
  EXPECT_EQ(r.body.size(), onnx_bytes_.size());
}

// GET /api/models/{ref}/plots/{file}: the run's plots kept at registration,
// by the names its evaluation lists; any other name is a 404 naming those;
// a damaged blob is never served; a token is needed as for every read.
TEST_F(ApiExportsTest, StoredPlotsAreServedByNameAndVerified) {
  const fs::path run = dir_ / "run";
  fs::create_directories(run);
  const std::string png = std::string("\x89PNG\r\n\x1a\n", 8) + std::string(300, '\0') + "pr";
  const std::string jpg = "\xff\xd8\xff\xe0 not a real jpeg";
  std::ofstream(run / "PR_curve.png", std::ios::binary) << png;
  std::ofstream(run / "labels.jpg", std::ios::binary) << jpg;
  std::ofstream(run / "notes.txt", std::ios::binary) << "not a plot";
  const std::string weights = (dir_ / "w2.safetensors").string();
  std::ofstream(weights, std::ios::binary) << testing::TinyWeightsBytes() << " ";
  app::RegisterRequest rr;
  rr.weights_path = weights;
  rr.name = "plotted";
  rr.dataset = "birds";
  rr.config_json = R"({"data":"birds","epochs":1})";
  rr.run_dir = run.string();
  auto m = app::ModelRegistry(*meta_, *blobs_, Env::Default()).Register(rr, 2500);
  ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();

  HttpReply r = Fetch("/api/models/plotted/plots/PR_curve.png", token_);
  ASSERT_EQ(r.status, 200) << r.body.substr(0, 300);
  EXPECT_EQ(r.headers["content-type"], "image/png");
  EXPECT_EQ(r.headers["x-content-type-options"], "nosniff");
  EXPECT_TRUE(r.body == png);
  r = Fetch("/api/models/plotted@v1/plots/labels.jpg", token_);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"], "image/jpeg");
  EXPECT_EQ(r.body, jpg);
  // Only the names the record lists: not any file of the run, not a path.
  r = Fetch("/api/models/plotted/plots/notes.txt", token_);
  EXPECT_EQ(ErrorCode(r, 404, "unlisted"), "not_found");
  EXPECT_NE(r.body.find("PR_curve.png, labels.jpg"), std::string::npos) << r.body;
  EXPECT_EQ(ErrorCode(Fetch("/api/models/plotted/plots/..%2Frun%2Fnotes.txt", token_), 404, "path"),
            "not_found");
  EXPECT_EQ(ErrorCode(Fetch("/api/models/birds/plots/PR_curve.png", token_), 404, "no plots"), "not_found");
  EXPECT_EQ(ErrorCode(Fetch("/api/models/nope/plots/PR_curve.png", token_), 404, "no model"), "not_found");
  EXPECT_EQ(Fetch("/api/models/plotted/plots/PR_curve.png", "").status, 401);
  // A damaged blob: the stored hash no longer matches, so nothing is served.
  const std::string blob = blobs_->PathFor(Sha256Hex(png));
  fs::permissions(blob, fs::perms::owner_write, fs::perm_options::add);
  std::ofstream(blob, std::ios::binary | std::ios::trunc) << png << "x";
  r = Fetch("/api/models/plotted/plots/PR_curve.png", token_);
  EXPECT_NE(r.status, 200);
  EXPECT_EQ(r.body.find("\x89PNG"), std::string::npos);
}

// WeightsLink: a blob path names its registered model; a path under the
// home's jobs/<id>/ names that job; anything else is a path alone. The model
// route fills lineage.parent.model for a parent registered afterwards.
TEST_F(ApiExportsTest, WeightsPathsLinkToTheirModelOrJob) {
  HttpMetrics metrics;
  ApiContext ctx{*meta_, *blobs_, metrics, home_};
  auto birds = app::ModelRegistry(*meta_, *blobs_, Env::Default()).Resolve("birds@v1");
  ASSERT_TRUE(birds.IsOk());
  json link = WeightsLink(ctx, blobs_->PathFor(birds->weights_sha));
  EXPECT_EQ(link["model"]["ref"], "birds@v1") << link.dump();
  EXPECT_EQ(link["model"]["id"], birds->id);
  link = WeightsLink(ctx, home_ + "/jobs/42/attempt-1/weights/best.pt");
  EXPECT_EQ(link["job_id"], 42) << link.dump();
  EXPECT_FALSE(link.contains("model"));
  for (const std::string& p : {std::string("/elsewhere/yolov8n.pt"), home_ + "/jobs/x/best.pt",
                               home_ + "/jobs/7", "/tmp/" + std::string(64, 'a')}) {
    link = WeightsLink(ctx, p);
    EXPECT_EQ(link, json({{"path", p}})) << p;
  }
  // A model whose parent file was registered only after it.
  const std::string parent = (dir_ / "parent.safetensors").string();
  std::ofstream(parent, std::ios::binary) << testing::TinyWeightsBytes() << "  ";
  const std::string child = (dir_ / "child.safetensors").string();
  std::ofstream(child, std::ios::binary) << testing::TinyWeightsBytes() << "   ";
  app::ModelRegistry reg(*meta_, *blobs_, Env::Default());
  app::RegisterRequest rr;
  rr.weights_path = child;
  rr.name = "child";
  rr.config_json = "{}";
  rr.parent_path = parent;
  ASSERT_TRUE(reg.Register(rr, 2600).IsOk());
  rr.weights_path = parent;
  rr.name = "parent";
  rr.parent_path.clear();
  auto p = reg.Register(rr, 2700);
  ASSERT_TRUE(p.IsOk());
  // The parent's path is the file, not its blob: the route links by the blob path it was stored under.
  HttpReply r = Fetch("/api/models/child", token_);
  ASSERT_EQ(r.status, 200);
  EXPECT_FALSE(json::parse(r.body)["model"]["lineage"]["parent"].contains("model"));
  rr.weights_path = child + "2";
  std::ofstream(rr.weights_path, std::ios::binary) << testing::TinyWeightsBytes() << "    ";
  rr.name = "grandchild";
  rr.parent_path = blobs_->PathFor(p->weights_sha);
  ASSERT_TRUE(reg.Register(rr, 2800).IsOk());
  r = Fetch("/api/models/grandchild", token_);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["model"]["lineage"]["parent"]["model"]["ref"], "parent@v1") << r.body;
}

}  // namespace
}  // namespace kestrel::server
