// Config templates (docs/templates.md): named, versioned sets of `kestrel
// submit` keys, validated by the same bindings `kestrel train` and `kestrel
// submit` use (train::TrainConfig and jobs::JobKeys through OptionSet), so a
// template is refused with the same error texts a submit would get.
//
//   kestrel template save fast epochs=10 imgsz=320 priority=high   -> fast@v1
//   kestrel submit template=fast data=birds epochs=20               -> epochs=20 wins
//
// References: "NAME" (newest version) or "NAME@vN". Config diffs compare
// effective configs (every key with its value after defaults): a template's
// is computed the way submit computes a job's; a job's is what it stored
// ("job:ID" on either side of DiffConfigs).
//
// Thread-safety: a TemplateLibrary borrows one MetadataStore (one per thread).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "store/job_types.h"
#include "store/metadata_store.h"

namespace kestrel::app {

// Keys as saved in a template: key -> value text, sorted.
using TemplateKeys = std::map<std::string, std::string>;

// Validates `key=value` tokens as `kestrel submit` does, with its texts:
// UTF-8 checked, job keys (jobs::JobKeys) and train keys (train::TrainConfig)
// parsed by their OptionSet bindings (unknown keys with the closest valid
// key as a hint, ranges, types), keys the job system owns (resume, run_dir,
// project, name, exist_ok) refused, then JobKeys::Validate and
// TrainConfig::Validate. data= may be absent (a template usually leaves the
// dataset to submit); files named by pretrained=/model= are not opened (the
// submit that uses the template checks them). A repeated key: the last wins.
// Errors about the request are located at {kRequestFile, 0, key} (app/jobs.h;
// a front end relocates them with RelocateRequestError).
Result<TemplateKeys> ValidateSubmitKeys(const std::vector<std::string>& args);

// The effective config of a set of submit keys: every train key with its
// value (defaults filled in; device as the trainer sees it; as submit stores
// them in a job's config), and the job keys priority, max_retries, backoff,
// time_limit, gpu_mem, min_map50. REQUIRES: keys validated.
Result<nlohmann::json> EffectiveConfigOfKeys(const TemplateKeys& keys);
// A job's effective config in the same shape: its stored config JSON plus
// the job keys from its spec (priority, max_retries, backoff and time_limit
// in seconds, gpu_mem, min_map50). kCorruption when the stored config is not
// a JSON object.
Result<nlohmann::json> EffectiveConfigOfJob(const store::JobRecord& job);

// THE expansion used by `kestrel submit template=NAME[@vN] [overrides]`
// (pure: no store). Returns the effective key=value list: the template's
// keys not overridden (sorted by key), then `overrides` unchanged and in
// order, so a key given on the command line wins over the template's and
// submit still sees (and reports) every token the user typed.
// kInvalidArgument when an override is itself template=..., or when the
// template's stored keys are not a JSON object of strings (kCorruption).
Result<std::vector<std::string>> ExpandTemplate(const store::TemplateRecord& tpl,
                                                const std::vector<std::string>& overrides);

// Key-by-key differences of two effective configs.
struct ConfigDifference {
  std::string key;
  nlohmann::json a;  // null when the key is absent on that side
  nlohmann::json b;
};
struct ConfigDiff {
  std::string a, b;                           // what was compared: "fast@v2", "job:12"
  std::vector<ConfigDifference> differences;  // sorted by key
  int64_t same = 0;                           // keys equal on both sides
};
// Pure: the key-by-key comparison of two JSON objects.
ConfigDiff DiffConfigJson(const std::string& a_label, const nlohmann::json& a, const std::string& b_label,
                          const nlohmann::json& b);

struct TemplateSaveResult {
  store::TemplateRecord tpl;
  bool created = false;  // false: the newest version already held these keys
};

class TemplateLibrary {
 public:
  explicit TemplateLibrary(store::MetadataStore& meta) : meta_(meta) {}

  // Validates `args` (ValidateSubmitKeys) and saves them as the next
  // version of `name`; identical to the newest version: that version,
  // created = false.
  Result<TemplateSaveResult> Save(const std::string& name, const std::vector<std::string>& args,
                                  int64_t now_ms);
  // "NAME" (newest) or "NAME@vN". kNotFound naming the reference.
  Result<store::TemplateRecord> Resolve(const std::string& ref);
  // With `name` "": the newest version of every template; else every
  // version of `name` (kNotFound when it has none), oldest first.
  Result<std::vector<store::TemplateRecord>> List(const std::string& name);
  // `args` of a submit: when one token is template=REF, resolves it and
  // returns ExpandTemplate(template, the other tokens); without one, `args`
  // unchanged. kInvalidArgument for a second template= or an empty ref.
  Result<std::vector<std::string>> ExpandArgs(const std::vector<std::string>& args);
  // Effective configs of two sides, each "NAME", "NAME@vN" or "job:ID",
  // compared key by key.
  Result<ConfigDiff> Diff(const std::string& a, const std::string& b);
  // The effective config of one side ("NAME[@vN]" or "job:ID") and the
  // label Diff uses for it.
  Result<nlohmann::json> EffectiveConfig(const std::string& side, std::string* label);

 private:
  store::MetadataStore& meta_;
};

// "fast@v2".
std::string TemplateRef(const store::TemplateRecord& t);

// The one JSON view of a template version: name, version ("v2"), ref
// ("fast@v2"), created_ms, content_sha, keys {key: value text}, and with
// `effective` also effective (EffectiveConfigOfKeys; null when it cannot be
// computed any more).
nlohmann::json TemplateJson(const store::TemplateRecord& t, bool effective);
// The list document of `kestrel template list --json` and GET
// /api/templates: {"ok": true, "templates": [TemplateJson without effective]}.
nlohmann::json TemplateListJson(const std::vector<store::TemplateRecord>& templates);
// The JSON view of a save: {"created", "template": TemplateJson}.
nlohmann::json TemplateSaveJson(const TemplateSaveResult& r);
// The JSON view of a diff: {"a", "b", "same", "differences": [{"key", "a", "b"}]}.
nlohmann::json ConfigDiffJson(const ConfigDiff& d);

}  // namespace kestrel::app
