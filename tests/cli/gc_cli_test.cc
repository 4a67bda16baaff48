// `kestrel gc` and `kestrel du`, black box (docs/disk.md): their --json
// documents equal the application layer's views, and gc running in a loop
// while imports and model registrations run in other processes never
// deletes a referenced blob (every referenced blob still hash-verifies),
// while it does delete the planted garbage.
#include <gtest/gtest.h>
#include <utime.h>

#include <atomic>
#include <cstdio>
#include <set>
#include <thread>

#include "app/gc.h"
#include "cli_fixture.h"
#include "core/hash.h"
#include "core/safetensors.h"
#include "store/local_artifact_store.h"

namespace kestrel::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class GcCliTest : public KestrelCliTest {
 protected:
  fs::path Home() { return dir_ / "home"; }
  std::unique_ptr<store::MetadataStore> Meta() {
    auto m = store::MetadataStore::Open("sqlite:" + (Home() / "kestrel.db").string());
    EXPECT_TRUE(m.IsOk()) << m.GetStatus().ToString();
    return m.IsOk() ? std::move(m).Value() : nullptr;
  }
  // Writes `bytes` as a blob as an interrupted import would have left it,
  // two days old.
  std::string PlantOld(const std::string& bytes) {
    const std::string sha = Sha256Hex(bytes);
    const fs::path p = Home() / "objects" / sha.substr(0, 2) / sha;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
    struct utimbuf t;
    t.actime = t.modtime = ::time(nullptr) - 2 * 86400;
    EXPECT_EQ(::utime(p.c_str(), &t), 0);
    return sha;
  }
  std::string Weights(const std::string& file, int seed) {
    SafeTensorFile f;
    std::string data(4096, '\0');
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 31 + seed) & 0xff);
    f.tensors["w"] = SafeTensor{"U8", {4096}, data};
    const std::string bytes = SerializeSafeTensors(f);
    std::ofstream(dir_ / file, std::ios::binary) << bytes;
    return bytes;
  }
  std::string ReadAll(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
};

TEST_F(GcCliTest, JsonEqualsTheAppViewsAndGcFreesThePlantedGarbage) {
  ASSERT_EQ(Kestrel("dataset synth ds --images 8 --imgsz 64 --seed 2").code, 0);
  ASSERT_EQ(Kestrel("dataset import ds --name birds").code, 0);
  Weights("m.safetensors", 1);
  ASSERT_EQ(Kestrel("models register m.safetensors --name m --data birds").code, 0);
  uint64_t planted = 0;
  for (int i = 0; i < 3; ++i) {
    const std::string g(1000 + i, static_cast<char>('a' + i));
    PlantOld(g);
    planted += g.size();
  }
  auto meta = Meta();
  ASSERT_NE(meta, nullptr);
  store::LocalArtifactStore blobs(Home().string());

  const CliRun dry = Kestrel("--json gc --dry-run");
  ASSERT_EQ(dry.code, 0) << dry.out;
  app::GcOptions o;
  o.dry_run = true;
  auto view = app::CollectGarbage(*meta, blobs, o, Env::Default().UnixSeconds());
  ASSERT_TRUE(view.IsOk()) << view.GetStatus().ToString();
  EXPECT_EQ(Json(dry), app::GcReportJson(*view));
  EXPECT_EQ(Json(dry)["freed_bytes"], planted);

  const CliRun du = Kestrel("--json du");
  ASSERT_EQ(du.code, 0) << du.out;
  auto du_view = app::DiskUsage(*meta, blobs, Env::Default());
  ASSERT_TRUE(du_view.IsOk()) << du_view.GetStatus().ToString();
  EXPECT_EQ(Json(du), app::DuReportJson(*du_view));
  EXPECT_EQ(Json(du)["unreferenced"]["bytes"], planted);
  EXPECT_EQ(Json(du)["models"][0]["ref"], "m@v1");

  const CliRun gc = Kestrel("--json gc");
  ASSERT_EQ(gc.code, 0) << gc.out;
  EXPECT_EQ(Json(gc)["deleted"], 3);
  EXPECT_EQ(Json(gc)["freed_bytes"], planted);
  const CliRun text = Kestrel("gc");
  EXPECT_NE(text.out.find("deleted 0 blobs, freed 0 B"), std::string::npos) << text.out;
  const CliRun du_text = Kestrel("du");
  EXPECT_NE(du_text.out.find("birds"), std::string::npos) << du_text.out;
  EXPECT_NE(du_text.out.find("m@v1"), std::string::npos) << du_text.out;
  EXPECT_EQ(Kestrel("gc --grace-s -1").code, 2);
}

TEST_F(GcCliTest, GcInALoopNeverDeletesWhatConcurrentImportsAndRegistrationsReference) {
  constexpr int kDatasets = 3;
  for (int d = 0; d < kDatasets; ++d) {
    ASSERT_EQ(Kestrel("dataset synth ds" + std::to_string(d) + " --images 10 --imgsz 64 --seed " +
                      std::to_string(10 + d))
                  .code,
              0);
  }
  // Garbage gc must delete, and leftovers of an "interrupted import" of the
  // very images (and weights) the concurrent writers are about to reference:
  // old unreferenced blobs that a deduplicating Put re-uses.
  uint64_t garbage_bytes = 0;
  std::vector<std::string> garbage;
  for (int i = 0; i < 20; ++i) {
    const std::string g(10'000 + i, static_cast<char>('A' + i));
    garbage.push_back(PlantOld(g));
    garbage_bytes += g.size();
  }
  int reused = 0;
  for (int d = 0; d < kDatasets; ++d) {
    for (const auto& e : fs::recursive_directory_iterator(dir_ / ("ds" + std::to_string(d)))) {
      if (e.is_regular_file() && e.path().string().find("/images/") != std::string::npos) {
        PlantOld(ReadAll(e.path()));
        ++reused;
      }
    }
  }
  for (int m = 0; m < kDatasets; ++m) PlantOld(Weights("w" + std::to_string(m) + ".safetensors", m));

  std::atomic<bool> stop{false};
  std::atomic<int> runs{0}, failures{0};
  std::atomic<uint64_t> freed{0};
  std::string last_failure;
  std::thread collector([&] {
    while (!stop.load()) {
      const CliRun r = Kestrel("--json gc --grace-s 60");
      ++runs;
      const json j = json::parse(r.out, nullptr, false);
      if (r.code != 0 || !j.is_object() || !j.contains("freed_bytes")) {
        ++failures;
        last_failure = r.out;
        continue;
      }
      freed += j["freed_bytes"].get<uint64_t>();
    }
  });
  for (int d = 0; d < kDatasets; ++d) {
    const std::string n = std::to_string(d);
    EXPECT_EQ(Kestrel("dataset import ds" + n + " --name d" + n).code, 0);
    EXPECT_EQ(Kestrel("models register w" + n + ".safetensors --name m" + n + " --data d" + n).code, 0);
  }
  // At least two full gc passes after the last commit.
  const int after = runs.load();
  while (runs.load() < after + 2) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  stop.store(true);
  collector.join();
  EXPECT_EQ(failures.load(), 0) << last_failure;

  // Every blob any record references still verifies.
  auto meta = Meta();
  ASSERT_NE(meta, nullptr);
  store::LocalArtifactStore blobs(Home().string());
  auto refs = app::CollectReferences(*meta, blobs);
  ASSERT_TRUE(refs.IsOk()) << refs.GetStatus().ToString();
  ASSERT_EQ(refs->versions.size(), static_cast<size_t>(kDatasets));
  ASSERT_EQ(refs->models.size(), static_cast<size_t>(kDatasets));
  // The blobs the records store (not every hash they mention: a manifest
  // also lists label hashes, which are no blobs).
  std::set<std::string> must;
  for (const auto& v : refs->versions) {
    must.insert(v.record.manifest_sha);
    must.insert(v.record.report_sha);
    auto manifest = blobs.Get(v.record.manifest_sha);
    ASSERT_TRUE(manifest.IsOk()) << manifest.GetStatus().ToString();
    const json entries = json::parse(*manifest)["entries"];
    for (const auto& e : entries) must.insert(e["image_sha"].get<std::string>());
  }
  for (const auto& m : refs->models) {
    must.insert(m.record.weights_sha);
    const json eval = json::parse(m.record.eval_json);
    if (eval.contains("plots")) {
      for (const auto& p : eval["plots"]) must.insert(p["sha256"].get<std::string>());
    }
  }
  size_t verified = 0;
  for (const auto& sha : must) {
    auto bytes = blobs.Get(sha);  // present and hash-verified
    EXPECT_TRUE(bytes.IsOk()) << "referenced blob " << sha << ": " << bytes.GetStatus().ToString();
    verified += bytes.IsOk();
  }
  EXPECT_EQ(verified, must.size());
  EXPECT_GT(must.size(), static_cast<size_t>(4 * kDatasets)) << "manifests, reports, weights and the images";
  for (const auto& g : garbage)
    EXPECT_FALSE(blobs.Has(g)) << "garbage " << g << " survived " << runs.load() << " runs";
  EXPECT_GE(freed.load(), garbage_bytes);
  for (int d = 0; d < kDatasets; ++d) {
    EXPECT_EQ(Kestrel("dataset export d" + std::to_string(d) + " --format yolo out" + std::to_string(d)).code,
              0);
  }
  std::printf(
      "[ gc ] %d gc runs during %d imports + %d registrations: %zu referenced blobs verified, "
      "%llu bytes freed (%llu of planted garbage, %d planted re-used image blobs)\n",
      runs.load(), kDatasets, kDatasets, verified, static_cast<unsigned long long>(freed.load()),
      static_cast<unsigned long long>(garbage_bytes), reused);
}

#ifdef KESTREL_CLI_WITH_TORCH
// save_period=1 writes epoch1..3.ckpt; after the job succeeds the worker
// keeps keep_ckpts=1 of them besides best/last, and du counts what is left.
TEST_F(GcCliTest, ASucceededJobKeepsBestLastAndTheNewestKeepCkptsEpochCheckpoints) {
  ASSERT_EQ(Kestrel("dataset synth data --images 12 --imgsz 64 --seed 3").code, 0);
  ASSERT_EQ(Kestrel("dataset import data --name tiny").code, 0);
  const json sub =
      Json(Kestrel("--json submit data=tiny model=t imgsz=64 batch=4 workers=1 threads=1 plots=false "
                   "optimizer=AdamW lr0=0.01 warmup_epochs=0 epochs=3 save_period=1 keep_ckpts=1"));
  ASSERT_TRUE(sub.value("ok", false)) << sub.dump();
  ASSERT_EQ(Kestrel("worker --exit-when-idle --poll-s 0.1 --min-free-gb 0").code, 0);
  const std::string id = std::to_string(sub["job_id"].get<int64_t>());
  ASSERT_EQ(Json(Kestrel("--json jobs show " + id))["job"]["state"], "succeeded");
  const fs::path w = Home() / "jobs" / id / "attempt-1" / "weights";
  for (const char* kept : {"best.ckpt", "best.safetensors", "last.ckpt", "last.safetensors", "epoch3.ckpt"}) {
    EXPECT_TRUE(fs::exists(w / kept)) << kept;
  }
  EXPECT_FALSE(fs::exists(w / "epoch1.ckpt"));
  EXPECT_FALSE(fs::exists(w / "epoch2.ckpt"));
  const json du = Json(Kestrel("--json du"));
  ASSERT_EQ(du["jobs"].size(), 1u) << du.dump();
  EXPECT_EQ(du["jobs"][0]["checkpoints"], 3) << "best, last, epoch3";
  EXPECT_EQ(du["jobs"][0]["state"], "succeeded");
  // submit validates the keys like train.
  EXPECT_EQ(Kestrel("submit data=tiny keep_ckpts=-1").code, 2);
  EXPECT_EQ(Kestrel("submit data=tiny save_period=x").code, 2);
}
#endif

}  // namespace
}  // namespace kestrel::testing
