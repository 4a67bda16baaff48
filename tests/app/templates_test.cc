// Config templates in the application layer: validation with submit's
// bindings and texts, versions through the store (both backends), the
// expansion's precedence, effective configs of templates and jobs, diffs.
#include "app/templates.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "app/jobs.h"
#include "core/hash.h"
#include "core/json.h"
#include "jobs/job_keys.h"
#include "store/postgres_store.h"
#include "train/train_config.h"

namespace kestrel::app {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The error submit gets for `token` from the train keys' binding directly.
Status TrainKeyError(const std::string& token) {
  train::TrainConfig cfg;
  OptionSet set;
  cfg.Bind(set);
  std::string k, v;
  SplitKeyValue(token, &k, &v);
  return set.Set(k, v, {"command line", 0, ""});
}

Status Validation(const std::vector<std::string>& args) { return ValidateSubmitKeys(args).GetStatus(); }

TEST(TemplateValidationTest, ErrorsAreTheBindingsOwnTextsLocatedInTheRequest) {
  // Unknown keys (with the closest key as a hint) and out-of-range values:
  // exactly the OptionSet's error of the train keys.
  for (const std::string token : {"epoch=10", "epochs=0", "lr0=-1", "imgsz=abc", "mosaic=2"}) {
    Status got = Validation({"imgsz=320", token});
    Status want = TrainKeyError(token);
    ASSERT_FALSE(want.IsOk()) << token;
    EXPECT_EQ(got.Code(), StatusCode::kInvalidArgument) << token;
    EXPECT_EQ(got.Message(), want.Message()) << token;
    EXPECT_EQ(got.Where().file, kRequestFile) << token;
  }
  EXPECT_NE(Validation({"epoch=10"}).Message().find("epochs"), std::string::npos)
      << "the hint names the close key";

  // Job keys bind through JobKeys.
  jobs::JobKeys jk;
  OptionSet js;
  jk.Bind(js);
  EXPECT_EQ(Validation({"priority=urgent"}).Message(),
            js.Set("priority", "urgent", {"command line", 0, ""}).Message());
  // Rules between keys: JobKeys::Validate and TrainConfig::Validate, located on the key.
  Status gpu = Validation({"gpu_mem=100"});
  EXPECT_EQ(gpu.Where().field, "gpu_mem");
  EXPECT_EQ(gpu.Message(), "gpu_mem is for GPU jobs (device=0)");
  Status stride = Validation({"imgsz=100"});
  EXPECT_EQ(stride.Code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(stride.Where().field, "imgsz");
  // Keys the job system owns, and tokens that are not key=value.
  Status owned = Validation({"resume=x.ckpt"});
  EXPECT_EQ(owned.Where().field, "resume");
  EXPECT_NE(owned.Message().find("decided by the job system"), std::string::npos);
  EXPECT_EQ(Validation({"epochs"}).Code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Validation({"kind=val"}).Where().field, "kind");
  Status utf8 = Validation({"name\xff=1"});
  EXPECT_NE(utf8.Message().find("not valid UTF-8"), std::string::npos);

  // Valid: data= may be absent; the last of a repeated key wins.
  auto ok = ValidateSubmitKeys({"epochs=5", "imgsz=320", "priority=high", "epochs=7"});
  ASSERT_TRUE(ok.IsOk()) << ok.GetStatus().ToString();
  EXPECT_EQ(*ok, (TemplateKeys{{"epochs", "7"}, {"imgsz", "320"}, {"priority", "high"}}));
}

store::TemplateRecord Tpl(const TemplateKeys& keys, const std::string& name = "fast", int64_t seq = 1) {
  store::TemplateRecord t;
  t.name = name;
  t.seq = seq;
  t.keys_json = DumpJson(json(keys));
  t.content_sha = Sha256Hex(t.keys_json);
  return t;
}

TEST(TemplateExpansionTest, CommandLineOverridesWinAndEveryTypedTokenStays) {
  auto t = Tpl({{"epochs", "10"}, {"imgsz", "320"}, {"priority", "low"}});
  auto out = ExpandTemplate(t, {"epochs=20", "data=birds", "priority=high"});
  ASSERT_TRUE(out.IsOk()) << out.GetStatus().ToString();
  EXPECT_EQ(*out, (std::vector<std::string>{"imgsz=320", "epochs=20", "data=birds", "priority=high"}));
  // No overrides: the template's keys, sorted.
  EXPECT_EQ(*ExpandTemplate(t, {}), (std::vector<std::string>{"epochs=10", "imgsz=320", "priority=low"}));
  // A token that is not key=value is passed on for submit to report.
  EXPECT_EQ(*ExpandTemplate(t, {"oops"}),
            (std::vector<std::string>{"epochs=10", "imgsz=320", "priority=low", "oops"}));
  // template= is not a key a template can be overridden with.
  EXPECT_EQ(ExpandTemplate(t, {"template=x"}).GetStatus().Code(), StatusCode::kInvalidArgument);
  // Damaged stored keys are corruption, not an empty template.
  store::TemplateRecord bad = t;
  bad.keys_json = R"({"epochs": 10})";
  EXPECT_EQ(ExpandTemplate(bad, {}).GetStatus().Code(), StatusCode::kCorruption);
}

TEST(ConfigDiffTest, KeyByKeyWithAbsentKeysAsNull) {
  json a = {{"epochs", 10}, {"imgsz", 320}, {"backoff", {1, 2}}, {"only_a", true}};
  json b = {{"epochs", 20}, {"imgsz", 320}, {"backoff", {1, 2}}, {"only_b", "x"}};
  ConfigDiff d = DiffConfigJson("A", a, "B", b);
  EXPECT_EQ(d.same, 2);
  ASSERT_EQ(d.differences.size(), 3u);
  EXPECT_EQ(d.differences[0].key, "epochs");
  EXPECT_EQ(d.differences[0].a, 10);
  EXPECT_EQ(d.differences[0].b, 20);
  EXPECT_EQ(d.differences[1].key, "only_a");
  EXPECT_TRUE(d.differences[1].b.is_null());
  EXPECT_EQ(d.differences[2].key, "only_b");
  EXPECT_TRUE(d.differences[2].a.is_null());
  json view = ConfigDiffJson(d);
  EXPECT_EQ(view["a"], "A");
  EXPECT_EQ(view["same"], 2);
  EXPECT_EQ(view["differences"][0], (json{{"key", "epochs"}, {"a", 10}, {"b", 20}}));
}

TEST(EffectiveConfigTest, ATemplateAndTheJobSubmitMakesOfItHaveTheSameConfig) {
  TemplateKeys keys = {{"epochs", "7"},      {"imgsz", "320"},      {"priority", "high"}, {"backoff", "5,10"},
                       {"time_limit", "60"}, {"min_map50", "0.25"}, {"data", "birds"}};
  auto eff = EffectiveConfigOfKeys(keys);
  ASSERT_TRUE(eff.IsOk()) << eff.GetStatus().ToString();
  EXPECT_EQ((*eff)["epochs"], 7);
  EXPECT_EQ((*eff)["lr0"], 0.01) << "defaults filled in";
  EXPECT_EQ((*eff)["priority"], "high");
  EXPECT_EQ((*eff)["device"], "cpu");

  // The job submit would store: train keys' JSON as config, the job keys
  // (min_map50 among them) in the spec (JobKeys::ApplyTo).
  train::TrainConfig cfg;
  OptionSet set;
  cfg.Bind(set);
  jobs::JobKeys jk;
  OptionSet js;
  jk.Bind(js);
  for (const auto& [k, v] : keys) ASSERT_TRUE((js.Has(k) ? js.Set(k, v) : set.Set(k, v)).IsOk()) << k;
  store::JobRecord job;
  job.id = 4;
  jk.ApplyTo(&job.spec);
  job.spec.config_json = DumpJson(set.ToJson());
  auto from_job = EffectiveConfigOfJob(job);
  ASSERT_TRUE(from_job.IsOk()) << from_job.GetStatus().ToString();
  ConfigDiff d = DiffConfigJson("t", *eff, "job:4", *from_job);
  EXPECT_TRUE(d.differences.empty()) << ConfigDiffJson(d).dump(2);
  EXPECT_GT(d.same, 50);

  job.spec.config_json = "[1]";
  EXPECT_EQ(EffectiveConfigOfJob(job).GetStatus().Code(), StatusCode::kCorruption);
}

class TemplateLibraryTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : name) {
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    }
    dir_ = fs::temp_directory_path() / ("kestrel_templates_" + std::to_string(::getpid()) + "_" + name);
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
      schema_ = "tp" + std::to_string(::getpid()) + "_" + std::to_string(rd() % 1000000);
      Status s = store::ExecPostgres(admin_url_, "CREATE SCHEMA " + schema_);
      ASSERT_TRUE(s.IsOk()) << s.ToString();
      url_ = admin_url_ + (admin_url_.find('?') == std::string::npos ? "?" : "&") +
             "options=-csearch_path%3D" + schema_;
    }
    auto m = store::MetadataStore::Open(url_);
    ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
    meta_ = std::move(m).Value();
    lib_ = std::make_unique<TemplateLibrary>(*meta_);
  }
  void TearDown() override {
    lib_.reset();
    meta_.reset();
    fs::remove_all(dir_);
    if (!schema_.empty()) {
      EXPECT_TRUE(store::ExecPostgres(admin_url_, "DROP SCHEMA " + schema_ + " CASCADE").IsOk());
    }
  }

  fs::path dir_;
  std::string url_, admin_url_, schema_;
  std::unique_ptr<store::MetadataStore> meta_;
  std::unique_ptr<TemplateLibrary> lib_;
};

TEST_P(TemplateLibraryTest, SaveResolveListExpandAndDiff) {
  auto v1 = lib_->Save("fast", {"epochs=10", "imgsz=320"}, 1000);
  ASSERT_TRUE(v1.IsOk()) << v1.GetStatus().ToString();
  EXPECT_TRUE(v1->created);
  EXPECT_EQ(TemplateRef(v1->tpl), "fast@v1");
  EXPECT_EQ(v1->tpl.keys_json, R"({"epochs":"10","imgsz":"320"})");
  // The same keys in another order: the same content, the existing version.
  auto same = lib_->Save("fast", {"imgsz=320", "epochs=10"}, 2000);
  ASSERT_TRUE(same.IsOk());
  EXPECT_FALSE(same->created);
  EXPECT_EQ(same->tpl.seq, 1);
  auto v2 = lib_->Save("fast", {"epochs=20", "imgsz=320", "priority=high"}, 3000);
  ASSERT_TRUE(v2.IsOk());
  EXPECT_EQ(v2->tpl.seq, 2);
  // Invalid keys store nothing.
  EXPECT_EQ(lib_->Save("fast", {"epochs=0"}, 4000).GetStatus().Code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(lib_->Save("bad@name", {"epochs=1"}, 4000).GetStatus().Code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(lib_->Save("empty", {}, 4000).GetStatus().Code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(lib_->Save("slow", {"epochs=300"}, 5000).IsOk());

  EXPECT_EQ(lib_->Resolve("fast")->seq, 2);
  EXPECT_EQ(lib_->Resolve("fast@v1")->seq, 1);
  EXPECT_EQ(lib_->Resolve("fast@v3").GetStatus().Code(), StatusCode::kNotFound);
  EXPECT_EQ(lib_->Resolve("nope").GetStatus().Code(), StatusCode::kNotFound);
  for (const std::string bad : {"fast@", "fast@1", "fast@vx", "fast@v0", "@v1"}) {
    EXPECT_EQ(lib_->Resolve(bad).GetStatus().Code(), StatusCode::kInvalidArgument) << bad;
  }

  auto newest = lib_->List("");
  ASSERT_TRUE(newest.IsOk());
  ASSERT_EQ(newest->size(), 2u);
  EXPECT_EQ(TemplateRef((*newest)[0]), "fast@v2");
  EXPECT_EQ(TemplateRef((*newest)[1]), "slow@v1");
  EXPECT_EQ(lib_->List("fast")->size(), 2u);
  EXPECT_EQ(lib_->List("nope").GetStatus().Code(), StatusCode::kNotFound);

  // Expansion through the store: newest by default, @vN pinned, overrides win.
  auto args = lib_->ExpandArgs({"data=birds", "template=fast", "epochs=3"});
  ASSERT_TRUE(args.IsOk()) << args.GetStatus().ToString();
  EXPECT_EQ(*args, (std::vector<std::string>{"imgsz=320", "priority=high", "data=birds", "epochs=3"}));
  EXPECT_EQ(*lib_->ExpandArgs({"template=fast@v1"}), (std::vector<std::string>{"epochs=10", "imgsz=320"}));
  EXPECT_EQ(*lib_->ExpandArgs({"epochs=3"}), (std::vector<std::string>{"epochs=3"}))
      << "no template: unchanged";
  EXPECT_EQ(lib_->ExpandArgs({"template=fast", "template=slow"}).GetStatus().Code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(lib_->ExpandArgs({"template="}).GetStatus().Code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(lib_->ExpandArgs({"template=nope"}).GetStatus().Code(), StatusCode::kNotFound);

  // Diffs of effective configs: templates and jobs.
  auto d = lib_->Diff("fast@v1", "fast");
  ASSERT_TRUE(d.IsOk()) << d.GetStatus().ToString();
  EXPECT_EQ(d->a, "fast@v1");
  EXPECT_EQ(d->b, "fast@v2");
  ASSERT_EQ(d->differences.size(), 2u) << ConfigDiffJson(*d).dump(2);
  EXPECT_EQ(d->differences[0].key, "epochs");
  EXPECT_EQ(d->differences[0].a, 10);
  EXPECT_EQ(d->differences[0].b, 20);
  EXPECT_EQ(d->differences[1].key, "priority");
  store::JobSpec spec;
  spec.dataset_version = Sha256Hex("birds");
  spec.config_json = R"({"epochs": 10, "imgsz": 320, "data": "birds@abc"})";
  bool created = false;
  auto job = meta_->SubmitJob(spec, 1000, &created);
  ASSERT_TRUE(job.IsOk()) << job.GetStatus().ToString();
  auto dj = lib_->Diff("job:" + std::to_string(job->id), "fast@v1");
  ASSERT_TRUE(dj.IsOk()) << dj.GetStatus().ToString();
  EXPECT_EQ(dj->a, "job:" + std::to_string(job->id));
  bool saw_data = false;
  for (const auto& x : dj->differences) {
    EXPECT_NE(x.key, "epochs");
    if (x.key == "data") {
      saw_data = true;
      EXPECT_EQ(x.a, "birds@abc");
      EXPECT_EQ(x.b, "");
    }
  }
  EXPECT_TRUE(saw_data);
  EXPECT_EQ(lib_->Diff("job:999", "fast").GetStatus().Code(), StatusCode::kNotFound);
  EXPECT_EQ(lib_->Diff("job:x", "fast").GetStatus().Code(), StatusCode::kInvalidArgument);

  // The JSON view.
  json view = TemplateJson(*lib_->Resolve("fast@v1"), true);
  EXPECT_EQ(view["ref"], "fast@v1");
  EXPECT_EQ(view["version"], "v1");
  EXPECT_EQ(view["created_ms"], 1000);
  EXPECT_EQ(view["keys"], (json{{"epochs", "10"}, {"imgsz", "320"}}));
  EXPECT_EQ(view["effective"]["epochs"], 10);
  EXPECT_FALSE(TemplateJson(*lib_->Resolve("fast@v1"), false).contains("effective"));
  EXPECT_EQ(TemplateSaveJson(*v2)["created"], true);
}

INSTANTIATE_TEST_SUITE_P(Backends, TemplateLibraryTest, ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kestrel::app
