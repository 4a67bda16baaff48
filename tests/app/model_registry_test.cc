// The model registry: store rules (versions per name, idempotent job
// registration, one production model per dataset, delete guard, concurrent
// registrations) on both backends, and the application layer (references,
// weights resolution with hash verification, lineage, comparison).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "app/models.h"
#include "core/hash.h"
#include "core/safetensors.h"
#include "store/local_artifact_store.h"
#include "store/postgres_store.h"

namespace kestrel::app {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class ModelRegistryTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : name) {
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    }
    dir_ = fs::temp_directory_path() / ("kestrel_models_" + std::to_string(::getpid()) + "_" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    if (GetParam() == "sqlite") {
      url_ = "sqlite:" + (dir_ / "kestrel.db").string();
    } else {
      const char* pg = std::getenv("KESTREL_TEST_PG");
      if (pg == nullptr || *pg == '\0')
        GTEST_SKIP() << "PostgreSQL tests need KESTREL_TEST_PG=postgresql://...";
      admin_url_ = pg;
      std::random_device rd;
      schema_ = "m" + std::to_string(::getpid()) + "_" + std::to_string(rd() % 1000000);
      Status s = store::ExecPostgres(admin_url_, "CREATE SCHEMA " + schema_);
      ASSERT_TRUE(s.IsOk()) << s.ToString();
      url_ = admin_url_ + (admin_url_.find('?') == std::string::npos ? "?" : "&") +
             "options=-csearch_path%3D" + schema_;
    }
    meta_ = Open();
    ASSERT_NE(meta_, nullptr);
    blobs_ = std::make_unique<store::LocalArtifactStore>((dir_ / "home").string());
    reg_ = std::make_unique<ModelRegistry>(*meta_, *blobs_, Env::Default());
  }
  void TearDown() override {
    reg_.reset();
    meta_.reset();
    fs::remove_all(dir_);
    if (!schema_.empty()) {
      EXPECT_TRUE(store::ExecPostgres(admin_url_, "DROP SCHEMA " + schema_ + " CASCADE").IsOk());
    }
  }
  std::unique_ptr<store::MetadataStore> Open() {
    auto s = store::MetadataStore::Open(url_);
    EXPECT_TRUE(s.IsOk()) << s.GetStatus().ToString();
    return s.IsOk() ? std::move(s).Value() : nullptr;
  }

  // A small valid safetensors file whose bytes depend on `seed`.
  std::string Weights(const std::string& file, int seed) {
    SafeTensorFile f;
    float v = static_cast<float>(seed);
    f.tensors["w"] = SafeTensor{"F32", {1}, std::string(reinterpret_cast<const char*>(&v), sizeof v)};
    const std::string path = (dir_ / file).string();
    std::ofstream(path, std::ios::binary) << SerializeSafeTensors(f);
    return path;
  }
  store::ModelRecord Reg(const std::string& name, int seed, const std::string& dataset_version,
                         double map5095, int64_t job_id = 0, const std::string& dataset = "birds") {
    RegisterRequest r;
    r.weights_path = Weights(name + std::to_string(seed) + ".safetensors", seed);
    r.name = name;
    r.dataset = dataset;
    r.dataset_version = dataset_version;
    r.config_json = R"({"data":"birds","imgsz":64,"epochs":1})";
    r.job_id = job_id;
    r.eval = {{"metrics", {{"map50", map5095 + 0.2}, {"map50_95", map5095}}},
              {"per_class", {{{"class_id", 0}, {"name", "a"}, {"map50", 0.5}, {"map50_95", map5095}}}}};
    bool created = false;
    auto m = reg_->Register(r, ++now_, &created);
    EXPECT_TRUE(m.IsOk()) << m.GetStatus().ToString();
    return m.IsOk() ? *m : store::ModelRecord{};
  }

  fs::path dir_;
  std::string url_, admin_url_, schema_;
  std::unique_ptr<store::MetadataStore> meta_;
  std::unique_ptr<store::ArtifactStore> blobs_;
  std::unique_ptr<ModelRegistry> reg_;
  int64_t now_ = 1'700'000'000'000;
};

const std::string kV1 = Sha256Hex("birds v1");
const std::string kV2 = Sha256Hex("birds v2");

TEST_P(ModelRegistryTest, VersionsCountPerNameAndJobRegistrationIsIdempotent) {
  auto a = Reg("birds", 1, kV1, 0.1, /*job=*/7);
  auto b = Reg("birds", 2, kV1, 0.2, /*job=*/8);
  auto c = Reg("cats", 3, kV1, 0.3, /*job=*/9);
  EXPECT_EQ(a.seq, 1);
  EXPECT_EQ(b.seq, 2);
  EXPECT_EQ(c.seq, 1);
  EXPECT_EQ(a.id.size(), 64u);
  EXPECT_TRUE(blobs_->Has(a.weights_sha));
  // The same job again (a worker retrying after a lost reply): the same record.
  RegisterRequest again;
  again.weights_path = Weights("other.safetensors", 99);
  again.name = "birds";
  again.job_id = 7;
  bool created = true;
  auto a2 = reg_->Register(again, ++now_, &created);
  ASSERT_TRUE(a2.IsOk()) << a2.GetStatus().ToString();
  EXPECT_FALSE(created);
  EXPECT_EQ(a2->id, a.id);
  // A hand registration of the same weights under the same name: one version.
  RegisterRequest hand;
  hand.weights_path = Weights("hand.safetensors", 5);
  hand.name = "birds";
  auto h1 = reg_->Register(hand, ++now_, &created);
  ASSERT_TRUE(h1.IsOk());
  EXPECT_TRUE(created);
  EXPECT_EQ(h1->seq, 3);
  auto h2 = reg_->Register(hand, ++now_, &created);
  ASSERT_TRUE(h2.IsOk());
  EXPECT_FALSE(created);
  EXPECT_EQ(h2->id, h1->id);
  auto list = reg_->List({});
  ASSERT_TRUE(list.IsOk());
  EXPECT_EQ(list->size(), 4u);
  EXPECT_EQ(list->front().id, h1->id) << "newest first";
  // Not weights at all.
  std::ofstream(dir_ / "junk.safetensors") << "not a model";
  hand.weights_path = (dir_ / "junk.safetensors").string();
  EXPECT_EQ(reg_->Register(hand, ++now_).GetStatus().Code(), StatusCode::kInvalidArgument);
  hand.name = "bad@name";
  hand.weights_path = Weights("x.safetensors", 6);
  EXPECT_EQ(reg_->Register(hand, ++now_).GetStatus().Code(), StatusCode::kInvalidArgument);
}

TEST_P(ModelRegistryTest, ReferencesResolveByVersionTagLatestAndIdPrefix) {
  auto a = Reg("birds", 1, kV1, 0.1);
  auto b = Reg("birds", 2, kV1, 0.2);
  ASSERT_TRUE(reg_->Tag("birds@v1", "candidate", ++now_).IsOk());
  EXPECT_EQ(reg_->Resolve("birds@v1")->id, a.id);
  EXPECT_EQ(reg_->Resolve("birds@V2")->id, b.id);
  EXPECT_EQ(reg_->Resolve("birds")->id, b.id);
  EXPECT_EQ(reg_->Resolve("birds@latest")->id, b.id);
  EXPECT_EQ(reg_->Resolve("birds@candidate")->id, a.id);
  EXPECT_EQ(reg_->Resolve(a.id.substr(0, 8))->id, a.id);
  EXPECT_EQ(reg_->Resolve(a.id)->id, a.id);
  EXPECT_EQ(reg_->Resolve("birds@v3").GetStatus().Code(), StatusCode::kNotFound);
  EXPECT_NE(reg_->Resolve("birds@v3").GetStatus().Message().find("v1..v2"), std::string::npos);
  EXPECT_EQ(reg_->Resolve("birds@v0").GetStatus().Code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reg_->Resolve("birds@").GetStatus().Code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reg_->Resolve("nope@v1").GetStatus().Code(), StatusCode::kNotFound);
  EXPECT_EQ(reg_->Resolve("birds@production").GetStatus().Code(), StatusCode::kNotFound);
  // An ambiguous prefix (only testable when the two random ids share 6+ chars).
  std::string common;
  while (common.size() < a.id.size() && a.id[common.size()] == b.id[common.size()])
    common += a.id[common.size()];
  if (common.size() >= 6) {
    EXPECT_EQ(reg_->Resolve(common).GetStatus().Code(), StatusCode::kInvalidArgument);
  }
}

TEST_P(ModelRegistryTest, ProductionMovesAtomicallyAndOneModelPerDatasetHoldsIt) {
  auto a = Reg("birds", 1, kV1, 0.1);
  auto b = Reg("birds", 2, kV1, 0.2);
  auto other = Reg("cats", 3, kV1, 0.3, 0, "cats");
  auto p1 = reg_->Promote("birds@v1", ++now_);
  ASSERT_TRUE(p1.IsOk()) << p1.GetStatus().ToString();
  EXPECT_FALSE(p1->previous.has_value());
  EXPECT_EQ(p1->model.tags, std::vector<std::string>{"production"});
  ASSERT_TRUE(reg_->Promote("cats@v1", ++now_).IsOk());  // another dataset: its own holder
  auto p2 = reg_->Tag("birds@v2", "production", ++now_);
  ASSERT_TRUE(p2.IsOk());
  ASSERT_TRUE(p2->previous.has_value());
  EXPECT_EQ(p2->previous->id, a.id);
  EXPECT_TRUE(p2->previous->tags.empty());
  store::ModelFilter f;
  f.tag = "production";
  auto holders = reg_->List(f);
  ASSERT_TRUE(holders.IsOk());
  ASSERT_EQ(holders->size(), 2u);
  std::set<std::string> ids{(*holders)[0].id, (*holders)[1].id};
  EXPECT_EQ(ids, (std::set<std::string>{b.id, other.id}));
  // Promoting the holder again changes nothing.
  auto p3 = reg_->Promote("birds@v2", ++now_);
  ASSERT_TRUE(p3.IsOk());
  EXPECT_FALSE(p3->previous.has_value());
  // Tags: any number of models may hold other tags; bad tags are refused.
  ASSERT_TRUE(reg_->Tag("birds@v1", "candidate", ++now_).IsOk());
  ASSERT_TRUE(reg_->Tag("birds@v2", "candidate", ++now_).IsOk());
  EXPECT_EQ(reg_->Tag("birds@v1", "Bad Tag", ++now_).GetStatus().Code(), StatusCode::kInvalidArgument);
  auto un = reg_->Untag("birds@v1", "candidate");
  ASSERT_TRUE(un.IsOk());
  EXPECT_TRUE(un->tags.empty());
  EXPECT_EQ(reg_->Untag("birds@v1", "candidate").GetStatus().Code(), StatusCode::kNotFound);
  // Delete: the production holder only with force; blobs stay.
  EXPECT_EQ(reg_->Delete("birds@v2", false).GetStatus().Code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(reg_->Delete("birds@v1", false).IsOk());
  ASSERT_TRUE(reg_->Delete("birds@v2", true).IsOk());
  EXPECT_EQ(reg_->Resolve("birds").GetStatus().Code(), StatusCode::kNotFound);
  EXPECT_TRUE(blobs_->Has(b.weights_sha));
  // Versions are never reused after a delete.
  EXPECT_EQ(Reg("birds", 4, kV1, 0.4).seq, 3);
}

TEST_P(ModelRegistryTest, ConcurrentRegistrationsGetDistinctVersionsAndConcurrentPromotionsKeepOneHolder) {
  constexpr int kThreads = 4, kEach = 5;
  std::vector<std::string> paths;
  for (int i = 0; i < kThreads * kEach; ++i) paths.push_back(Weights("c" + std::to_string(i), i));
  std::vector<std::thread> threads;
  std::vector<std::vector<int64_t>> seqs(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto meta = Open();
      ASSERT_NE(meta, nullptr);
      ModelRegistry reg(*meta, *blobs_, Env::Default());
      for (int k = 0; k < kEach; ++k) {
        RegisterRequest r;
        r.weights_path = paths[t * kEach + k];
        r.name = "birds";
        r.dataset = "birds";
        r.dataset_version = kV1;
        r.job_id = 100 + t * kEach + k;
        auto m = reg.Register(r, now_ + t * 100 + k);
        ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
        seqs[t].push_back(m->seq);
        auto p = reg.Promote(m->id, now_ + t * 100 + k);
        ASSERT_TRUE(p.IsOk()) << p.GetStatus().ToString();
      }
    });
  }
  for (auto& t : threads) t.join();
  std::set<int64_t> all;
  for (const auto& s : seqs) all.insert(s.begin(), s.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads * kEach));
  EXPECT_EQ(*all.begin(), 1);
  EXPECT_EQ(*all.rbegin(), kThreads * kEach);
  store::ModelFilter f;
  f.tag = "production";
  EXPECT_EQ(reg_->List(f)->size(), 1u);
}

TEST_P(ModelRegistryTest, WeightsArgumentsStayPathsOrResolveToVerifiedBlobs) {
  auto a = Reg("birds", 1, kV1, 0.1);
  // An existing file is a path, even when its name is also a model name.
  fs::create_directories(dir_ / "cwd");
  const std::string file = (dir_ / "birds").string();
  std::ofstream(file) << "x";
  auto p = reg_->ResolveWeights(file);
  ASSERT_TRUE(p.IsOk());
  EXPECT_EQ(p->path, file);
  EXPECT_FALSE(p->model.has_value());
  auto r = reg_->ResolveWeights("birds@v1");
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_EQ(r->path, blobs_->PathFor(a.weights_sha));
  ASSERT_TRUE(r->model.has_value());
  EXPECT_EQ(r->model->id, a.id);
  EXPECT_EQ(reg_->ResolveWeights(a.id.substr(0, 10))->path, blobs_->PathFor(a.weights_sha));
  // Neither a file nor a model: unchanged, the caller reports the missing file.
  EXPECT_EQ(reg_->ResolveWeights("missing.safetensors")->path, "missing.safetensors");
  EXPECT_EQ(reg_->ResolveWeights("runs/x/best.safetensors")->path, "runs/x/best.safetensors");
  // Written as a reference: a clear error.
  EXPECT_EQ(reg_->ResolveWeights("birds@v9").GetStatus().Code(), StatusCode::kNotFound);
  // A damaged blob is never handed out.
  {
    const std::string blob = blobs_->PathFor(a.weights_sha);
    fs::permissions(blob, fs::perms::owner_write, fs::perm_options::add);
    std::fstream f(blob, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x7f');
  }
  EXPECT_EQ(reg_->ResolveWeights("birds@v1").GetStatus().Code(), StatusCode::kCorruption);
}

TEST_P(ModelRegistryTest, NewModelsAreComparedWithProductionOrTheBestOnTheSameVersion) {
  auto first = Reg("birds", 1, kV1, 0.30);
  ASSERT_FALSE(first.comparison_json.empty());
  EXPECT_TRUE(json::parse(first.comparison_json)["baseline"].is_null());
  auto best = Reg("birds", 2, kV1, 0.50);
  auto c = json::parse(best.comparison_json);
  EXPECT_EQ(c["baseline"]["id"], first.id);
  EXPECT_EQ(c["baseline"]["chosen_as"], "best_map50_95");
  EXPECT_NEAR(c["metrics"]["map50_95"]["delta"].get<double>(), 0.20, 1e-12);
  EXPECT_EQ(c["better"], true);
  ASSERT_EQ(c["per_class"].size(), 1u);
  EXPECT_NEAR(c["per_class"][0]["map50_95"]["baseline"].get<double>(), 0.30, 1e-12);
  // Production wins over the best model.
  ASSERT_TRUE(reg_->Promote("birds@v1", ++now_).IsOk());
  auto third = Reg("birds", 3, kV1, 0.40);
  c = json::parse(third.comparison_json);
  EXPECT_EQ(c["baseline"]["ref"], "birds@v1");
  EXPECT_EQ(c["baseline"]["chosen_as"], "production");
  EXPECT_NEAR(c["metrics"]["map50"]["new"].get<double>(), 0.60, 1e-12);
  EXPECT_NEAR(c["metrics"]["map50"]["baseline"].get<double>(), 0.50, 1e-12);
  // Another dataset version: production was trained elsewhere, so the best
  // model on the new version is the baseline (none yet), and it says so.
  auto v2 = Reg("birds", 4, kV2, 0.10);
  c = json::parse(v2.comparison_json);
  EXPECT_TRUE(c["baseline"].is_null());
  EXPECT_NE(c["notes"].dump().find("another dataset version"), std::string::npos) << c.dump();
  // The detail view carries lineage and comparison.
  json j = ModelJson(third, *blobs_, true);
  EXPECT_EQ(j["ref"], "birds@v3");
  EXPECT_EQ(j["lineage"]["dataset_version"], kV1);
  EXPECT_EQ(j["lineage"]["config_hash"], third.config_hash);
  EXPECT_EQ(j["lineage"]["kestrel_version"], KestrelVersion());
  EXPECT_EQ(j["comparison"]["baseline"]["ref"], "birds@v1");
}

TEST_P(ModelRegistryTest, JobModelsCarryLineageFromTheJobAndItsAttempt) {
  // A job run to success through the store as a worker would.
  const std::string run_dir = (dir_ / "run").string();
  fs::create_directories(run_dir + "/weights");
  const std::string best = Weights("run/weights/best.safetensors", 11);
  const std::string parent = Weights("parent.safetensors", 12);
  std::ofstream(run_dir + "/results.csv") << "epoch,time,train/box_loss,metrics/precision(B),metrics/"
                                             "recall(B),metrics/mAP50(B)\n1,9.5,1.0,0.25,0.5,0.3\n";
  std::ofstream(run_dir + "/results.png") << "png";
  std::ofstream(run_dir + "/best_eval.json")
      << R"({"precision":0.26,"classes":[{"class_id":0,"name":"a","instances":3,"map50":0.4,"map5095":0.2}]})";
  store::JobSpec spec;
  spec.dataset_version = kV1;
  spec.config_json = json{{"data", "birds@" + kV1}, {"imgsz", 64}, {"pretrained", parent}}.dump();
  spec.min_map50 = 0.25;
  bool created = false;
  auto job = meta_->SubmitJob(spec, ++now_, &created);
  ASSERT_TRUE(job.IsOk());
  store::ClaimRequest claim;
  claim.worker = "w1";
  claim.host = "gpu-host-3";
  claim.devices = {store::DeviceOffer{}};
  claim.now_ms = ++now_;
  ASSERT_TRUE(meta_->ClaimJob(claim).IsOk());
  EXPECT_EQ(reg_->RegisterJobModel(job->id, ++now_).GetStatus().Code(), StatusCode::kFailedPrecondition);
  store::AttemptOutcome ok;
  ok.success = true;
  ok.result_json = json{{"best", best}, {"map50", 0.3},       {"map50_95", 0.2}, {"best_epoch", 1},
                        {"epochs", 1},  {"run_dir", run_dir}, {"attempt", 1}}
                       .dump();
  ASSERT_TRUE(meta_->CompleteAttempt(job->id, 1, "w1", ok, ++now_).IsOk());
  auto m = reg_->RegisterJobModel(job->id, ++now_, &created);
  ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
  EXPECT_TRUE(created);
  EXPECT_EQ(m->name, "birds");
  EXPECT_EQ(m->dataset, "birds");
  EXPECT_EQ(m->dataset_version, kV1);
  // The config as submit stored it before min_map50 became a job column
  // (migration 10), so models registered before and after hash alike.
  EXPECT_EQ(
      m->config_hash,
      *ConfigHash(
          json{{"data", "birds@" + kV1}, {"imgsz", 64}, {"pretrained", parent}, {"min_map50", 0.25}}.dump()));
  EXPECT_EQ(m->job_id, job->id);
  EXPECT_EQ(m->attempt, 1);
  EXPECT_EQ(m->host, "gpu-host-3");
  json lineage = json::parse(m->lineage_json);
  EXPECT_EQ(lineage["parent"]["kind"], "pretrained");
  EXPECT_EQ(lineage["parent"]["sha256"], Sha256Hex(*Env::Default().ReadFile(parent)));
  EXPECT_EQ(lineage["worker"], "w1");
  EXPECT_EQ(lineage["config"]["imgsz"], 64);
  EXPECT_EQ(lineage["config"]["min_map50"], 0.25);
  json eval = json::parse(m->eval_json);
  EXPECT_NEAR(eval["metrics"]["precision"].get<double>(), 0.26, 1e-12);
  EXPECT_NEAR(eval["metrics"]["recall"].get<double>(), 0.5, 1e-12);
  ASSERT_EQ(eval["per_class"].size(), 1u);
  EXPECT_NEAR(eval["per_class"][0]["map50_95"].get<double>(), 0.2, 1e-12);
  ASSERT_EQ(eval["plots"].size(), 1u);
  EXPECT_EQ(eval["plots"][0]["file"], "results.png");
  EXPECT_TRUE(blobs_->Has(eval["plots"][0]["sha256"].get<std::string>()));
  // Registering the job again returns the same model.
  auto again = reg_->RegisterJobModel(job->id, ++now_, &created);
  ASSERT_TRUE(again.IsOk());
  EXPECT_FALSE(created);
  EXPECT_EQ(again->id, m->id);
}

TEST_P(ModelRegistryTest, RecordedExportsAreHashedAndShownInTheDetailedView) {
  const store::ModelRecord m = Reg("birds", 1, kV1, 0.3);
  const std::string onnx = (dir_ / "birds_v1.onnx").string();
  std::ofstream(onnx, std::ios::binary) << "not really onnx, but bytes to hash";
  ExportRecordRequest req;
  req.path = onnx;
  req.format = "onnx";
  req.options = {{"imgsz", {320, 256}}, {"batch", 1}, {"opset", 17}, {"dynamic", false}, {"half", false}};
  req.verified = true;
  req.verification = {{"verified", true},
                      {"tolerance", 1e-4},
                      {"runtimes", {{{"runtime", "opencv-dnn 4.6.0"}, {"ran", true}, {"passed", true}}}}};
  auto rec = reg_->RecordExport(m, req, ++now_);
  ASSERT_TRUE(rec.IsOk()) << rec.GetStatus().ToString();
  EXPECT_EQ(rec->sha256, Sha256Hex("not really onnx, but bytes to hash"));
  EXPECT_EQ(rec->bytes, 34);
  EXPECT_EQ(rec->kestrel_version, KestrelVersion());

  auto shown = reg_->Resolve("birds@v1");
  ASSERT_TRUE(shown.IsOk()) << shown.GetStatus().ToString();
  const json view = ModelJson(*shown, *blobs_, true);
  ASSERT_EQ(view["exports"].size(), 1u) << view.dump();
  const json& e = view["exports"][0];
  EXPECT_EQ(e["id"], rec->id);
  EXPECT_EQ(e["path"], onnx);
  EXPECT_EQ(e["format"], "onnx");
  EXPECT_EQ(e["sha256"], rec->sha256);
  EXPECT_EQ(e["bytes"], 34);
  EXPECT_EQ(e["options"], req.options);
  EXPECT_EQ(e["verified"], true);
  EXPECT_EQ(e["verification"], req.verification);
  EXPECT_FALSE(ModelJson(*shown, *blobs_, false).contains("exports")) << "only the detailed view";

  // A relative path is recorded as the absolute one it named: the same
  // file, so its record is updated (a retried export job), not duplicated.
  req.path = std::filesystem::relative(onnx).string();
  ASSERT_FALSE(std::filesystem::path(req.path).is_absolute()) << req.path;
  req.verified = false;
  bool created = true;
  auto relative = reg_->RecordExport(m, req, ++now_, &created);
  ASSERT_TRUE(relative.IsOk()) << relative.GetStatus().ToString();
  EXPECT_EQ(relative->path, std::filesystem::absolute(onnx).lexically_normal().string());
  EXPECT_FALSE(created);
  EXPECT_EQ(relative->id, rec->id);
  EXPECT_FALSE(reg_->Resolve("birds@v1")->exports.at(0).verified);
  // Other bytes at that path: another file, another record.
  std::ofstream(onnx, std::ios::binary | std::ios::trunc) << "other bytes";
  auto rewritten = reg_->RecordExport(m, req, ++now_, &created);
  ASSERT_TRUE(rewritten.IsOk()) << rewritten.GetStatus().ToString();
  EXPECT_TRUE(created);
  EXPECT_NE(rewritten->id, rec->id);

  // A missing file is not recorded.
  req.path = (dir_ / "gone.onnx").string();
  auto missing = reg_->RecordExport(m, req, ++now_);
  ASSERT_FALSE(missing.IsOk());
  EXPECT_EQ(missing.GetStatus().Code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.GetStatus().Where().field, "path");
  EXPECT_EQ(reg_->Resolve("birds@v1")->exports.size(), 2u);
}

INSTANTIATE_TEST_SUITE_P(Backends, ModelRegistryTest, ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kestrel::app
