// Label Studio's ML-backend protocol on `kestrel serve` (issue 34;
// docs/server.md "Label Studio ML backend"): Label Studio is given
// http://HOST:PORT/ls as the backend URL and calls
//   GET  /ls/health   {"status": "UP", "model_class", "model_version"}
//   POST /ls/setup    {"project", "schema", ...} -> {"model_version"}
//   POST /ls/predict  {"tasks": [{"data": {"image": URL}}...], "label_config"?, ...}
//                     -> {"results": [one prediction per task], "model_version"}
//   POST /ls/webhook  {"action": "ANNOTATION_CREATED" | "ANNOTATION_UPDATED",
//                      "annotation", "task", ...}: the annotation is kept
//                     (app/ls_annotations.h) and counted; with a train
//                     template, every `train_after` counted annotations
//                     are merged as a new dataset version and a fine-tune
//                     job on it is queued from the template.
//                     ANNOTATION(S)_DELETED drop pending annotations.
//   POST /ls/train    {}: the same merge (and job, with a template) now.
// The model is a registered model's verified ONNX export (app::LsModel),
// run through the program's ONNX backend. Token-protected like the rest of
// the API (Authorization: Bearer or Token, auth.h); errors are the API's
// error document with a 4xx status.
//
// Thread-safety: the webhook and train run on the blocking pool, one at a
// time (LsBackend::Serialized); predict too; the model locks itself.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "app/label_studio_backend.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "server/router.h"

namespace kestrel::server {

struct ApiContext;

// `kestrel serve --ls-*` (docs/cli.md "serve").
struct LsOptions {
  std::string model;  // --ls-model NAME@TAG: "" = the /ls routes answer 503 (no model)
  // --ls-local-files-root DIR: Label Studio's local-files document root as
  // this host sees it ("" = /data/local-files/ URLs are refused).
  std::string local_files_root;
  // --ls-train-template NAME[@vN]: the template a fine-tune job is queued
  // from, on the version the annotations make ("" = they are kept until
  // POST /ls/train).
  std::string train_template;
  // --ls-train-after N: counted annotations (created or updated) that are
  // merged and queue one job; >= 1.
  int64_t train_after = 20;
  // --ls-from-name / --ls-to-name: the RectangleLabels and Image tag names
  // when a predict request carries no label_config to read them from.
  std::string from_name = "label", to_name = "image";
  // The largest number of tasks one predict request may hold.
  int64_t max_tasks = 64;
};

// kInvalidArgument naming the flag (ls-train-after, ls-train-template
// without ls-model, ls-from-name/ls-to-name not identifiers).
Status ValidateLsOptions(const LsOptions& options);

// What the /ls routes share: the options, the model (null: none
// configured) and where the webhook keeps its annotations and counters
// (app/ls_annotations.h; <home>/ls/webhook-state.json).
class LsBackend {
 public:
  LsBackend(LsOptions options, std::unique_ptr<app::LsModel> model, std::string state_path)
      : options_(std::move(options)), model_(std::move(model)), state_path_(std::move(state_path)) {}

  const LsOptions& Options() const { return options_; }
  app::LsModel* Model() const { return model_.get(); }
  const std::string& StatePath() const { return state_path_; }

  // Runs `f` (a read-modify-write of the state file, a merge, a submit)
  // with no other webhook or train request of this server in between.
  template <typename F>
  auto Serialized(F&& f) EXCLUDES(mu_) {
    MutexLock l(mu_);
    return f();
  }

 private:
  const LsOptions options_;
  const std::unique_ptr<app::LsModel> model_;
  const std::string state_path_;
  Mutex mu_;
};

// The five /ls routes over ctx.ls (null: each answers 503 after reading its
// body, so bad bodies are still 400).
Status AddLabelStudioRoutes(Router& router, ApiContext& ctx);

// The RectangleLabels tag's name and toName in a Label Studio labelling
// config (the first such tag); false when it has none.
bool LsRectangleNames(const std::string& label_config, std::string* from_name, std::string* to_name);

}  // namespace kestrel::server
