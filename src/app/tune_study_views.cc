// The read-only views of a study (tune_study.h: show, plots, list, trials,
// stop, best): documents built from the store's study and trial records.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "app/jobs.h"
#include "app/tune_study.h"
#include "app/tune_study_internal.h"
#include "tune/importance.h"

namespace kestrel::app {

using json = nlohmann::json;
using tune_internal::DoubleArray;
using tune_internal::ToTrials;

namespace {

json TrialJson(const StudyDefinition& def, const store::TrialRecord& r) {
  json params = json::object();
  auto internal = DoubleArray(r.params_json, "trial params");
  if (internal.IsOk() && internal->size() == def.space.params.size()) {
    for (size_t k = 0; k < internal->size(); ++k) {
      const tune::Param& p = def.space.params[k];
      const double v = (*internal)[k];
      if (p.kind == tune::ParamKind::kCategorical) {
        params[p.key] = p.ValueText(v);
      } else if (p.kind == tune::ParamKind::kInt) {
        params[p.key] = static_cast<int64_t>(std::llround(p.FromInternal(v)));
      } else {
        params[p.key] = p.FromInternal(v);
      }
    }
  }
  auto inter = DoubleArray(r.intermediate_json, "trial values");
  json value = nullptr;
  if (!r.value.empty()) value = json::parse(r.value, nullptr, false);
  return json{{"number", r.number},
              {"job_id", r.job_id == 0 ? json(nullptr) : json(r.job_id)},
              {"state", r.state},
              {"params", params},
              {"value", value},
              {"intermediate", inter.IsOk() ? json(*inter) : json::array()},
              {"epochs_run", r.epochs_run},
              {"pruned_at", r.state == "pruned" || r.pruned_at > 0 ? json(r.pruned_at) : json(nullptr)},
              {"promotions", r.promotions}};
}

// The best succeeded trial by the study's direction (lowest number on ties).
const store::TrialRecord* BestTrial(const StudyDefinition& def,
                                    const std::vector<store::TrialRecord>& trials) {
  const store::TrialRecord* best = nullptr;
  double best_loss = 0;
  for (const auto& r : trials) {
    if (r.state != "succeeded" || r.value.empty()) continue;
    const double loss = tune::Loss(def.settings.direction, json::parse(r.value).get<double>());
    if (best == nullptr || loss < best_loss) {
      best = &r;
      best_loss = loss;
    }
  }
  return best;
}

json StudyJson(const store::StudyRecord& s, const StudyDefinition& def,
               const std::vector<store::TrialRecord>& trials) {
  json counts = {{"queued", 0}, {"running", 0}, {"succeeded", 0},
                 {"pruned", 0}, {"failed", 0},  {"infra_failed", 0}};
  int64_t spent = 0, epochs = 0;
  for (const auto& r : trials) {
    if (counts.contains(r.state)) counts[r.state] = counts[r.state].get<int64_t>() + 1;
    if (r.state != "infra_failed") ++spent;
    epochs += r.epochs_run;
  }
  json settings = def.SettingsJson();
  json base = settings["base"];
  for (const char* k : {"base", "data", "model"}) settings.erase(k);
  const store::TrialRecord* best = BestTrial(def, trials);
  json best_json = nullptr;
  if (best != nullptr) {
    best_json = {{"number", best->number}, {"value", json::parse(best->value)}, {"job_id", best->job_id}};
  }
  return json{{"id", s.id},
              {"name", s.name},
              {"state", s.state},
              {"job_id", s.job_id == 0 ? json(nullptr) : json(s.job_id)},
              {"space_hash", s.space_hash},
              {"data", def.data},
              {"model", def.model},
              {"settings", settings},
              {"base", base},
              {"counts", counts},
              {"spent", spent},
              {"epochs_run", epochs},
              {"best", best_json}};
}

struct Loaded {
  store::StudyRecord study;
  StudyDefinition def;
  std::vector<store::TrialRecord> trials;
};

Result<Loaded> Load(store::MetadataStore& meta, const std::string& name) {
  Loaded l;
  auto s = meta.GetStudy(name);
  if (!s.IsOk()) return Status(s.GetStatus().Code(), s.GetStatus().Message(), {kRequestFile, 0, "study"});
  l.study = *s;
  KESTREL_ASSIGN_OR_RETURN(l.def, StudyDefinition::FromRecord(l.study));
  KESTREL_ASSIGN_OR_RETURN(l.trials, meta.ListTrials(l.study.id));
  return l;
}

// The show document's importances (seeded by the study's seed, so the
// plots and the table agree); kFailedPrecondition below 4 succeeded trials.
Result<std::vector<double>> Importances(const StudyDefinition& def, const std::vector<tune::Trial>& view) {
  tune::ImportanceOptions io;
  io.seed = def.settings.seed;
  return tune::ParamImportances(def.space, view, io);
}

}  // namespace

Result<json> StudyShowJson(store::MetadataStore& meta, const std::string& name) {
  KESTREL_ASSIGN_OR_RETURN(Loaded l, Load(meta, name));
  json trials = json::array();
  for (const auto& r : l.trials) trials.push_back(TrialJson(l.def, r));
  const store::TrialRecord* best = BestTrial(l.def, l.trials);
  json importances = json::array();
  KESTREL_ASSIGN_OR_RETURN(auto view, ToTrials(l.trials));
  auto imp = Importances(l.def, view);
  if (imp.IsOk()) {
    std::vector<std::pair<double, std::string>> sorted;
    for (size_t k = 0; k < imp->size(); ++k) sorted.emplace_back((*imp)[k], l.def.space.params[k].key);
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    for (const auto& [v, key] : sorted) importances.push_back({{"key", key}, {"importance", v}});
  }
  return json{{"ok", true},
              {"study", StudyJson(l.study, l.def, l.trials)},
              {"space", tune::SpaceToJson(l.def.space)},
              {"trials", trials},
              {"best", best != nullptr ? TrialJson(l.def, *best) : json(nullptr)},
              {"importances", importances}};
}

Result<eval::StudyPlotData> StudyPlotDataFor(store::MetadataStore& meta, const std::string& name) {
  KESTREL_ASSIGN_OR_RETURN(Loaded l, Load(meta, name));
  KESTREL_ASSIGN_OR_RETURN(auto view, ToTrials(l.trials));
  eval::StudyPlotData d;
  d.study = l.study.name;
  d.metric = l.def.metric;
  d.maximize = l.def.settings.direction == tune::Direction::kMaximize;
  for (const auto& p : l.def.space.params) {
    d.params.push_back(
        {p.key, p.log, p.kind == tune::ParamKind::kCategorical ? p.choices : std::vector<std::string>{}});
  }
  for (const auto& t : view) {
    eval::StudyPlotTrial pt;
    pt.number = t.number;
    if (t.params.size() != l.def.space.params.size()) {
      return Status::Corruption("trial " + std::to_string(t.number) + " of study " + name + " has " +
                                    std::to_string(t.params.size()) + " params, its space " +
                                    std::to_string(l.def.space.params.size()),
                                {kRequestFile, 0, "params"});
    }
    for (size_t k = 0; k < t.params.size(); ++k)
      pt.params.push_back(l.def.space.params[k].FromInternal(t.params[k]));
    // Only a succeeded trial has an objective (a failed one is never 0).
    if (t.state == tune::TrialState::kSucceeded) pt.value = t.value;
    d.trials.push_back(std::move(pt));
  }
  auto imp = Importances(l.def, view);
  if (imp.IsOk()) d.importances = *imp;
  return d;
}

Result<json> StudyListJson(store::MetadataStore& meta) {
  KESTREL_ASSIGN_OR_RETURN(auto studies, meta.ListStudies());
  json out = json::array();
  for (const auto& s : studies) {
    KESTREL_ASSIGN_OR_RETURN(StudyDefinition def, StudyDefinition::FromRecord(s));
    KESTREL_ASSIGN_OR_RETURN(auto trials, meta.ListTrials(s.id));
    out.push_back(StudyJson(s, def, trials));
  }
  return json{{"ok", true}, {"studies", out}};
}

Result<json> StudyTrialsJson(store::MetadataStore& meta, const std::string& name) {
  KESTREL_ASSIGN_OR_RETURN(Loaded l, Load(meta, name));
  json trials = json::array();
  for (const auto& r : l.trials) trials.push_back(TrialJson(l.def, r));
  return json{{"ok", true}, {"study", l.study.name}, {"state", l.study.state}, {"trials", trials}};
}

std::string StudyShowText(const json& show) {
  std::ostringstream o;
  const json& s = show["study"];
  const json& st = s["settings"];
  o << "study " << s["name"].get<std::string>() << " (" << s["state"].get<std::string>() << "), data "
    << s["data"].get<std::string>().substr(0, s["data"].get<std::string>().find('@') + 13) << ", model "
    << s["model"].get<std::string>() << "\n";
  o << "  " << st["sampler"].get<std::string>() << " sampler, pruner " << st["pruner"].get<std::string>()
    << ", " << s["spent"] << "/" << st["trials"] << " trials spent, " << st["parallel"] << " in parallel, "
    << st["epochs"] << " epochs each, seed " << st["seed"] << ", " << s["epochs_run"] << " epochs run\n";
  o << "  space " << s["space_hash"].get<std::string>().substr(0, 12) << ", coordinator job "
    << (s["job_id"].is_null() ? std::string("-") : s["job_id"].dump()) << "\n\n";
  o << "  #    job    state         fitness   epochs  params\n";
  for (const auto& t : show["trials"]) {
    char line[128];
    const std::string value = t["value"].is_null() ? "-" : [&] {
      char b[32];
      std::snprintf(b, sizeof b, "%.4f", t["value"].get<double>());
      return std::string(b);
    }();
    std::snprintf(line, sizeof line, "  %-4lld %-6s %-13s %-9s %-7lld ",
                  static_cast<long long>(t["number"].get<int64_t>()),
                  t["job_id"].is_null() ? "-" : t["job_id"].dump().c_str(),
                  t["state"].get<std::string>().c_str(), value.c_str(),
                  static_cast<long long>(t["epochs_run"].get<int64_t>()));
    o << line;
    std::string params;
    for (const auto& [k, v] : t["params"].items())
      params += (params.empty() ? "" : " ") + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
    o << params << "\n";
  }
  if (show["best"].is_null()) {
    o << "\nbest: none yet (no trial succeeded)\n";
  } else {
    o << "\nbest: trial " << show["best"]["number"] << " (job " << show["best"]["job_id"] << "), fitness "
      << show["best"]["value"] << "\n";
  }
  if (!show["importances"].empty()) {
    o << "importances (permutation, random forest):";
    for (const auto& i : show["importances"]) {
      char b[64];
      std::snprintf(b, sizeof b, " %s %.3f", i["key"].get<std::string>().c_str(),
                    i["importance"].get<double>());
      o << b;
    }
    o << "\n";
  }
  return o.str();
}

Result<json> StopStudy(store::MetadataStore& meta, const std::string& name, int64_t now_ms) {
  KESTREL_ASSIGN_OR_RETURN(Loaded l, Load(meta, name));
  if (l.study.state == kStudyRunning) {
    store::StudyRecord upd = l.study;
    upd.state = kStudyStopping;
    upd.updated_ms = now_ms;
    KESTREL_ASSIGN_OR_RETURN(bool wrote, meta.UpdateStudy(upd, kStudyRunning));
    if (wrote) l.study = upd;
  }
  return json{{"ok", true}, {"study", StudyJson(l.study, l.def, l.trials)}};
}

Result<std::vector<std::string>> BestTrialTokens(store::MetadataStore& meta, const std::string& name) {
  KESTREL_ASSIGN_OR_RETURN(Loaded l, Load(meta, name));
  const store::TrialRecord* best = BestTrial(l.def, l.trials);
  if (best == nullptr) {
    return Status::FailedPrecondition("study '" + name + "' has no succeeded trial yet",
                                      {kRequestFile, 0, "study"});
  }
  KESTREL_ASSIGN_OR_RETURN(auto params, DoubleArray(best->params_json, "trial params"));
  std::vector<std::string> out;
  for (auto& t : l.def.TrialTokens(params)) {
    if (t.rfind("data=", 0) != 0) out.push_back(std::move(t));
  }
  return out;
}

}  // namespace kestrel::app
