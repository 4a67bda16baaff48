#include "server/api_ls.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <utility>
#include <vector>

#include "app/datasets.h"
#include "app/jobs.h"
#include "app/ls_annotations.h"
#include "app/models.h"
#include "app/templates.h"
#include "core/env.h"
#include "server/api.h"
#include "server/job_paths.h"
#include "server/json_body.h"

namespace kestrel::server {
namespace {

using nlohmann::json;

// The largest task image read from a local file (a dataset image is as large
// as its import allowed).
constexpr uint64_t kMaxLocalImageBytes = uint64_t{256} << 20;

Status BodyError(const std::string& message, const std::string& field) {
  return Status::InvalidArgument(message, {app::kRequestFile, 0, field});
}

// The body as a JSON object. Label Studio sends keys this backend does not
// read (project, params, hostname, access_token...): they are ignored.
Result<json> LsBody(const Request& req) {
  KESTREL_ASSIGN_OR_RETURN(json body, ParseJsonBody(req.body));
  if (!body.is_object())
    return BodyError(std::string("the request body must be a JSON object, not ") + body.type_name(), "body");
  return body;
}

Response NoModel() {
  return ErrorResponse(503, "unavailable",
                       "this server has no Label Studio model: start kestrel serve with --ls-model NAME@TAG "
                       "(a registered model with a verified ONNX export)",
                       "ls-model");
}

bool IsIdentifier(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-')) return false;
  }
  return true;
}

// A tag's attribute value (name="x" or name='x'), "" when absent.
std::string Attribute(const std::string& tag, const std::string& name) {
  const std::regex re("\\s" + name + "\\s*=\\s*(\"([^\"]*)\"|'([^']*)')");
  std::smatch m;
  if (!std::regex_search(tag, m, re)) return "";
  return m[2].matched ? m[2].str() : m[3].str();
}

// The task's image URL (field tasks[i].data.image).
Result<std::string> TaskImage(const json& tasks, size_t i) {
  const std::string at = "tasks[" + std::to_string(i) + "]";
  const json& t = tasks[i];
  if (!t.is_object()) return BodyError(at + " must be a task object {\"data\": {\"image\": URL}}", at);
  if (!t.contains("data") || !t["data"].is_object())
    return BodyError(at + ".data must be an object holding \"image\"", at + ".data");
  const json& d = t["data"];
  if (!d.contains("image") || !d["image"].is_string() || d["image"].get<std::string>().empty())
    return BodyError(at + ".data.image must be the image's URL (a string)", at + ".data.image");
  return d["image"].get<std::string>();
}

Response Predict(ApiContext& ctx, const Request& req) {
  auto body = LsBody(req);
  if (!body.IsOk()) return ErrorResponse(body.GetStatus());
  if (!body->contains("tasks") || !(*body)["tasks"].is_array() || (*body)["tasks"].empty())
    return ErrorResponse(BodyError("the request body needs \"tasks\": a non-empty array of tasks", "tasks"));
  const json& tasks = (*body)["tasks"];
  std::vector<std::string> urls;
  for (size_t i = 0; i < tasks.size(); ++i) {
    auto url = TaskImage(tasks, i);
    if (!url.IsOk()) return ErrorResponse(url.GetStatus());
    urls.push_back(*url);
  }
  std::string label_config;
  if (body->contains("label_config")) {
    if (!(*body)["label_config"].is_string())
      return ErrorResponse(
          BodyError("label_config must be the labelling config XML (a string)", "label_config"));
    label_config = (*body)["label_config"].get<std::string>();
  }
  std::string config_from, config_to;
  if (!label_config.empty() && !LsRectangleNames(label_config, &config_from, &config_to))
    return ErrorResponse(
        BodyError("label_config has no <RectangleLabels name=... toName=...>: this backend predicts boxes",
                  "label_config"));
  if (ctx.ls == nullptr || ctx.ls->Model() == nullptr) return NoModel();
  const LsOptions& o = ctx.ls->Options();
  if (static_cast<int64_t>(tasks.size()) > o.max_tasks)
    return ErrorResponse(BodyError("one predict request holds at most " + std::to_string(o.max_tasks) +
                                       " tasks, got " + std::to_string(tasks.size()),
                                   "tasks"));
  // The request's label_config names the tags; without one, the flags do.
  const std::string from_name = label_config.empty() ? o.from_name : config_from;
  const std::string to_name = label_config.empty() ? o.to_name : config_to;
  app::LsModel& model = *ctx.ls->Model();

  // This runs on a blocking thread (RouteDoc::blocking): its own store,
  // opened when a task names a dataset image.
  std::unique_ptr<store::MetadataStore> own;
  app::LsImageOptions io;
  io.local_files_root = o.local_files_root;
  io.own_host = req.Header("host");
  std::vector<app::LsTaskImage> images;
  for (size_t i = 0; i < urls.size(); ++i) {
    const std::string field = "tasks[" + std::to_string(i) + "].data.image";
    auto ref = app::ResolveLsImage(urls[i], io, field);
    if (!ref.IsOk()) return ErrorResponse(ref.GetStatus());
    std::string bytes;
    if (ref->kind == app::LsImageRef::Kind::kDatasetImage) {
      if (!own && !ctx.meta_url.empty()) {
        auto opened = store::MetadataStore::Open(ctx.meta_url);
        if (!opened.IsOk()) return ErrorResponse(opened.GetStatus());
        own = std::move(opened).Value();
      }
      auto img = app::Datasets(own ? *own : ctx.meta, ctx.blobs).ImageBytes(ref->dataset, ref->sha);
      if (!img.IsOk()) {
        const Status& s = img.GetStatus();
        return ErrorResponse(Status(s.Code(), field + ": " + s.Message(), {app::kRequestFile, 0, field}));
      }
      bytes = std::move(img->bytes);
    } else {
      auto read = Env::Default().ReadFile(ref->path, kMaxLocalImageBytes);
      if (!read.IsOk())
        return ErrorResponse(
            BodyError(field + ": cannot read the local file: " + read.GetStatus().Message(), field));
      bytes = std::move(read).Value();
    }
    images.push_back({std::move(bytes), urls[i], field});
  }
  auto doc = model.PredictTasks(images, from_name, to_name);
  if (!doc.IsOk()) return ErrorResponse(doc.GetStatus());
  return JsonResponse(*doc, 200, -1);
}

// The store a blocking route uses: its own, opened from ctx.meta_url (a
// MetadataStore serves one thread), or ctx.meta where there is no URL
// (tests dispatching on one thread).
Result<store::MetadataStore*> OwnStore(ApiContext& ctx, std::unique_ptr<store::MetadataStore>& own) {
  if (ctx.meta_url.empty()) return &ctx.meta;
  if (!own) {
    KESTREL_ASSIGN_OR_RETURN(own, store::MetadataStore::Open(ctx.meta_url));
  }
  return own.get();
}

// /ls/webhook and /ls/train alike: a served model, this handler's own store
// connection, and fn run on the state file under the backend's lock; fn's
// document is the answer, its error the error response.
template <typename F>
Response WithLsState(ApiContext& ctx, F&& fn) {
  if (ctx.ls == nullptr || ctx.ls->Model() == nullptr) return NoModel();
  LsBackend& ls = *ctx.ls;
  std::unique_ptr<store::MetadataStore> own;
  auto meta = OwnStore(ctx, own);
  if (!meta.IsOk()) return ErrorResponse(meta.GetStatus());
  Result<json> doc = ls.Serialized([&]() -> Result<json> {
    KESTREL_ASSIGN_OR_RETURN(app::LsWebhookState state, app::LoadLsState(ls.StatePath()));
    return fn(**meta, ls, state);
  });
  if (!doc.IsOk()) return ErrorResponse(doc.GetStatus());
  return JsonResponse(*doc);
}

json Counters(const LsBackend& ls, const app::LsWebhookState& state) {
  json c = app::LsStateJson(state);
  c["train_after"] = ls.Options().train_after;
  c["train_template"] =
      ls.Options().train_template.empty() ? json(nullptr) : json(ls.Options().train_template);
  return c;
}

// The version the pending annotations go on top of: the one the last merge
// made (while it exists), else the served model's dataset version as its
// registry record has it, else the train template's data=.
Result<std::string> MergeBase(store::MetadataStore& meta, ApiContext& ctx, const LsBackend& ls,
                              const app::LsWebhookState& state) {
  if (const size_t at = state.last_version.find('@'); at != std::string::npos) {
    if (meta.GetVersion(state.last_version.substr(0, at), state.last_version.substr(at + 1)).IsOk())
      return state.last_version;
  }
  KESTREL_ASSIGN_OR_RETURN(
      store::ModelRecord model,
      app::ModelRegistry(meta, ctx.blobs, Env::Default()).Resolve(ls.Model()->ModelVersion()));
  if (!model.dataset.empty())
    return model.dataset_version.empty() ? model.dataset : model.dataset + "@" + model.dataset_version;
  if (!ls.Options().train_template.empty()) {
    KESTREL_ASSIGN_OR_RETURN(store::TemplateRecord t,
                             app::TemplateLibrary(meta).Resolve(ls.Options().train_template));
    const json keys = json::parse(t.keys_json, nullptr, false);
    if (keys.is_object() && keys.contains("data") && keys["data"].is_string())
      return keys["data"].get<std::string>();
  }
  return Status::FailedPrecondition("the served model " + ls.Model()->ModelVersion() +
                                        " records no dataset and no --ls-train-template names data=: the "
                                        "Label Studio annotations have no version to be merged into",
                                    {"command line", 0, "ls-model"});
}

// The pending annotations merged as a new version, then (with a template)
// the fine-tune job on it; the state saved after both. A failure keeps the
// pending annotations and counters as they were.
Result<json> Train(ApiContext& ctx, store::MetadataStore& meta, const LsBackend& ls,
                   app::LsWebhookState& state) {
  if (state.pending.empty())
    return Status::FailedPrecondition(
        "no pending Label Studio annotations: the webhook has received none since the last merge",
        {app::kRequestFile, 0, "pending"});
  KESTREL_ASSIGN_OR_RETURN(std::string base, MergeBase(meta, ctx, ls, state));
  KESTREL_ASSIGN_OR_RETURN(app::DatasetMerge merge,
                           app::MergeLsPending(meta, ctx.blobs, base, state, ls.Options().local_files_root));
  const std::string version = merge.record.dataset + "@v" + std::to_string(merge.record.seq);
  json doc = {{"version", version}, {"merge", app::DatasetMergeJson(merge)}, {"job", nullptr}};
  int64_t job_id = 0;
  if (!ls.Options().train_template.empty()) {
    // A fine-tune of the served model on the new version with the
    // template's keys, as POST /api/jobs submits it (job_paths.h: the
    // model's blob).
    const JobFilePolicy files(ctx.data_roots, ctx.home);
    app::ModelRegistry reg(meta, ctx.blobs, Env::Default());
    app::SubmitSteps steps;
    steps.open_store = [&meta]() -> Result<store::MetadataStore*> { return &meta; };
    steps.resolve_weights = [&](const std::string& key, std::string* weights) -> Status {
      KESTREL_ASSIGN_OR_RETURN(auto resolved, files.Resolve(reg, key, *weights));
      *weights = resolved.path;
      return {};
    };
    steps.resolve_model = [&](const std::string& text) { return files.Resolve(reg, "model", text); };
    const std::vector<std::string> tokens{"template=" + ls.Options().train_template,
                                          "pretrained=" + ls.Model()->ModelVersion(), "data=" + version};
    auto r = app::SubmitTokens(tokens, steps, Env::Default().UnixMillis());
    if (!r.IsOk()) {
      const Status& s = r.GetStatus();
      return Status(s.Code(),
                    "the Label Studio annotations are " + version + ", but the fine-tune job from template " +
                        ls.Options().train_template +
                        " was not queued (the annotations stay pending): " + s.Message(),
                    {"command line", 0, "ls-train-template"});
    }
    job_id = r->job.id;
    doc["job"] = app::SubmitResultJson(*r);
  }
  app::LsMerged(state, version, job_id);
  KESTREL_RETURN_IF_ERROR(app::SaveLsState(ls.StatePath(), state));
  return doc;
}

Response Webhook(ApiContext& ctx, const Request& req) {
  auto body = LsBody(req);
  if (!body.IsOk()) return ErrorResponse(body.GetStatus());
  if (!body->contains("action") || !(*body)["action"].is_string())
    return ErrorResponse(
        BodyError("the request body needs \"action\" (a Label Studio webhook event, e.g. "
                  "ANNOTATION_CREATED)",
                  "action"));
  const std::string action = (*body)["action"].get<std::string>();
  // Label Studio's events are upper-case words joined by '_'.
  const bool event_name =
      !action.empty() && action.size() <= 64 &&
      std::all_of(action.begin(), action.end(), [](char c) { return (c >= 'A' && c <= 'Z') || c == '_'; });
  if (!event_name)
    return ErrorResponse(
        BodyError("action must be a Label Studio webhook event (ANNOTATION_CREATED, ...)", "action"));
  auto event = app::ParseLsEvent(*body, action);
  if (!event.IsOk()) return ErrorResponse(event.GetStatus());
  return WithLsState(
      ctx, [&](store::MetadataStore& meta, LsBackend& ls, app::LsWebhookState& state) -> Result<json> {
        const app::LsApplied applied = app::ApplyLsEvent(state, *event);
        if (applied == app::LsApplied::kCounted || applied == app::LsApplied::kRemoved)
          KESTREL_RETURN_IF_ERROR(app::SaveLsState(ls.StatePath(), state));
        json out = {{"ok", true},
                    {"action", action},
                    {"counted", applied == app::LsApplied::kCounted},
                    {"duplicate", applied == app::LsApplied::kDuplicate},
                    {"removed", applied == app::LsApplied::kRemoved},
                    {"version", nullptr},
                    {"job", nullptr}};
        if (applied == app::LsApplied::kCounted && !ls.Options().train_template.empty() &&
            state.since_last_job >= ls.Options().train_after) {
          // The event is kept whatever the train does: a refused merge or job
          // is this answer's error, and the next counted event tries again.
          KESTREL_ASSIGN_OR_RETURN(json trained, Train(ctx, meta, ls, state));
          out["version"] = trained["version"];
          out["job"] = trained["job"];
          out["merge"] = trained["merge"];
        }
        out["counters"] = Counters(ls, state);
        return out;
      });
}

Response TrainNow(ApiContext& ctx, const Request& req) {
  auto body = ReadJsonObjectBody(req.body, {}, false);
  if (!body.IsOk()) return ErrorResponse(body.GetStatus());
  return WithLsState(
      ctx, [&](store::MetadataStore& meta, LsBackend& ls, app::LsWebhookState& state) -> Result<json> {
        KESTREL_ASSIGN_OR_RETURN(json out, Train(ctx, meta, ls, state));
        out["ok"] = true;
        out["counters"] = Counters(ls, state);
        return out;
      });
}

}  // namespace

Status ValidateLsOptions(const LsOptions& options) {
  if (options.train_after < 1)
    return Status::InvalidArgument(
        "--ls-train-after must be >= 1, got " + std::to_string(options.train_after),
        {"command line", 0, "ls-train-after"});
  if (options.model.empty() && !options.train_template.empty())
    return Status::InvalidArgument("--ls-train-template needs --ls-model (the model the jobs fine-tune)",
                                   {"command line", 0, "ls-train-template"});
  if (!IsIdentifier(options.from_name))
    return Status::InvalidArgument("--ls-from-name must be a tag name (letters, digits, '_', '-')",
                                   {"command line", 0, "ls-from-name"});
  if (!IsIdentifier(options.to_name))
    return Status::InvalidArgument("--ls-to-name must be a tag name (letters, digits, '_', '-')",
                                   {"command line", 0, "ls-to-name"});
  return {};
}

bool LsRectangleNames(const std::string& label_config, std::string* from_name, std::string* to_name) {
  const size_t open = label_config.find("<RectangleLabels");
  if (open == std::string::npos) return false;
  const size_t close = label_config.find('>', open);
  if (close == std::string::npos) return false;
  const std::string tag = label_config.substr(open, close - open);
  const std::string from = Attribute(tag, "name");
  const std::string to = Attribute(tag, "toName");
  if (from.empty() || to.empty()) return false;
  *from_name = from;
  *to_name = to;
  return true;
}

Status AddLabelStudioRoutes(Router& router, ApiContext& ctx) {
  KESTREL_RETURN_IF_ERROR(router.Add(
      "GET", "/ls/health",
      {"Label Studio ML backend: {\"status\": \"UP\", \"model_class\", \"model_version\"} (503 without "
       "--ls-model)"},
      [&ctx](const Request&, const PathParams&) {
        if (ctx.ls == nullptr || ctx.ls->Model() == nullptr) return NoModel();
        const app::LsModel& m = *ctx.ls->Model();
        return JsonResponse({{"status", "UP"},
                             {"model_class", "KestrelOnnxDetector"},
                             {"model_version", m.ModelVersion()},
                             {"model", m.Ref()},
                             {"arch", m.Arch()},
                             {"classes", m.Names()}});
      }));
  KESTREL_RETURN_IF_ERROR(router.Add(
      "POST", "/ls/setup",
      {"Label Studio ML backend: a project connects; answers {\"model_version\"} (a schema without "
       "RectangleLabels is 400)",
       {},
       "application/json",
       Access::kRead,
       "{\"schema\": labelling config XML, \"project\"?, ...}"},
      [&ctx](const Request& req, const PathParams&) {
        auto body = LsBody(req);
        if (!body.IsOk()) return ErrorResponse(body.GetStatus());
        if (!body->contains("schema") || !(*body)["schema"].is_string())
          return ErrorResponse(
              BodyError("the request body needs \"schema\": the project's labelling config XML", "schema"));
        std::string from, to;
        if (!LsRectangleNames((*body)["schema"].get<std::string>(), &from, &to))
          return ErrorResponse(
              BodyError("the labelling config has no <RectangleLabels name=... toName=...>: this backend "
                        "predicts boxes",
                        "schema"));
        if (ctx.ls == nullptr || ctx.ls->Model() == nullptr) return NoModel();
        return JsonResponse({{"model_version", ctx.ls->Model()->ModelVersion()}});
      }));
  KESTREL_RETURN_IF_ERROR(router.Add(
      "POST", "/ls/predict",
      {"Label Studio ML backend: one prediction per task ({\"results\": [{\"result\": [rectanglelabels in "
       "percent of the original image], \"score\", \"model_version\"}]}); images from this server's "
       "dataset image route or --ls-local-files-root",
       {},
       "application/json",
       Access::kRead,
       "{\"tasks\": [{\"data\": {\"image\": URL}}], \"label_config\"?: XML, ...}",
       "",
       true},
      [&ctx](const Request& req, const PathParams&) { return Predict(ctx, req); }));
  KESTREL_RETURN_IF_ERROR(router.Add(
      "POST", "/ls/webhook",
      {"Label Studio webhook: ANNOTATION_CREATED/UPDATED keep the task's annotation (durably, the latest "
       "per task) and are counted; ANNOTATION(S)_DELETED drop it; with --ls-train-template every "
       "--ls-train-after of them are merged as a new dataset version and queue a fine-tune job on it",
       {},
       "application/json",
       Access::kWrite,
       "{\"action\": \"ANNOTATION_CREATED\" | ..., \"annotation\": {\"id\", \"result\"}, \"task\": "
       "{\"id\", \"data\": {\"image\"}}, ...}",
       "",
       true},
      [&ctx](const Request& req, const PathParams&) { return Webhook(ctx, req); }));
  return router.Add("POST", "/ls/train",
                    {"Label Studio ML backend: merge the pending webhook annotations now as a new dataset "
                     "version (and, with --ls-train-template, queue the fine-tune job on it)",
                     {},
                     "application/json",
                     Access::kWrite,
                     "{} (or no body)",
                     "",
                     true},
                    [&ctx](const Request& req, const PathParams&) { return TrainNow(ctx, req); });
}

}  // namespace kestrel::server
