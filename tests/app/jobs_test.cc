// The job use cases (app/jobs.h) on a SQLite store, without the CLI:
// DraftJob per kind (keys, owned keys, weights resolution, errors located in
// the request), SubmitJob (version resolution, dedup, the stored config),
// list filters, show with attempts, cancel/retry, and the JSON views.
#include "app/jobs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "app/export_keys.h"
#include "core/json.h"
#include "core/safetensors.h"

namespace kestrel::app {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class JobsAppTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::temp_directory_path() / ("kestrel_app_jobs_" + std::to_string(::getpid()) + "_" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto m = store::MetadataStore::Open("sqlite:" + (dir_ / "kestrel.db").string());
    ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
    meta_ = std::move(m).Value();
    store::DatasetVersionRecord v;
    v.dataset = "birds";
    v.version_id = std::string(64, 'a');
    v.manifest_sha = std::string(64, 'b');
    v.report_sha = std::string(64, 'c');
    v.created_at = 1;
    v.num_classes = 1;
    v.summary_json = "{}";
    bool created = false;
    auto added = meta_->AddDatasetVersion(v, &created);
    ASSERT_TRUE(added.IsOk()) << added.GetStatus().ToString();
  }
  void TearDown() override {
    meta_.reset();
    fs::remove_all(dir_);
  }
  std::string Weights() {
    SafeTensorFile f;
    float v = 1;
    f.tensors["w"] = SafeTensor{"F32", {1}, std::string(reinterpret_cast<const char*>(&v), sizeof v)};
    const std::string path = (dir_ / "w.safetensors").string();
    std::ofstream(path, std::ios::binary) << SerializeSafeTensors(f);
    return path;
  }
  Result<SubmitResult> Submit(const std::vector<std::string>& tokens, int64_t now = 1000) {
    KESTREL_ASSIGN_OR_RETURN(JobDraft d, DraftJob(tokens, nullptr));
    return SubmitJob(*meta_, std::move(d), now);
  }
  static void ExpectRequestError(const Status& s, const std::string& field) {
    EXPECT_EQ(s.Code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_EQ(s.Where().file, kRequestFile) << s.ToString();
    EXPECT_EQ(s.Where().field, field) << s.ToString();
  }

  fs::path dir_;
  std::unique_ptr<store::MetadataStore> meta_;
};

TEST_F(JobsAppTest, TrainDraftsStoreTheTrainKeysWithoutAKind) {
  auto d = DraftJob({"data=birds", "epochs=3", "priority=high", "min_map50=0.25", "backoff=1,2"}, nullptr);
  ASSERT_TRUE(d.IsOk()) << d.GetStatus().ToString();
  EXPECT_EQ(d->kind, "train");
  EXPECT_EQ(d->data, "birds");
  EXPECT_EQ(d->config["epochs"], 3);
  EXPECT_EQ(d->config["device"], "cpu");
  EXPECT_FALSE(d->config.contains("min_map50")) << "a job key: the spec's min_map50";
  EXPECT_EQ(d->spec.min_map50, 0.25);
  EXPECT_FALSE(d->config.contains("kind")) << "a training job's config is its trainer keys";
  EXPECT_FALSE(d->config.contains("priority")) << "job keys live in the spec";
  EXPECT_EQ(d->spec.priority, store::JobPriority::kHigh);
  EXPECT_EQ(d->spec.retry.backoff_ms, (std::vector<int64_t>{1000, 2000}));
  EXPECT_EQ(d->typed, json({{"data", "birds"},
                            {"epochs", "3"},
                            {"priority", "high"},
                            {"min_map50", "0.25"},
                            {"backoff", "1,2"}}));
}

// min_map50 is stored as the job's column, shown in its config view, and
// two submissions that differ only in it are two jobs.
TEST_F(JobsAppTest, MinMap50IsAJobColumnThatJobsShowPrintsInTheConfig) {
  auto a = Submit({"data=birds", "epochs=3", "min_map50=0.3"});
  ASSERT_TRUE(a.IsOk()) << a.GetStatus().ToString();
  EXPECT_TRUE(a->created);
  EXPECT_EQ(a->job.spec.min_map50, 0.3);
  EXPECT_FALSE(json::parse(a->job.spec.config_json).contains("min_map50"));
  EXPECT_EQ(JobJson(a->job, true)["config"]["min_map50"], 0.3);
  EXPECT_EQ(JobConfigJson(a->job)["epochs"], 3);
  auto b = Submit({"data=birds", "epochs=3", "min_map50=0.5"});
  ASSERT_TRUE(b.IsOk()) << b.GetStatus().ToString();
  EXPECT_TRUE(b->created) << "another gate, another job";
  EXPECT_NE(b->job.id, a->job.id);
  auto again = Submit({"data=birds", "epochs=3", "min_map50=0.3"});
  ASSERT_TRUE(again.IsOk()) << again.GetStatus().ToString();
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->job.id, a->job.id);
}

TEST_F(JobsAppTest, DraftErrorsNameTheKeyInTheRequest) {
  ExpectRequestError(DraftJob({"data=birds", "epoch=3"}, nullptr).GetStatus(), "epoch");
  ExpectRequestError(DraftJob({"data=birds", "resume=x.ckpt"}, nullptr).GetStatus(), "resume");
  ExpectRequestError(DraftJob({"data=birds", "priority=urgent"}, nullptr).GetStatus(), "priority");
  ExpectRequestError(DraftJob({"data=birds", "gpu_mem=5"}, nullptr).GetStatus(), "gpu_mem");
  ExpectRequestError(DraftJob({"data=birds", "lr0=100"}, nullptr).GetStatus(), "lr0");
  ExpectRequestError(DraftJob({"kind=segment", "data=birds"}, nullptr).GetStatus(), "kind");
  ExpectRequestError(DraftJob({"data=birds", "stray"}, nullptr).GetStatus(), "");
  ExpectRequestError(DraftJob({"data=bir\xff"}, nullptr).GetStatus(), "data");
  // The first bad token is the one reported, whatever comes after it.
  auto first = DraftJob({"epoch=3", "kind=val", "x=\xff"}, nullptr);
  ExpectRequestError(first.GetStatus(), "epoch");
}

TEST_F(JobsAppTest, ValDraftsNeedModelAndDataAndResolveTheWeights) {
  const std::string w = Weights();
  ExpectRequestError(DraftJob({"kind=val", "data=birds"}, nullptr).GetStatus(), "model");
  ExpectRequestError(DraftJob({"kind=val", "model=" + w}, nullptr).GetStatus(), "data");
  ExpectRequestError(DraftJob({"kind=val", "data=birds", "model=" + w, "epochs=3"}, nullptr).GetStatus(),
                     "epochs");
  for (const char* owned : {"predictions=p", "project=p", "name=n", "exist_ok=true"}) {
    ExpectRequestError(DraftJob({"kind=val", "data=birds", "model=" + w, owned}, nullptr).GetStatus(),
                       std::string(owned).substr(0, std::string(owned).find('=')));
  }
  ExpectRequestError(
      DraftJob({"kind=val", "data=birds", "model=" + w, "device=0", "gpu_mem=10"}, nullptr).GetStatus(),
      "device");
  ExpectRequestError(
      DraftJob({"kind=val", "data=birds", "model=" + (dir_ / "none").string()}, nullptr).GetStatus(),
      "model");
  // A model reference is resolved by the front end's resolver.
  std::string asked;
  auto d = DraftJob({"kind=val", "data=birds", "model=birds@v1", "conf=0.25", "min_map50=0.5"},
                    [&](const std::string& key, std::string* m) {
                      EXPECT_EQ(key, "model");
                      asked = *m;
                      *m = w;
                      return Status();
                    });
  ASSERT_TRUE(d.IsOk()) << d.GetStatus().ToString();
  EXPECT_EQ(asked, "birds@v1");
  EXPECT_EQ(d->kind, "val");
  EXPECT_EQ(d->config["kind"], "val");
  EXPECT_EQ(d->config["model"], w);
  EXPECT_EQ(d->config["conf"], 0.25);
  EXPECT_EQ(d->config["split"], "val");
  EXPECT_FALSE(d->config.contains("min_map50"));
  EXPECT_EQ(d->spec.min_map50, 0.5);
  // A resolver's error is returned as it is (not a request error).
  auto refused = DraftJob({"kind=val", "data=birds", "model=birds@v9"}, [](const std::string&, std::string*) {
    return Status::Corruption("blob damaged");
  });
  EXPECT_EQ(refused.GetStatus().Code(), StatusCode::kCorruption);
}

// An export job takes `kestrel export`'s keys (app::ExportKeys) and refuses
// what that command refuses before it opens the weights, with its messages;
// a registered model is pinned as NAME@vN and the job is filed under its
// dataset version when data= is not given.
TEST_F(JobsAppTest, ExportDraftsTakeTheExportKeysAndPinTheModel) {
  const std::string w = Weights();
  ExpectRequestError(DraftJob({"kind=export"}, nullptr).GetStatus(), "model");
  for (const std::string bad :
       {"format=tflite", "imgsz=100", "imgsz=64,", "opset=11", "batch=0", "verify_images=0", "half=maybe",
        "output=/tmp/x.onnx", "epochs=3", "predictions=p", "min_map50=0.5"}) {
    auto d = DraftJob({"kind=export", "model=" + w, bad}, nullptr);
    ExpectRequestError(d.GetStatus(), bad.substr(0, bad.find('=')));
  }
  ExpectRequestError(DraftJob({"kind=export", "model=" + w, "device=0", "gpu_mem=10"}, nullptr).GetStatus(),
                     "device");
  // The same message as `kestrel export` (ExportKeys::Request).
  ExportKeys keys;
  keys.r.model = w;
  keys.r.opset = 11;
  auto cli = keys.Request();
  auto job = DraftJob({"kind=export", "model=" + w, "opset=11"}, nullptr);
  ASSERT_FALSE(cli.IsOk());
  EXPECT_EQ(job.GetStatus().Message(), cli.GetStatus().Message());
  ExpectRequestError(DraftJob({"kind=export", "model=" + (dir_ / "none").string()}, nullptr).GetStatus(),
                     "model");
  // A plain file: made absolute, no dataset; stored with an empty dataset version.
  auto plain = DraftJob({"kind=export", "model=" + w, "imgsz=64", "dynamic=true"}, nullptr);
  ASSERT_TRUE(plain.IsOk()) << plain.GetStatus().ToString();
  EXPECT_EQ(plain->kind, "export");
  EXPECT_EQ(plain->config["kind"], "export");
  EXPECT_EQ(plain->config["model"], w);
  EXPECT_EQ(plain->config["imgsz"], "64");
  EXPECT_EQ(plain->config["dynamic"], true);
  EXPECT_EQ(plain->config["output"], "");
  auto sub = SubmitJob(*meta_, *plain, 1000);
  ASSERT_TRUE(sub.IsOk()) << sub.GetStatus().ToString();
  EXPECT_EQ(sub->job.spec.dataset_version, "");
  EXPECT_EQ(JobKindText(sub->job), "export");
  auto again = SubmitJob(*meta_, *plain, 2000);
  ASSERT_TRUE(again.IsOk());
  EXPECT_EQ(again->job.id, sub->job.id) << "deduplicated";
  // A registered model: pinned as NAME@vN, filed under the model's dataset version.
  auto pinned = DraftJob({"kind=export", "model=birds@production", "imgsz=64"}, nullptr,
                         [&](const std::string& text) -> Result<ResolvedWeights> {
                           EXPECT_EQ(text, "birds@production");
                           store::ModelRecord m;
                           m.name = "birds";
                           m.seq = 3;
                           m.dataset_version = std::string(64, 'a');
                           return ResolvedWeights{w, m};
                         });
  ASSERT_TRUE(pinned.IsOk()) << pinned.GetStatus().ToString();
  EXPECT_EQ(pinned->config["model"], "birds@v3");
  auto filed = SubmitJob(*meta_, *pinned, 3000);
  ASSERT_TRUE(filed.IsOk()) << filed.GetStatus().ToString();
  EXPECT_EQ(filed->job.spec.dataset_version, std::string(64, 'a'));
  // int8=true without data=: a weights file has nothing to calibrate on
  // (usage error naming `data`); a registered model calibrates on its own
  // dataset version.
  ExpectRequestError(DraftJob({"kind=export", "model=" + w, "int8=true"}, nullptr).GetStatus(), "data");
  auto int8 = DraftJob({"kind=export", "model=birds@v3", "int8=true"}, nullptr,
                       [&](const std::string&) -> Result<ResolvedWeights> {
                         store::ModelRecord m;
                         m.name = "birds";
                         m.seq = 3;
                         m.dataset_version = std::string(64, 'a');
                         return ResolvedWeights{w, m};
                       });
  EXPECT_TRUE(int8.IsOk()) << int8.GetStatus().ToString();
  // Train jobs still need a dataset.
  EXPECT_FALSE(Submit({"epochs=2"}).IsOk());
}

TEST_F(JobsAppTest, SubmitStoresTheVersionAndDeduplicatesPerKind) {
  auto a = Submit({"data=birds", "epochs=2"});
  ASSERT_TRUE(a.IsOk()) << a.GetStatus().ToString();
  EXPECT_TRUE(a->created);
  EXPECT_EQ(a->dataset, "birds");
  EXPECT_EQ(a->version_id, std::string(64, 'a'));
  EXPECT_EQ(a->job.spec.dataset_version, a->version_id);
  auto cfg = json::parse(a->job.spec.config_json);
  EXPECT_EQ(cfg["data"], "birds@" + a->version_id);
  EXPECT_EQ(json::parse(a->job.spec.spec_json)["data"], "birds") << "typed as given";
  auto b = Submit({"epochs=2", "data=birds@v1"});
  ASSERT_TRUE(b.IsOk());
  EXPECT_FALSE(b->created);
  EXPECT_EQ(b->job.id, a->job.id);
  auto v = Submit({"kind=val", "data=birds", "model=" + Weights()});
  ASSERT_TRUE(v.IsOk()) << v.GetStatus().ToString();
  EXPECT_TRUE(v->created);
  EXPECT_EQ(JobKindText(v->job), "val");
  EXPECT_EQ((*JobKinds().KindOf(v->job))->name, "val");
  EXPECT_EQ(JobKindText(a->job), "train");
  ExpectRequestError(Submit({"data=nope"}).GetStatus(), "data");
  ExpectRequestError(Submit({"data=birds@v7"}).GetStatus(), "data");
  // A front end that imported a dataset path replaces data=: the job stores the version.
  auto d = DraftJob({"data=/some/folder", "epochs=4"}, nullptr);
  ASSERT_TRUE(d.IsOk());
  d->data = "birds@v1";
  auto p = SubmitJob(*meta_, std::move(d).Value(), 1000);
  ASSERT_TRUE(p.IsOk()) << p.GetStatus().ToString();
  EXPECT_EQ(json::parse(p->job.spec.spec_json)["data"], "birds@" + std::string(64, 'a'));
  EXPECT_EQ(SubmitResultJson(*p),
            json({{"ok", true}, {"job_id", p->job.id}, {"created", true}, {"dedup_key", p->job.dedup_key}}));
}

TEST_F(JobsAppTest, ListShowCancelRetryAndTheirViews) {
  auto a = Submit({"data=birds", "epochs=1"}, 1000);
  auto b = Submit({"data=birds", "epochs=2", "priority=low"}, 2000);
  ASSERT_TRUE(a.IsOk() && b.IsOk());
  auto all = ListJobs(*meta_, {});
  ASSERT_TRUE(all.IsOk());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].id, b->job.id) << "newest first";
  auto one = ListJobs(*meta_, {"", 1});
  ASSERT_TRUE(one.IsOk());
  EXPECT_EQ(one->size(), 1u);
  ExpectRequestError(ListJobs(*meta_, {"done", 10}).GetStatus(), "state");
  ExpectRequestError(JobListFilter({"", 0}).GetStatus(), "limit");

  store::ClaimRequest req;
  req.worker = "w";
  req.host = "h";
  req.devices = {store::DeviceOffer{}};
  req.now_ms = 3000;
  auto claimed = meta_->ClaimJob(req);
  ASSERT_TRUE(claimed.IsOk()) << claimed.GetStatus().ToString();
  ASSERT_EQ(claimed->job.id, a->job.id);
  auto running = ListJobs(*meta_, {"running", 10});
  ASSERT_TRUE(running.IsOk());
  ASSERT_EQ(running->size(), 1u);
  EXPECT_EQ((*running)[0].id, a->job.id);
  auto shown = ShowJob(*meta_, a->job.id);
  ASSERT_TRUE(shown.IsOk());
  ASSERT_EQ(shown->attempts.size(), 1u);
  const json view = JobDetailJson(*shown);
  EXPECT_EQ(view["job"], JobJson(shown->job, true));
  EXPECT_EQ(view["attempts"][0], AttemptJson(shown->attempts[0]));
  EXPECT_EQ(view["job"]["kind"], "train");
  EXPECT_EQ(view["job"]["state"], "running");
  EXPECT_EQ(view["job"]["config"]["epochs"], 1);
  EXPECT_EQ(view["job"]["wall_clock_limit_ms"], 0);
  EXPECT_EQ(view["attempts"][0]["worker"], "w");
  EXPECT_EQ(view["attempts"][0]["host"], "h");
  EXPECT_FALSE(JobJson(shown->job, false).contains("config"));
  EXPECT_EQ(ShowJob(*meta_, 99).GetStatus().Code(), StatusCode::kNotFound);

  auto cancelled = CancelJob(*meta_, a->job.id, 4000);
  ASSERT_TRUE(cancelled.IsOk()) << cancelled.GetStatus().ToString();
  EXPECT_EQ(cancelled->state, store::JobState::kCancelled);
  EXPECT_FALSE(CancelJob(*meta_, a->job.id, 4001).IsOk()) << "already finished";
  auto retried = RetryJob(*meta_, a->job.id, 5000);
  ASSERT_TRUE(retried.IsOk()) << retried.GetStatus().ToString();
  EXPECT_EQ(retried->state, store::JobState::kQueued);
  EXPECT_EQ(JobJson(*retried, false)["state"], "queued");
}

TEST_F(JobsAppTest, AJobOfAnUnknownKindReadsAsWrittenAndIsNotRunnable) {
  store::JobRecord j;
  j.id = 7;
  j.spec.config_json = R"({"kind":"segment","data":"birds@x"})";
  EXPECT_EQ(JobKindText(j), "segment");
  auto k = JobKinds().KindOf(j);
  EXPECT_EQ(k.GetStatus().Code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(k.GetStatus().Where().field, "kind");
  EXPECT_EQ(JobJson(j, false)["kind"], "segment");
  j.spec.config_json = R"({"data":"birds@x"})";
  EXPECT_EQ((*JobKinds().KindOf(j))->name, "train") << "jobs from before kinds are training jobs";
}

}  // namespace
}  // namespace kestrel::app
