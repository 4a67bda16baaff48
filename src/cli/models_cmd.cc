// `kestrel models list|show|tag|untag|promote|delete|register` (docs/models.md):
// a thin adapter over app/models.h — parse, call, print. The JSON documents
// carry app::ModelJson / app::TagResultJson unchanged.
#include <cstdio>
#include <iostream>
#include <sstream>

#include "app/job_kinds.h"
#include "app/models.h"
#include "cli/cli.h"
#include "core/env.h"
#include "core/json.h"
#include "core/utf8.h"
#include "data/dataset_ref.h"
#include "jobs/job_keys.h"

namespace kestrel::cli {
namespace {

using nlohmann::json;

std::string Fixed(double v, int digits = 3) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string Short(const std::string& id) { return id.substr(0, 12); }

std::string Ref(const store::ModelRecord& m) { return m.name + "@v" + std::to_string(m.seq); }

std::string Tags(const std::vector<std::string>& tags) {
  std::string s;
  for (const auto& t : tags) s += (s.empty() ? "" : ",") + t;
  return s.empty() ? "-" : s;
}

// `body(registry, stores)`'s result, with the stores open (or the error opening them).
template <typename F>
CommandResult WithRegistry(const Context& ctx, F&& body) {
  KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
  app::ModelRegistry reg(*stores.meta, *stores.blobs, Env::Default());
  return body(reg, stores);
}

// "-" for a number that was never measured (ModelRecord::map50).
std::string Measured(const std::optional<double>& v, int digits = 3) { return v ? Fixed(*v, digits) : "-"; }

std::string ListText(const std::vector<store::ModelRecord>& models) {
  if (models.empty())
    return "no models registered (a successful job registers one; or `kestrel models register`)";
  std::ostringstream t;
  char line[256];
  std::snprintf(line, sizeof(line), "%-24s %-12s %-22s %-20s %8s %9s %6s\n", "MODEL", "ID", "TAGS", "DATASET",
                "mAP50", "mAP50-95", "JOB");
  t << line;
  for (const auto& m : models) {
    const std::string ds = m.dataset.empty() ? "-" : m.dataset + "@" + m.dataset_version.substr(0, 8);
    std::snprintf(line, sizeof(line), "%-24s %-12s %-22s %-20s %8s %9s %6s\n",
                  EscapeInvalidUtf8(Ref(m)).c_str(), Short(m.id).c_str(), Tags(m.tags).c_str(),
                  EscapeInvalidUtf8(ds).c_str(), Measured(m.map50).c_str(), Measured(m.map50_95).c_str(),
                  m.job_id > 0 ? std::to_string(m.job_id).c_str() : "-");
    t << line;
  }
  return t.str();
}

std::string ComparisonText(const json& c) {
  std::ostringstream t;
  if (c.is_null()) return "comparison: none (registered by hand or without a dataset version)\n";
  if (!c.contains("baseline") || c["baseline"].is_null()) {
    t << "comparison: no baseline\n";
  } else {
    t << "comparison with " << c["baseline"].value("ref", "?") << " (" << c["baseline"].value("chosen_as", "")
      << "): ";
    const json better = c.value("better", json(nullptr));
    if (better.is_boolean()) {
      t << (better.get<bool>() ? "better" : "not better") << " by mAP50-95\n";
    } else {
      t << "no verdict by mAP50-95 (see the note)\n";
    }
    const json metrics = c.value("metrics", json::object());  // a named copy: items() borrows it
    for (const auto& [k, v] : metrics.items()) {
      t << "  " << k << ": " << Fixed(v.value("new", 0.0), 4) << " vs " << Fixed(v.value("baseline", 0.0), 4)
        << " (" << (v.value("delta", 0.0) >= 0 ? "+" : "") << Fixed(v.value("delta", 0.0), 4) << ")\n";
    }
  }
  const json notes = c.value("notes", json::array());
  for (const auto& n : notes) t << "  note: " << (n.is_string() ? n.get<std::string>() : DumpJson(n)) << "\n";
  return t.str();
}

std::string ShowText(const store::ModelRecord& m, const json& view) {
  std::ostringstream t;
  const json& l = view["lineage"];
  t << "model " << Ref(m) << "  id " << m.id << "\n";
  t << "tags: " << Tags(m.tags) << "\n";
  t << "weights: " << m.weights_sha << " (" << m.weights_bytes << " bytes, " << m.format << ")\n";
  if (m.map50 || m.map50_95) {
    t << "metrics: mAP50 " << Measured(m.map50, 4) << "  mAP50-95 " << Measured(m.map50_95, 4) << "\n";
  } else {
    t << "metrics: none (not validated)\n";
  }
  t << "lineage:\n";
  t << "  dataset: " << (m.dataset.empty() ? "-" : m.dataset) << " version "
    << (m.dataset_version.empty() ? "-" : m.dataset_version) << "\n";
  if (l.contains("model") && l["model"].is_object()) {
    const json& a = l["model"];
    std::string strides;
    for (const auto& s : a.value("detect_strides", json::array()))
      strides += (strides.empty() ? "" : "/") + s.dump();
    t << "  model: " << a.value("name", "") << " (" << a.value("graph", "") << " graph, "
      << a.value("layers", 0) << " layers, strides " << strides << ")\n";
  }
  t << "  config hash: " << m.config_hash << "\n";
  t << "  kestrel: " << m.kestrel_version << "\n";
  if (l.contains("parent") && l["parent"].is_object()) {
    const json& p = l["parent"];
    t << "  parent (" << p.value("kind", "") << "): " << p.value("path", "");
    if (p.contains("sha256") && p["sha256"].is_string()) t << " sha256 " << p["sha256"].get<std::string>();
    if (p.contains("model")) t << " = " << p["model"].value("ref", "");
    t << "\n";
  } else {
    t << "  parent: none (trained from scratch)\n";
  }
  if (m.job_id > 0) {
    t << "  job " << m.job_id << " attempt " << m.attempt << " on " << l.value("worker", "") << " (host "
      << (m.host.empty() ? "-" : m.host) << ")\n";
  } else {
    t << "  registered by hand from " << l.value("source", "") << "\n";
  }
  const json& e = view["evaluation"];
  if (e.contains("per_class") && e["per_class"].is_array() && !e["per_class"].empty()) {
    t << "per class (mAP50 / mAP50-95):\n";
    for (const auto& c : e["per_class"]) {
      t << "  " << c.value("name", "") << ": " << Fixed(c.value("map50", 0.0)) << " / "
        << Fixed(c.value("map50_95", 0.0)) << "\n";
    }
  }
  if (e.contains("plots") && e["plots"].is_array() && !e["plots"].empty()) {
    t << "plots:";
    for (const auto& p : e["plots"]) t << " " << p.value("file", "");
    t << "\n";
  }
  t << ComparisonText(view["comparison"]);
  if (!m.exports.empty()) t << "exports:\n";
  for (const store::ModelExportRecord& e : m.exports) {
    t << "  " << e.format << " " << e.path << " (" << e.bytes << " bytes, sha256 " << e.sha256.substr(0, 12)
      << "): " << (e.verified ? "verified" : "UNVERIFIED");
    const json v = json::parse(e.verification_json, nullptr, false);
    if (v.is_object() && v.contains("runtimes") && v["runtimes"].is_array()) {
      for (const auto& rt : v["runtimes"]) {
        t << "; " << rt.value("runtime", "") << " "
          << (!rt.value("ran", false)     ? "not run"
              : rt.value("passed", false) ? "passed"
                                          : "failed");
        if (rt.contains("max_abs_diff_scores")) {
          t << " (scores " << rt.value("max_abs_diff_scores", 0.0) << ", boxes "
            << rt.value("max_rel_diff_boxes", 0.0) << " relative)";
        }
      }
    }
    t << "\n";
    // The mAP check (export data=): LibTorch's mAP50-95 and each runtime's.
    if (v.is_object() && v.contains("map") && v["map"].is_object() && v["map"].value("ran", false)) {
      const json& mp = v["map"];
      t << "    mAP50-95 on " << mp.value("dataset", "") << " " << mp.value("split", "") << ": libtorch "
        << Fixed(mp.contains("libtorch") ? mp["libtorch"].value("map50_95", 0.0) : 0.0, 4);
      for (const auto& rt : mp.value("runtimes", json::array())) {
        t << ", " << rt.value("runtime", "") << " ";
        if (rt.contains("map50_95")) {
          t << Fixed(rt.value("map50_95", 0.0), 4) << (rt.value("passed", false) ? "" : " FAILED");
        } else {
          t << "not run";
        }
      }
      t << (mp.value("passed", false) ? " (passed)" : " (failed)") << "\n";
    }
  }
  return t.str();
}

}  // namespace

std::function<void(store::MetadataStore&, const store::JobRecord&, int64_t)> JobModelRegistrar(
    const std::string& home) {
  return [home](store::MetadataStore& meta, const store::JobRecord& job, int64_t now_ms) {
    // What the job's kind registers (app/job_kinds.h: train registers its model).
    auto r = app::RegisterSucceededJob(app::JobKinds(), meta, home, job, now_ms);
    if (!r.IsOk()) {
      std::cerr << "warning: job " << job.id
                << " succeeded but its registration failed: " << r.GetStatus().ToString()
                << " (retry: kestrel models register --job " << job.id << ")" << std::endl;
      return;
    }
    if (!r->empty()) std::cerr << "job " << job.id << ": " << *r << std::endl;
  };
}

Status ResolveWeightsOption(const Context& ctx, std::string* weights) {
  if (weights->empty()) return {};
  auto stores = OpenStores(ctx);
  if (!stores.IsOk()) return stores.GetStatus();
  app::ModelRegistry reg(*stores->meta, *stores->blobs, Env::Default());
  KESTREL_ASSIGN_OR_RETURN(auto r, reg.ResolveWeights(*weights));
  if (r.model) {
    (ctx.json ? std::cerr : std::cout)
        << "model " << Ref(*r.model) << " (" << Short(r.model->id) << "): " << r.path << std::endl;
  }
  *weights = r.path;
  return {};
}

void AddModelRegistryCommands(CLI::App& app, Context& ctx, int* exit_code) {
  CLI::App* models =
      app.add_subcommand("models", "The model registry: versions, lineage, tags (docs/models.md)");
  models->require_subcommand(1);

  struct State {
    std::string ref, tag, name, dataset, weights, pretrained, filter_tag;
    std::vector<std::string> args;  // models register: WEIGHTS and key=value options
    int64_t job = 0;
    bool force = false;
  };
  auto st = std::make_shared<State>();

  CLI::App* list = models->add_subcommand("list", "List registered models, newest first");
  list->add_option("--name", st->name, "only this model name");
  list->add_option("--dataset", st->dataset, "only models trained on this dataset");
  list->add_option("--tag", st->filter_tag, "only models with this tag");
  list->callback(Callback(ctx, exit_code, [&ctx, st]() -> CommandResult {
    return WithRegistry(ctx, [&](app::ModelRegistry& reg, Stores& stores) -> CommandResult {
      store::ModelFilter f;
      f.name = st->name;
      f.dataset = st->dataset;
      f.tag = st->filter_tag;
      auto r = reg.List(f);
      if (!r.IsOk()) return r.GetStatus();
      return Output{ListText(*r), app::ModelListJson(*r, *stores.blobs)};
    });
  }));

  CLI::App* show = models->add_subcommand("show", "A model with its lineage, evaluation and comparison");
  show->add_option("model", st->ref, "NAME, NAME@vN, NAME@TAG or an id prefix")->required();
  show->callback(Callback(ctx, exit_code, [&ctx, st]() -> CommandResult {
    return WithRegistry(ctx, [&](app::ModelRegistry& reg, Stores& stores) -> CommandResult {
      auto m = reg.Resolve(st->ref);
      if (!m.IsOk()) return m.GetStatus();
      json view = app::ModelJson(*m, *stores.blobs, true);
      return Output{ShowText(*m, view), {{"ok", true}, {"model", view}}};
    });
  }));

  auto tag_like = [&ctx, st](bool promote) {
    return WithRegistry(ctx, [&](app::ModelRegistry& reg, Stores& stores) -> CommandResult {
      auto r = promote ? reg.Promote(st->ref, Env::Default().UnixMillis())
                       : reg.Tag(st->ref, st->tag, Env::Default().UnixMillis());
      if (!r.IsOk()) return r.GetStatus();
      std::string text = "tagged " + Ref(r->model) + " " + r->tag;
      if (r->previous) text += " (moved from " + Ref(*r->previous) + ")";
      json doc = app::TagResultJson(*r, *stores.blobs);
      doc["ok"] = true;
      return Output{text, doc};
    });
  };
  CLI::App* tag = models->add_subcommand("tag", "Tag a model (production moves from the dataset's holder)");
  tag->add_option("model", st->ref, "model reference")->required();
  tag->add_option("tag", st->tag, "e.g. candidate, production")->required();
  tag->callback(Callback(ctx, exit_code, [tag_like] { return tag_like(false); }));
  CLI::App* promote = models->add_subcommand("promote", "Tag a model production (moves it, atomically)");
  promote->add_option("model", st->ref, "model reference")->required();
  promote->callback(Callback(ctx, exit_code, [tag_like] { return tag_like(true); }));

  CLI::App* untag = models->add_subcommand("untag", "Remove a tag from a model");
  untag->add_option("model", st->ref, "model reference")->required();
  untag->add_option("tag", st->tag, "the tag")->required();
  untag->callback(Callback(ctx, exit_code, [&ctx, st]() -> CommandResult {
    return WithRegistry(ctx, [&](app::ModelRegistry& reg, Stores& stores) -> CommandResult {
      auto r = reg.Untag(st->ref, st->tag);
      if (!r.IsOk()) return r.GetStatus();
      return Output{"removed tag " + st->tag + " from " + Ref(*r),
                    {{"ok", true}, {"model", app::ModelJson(*r, *stores.blobs, false)}, {"tag", st->tag}}};
    });
  }));

  CLI::App* del =
      models->add_subcommand("delete", "Remove a model version from the registry (its blobs stay)");
  del->add_option("model", st->ref, "model reference")->required();
  del->add_flag("--force", st->force, "also the dataset's production model");
  del->callback(Callback(ctx, exit_code, [&ctx, st]() -> CommandResult {
    return WithRegistry(ctx, [&](app::ModelRegistry& reg, Stores& stores) -> CommandResult {
      auto r = reg.Delete(st->ref, st->force);
      if (!r.IsOk()) return r.GetStatus();
      return Output{"deleted " + Ref(*r),
                    {{"ok", true}, {"deleted", app::ModelJson(*r, *stores.blobs, false)}}};
    });
  }));

  CLI::App* reg_cmd = models->add_subcommand(
      "register", "Register weights trained elsewhere (or a succeeded job's model: --job ID)");
  reg_cmd->add_option("args", st->args,
                      "WEIGHTS (.safetensors or Ultralytics .pt) [data=D] [name=N] [pretrained=P]");
  reg_cmd->add_option("--name", st->name, "model name (default: the dataset's name)");
  reg_cmd->add_option("--data", st->dataset, "dataset it was trained on: NAME[@vN|@id] (or data=...)");
  reg_cmd->add_option("--pretrained", st->pretrained, "weights it started from (recorded with their sha256)");
  reg_cmd->add_option("--job", st->job, "register the model of this succeeded job instead")->check(IntArg(1));
  reg_cmd->callback(Callback(ctx, exit_code, [&ctx, st]() -> CommandResult {
    // The weights file, then Ultralytics-style key=value for the options.
    for (const auto& extra : st->args) {
      const size_t eq = extra.find('=');
      if (eq == std::string::npos || Env::Default().Stat(extra).exists) {
        if (!st->weights.empty()) {
          return Status::InvalidArgument(
              "one weights file at a time ('" + st->weights + "', '" + extra + "')",
              {"command line", 0, "weights"});
        }
        st->weights = extra;
        continue;
      }
      const std::string key = extra.substr(0, eq == std::string::npos ? 0 : eq);
      std::string* target = key == "data"         ? &st->dataset
                            : key == "name"       ? &st->name
                            : key == "pretrained" ? &st->pretrained
                                                  : nullptr;
      if (target == nullptr) {
        return Status::InvalidArgument(
            "unexpected argument '" + extra + "' (models register WEIGHTS [data=D] [name=N] [pretrained=P])",
            {"command line", 0, ""});
      }
      *target = extra.substr(eq + 1);
    }
    return WithRegistry(ctx, [&](app::ModelRegistry& reg, Stores& stores) -> CommandResult {
      bool created = false;
      Result<store::ModelRecord> r = Status::Internal("unset");
      if (st->job > 0) {
        if (!st->weights.empty()) {
          return Status::InvalidArgument("--job registers the job's own weights; drop the file",
                                         {"command line", 0, "weights"});
        }
        r = reg.RegisterJobModel(st->job, Env::Default().UnixMillis(), &created);
      } else {
        if (st->weights.empty()) {
          return Status::InvalidArgument("give a weights file (or --job ID)", {"command line", 0, "weights"});
        }
        app::RegisterRequest req;
        req.weights_path = st->weights;
        req.name = st->name;
        req.parent_path = st->pretrained;
        req.parent_kind = "pretrained";
        req.compare = false;  // its metrics are unknown
        req.config_json = "{}";
        if (!st->dataset.empty()) {
          std::string name, ref;
          store::SplitDatasetRef(st->dataset, &name, &ref);
          auto v = stores.meta->GetVersion(name, ref);
          if (!v.IsOk()) return v.GetStatus();
          req.dataset = v->dataset;
          req.dataset_version = v->version_id;
        }
        r = reg.Register(req, Env::Default().UnixMillis(), &created);
      }
      if (!r.IsOk()) return r.GetStatus();
      return Output{
          std::string(created ? "registered " : "already registered: ") + Ref(*r) + " (" + r->id + ")",
          {{"ok", true}, {"created", created}, {"model", app::ModelJson(*r, *stores.blobs, true)}}};
    });
  }));
}

}  // namespace kestrel::cli
