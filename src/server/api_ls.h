// Label Studio's ML-backend protocol on `kestrel serve` (issue 34;
// docs/server.md "Label Studio ML backend"): Label Studio is given
// http://HOST:PORT/ls as the backend URL and calls
//   GET  /ls/health   {"status": "UP", "model_class", "model_version"}
//   POST /ls/setup    {"project", "schema", ...} -> {"model_version"}
//   POST /ls/predict  {"tasks": [{"data": {"image": URL}}...], "label_config"?, ...}
//                     -> {"results": [one prediction per task], "model_version"}
//   POST /ls/webhook  {"action": "ANNOTATION_CREATED" | "ANNOTATION_UPDATED", ...}:
//                     counted; with a train template, every `train_after`
//                     counted annotations queue a fine-tune job from it.
// The model is a registered model's verified ONNX export (app::LsModel),
// run through the program's ONNX backend. Token-protected like the rest of
// the API (Authorization: Bearer or Token, auth.h); errors are the API's
// error document with a 4xx status.
//
// Thread-safety: LsBackend's counters are locked (the webhook runs on the
// I/O thread, predict on the blocking pool); the model locks itself.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

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
  // from ("" = webhooks are only counted).
  std::string train_template;
  // --ls-train-after N: counted annotations (created or updated) that queue
  // one job; >= 1.
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
// configured) and the webhook's counters.
class LsBackend {
 public:
  LsBackend(LsOptions options, std::unique_ptr<app::LsModel> model)
      : options_(std::move(options)), model_(std::move(model)) {}

  const LsOptions& Options() const { return options_; }
  app::LsModel* Model() const { return model_.get(); }

  // Counts one annotation event; true when a job is due (the count since
  // the last queued job reached train_after and a template is set), which
  // resets that count.
  bool CountAnnotation() EXCLUDES(mu_);
  // A queued job's id (0: none yet), for the webhook's answer.
  void JobQueued(int64_t job_id) EXCLUDES(mu_);
  // {"annotations": total counted, "since_last_job", "train_after",
  //  "train_template", "last_job_id"}
  nlohmann::json CountersJson() const EXCLUDES(mu_);

 private:
  const LsOptions options_;
  const std::unique_ptr<app::LsModel> model_;
  mutable Mutex mu_;
  int64_t annotations_ GUARDED_BY(mu_) = 0;
  int64_t since_last_job_ GUARDED_BY(mu_) = 0;
  int64_t last_job_id_ GUARDED_BY(mu_) = 0;
};

// The four /ls routes over ctx.ls (null: each answers 503 after reading its
// body, so bad bodies are still 400).
Status AddLabelStudioRoutes(Router& router, ApiContext& ctx);

// The RectangleLabels tag's name and toName in a Label Studio labelling
// config (the first such tag); false when it has none.
bool LsRectangleNames(const std::string& label_config, std::string* from_name, std::string* to_name);

}  // namespace kestrel::server
