// Black-box tests of the job commands: submit (dedup, validation), jobs
// list/show/logs/cancel/retry, stats, breaker reset, and (with LibTorch) a
// worker running real tiny trainings, including a SIGKILLed child whose
// next attempt resumes from the checkpoint the killed one left.
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <thread>

#include "app/jobs.h"
#include "cli_fixture.h"
#include "freeze_when.h"
#include "store/artifact_store.h"

namespace kestrel::testing {
namespace {

namespace fs = std::filesystem;

class JobsCliTest : public KestrelCliTest {
 protected:
  void SetUp() override {
    KestrelCliTest::SetUp();
    ASSERT_EQ(Kestrel("dataset synth data --images 12 --imgsz 64 --seed 3").code, 0);
    ASSERT_EQ(Kestrel("dataset import data --name tiny").code, 0);
  }
  // A job that trains in about a second on one core.
  static std::string TinyJob(const std::string& extra = "") {
    return "submit data=tiny model=t imgsz=64 batch=4 workers=1 threads=1 plots=false optimizer=AdamW "
           "lr0=0.01 "
           "warmup_epochs=0 " +
           extra;
  }
  int64_t SubmitId(const std::string& args) {
    CliRun r = Kestrel("--json " + args);
    EXPECT_EQ(r.code, 0) << r.out;
    auto j = Json(r);
    return j.value("job_id", int64_t{0});
  }
  nlohmann::json Show(int64_t id) { return Json(Kestrel("--json jobs show " + std::to_string(id))); }
  // The store the CLI wrote, opened by the test (what a server would call).
  std::unique_ptr<store::MetadataStore> Meta() {
    auto m = store::MetadataStore::Open(store::MetadataUrl((dir_ / "home").string()));
    EXPECT_TRUE(m.IsOk()) << m.GetStatus().ToString();
    return m.IsOk() ? std::move(m).Value() : nullptr;
  }
  fs::path JobDir(int64_t id) { return dir_ / "home" / "jobs" / std::to_string(id); }
};

TEST_F(JobsCliTest, SubmitIsIdempotentAndRejectsBadKeysWithoutStoringAnything) {
  auto a = Json(Kestrel("--json " + TinyJob("epochs=1")));
  EXPECT_EQ(a["ok"], true);
  EXPECT_EQ(a["created"], true);
  EXPECT_EQ(a["dedup_key"].get<std::string>().size(), 64u);
  // Same effective config in another key order: the same live job.
  auto b =
      Json(Kestrel("--json submit epochs=1 warmup_epochs=0 lr0=0.01 optimizer=AdamW plots=false threads=1 "
                   "workers=1 batch=4 imgsz=64 model=t data=tiny"));
  EXPECT_EQ(b["job_id"], a["job_id"]);
  EXPECT_EQ(b["created"], false);
  // data=NAME@v1 resolves to the same version: still the same job.
  EXPECT_EQ(Json(Kestrel("--json " + TinyJob("epochs=1 data=tiny@v1")))["job_id"], a["job_id"]);

  for (const char* bad :
       {"epoch=1", "lr0=100", "data=nope", "resume=x.ckpt", "device=0", "gpu_mem=100", "priority=urgent",
        "backoff=1,x", "min_map50=2", "max_retries=-1", "time_limit=-5"}) {
    CliRun r = Kestrel("--json " + TinyJob(std::string("epochs=2 ") + bad));
    EXPECT_EQ(r.code, 2) << bad << ": " << r.out;
    auto j = Json(r);
    EXPECT_EQ(j["ok"], false) << bad;
  }
  // The message names the key (with a hint for a typo).
  CliRun typo = Kestrel("--json " + TinyJob("epoch=1"));
  EXPECT_NE(typo.out.find("epochs"), std::string::npos) << typo.out;
  auto list = Json(Kestrel("--json jobs list"));
  EXPECT_EQ(list["jobs"].size(), 1u) << "a rejected submission stored a job";
}

TEST_F(JobsCliTest, ListShowCancelRetryStatsAndBreakerReset) {
  int64_t id =
      SubmitId(TinyJob("epochs=1 priority=high max_retries=2 backoff=0.5,1 time_limit=600 min_map50=0.1"));
  ASSERT_GT(id, 0);
  auto list = Json(Kestrel("--json jobs list"));
  ASSERT_EQ(list["jobs"].size(), 1u);
  const auto& j = list["jobs"][0];
  for (const char* k : {"id", "state", "attempt", "priority", "retries_used", "infra_retries_used",
                        "last_reason", "created_ms", "finished_ms", "result"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_EQ(j["id"], id);
  EXPECT_EQ(j["state"], "queued");
  EXPECT_EQ(j["priority"], "high");
  EXPECT_TRUE(j["result"].is_null());
  EXPECT_EQ(Json(Kestrel("--json jobs list --state running"))["jobs"].size(), 0u);

  auto show = Show(id);
  EXPECT_EQ(show["job"]["id"], id);
  EXPECT_EQ(show["job"]["max_retries"], 2);
  EXPECT_EQ(show["job"]["wall_clock_limit_ms"], 600000);
  EXPECT_EQ(show["job"]["config"]["min_map50"], 0.1);
  EXPECT_EQ(show["job"]["config"]["epochs"], 1);
  EXPECT_EQ(show["job"]["config"]["device"], "cpu");
  EXPECT_NE(show["job"]["config"]["data"].get<std::string>().find("tiny@"), std::string::npos);
  EXPECT_TRUE(show["attempts"].is_array());
  EXPECT_EQ(show["attempts"].size(), 0u);
  EXPECT_EQ(Kestrel("jobs logs " + std::to_string(id)).code, 1) << "no attempt yet";
  EXPECT_EQ(Kestrel("jobs show 999").code, 1);
  EXPECT_EQ(Kestrel("jobs show x").code, 2);

  auto cancelled = Json(Kestrel("--json jobs cancel " + std::to_string(id)));
  EXPECT_EQ(cancelled["job"]["state"], "cancelled");
  EXPECT_EQ(Kestrel("jobs cancel " + std::to_string(id)).code, 1) << "already finished";
  auto retried = Json(Kestrel("--json jobs retry " + std::to_string(id)));
  EXPECT_EQ(retried["job"]["state"], "queued");

  auto stats = Json(Kestrel("--json stats"));
  for (const char* k :
       {"jobs", "succeeded", "failed_permanent", "cancelled", "live", "availability", "attempts",
        "failed_attempts", "retries", "infra_retries", "failures_by_stage", "failures_by_class",
        "failures_by_reason", "mean_time_to_recovery_ms", "recovered_jobs"}) {
    EXPECT_TRUE(stats.contains(k)) << k;
  }
  EXPECT_EQ(stats["jobs"], 1);
  EXPECT_EQ(stats["live"], 1);
  EXPECT_EQ(stats["breaker"]["open"], false);
  EXPECT_EQ(stats["breaker"]["reason"], "");
  auto reset = Json(Kestrel("--json breaker reset"));
  EXPECT_EQ(reset["ok"], true);
  EXPECT_GT(reset["reset_ms"].get<int64_t>(), 0);
  EXPECT_EQ(Kestrel("stats").code, 0);
}

// Every job command's --json document is the application layer's JSON view
// of the same record (app/jobs.h), so another front end calling the same
// functions cannot drift from the CLI.
TEST_F(JobsCliTest, JsonOutputIsTheAppLayersViewOfTheSameRecords) {
  using nlohmann::json;
  auto meta = Meta();
  ASSERT_NE(meta, nullptr);
  // submit
  const json submitted = Json(Kestrel("--json " + TinyJob("epochs=1 min_map50=0.2")));
  const int64_t id = submitted.value("job_id", int64_t{0});
  ASSERT_GT(id, 0) << submitted.dump();
  auto job = meta->GetJob(id);
  ASSERT_TRUE(job.IsOk()) << job.GetStatus().ToString();
  EXPECT_EQ(submitted, app::SubmitResultJson({*job, true, "", ""}));
  const json again = Json(Kestrel("--json " + TinyJob("epochs=1 min_map50=0.2")));
  EXPECT_EQ(again, app::SubmitResultJson({*job, false, "", ""}));
  const int64_t other = SubmitId(TinyJob("epochs=2"));
  // list (newest first), with and without a filter
  auto all = app::ListJobPage(*meta, {});
  ASSERT_TRUE(all.IsOk());
  ASSERT_EQ(all->jobs.size(), 2u);
  const json views = app::JobPageJson(*all)["jobs"];
  EXPECT_EQ(Json(Kestrel("--json jobs list")), app::JobPageJson(*all));
  app::JobListRequest first_req;
  first_req.state = "queued";
  first_req.limit = 1;
  auto first = app::ListJobPage(*meta, first_req);
  ASSERT_TRUE(first.IsOk());
  const json page1 = Json(Kestrel("--json jobs list --state queued --limit 1"));
  EXPECT_EQ(page1, app::JobPageJson(*first));
  EXPECT_EQ(page1["jobs"], json::array({views[0]}));
  // The next page from the cursor: the older job, and no page after it.
  const json page2 = Json(Kestrel("--json jobs list --state queued --limit 1 --before " +
                                  std::to_string(page1["next_cursor"].get<int64_t>())));
  EXPECT_EQ(page2["jobs"], json::array({views[1]}));
  EXPECT_TRUE(page2["next_cursor"].is_null());
  EXPECT_EQ(views[0]["id"], other);
  EXPECT_EQ(views[0]["kind"], "train");
  // The registry's name and version of the job's dataset version (one row
  // is JobJson plus these two).
  EXPECT_EQ(views[0]["dataset"], "tiny");
  EXPECT_EQ(views[0]["version"], "v1");
  json plain = views[0];
  plain.erase("dataset");
  plain.erase("version");
  EXPECT_EQ(plain, app::JobJson(all->jobs[0], false));
  // attempts: a worker's steps through the store (claim, pid, a retryable
  // failure), so `jobs show` has an attempt to show.
  store::ClaimRequest req;
  req.worker = "w-test";
  req.host = "host-test";
  req.devices = {store::DeviceOffer{}};
  req.now_ms = job->created_ms + 1;
  auto claimed = meta->ClaimJob(req);
  ASSERT_TRUE(claimed.IsOk()) << claimed.GetStatus().ToString();
  ASSERT_EQ(claimed->job.id, id) << "FIFO within a priority";
  ASSERT_TRUE(meta->RecordAttemptPid(id, 1, "w-test", 4242).IsOk());
  store::AttemptOutcome failed;
  failed.exit_code = 6;
  failed.stage = store::FailureStage::kTrain;
  failed.reason = FailureReason::kIoError;
  failed.message = "disk full";
  ASSERT_TRUE(meta->CompleteAttempt(id, 1, "w-test", failed, req.now_ms + 5).IsOk());
  auto detail = app::ShowJob(*meta, id);
  ASSERT_TRUE(detail.IsOk());
  ASSERT_EQ(detail->attempts.size(), 1u);
  const json shown = Show(id);
  EXPECT_EQ(shown, app::JobDetailJson(*detail));
  EXPECT_EQ(shown["attempts"][0], app::AttemptJson(detail->attempts[0]));
  EXPECT_EQ(shown["attempts"][0]["pid"], 4242);
  EXPECT_EQ(shown["attempts"][0]["reason"], "io_error");
  EXPECT_EQ(shown["job"]["config"]["min_map50"], 0.2);
  // cancel and retry print the changed record's view
  const json cancelled = Json(Kestrel("--json jobs cancel " + std::to_string(id)));
  EXPECT_EQ(cancelled, json({{"ok", true}, {"job", app::JobJson(*meta->GetJob(id), false)}}));
  EXPECT_EQ(cancelled["job"]["state"], "cancelled");
  const json retried = Json(Kestrel("--json jobs retry " + std::to_string(id)));
  EXPECT_EQ(retried, json({{"ok", true}, {"job", app::JobJson(*meta->GetJob(id), false)}}));
  EXPECT_EQ(retried["job"]["state"], "queued");
}

TEST_F(JobsCliTest, ValJobsAreValidatedAtSubmitAndShowTheirKind) {
  // A val job names the weights it scores; they must be a readable weights file.
  Write("weights.safetensors", "not safetensors");
  for (const char* bad :
       {"kind=val data=tiny", "kind=val model=weights.safetensors",
        "kind=val data=tiny model=none.safetensors", "kind=val data=tiny model=weights.safetensors",
        "kind=val data=tiny model=x epochs=3", "kind=val data=tiny model=x predictions=p",
        "kind=val data=tiny model=x project=p", "kind=tune data=tiny"}) {
    CliRun r = Kestrel(std::string("--json submit ") + bad);
    EXPECT_EQ(r.code, 2) << bad << ": " << r.out;
    EXPECT_EQ(Json(r)["ok"], false) << bad;
  }
  CliRun typo = Kestrel("--json submit kind=val data=tiny model=x epochs=3");
  EXPECT_NE(typo.out.find("epochs"), std::string::npos) << typo.out;
  EXPECT_EQ(Json(Kestrel("--json jobs list"))["jobs"].size(), 0u) << "a rejected submission stored a job";
}

#ifdef KESTREL_CLI_WITH_TORCH

TEST_F(JobsCliTest, WorkerRunsATinyJobPastTheQualityGate) {
  int64_t id = SubmitId(TinyJob("epochs=1"));
  ASSERT_GT(id, 0);
  CliRun w = Kestrel("--json worker --exit-when-idle --poll-s 0.1 --heartbeat-s 1 --lease-s 10 --id w1");
  ASSERT_EQ(w.code, 0) << w.out;
  auto wj = Json(w);
  EXPECT_EQ(wj["claimed"], 1);
  EXPECT_EQ(wj["succeeded"], 1);
  auto show = Show(id);
  EXPECT_EQ(show["job"]["state"], "succeeded") << show.dump(2);
  const auto& result = show["job"]["result"];
  ASSERT_TRUE(result.is_object()) << show.dump(2);
  const std::string attempt_dir = (JobDir(id) / "attempt-1").string();
  EXPECT_EQ(result["run_dir"], attempt_dir);
  EXPECT_EQ(result["best"], attempt_dir + "/weights/best.safetensors");
  EXPECT_TRUE(fs::exists(result["best"].get<std::string>()));
  EXPECT_TRUE(fs::exists(attempt_dir + "/weights/last.ckpt"));
  EXPECT_EQ(result["epochs"], 1);
  EXPECT_TRUE(result["map50"].is_number());
  ASSERT_EQ(show["attempts"].size(), 1u);
  const auto& a = show["attempts"][0];
  EXPECT_EQ(a["worker"], "w1");
  EXPECT_GT(a["pid"].get<int64_t>(), 0);
  EXPECT_EQ(a["exit_code"], 0);
  EXPECT_EQ(a["signal"], 0);
  EXPECT_GT(a["ended_ms"].get<int64_t>(), a["started_ms"].get<int64_t>());
  CliRun logs = Kestrel("jobs logs " + std::to_string(id));
  EXPECT_EQ(logs.code, 0);
  EXPECT_NE(logs.out.find("best mAP50"), std::string::npos) << logs.out;
  auto stats = Json(Kestrel("--json stats"));
  EXPECT_EQ(stats["succeeded"], 1);
  EXPECT_EQ(stats["availability"], 1.0);
  // A job whose model misses its threshold fails the gate for good.
  int64_t strict = SubmitId(TinyJob("epochs=1 min_map50=1"));
  ASSERT_EQ(Kestrel("worker --exit-when-idle --poll-s 0.1").code, 0);
  auto s2 = Show(strict);
  EXPECT_EQ(s2["job"]["state"], "failed_permanent");
  EXPECT_EQ(s2["attempts"][0]["reason"], "quality_gate");
  EXPECT_EQ(s2["attempts"][0]["exit_code"], 0) << "exit code 0 is not success";
  // A stale attempt number is refused by the child itself.
  EXPECT_EQ(Kestrel("train --job " + std::to_string(id) + " --attempt 7").code, 1);
}

// A val job runs `kestrel val --job ID --attempt N` under the same worker,
// lease and gate as a training job; its result is the evaluation, readable
// in `jobs show`, and it registers no model.
TEST_F(JobsCliTest, WorkerRunsAValJobAndShowsItsResult) {
  const int64_t train = SubmitId(TinyJob("epochs=1"));
  ASSERT_EQ(Kestrel("worker --exit-when-idle --poll-s 0.1").code, 0);
  const auto trained = Show(train);
  ASSERT_EQ(trained["job"]["state"], "succeeded") << trained.dump(2);
  const std::string weights = trained["job"]["result"]["best"];
  auto sub = Json(Kestrel("--json submit kind=val model=" + weights +
                          " data=tiny split=val imgsz=64 batch=4 save_json=true"));
  ASSERT_EQ(sub["ok"], true) << sub.dump();
  const int64_t id = sub["job_id"];
  CliRun w = Kestrel("--json worker --exit-when-idle --poll-s 0.1 --heartbeat-s 1 --lease-s 10 --id wv");
  ASSERT_EQ(w.code, 0) << w.out;
  EXPECT_EQ(Json(w)["succeeded"], 1);
  const auto show = Show(id);
  EXPECT_EQ(show["job"]["kind"], "val");
  EXPECT_EQ(show["job"]["config"]["kind"], "val");
  EXPECT_EQ(show["job"]["config"]["model"], weights);
  ASSERT_EQ(show["job"]["state"], "succeeded") << show.dump(2);
  const auto& result = show["job"]["result"];
  const std::string attempt_dir = (JobDir(id) / "attempt-1").string();
  EXPECT_EQ(result["kind"], "val");
  EXPECT_EQ(result["model"], weights);
  EXPECT_EQ(result["run_dir"], attempt_dir);
  EXPECT_TRUE(result["map50"].is_number());
  EXPECT_GT(result["images"].get<int64_t>(), 0);
  EXPECT_TRUE(fs::exists(attempt_dir + "/result.json"));
  EXPECT_EQ(show["attempts"][0]["worker"], "wv");
  EXPECT_EQ(show["attempts"][0]["exit_code"], 0);
  // Only the training job made a model.
  EXPECT_EQ(Json(Kestrel("--json models list"))["models"].size(), 1u);
  // The succeeded val job is an evaluation (what /api/evaluations serves):
  // listed with the job's figures, its images read from the predictions the
  // worker's child saved.
  const auto evals = Json(Kestrel("--json evaluations list"))["evaluations"];
  ASSERT_EQ(evals.size(), 1u) << evals.dump(2);
  EXPECT_EQ(evals[0]["id"], id);
  EXPECT_EQ(evals[0]["map50"], result["map50"]);
  EXPECT_EQ(evals[0]["images"], result["images"]);
  EXPECT_EQ(evals[0]["has_predictions"], true);
  const auto one = Json(Kestrel("--json evaluations show " + std::to_string(id)));
  EXPECT_EQ(one["evaluation"]["split"], "val") << one.dump(2);
  const auto images = Json(Kestrel("--json evaluations images " + std::to_string(id)));
  EXPECT_EQ(images["total"], result["images"]) << images.dump(2);
  EXPECT_EQ(images["right"].get<int64_t>() + images["wrong"].get<int64_t>(), result["images"].get<int64_t>());
  // The gate judges a val job's map50 too; the child refuses a job of another kind.
  const int64_t strict =
      SubmitId("submit kind=val model=" + weights + " data=tiny imgsz=64 batch=4 plots=false min_map50=1");
  ASSERT_EQ(Kestrel("worker --exit-when-idle --poll-s 0.1").code, 0);
  const auto s2 = Show(strict);
  EXPECT_EQ(s2["job"]["state"], "failed_permanent") << s2.dump(2);
  EXPECT_EQ(s2["attempts"][0]["reason"], "quality_gate");
  EXPECT_EQ(Kestrel("val --job " + std::to_string(train) + " --attempt 1").code, 1)
      << "not running: lease_lost";
}

// An export job runs `kestrel export --job ID --attempt N`: the registered
// model's export written into the job's folder, verified, recorded on the
// model as `kestrel export` records it, its result (path, verified, max
// diffs) in `jobs show`. A file an earlier (crashed) attempt left at the
// path is replaced by the verified one, never trusted.
TEST_F(JobsCliTest, WorkerRunsAnExportJobAndTheRegistryRecordsIt) {
  const int64_t train = SubmitId(TinyJob("epochs=1"));
  ASSERT_EQ(Kestrel("worker --exit-when-idle --poll-s 0.1").code, 0);
  ASSERT_EQ(Show(train)["job"]["state"], "succeeded");
  const auto models = Json(Kestrel("--json models list"))["models"];
  ASSERT_EQ(models.size(), 1u) << models.dump();
  const std::string ref = models[0]["ref"];
  // Refused at submit with `kestrel export`'s messages, exit 2, nothing stored.
  for (const char* bad : {"opset=11", "imgsz=33", "format=tflite", "output=x.onnx", "min_map50=0.5"}) {
    CliRun r = Kestrel("--json submit kind=export model=" + ref + " " + bad);
    EXPECT_EQ(r.code, 2) << bad << ": " << r.out;
    const std::string key = std::string(bad).substr(0, std::string(bad).find('='));
    EXPECT_EQ(Json(r)["error"]["field"], key) << r.out;
    if (key == "opset" || key == "imgsz" || key == "format") {
      CliRun direct = Kestrel("--json export model=" + ref + " " + bad);
      EXPECT_EQ(direct.code, 2);
      EXPECT_EQ(Json(r)["error"]["message"], Json(direct)["error"]["message"]) << "the same check";
    }
  }
  EXPECT_EQ(Json(Kestrel("--json jobs list"))["jobs"].size(), 1u) << "a rejected submission stored a job";

  const auto sub =
      Json(Kestrel("--json submit kind=export model=" + ref + " format=onnx imgsz=64 verify_images=2"));
  ASSERT_EQ(sub["ok"], true) << sub.dump();
  const int64_t id = sub["job_id"];
  const std::string stem = std::string(ref).replace(ref.find('@'), 1, "_");
  const fs::path path = JobDir(id) / (stem + ".onnx");
  fs::create_directories(JobDir(id));
  std::ofstream(path) << "left by a crashed attempt";
  const auto t0 = std::chrono::steady_clock::now();
  CliRun w = Kestrel("--json worker --exit-when-idle --poll-s 0.1 --heartbeat-s 1 --lease-s 10 --id we");
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(w.code, 0) << w.out;
  EXPECT_EQ(Json(w)["succeeded"], 1) << Kestrel("jobs logs " + std::to_string(id)).out;
  const auto show = Show(id);
  ASSERT_EQ(show["job"]["state"], "succeeded") << show.dump(2);
  EXPECT_EQ(show["job"]["kind"], "export");
  EXPECT_EQ(show["job"]["config"]["model"], ref);
  const auto& result = show["job"]["result"];
  EXPECT_EQ(result["kind"], "export");
  EXPECT_EQ(result["model"], ref);
  EXPECT_EQ(result["path"], path.string());
  EXPECT_EQ(result["verified"], true);
  EXPECT_LE(result["max_abs_diff_scores"].get<double>(), result["tolerance"].get<double>());
  EXPECT_LE(result["max_rel_diff_boxes"].get<double>(), result["tolerance"].get<double>());
  EXPECT_EQ(result["bytes"].get<int64_t>(), static_cast<int64_t>(fs::file_size(path)))
      << "the stale file was replaced by the verified export";
  EXPECT_EQ(result["registry"]["model"], ref);
  EXPECT_FALSE(fs::exists(path.string() + ".verifying.onnx"));
  std::cout << "export job wall time (worker start to exit): " << wall_s << " s\n";
  // The registry lists the export on the model, as after `kestrel export`.
  const auto model = Json(Kestrel("--json models show " + ref));
  const auto& exports = model["model"]["exports"];
  ASSERT_EQ(exports.size(), 1u) << model.dump(2);
  EXPECT_EQ(exports[0]["path"], path.string());
  EXPECT_EQ(exports[0]["id"], result["registry"]["export_id"]);
  EXPECT_EQ(exports[0]["verified"], true);
  // Still one model: an export job registers none. The child refuses a job of another kind.
  EXPECT_EQ(Json(Kestrel("--json models list"))["models"].size(), 1u);
  EXPECT_EQ(Kestrel("export --job " + std::to_string(train) + " --attempt 1").code, 1);
  EXPECT_EQ(Kestrel("export --job 1").code, 2) << "--job needs --attempt";
}

TEST_F(JobsCliTest, TooManyUnreadableImagesFailPermanentlyAsDatasetErrors) {
  // Damage every stored JPEG (the artifact store verifies each read, so the
  // loader sees them as unreadable); the manifest blobs stay intact.
  int damaged = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir_ / "home" / "objects")) {
    if (!e.is_regular_file()) continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    char magic[2] = {0, 0};
    f.read(magic, 2);
    if (static_cast<unsigned char>(magic[0]) != 0xFF || static_cast<unsigned char>(magic[1]) != 0xD8)
      continue;
    f.seekp(10);
    f.write("XXXX", 4);
    ++damaged;
  }
  ASSERT_GT(damaged, 0);
  int64_t id = SubmitId(TinyJob("epochs=1 max_bad_fraction=0.1 max_retries=3 backoff=0"));
  ASSERT_EQ(Kestrel("worker --exit-when-idle --poll-s 0.1").code, 0);
  auto show = Show(id);
  EXPECT_EQ(show["job"]["state"], "failed_permanent") << show.dump(2);
  ASSERT_EQ(show["attempts"].size(), 1u) << "a data failure must not be retried: " << show.dump(2);
  EXPECT_EQ(show["attempts"][0]["reason"], "dataset_errors") << show.dump(2);
  EXPECT_EQ(show["attempts"][0]["failure_class"], "permanent");
}

TEST_F(JobsCliTest, SigkilledChildResumesFromThePreviousAttemptsCheckpoint) {
  int64_t id = SubmitId(TinyJob("epochs=5 backoff=0"));
  ASSERT_GT(id, 0);
  CliRun w;
  std::thread worker(
      [&] { w = Kestrel("--json worker --exit-when-idle --poll-s 0.1 --heartbeat-s 1 --lease-s 10"); });
  // Find the child in /proc (asking the store would take longer than its
  // remaining epochs), then kill it once its first epoch's checkpoint
  // exists. The check runs while the child is frozen (FreezeWhen), so a
  // loaded machine cannot let it finish between the check and the kill.
  const fs::path ckpt = JobDir(id) / "attempt-1" / "weights" / "last.ckpt";
  const pid_t pid = WaitForTrainAttempt(id, 1, (dir_ / "home").string(), std::chrono::minutes(2));
  ASSERT_GT(pid, 0) << "attempt 1 never started";
  const Freeze frozen = FreezeWhen(
      pid, [&] { return fs::exists(ckpt); }, std::chrono::minutes(2));
  ASSERT_EQ(frozen, Freeze::kReady) << (frozen == Freeze::kEnded
                                            ? "attempt 1 ended before its first checkpoint"
                                            : "attempt 1 never wrote a checkpoint");
  ::kill(pid, SIGKILL);
  worker.join();
  ASSERT_EQ(w.code, 0) << w.out;
  auto show = Show(id);
  EXPECT_EQ(show["job"]["state"], "succeeded") << show.dump(2);
  ASSERT_EQ(show["attempts"].size(), 2u) << show.dump(2);
  EXPECT_EQ(show["attempts"][0]["reason"], "killed");
  EXPECT_EQ(show["attempts"][0]["signal"], SIGKILL);
  EXPECT_EQ(show["attempts"][0]["failure_class"], "retryable");
  EXPECT_EQ(show["job"]["retries_used"], 1);
  CliRun log2 = Kestrel("jobs logs " + std::to_string(id) + " --attempt 2");
  EXPECT_NE(log2.out.find("resuming from " + ckpt.string()), std::string::npos) << log2.out;
  EXPECT_NE(log2.out.find("resumed from"), std::string::npos) << "the trainer continued the checkpoint:\n"
                                                              << log2.out;
  // Attempt 2 wrote into its own folder and finished all epochs there.
  EXPECT_TRUE(fs::exists(JobDir(id) / "attempt-2" / "weights" / "last.ckpt"));
  EXPECT_EQ(show["job"]["result"]["epochs"], 5);
  EXPECT_EQ(show["job"]["result"]["run_dir"], (JobDir(id) / "attempt-2").string());
}

// Issue 31: a host whose kestrel-torch cannot load a library. A copy of
// `kestrel` whose kestrel-torch beside it is a wrapper that answers
// `fingerprint` (the worker's start) through the real one but fails every
// attempt as the dynamic loader does (its message, exit 127). Its worker
// fails each job once (environment: no retry spent, the job kept off the
// host), is quarantined at the third failure and claims nothing more; a
// healthy worker on another host finishes every job. ~6 s.
TEST_F(JobsCliTest, ABrokenHostIsQuarantinedAfterThreeEnvironmentFailuresWhileAHealthyOneFinishes) {
  std::vector<int64_t> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(SubmitId(TinyJob("epochs=1 seed=" + std::to_string(i))));
  const fs::path broken = dir_ / "broken";
  fs::create_directories(broken);
  fs::copy_file(KESTREL_CLI, broken / "kestrel");
  fs::permissions(broken / "kestrel", fs::perms::owner_all);
  const std::string real_torch = (fs::path(KESTREL_CLI).parent_path() / "kestrel-torch").string();
  Write("broken/kestrel-torch",
        "#!/bin/sh\n"
        "for a in \"$@\"; do if [ \"$a\" = --job ]; then\n"
        "  echo \"kestrel-torch: error while loading shared libraries: libtorch_cpu.so: cannot open shared "
        "object file: No such file or directory\" >&2; exit 127; fi; done\n"
        "exec '" +
            real_torch + "' \"$@\"\n");
  fs::permissions(broken / "kestrel-torch", fs::perms::owner_all);
  CliRun bad = Run((broken / "kestrel").string(),
                   "--json worker --exit-when-idle --poll-s 0.1 --heartbeat-s 1 --lease-s 10 --id bad --host "
                   "broken-host");
  ASSERT_EQ(bad.code, 0) << bad.out;
  EXPECT_EQ(Json(bad)["claimed"], 3) << "quarantined at the third environment failure";
  auto workers = Json(Kestrel("--json workers"));
  ASSERT_EQ(workers["hosts"].size(), 1u) << workers.dump(2);
  EXPECT_EQ(workers["hosts"][0]["host"], "broken-host");
  EXPECT_EQ(workers["hosts"][0]["quarantined"], true);
  EXPECT_EQ(workers["hosts"][0]["env_failures"], 3);
  EXPECT_NE(workers["hosts"][0]["quarantine_reason"].get<std::string>().find("libtorch_cpu.so"),
            std::string::npos)
      << "the loader's own words are the finding";
  // Quarantined: started again it claims nothing.
  CliRun again =
      Run((broken / "kestrel").string(), "--json worker --exit-when-idle --poll-s 0.1 --host broken-host");
  EXPECT_EQ(again.code, 0);
  EXPECT_EQ(Json(again)["claimed"], 0);

  CliRun good = Kestrel(
      "--json worker --exit-when-idle --poll-s 0.1 --heartbeat-s 1 --lease-s 10 --id good --host "
      "healthy-host");
  ASSERT_EQ(good.code, 0) << good.out;
  EXPECT_EQ(Json(good)["succeeded"], 4);
  for (int64_t id : ids) {
    auto show = Show(id);
    EXPECT_EQ(show["job"]["state"], "succeeded") << show.dump(2);
    EXPECT_EQ(show["job"]["retries_used"], 0) << "environment failures spend no retries";
    const auto& last = show["attempts"].back();
    EXPECT_EQ(last["host"], "healthy-host");
    ASSERT_TRUE(last["fingerprint"].is_string());
    EXPECT_TRUE(show["environments"][last["fingerprint"].get<std::string>()].contains("libtorch"));
  }
  auto first = Show(ids[0]);
  EXPECT_EQ(first["attempts"][0]["reason"], "environment");
  EXPECT_EQ(first["attempts"][0]["host"], "broken-host");
  // Both hosts are this machine: the same environment, attempt against attempt.
  auto diff =
      Json(Kestrel("--json jobs diff-env " + std::to_string(ids[0]) + ":1 " + std::to_string(ids[0]) + ":2"));
  EXPECT_EQ(diff["ok"], true) << diff.dump();
  EXPECT_EQ(diff["differences"].size(), 0u) << diff.dump();
  EXPECT_EQ(Kestrel("--json jobs diff-env " + std::to_string(ids[0]) + ":9 1").code, 1);

  // Lifted by hand: the host may claim again.
  EXPECT_EQ(Kestrel("workers unquarantine broken-host").code, 0);
  EXPECT_EQ(Json(Kestrel("--json workers"))["hosts"][0]["quarantined"], false);
  EXPECT_NE(Kestrel("workers unquarantine no-such-host").code, 0);
  // drain/undrain by host and id.
  auto drained = Json(Kestrel("--json workers drain healthy-host"));
  EXPECT_EQ(drained["workers"], nlohmann::json::array({"good"})) << drained.dump();
  EXPECT_EQ(Kestrel("workers undrain good").code, 0);
  EXPECT_NE(Kestrel("workers drain nobody").code, 0);
}

#endif  // KESTREL_CLI_WITH_TORCH

}  // namespace
}  // namespace kestrel::testing
