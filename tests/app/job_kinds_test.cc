// The job-kind table (app/job_kinds.h) without processes: the rows and
// their names, each built-in kind's key checks at submit, the typed result
// and its JSON form, each kind's gate as the worker applies it
// (WorkerKinds), the attempt preamble (RunAttempt) with an in-process
// runner, and the table's view for the UI (JobKindsJson).
#include "app/job_kinds.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "app/jobs.h"
#include "core/safetensors.h"
#include "probe_kind.h"

namespace kestrel::app {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class JobKindsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::temp_directory_path() / ("kestrel_job_kinds_" + std::to_string(::getpid()) + "_" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Weights(bool with_tensor = true) {
    SafeTensorFile f;
    float v = 1;
    if (with_tensor)
      f.tensors["w"] = SafeTensor{"F32", {1}, std::string(reinterpret_cast<const char*>(&v), sizeof v)};
    const std::string path = (dir_ / (with_tensor ? "w.safetensors" : "empty.safetensors")).string();
    std::ofstream(path, std::ios::binary) << SerializeSafeTensors(f);
    return path;
  }
  static store::JobRecord Job(const std::string& kind, double min_map50 = 0) {
    store::JobRecord j;
    j.id = 5;
    j.spec.config_json = kind == "train" ? "{}" : json{{"kind", kind}}.dump();
    j.spec.min_map50 = min_map50;
    return j;
  }
  // The worker's verdict on a result line of a `kind` job.
  static Status Gate(const std::string& kind, const json& result, double min_map50 = 0) {
    return WorkerKinds(JobKinds(), Env::Default()).gate(Job(kind, min_map50), result.dump());
  }
  static void ExpectRequestError(const Status& s, const std::string& field) {
    EXPECT_EQ(s.Code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_EQ(s.Where().file, kRequestFile) << s.ToString();
    EXPECT_EQ(s.Where().field, field) << s.ToString();
  }

  fs::path dir_;
};

TEST_F(JobKindsTest, TheBuiltInRowsAndWhatATableRefuses) {
  JobKindTable t = BuiltinJobKinds();
  EXPECT_EQ(t.Names(), (std::vector<std::string>{"train", "val", "export", "tune"}));
  for (const auto& k : t.Kinds()) {
    EXPECT_FALSE(k->summary.empty()) << k->name;
    EXPECT_TRUE(k->gate) << k->name;
    // tune's coordinator is torch-free: its row carries its runner (app/tune_study.h).
    EXPECT_EQ(static_cast<bool>(k->run), k->name == "tune")
        << k->name << ": runners are set by the program that can run them";
    EXPECT_EQ(k->config_names_kind, k->name != "train") << k->name;
  }
  EXPECT_TRUE(t.Find("train")->on_succeeded) << "a training job registers its model";
  EXPECT_FALSE(t.Find("val")->on_succeeded);
  EXPECT_EQ(t.Add(probe::ProbeKind(false)).Code(), StatusCode::kOk);
  EXPECT_EQ(t.Add(probe::ProbeKind(false)).Code(), StatusCode::kInvalidArgument) << "a name once";
  JobKindSpec bad = probe::ProbeKind(false);
  bad.name = "Tune Study";
  EXPECT_EQ(t.Add(bad).Where().field, "kind");
  EXPECT_EQ(t.SetRunner("nope", probe::RunProbe).Code(), StatusCode::kNotFound);
  EXPECT_TRUE(t.SetRunner("probe", probe::RunProbe).IsOk());

  // A stored job's kind: its config's, train when it names none, an error for one the table lacks.
  EXPECT_EQ((*t.KindOf(Job("val")))->name, "val");
  EXPECT_EQ((*t.KindOf(Job("train")))->name, "train");
  auto unknown = t.KindOf(Job("sweep"));
  EXPECT_EQ(unknown.GetStatus().Where().field, "kind");
  EXPECT_NE(unknown.GetStatus().Message().find("train, val, export, tune, probe"), std::string::npos)
      << unknown.GetStatus().Message();
  EXPECT_FALSE(WorkerKinds(t, Env::Default()).command(Job("sweep")).IsOk());
  EXPECT_EQ(*WorkerKinds(t, Env::Default()).command(Job("export")), "export");
}

TEST_F(JobKindsTest, EachKindsKeyChecksAtSubmit) {
  // A kind picks its schema; kind= names a row of the table passed.
  ExpectRequestError(DraftJob({"kind=sweep", "data=birds"}, nullptr).GetStatus(), "kind");
  JobKindTable only_probe;
  ASSERT_TRUE(only_probe.Add(probe::ProbeKind(false)).IsOk());
  auto no_default = DraftJob({"answer=1"}, nullptr, {}, only_probe);
  ExpectRequestError(no_default.GetStatus(), "kind");
  auto p = DraftJob({"kind=probe", "answer=3"}, nullptr, {}, only_probe);
  ASSERT_TRUE(p.IsOk()) << p.GetStatus().ToString();
  EXPECT_EQ(p->kind, "probe");
  EXPECT_EQ(p->config["kind"], "probe");
  EXPECT_EQ(p->config["answer"], 3);
  EXPECT_EQ(p->data, "");
  ExpectRequestError(DraftJob({"kind=probe", "epochs=3"}, nullptr, {}, only_probe).GetStatus(), "epochs");

  // train: its keys, the job system's keys refused, the trainer's own checks.
  ExpectRequestError(DraftJob({"data=birds", "resume=x.ckpt"}, nullptr).GetStatus(), "resume");
  ExpectRequestError(DraftJob({"data=birds", "epochs=0"}, nullptr).GetStatus(), "epochs");
  auto t = DraftJob({"data=birds", "epochs=2"}, nullptr);
  ASSERT_TRUE(t.IsOk()) << t.GetStatus().ToString();
  EXPECT_FALSE(t->config.contains("kind"));
  // val: data= and model= required, a CPU job, its own refused keys.
  ExpectRequestError(DraftJob({"kind=val", "model=" + Weights()}, nullptr).GetStatus(), "data");
  ExpectRequestError(DraftJob({"kind=val", "data=birds"}, nullptr).GetStatus(), "model");
  ExpectRequestError(
      DraftJob({"kind=val", "data=birds", "model=" + Weights(), "predictions=p"}, nullptr).GetStatus(),
      "predictions");
  ExpectRequestError(
      DraftJob({"kind=val", "data=birds", "model=" + Weights(), "device=0", "gpu_mem=100"}, nullptr)
          .GetStatus(),
      "device");
  ExpectRequestError(
      DraftJob({"kind=val", "data=birds", "model=" + (dir_ / "none").string()}, nullptr).GetStatus(),
      "model");
  // export: output= is the job system's, no min_map50, model= must be weights.
  ExpectRequestError(DraftJob({"kind=export", "model=" + Weights(), "output=x.onnx"}, nullptr).GetStatus(),
                     "output");
  ExpectRequestError(DraftJob({"kind=export", "model=" + Weights(), "min_map50=0.5"}, nullptr).GetStatus(),
                     "min_map50");
  auto e = DraftJob({"kind=export", "model=" + Weights()}, nullptr);
  ASSERT_TRUE(e.IsOk()) << e.GetStatus().ToString();
  EXPECT_EQ(e->config["kind"], "export");
  EXPECT_EQ(e->data, "") << "an export job has no dataset of its own";
}

TEST_F(JobKindsTest, TheResultsJsonFormRoundTripsAndNamesAWrongType) {
  const json train = {{"kind", "train"}, {"attempt", 2},       {"best", "/h/b.safetensors"},
                      {"last", "/h/l"},  {"checkpoint", "/c"}, {"validated", true},
                      {"map50", 0.5},    {"map50_95", 0.25},   {"run_dir", "/h/jobs/1/attempt-2"},
                      {"best_epoch", 3}, {"epochs", 4},        {"exit_reason", "completed"}};
  const json unvalidated = {{"best", "/b"}, {"validated", false}, {"not_validated", "val=false"}};
  const json val = {{"kind", "val"}, {"model", "/m"}, {"map50", 0.0}, {"data", "birds@x"}, {"images", 8}};
  const json exported = {{"kind", "export"},
                         {"path", "/j/m.onnx"},
                         {"verified", false},
                         {"verification", {{"verified", false}, {"max_abs_diff", 1e-5}}}};
  const json empty_strings = {{"best", ""}, {"attempt", 0}};  // kept as they were written
  for (const json& j : {train, unvalidated, val, exported, empty_strings}) {
    auto r = AttemptResult::FromJson(j);
    ASSERT_TRUE(r.IsOk()) << j.dump() << ": " << r.GetStatus().ToString();
    EXPECT_EQ(r->ToJson(), j);
  }
  auto t = AttemptResult::FromJson(train);
  EXPECT_EQ(t->best, "/h/b.safetensors");
  EXPECT_EQ(t->map50, 0.5);
  EXPECT_EQ(t->attempt, 2);
  EXPECT_EQ(t->details, (json{{"best_epoch", 3}, {"epochs", 4}, {"exit_reason", "completed"}}));
  EXPECT_EQ(AttemptResult::FromJson(unvalidated)->map50, std::nullopt) << "no mAP, never a 0";
  for (const auto& [key, value] : std::vector<std::pair<std::string, json>>{
           {"map50", "0.5"}, {"best", 3}, {"validated", "no"}, {"verified", 1}, {"attempt", 1.5}}) {
    auto bad = AttemptResult::FromJson({{key, value}});
    EXPECT_EQ(bad.GetStatus().Code(), StatusCode::kInvalidArgument) << key;
    EXPECT_EQ(bad.GetStatus().Where().field, key);
  }
  EXPECT_FALSE(AttemptResult::Parse("[1]").IsOk());
  EXPECT_FALSE(AttemptResult::Parse("{").IsOk());
}

TEST_F(JobKindsTest, EachKindsGate) {
  const std::string w = Weights();
  // train: best weights that load, then min_map50 on map50.
  EXPECT_TRUE(Gate("train", {{"best", w}, {"map50", 0.5}}, 0.4).IsOk());
  EXPECT_NE(Gate("train", {{"best", w}, {"map50", 0.3}}, 0.4).Message().find("below the job's min_map50"),
            std::string::npos);
  EXPECT_NE(Gate("train", {{"map50", 0.9}}).Message().find("no best weights"), std::string::npos);
  EXPECT_NE(
      Gate("train", {{"best", (dir_ / "gone").string()}, {"map50", 0.9}}).Message().find("do not exist"),
      std::string::npos);
  EXPECT_NE(Gate("train", {{"best", Weights(false)}, {"map50", 0.9}}).Message().find("hold no tensors"),
            std::string::npos);
  // val=false: passes without a gate, fails one it cannot check.
  EXPECT_TRUE(Gate("train", {{"best", w}, {"validated", false}}).IsOk());
  EXPECT_NE(Gate("train", {{"best", w}, {"validated", false}}, 0.1).Message().find("not validated"),
            std::string::npos);
  // val: its map50 against min_map50; no map50, no pass.
  EXPECT_TRUE(Gate("val", {{"map50", 0.2}}, 0.2).IsOk());
  EXPECT_FALSE(Gate("val", {{"model", "/m"}}).IsOk());
  // export: the written file, and a verified flag.
  EXPECT_TRUE(Gate("export", {{"path", w}, {"verified", true}}).IsOk());
  EXPECT_NE(Gate("export", {{"path", w}}).Message().find("verified"), std::string::npos);
  EXPECT_NE(Gate("export", {{"verified", true}}).Message().find("no exported file"), std::string::npos);
  // Every kind: a result line is required and must be the typed result.
  auto gate = WorkerKinds(JobKinds(), Env::Default()).gate;
  EXPECT_NE(gate(Job("val"), "").Message().find("without a result line"), std::string::npos);
  EXPECT_NE(gate(Job("val"), R"({"map50":"high"})").Message().find("map50"), std::string::npos);
  EXPECT_FALSE(gate(Job("sweep"), R"({"map50":1})").IsOk()) << "a kind the table lacks";
}

TEST_F(JobKindsTest, ThePreambleChecksTheAttemptAndReportsTheTypedResult) {
  JobKindTable t = BuiltinJobKinds();
  ASSERT_TRUE(t.Add(probe::ProbeKind(/*with_runner=*/true)).IsOk());
  const std::string home = (dir_ / "home").string();
  auto meta = store::MetadataStore::Open(store::MetadataUrl(home));
  ASSERT_TRUE(meta.IsOk()) << meta.GetStatus().ToString();
  auto submit = [&](const std::vector<std::string>& tokens) {
    auto d = DraftJob(tokens, nullptr, {}, t);
    EXPECT_TRUE(d.IsOk()) << d.GetStatus().ToString();
    return *SubmitJob(**meta, std::move(d).Value(), 1'000);
  };
  const SubmitResult probe_job = submit({"kind=probe", "answer=42"});
  std::vector<std::string> lines;
  AttemptIo io;
  io.progress = [&lines](const std::string& l) { lines.push_back(l); };

  // Queued, not running at attempt 1: the lease is someone else's (or nobody's).
  AttemptOutcome stale = RunAttempt(t, "probe", home, probe_job.job.id, 1, io);
  EXPECT_EQ(stale.failure, FailureReason::kLeaseLost);
  EXPECT_EQ(lines.back(), "reason=lease_lost");

  store::ClaimRequest req;
  req.worker = "w";
  req.host = "h";
  req.devices = {{"cpu", 0, 0}};
  req.now_ms = 2'000;
  req.lease_ms = 60'000;
  auto claimed = (*meta)->ClaimJob(req);
  ASSERT_TRUE(claimed.IsOk()) << claimed.GetStatus().ToString();
  ASSERT_EQ(claimed->job.id, probe_job.job.id);
  // The job's kind decides: a train child refuses a probe job.
  lines.clear();
  AttemptOutcome wrong = RunAttempt(t, "train", home, probe_job.job.id, 1, io);
  EXPECT_EQ(wrong.failure, FailureReason::kBadConfig) << "the train row has no runner here";
  lines.clear();
  ASSERT_TRUE(
      t.SetRunner("train", [](AttemptContext&) -> Result<AttemptResult> { return AttemptResult{}; }).IsOk());
  wrong = RunAttempt(t, "train", home, probe_job.job.id, 1, io);
  EXPECT_EQ(wrong.failure, FailureReason::kBadConfig);
  EXPECT_NE(wrong.error.Message().find("is a probe job, not a train job"), std::string::npos)
      << wrong.error.ToString();

  lines.clear();
  AttemptOutcome done = RunAttempt(t, "probe", home, probe_job.job.id, 1, io);
  ASSERT_EQ(done.failure, FailureReason::kNone) << done.error.ToString();
  EXPECT_EQ(done.exit_code, 0);
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines.front(), "stage=data job=" + std::to_string(probe_job.job.id) + " attempt=1");
  ASSERT_EQ(lines.back().rfind("result ", 0), 0u) << lines.back();
  auto reported = AttemptResult::Parse(lines.back().substr(7));
  ASSERT_TRUE(reported.IsOk());
  EXPECT_EQ(reported->kind, "probe");
  EXPECT_EQ(reported->attempt, 1);
  EXPECT_EQ(reported->map50, 0.42);
  EXPECT_EQ(reported->ToJson(), done.result.ToJson());
  EXPECT_EQ(AttemptOutcomeJson(probe_job.job.id, 1, done)["result"], done.result.ToJson());
}

TEST_F(JobKindsTest, TheUiReadsKindsStatesAndActionsFromTheTable) {
  const json doc = JobKindsJson(BuiltinJobKinds());
  ASSERT_EQ(doc["kinds"].size(), 4u);
  EXPECT_EQ(doc["kinds"][0]["name"], "train");
  EXPECT_EQ(doc["kinds"][0]["default"], true);
  std::map<std::string, json> actions;
  for (const auto& s : doc["states"]) actions[s["name"]] = s["actions"];
  ASSERT_EQ(actions.size(), 6u);
  EXPECT_EQ(actions["queued"], json::array({"cancel"}));
  EXPECT_EQ(actions["running"], json::array({"cancel"}));
  EXPECT_EQ(actions["failed_retryable"], json::array({"cancel", "retry"}));
  EXPECT_EQ(actions["failed_permanent"], json::array({"retry"}));
  EXPECT_EQ(actions["cancelled"], json::array({"retry"}));
  EXPECT_EQ(actions["succeeded"], json::array());
}

}  // namespace
}  // namespace kestrel::app
