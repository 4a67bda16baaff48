#include "app/ls_annotations.h"

#include <limits>
#include <regex>
#include <utility>

#include "core/hash.h"
#include "core/json.h"
#include "data/corrections.h"
#include "data/dataset.h"
#include "data/version.h"

namespace kestrel::app {
namespace {

using nlohmann::json;

// The state file's largest size (a pending annotation is a few KB).
constexpr uint64_t kMaxStateBytes = uint64_t{256} << 20;
constexpr int kStateFormat = 1;
// The name findings give the webhook's annotations (as a file's name).
constexpr const char* kSource = "ls-webhook";

Status BodyError(const std::string& message, const std::string& field) {
  return Status::InvalidArgument(message, {"request", 0, field});
}

// An integer id (not a bool, not a fraction, > 0).
bool ReadId(const json& obj, const char* key, int64_t* out) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer()) return false;
  if (it->is_number_unsigned()) {
    if (it->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) return false;
  }
  *out = it->get<int64_t>();
  return *out > 0;
}

std::string Digest(const LsAnnotation& a) {
  return Sha256Hex(DumpJson(json{{"id", a.annotation_id}, {"image", a.image}, {"result", a.result}}));
}

Status StateError(const std::string& path, const std::string& field, const std::string& what) {
  return Status::Corruption("the Label Studio webhook state " + path + " is damaged: " + what +
                                " (move it away to start over; the pending annotations in it are then lost)",
                            {path, 0, field});
}

// "tasks[0].annotations[0].result..." of a one-task export -> "annotation.result...".
std::string AnnotationField(const std::string& field) {
  const std::string prefix = "tasks[0].annotations[0].";
  if (field.rfind(prefix, 0) == 0) return "annotation." + field.substr(prefix.size());
  if (field.rfind("tasks[0].", 0) == 0) return "task." + field.substr(9);
  return field;
}

}  // namespace

std::string LsStatePath(const std::string& home) {
  return JoinPath(JoinPath(home, "ls"), "webhook-state.json");
}

Result<LsWebhookState> LoadLsState(const std::string& path, Env& env) {
  LsWebhookState s;
  if (!env.Stat(path).exists) return s;
  KESTREL_ASSIGN_OR_RETURN(std::string text, env.ReadFile(path, kMaxStateBytes));
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return StateError(path, "", "not a JSON object");
  if (doc.value("format", 0) != kStateFormat)
    return StateError(path, "format", "format is not " + std::to_string(kStateFormat));
  try {
    s.annotations = doc.at("annotations").get<int64_t>();
    s.since_last_job = doc.at("since_last_job").get<int64_t>();
    s.last_job_id = doc.at("last_job_id").get<int64_t>();
    s.last_version = doc.at("last_version").get<std::string>();
    for (const json& p : doc.at("pending")) {
      LsAnnotation a;
      a.task_id = p.at("task").get<int64_t>();
      a.annotation_id = p.at("annotation").get<int64_t>();
      a.image = p.at("image").get<std::string>();
      a.result = p.at("result");
      a.digest = Digest(a);
      s.pending[a.task_id] = std::move(a);
    }
    for (const json& m : doc.at("merged"))
      s.merged[m.at("task").get<int64_t>()] = m.at("digest").get<std::string>();
  } catch (const json::exception& e) {
    return StateError(path, "", e.what());
  }
  return s;
}

Status SaveLsState(const std::string& path, const LsWebhookState& state, Env& env) {
  json pending = json::array(), merged = json::array();
  for (const auto& [task, a] : state.pending)
    pending.push_back(
        {{"task", task}, {"annotation", a.annotation_id}, {"image", a.image}, {"result", a.result}});
  for (const auto& [task, digest] : state.merged) merged.push_back({{"task", task}, {"digest", digest}});
  const json doc = {{"format", kStateFormat},
                    {"annotations", state.annotations},
                    {"since_last_job", state.since_last_job},
                    {"last_job_id", state.last_job_id},
                    {"last_version", state.last_version},
                    {"pending", pending},
                    {"merged", merged}};
  KESTREL_RETURN_IF_ERROR(env.CreateDirs(DirName(path)));
  return env.WriteFileAtomic(path, DumpJson(doc, 1) + "\n");
}

Result<LsEvent> ParseLsEvent(const json& body, const std::string& action) {
  LsEvent ev;
  if (action == "ANNOTATION_DELETED" || action == "ANNOTATIONS_DELETED") {
    ev.kind = LsEvent::Kind::kDeleted;
    if (body.contains("annotations")) {
      const json& list = body["annotations"];
      if (!list.is_array() || list.empty())
        return BodyError("annotations must be a non-empty array of {\"id\": annotation id}", "annotations");
      for (size_t i = 0; i < list.size(); ++i) {
        const std::string f = "annotations[" + std::to_string(i) + "]";
        int64_t id = 0;
        if (!list[i].is_object() || !ReadId(list[i], "id", &id))
          return BodyError(f + " must be {\"id\": the deleted annotation's id (a positive integer)}",
                           f + ".id");
        ev.deleted_ids.push_back(id);
      }
      return ev;
    }
    int64_t id = 0;
    if (!body.contains("annotation") || !body["annotation"].is_object() ||
        !ReadId(body["annotation"], "id", &id))
      return BodyError(
          action + " needs \"annotations\": [{\"id\"}] or \"annotation\": {\"id\"} (a positive integer)",
          "annotation.id");
    ev.deleted_ids.push_back(id);
    return ev;
  }
  if (action != "ANNOTATION_CREATED" && action != "ANNOTATION_UPDATED") return ev;
  if (!body.contains("annotation") || !body["annotation"].is_object())
    return BodyError(action + " needs \"annotation\": the annotation object Label Studio sends",
                     "annotation");
  const json& ann = body["annotation"];
  LsAnnotation& a = ev.annotation;
  if (!ReadId(ann, "id", &a.annotation_id))
    return BodyError("annotation.id must be the annotation's id (a positive integer)", "annotation.id");
  if (!ann.contains("result") || !ann["result"].is_array())
    return BodyError("annotation.result must be the annotation's result list (an array)",
                     "annotation.result");
  if (ann.contains("was_cancelled") && !ann["was_cancelled"].is_boolean())
    return BodyError("annotation.was_cancelled must be true or false", "annotation.was_cancelled");
  if (!body.contains("task") || !body["task"].is_object())
    return BodyError(action + " needs \"task\": {\"id\", \"data\": {\"image\"}} (the annotated task)",
                     "task");
  const json& task = body["task"];
  if (!ReadId(task, "id", &a.task_id))
    return BodyError("task.id must be the task's id (a positive integer)", "task.id");
  if (!task.contains("data") || !task["data"].is_object())
    return BodyError("task.data must be an object holding \"image\"", "task.data");
  const json& data = task["data"];
  if (!data.contains("image") || !data["image"].is_string() || data["image"].get<std::string>().empty())
    return BodyError("task.data.image must be the task's image URL (a string)", "task.data.image");
  int64_t ann_task = 0;
  if (ann.contains("task") && (!ReadId(ann, "task", &ann_task) || ann_task != a.task_id))
    return BodyError("annotation.task must be task.id (" + std::to_string(a.task_id) + ")",
                     "annotation.task");
  a.image = data["image"].get<std::string>();
  a.result = ann["result"];
  a.digest = Digest(a);
  if (ann.value("was_cancelled", false)) {
    ev.kind = LsEvent::Kind::kCancelled;
    return ev;
  }
  ev.kind = LsEvent::Kind::kAnnotation;
  // The boxes as `dataset merge` reads them: their errors now, not at the
  // train (labels and images are checked against the version there).
  const json one = json::array({{{"id", a.task_id},
                                 {"data", {{"image", a.image}}},
                                 {"annotations", json::array({{{"result", a.result}}})}}});
  KESTREL_ASSIGN_OR_RETURN(data::Corrections c, data::ParseLabelStudioExport(DumpJson(one), kSource));
  for (const data::Finding& f : c.findings) {
    if (f.severity != data::Severity::kError) continue;
    const std::string field = AnnotationField(f.field);
    return BodyError(field + ": " + f.message + " [" + f.check + "]; the annotation is not kept", field);
  }
  return ev;
}

LsApplied ApplyLsEvent(LsWebhookState& state, const LsEvent& event) {
  switch (event.kind) {
    case LsEvent::Kind::kAnnotation: {
      const LsAnnotation& a = event.annotation;
      auto p = state.pending.find(a.task_id);
      if (p != state.pending.end() && p->second.digest == a.digest) return LsApplied::kDuplicate;
      auto m = state.merged.find(a.task_id);
      if (p == state.pending.end() && m != state.merged.end() && m->second == a.digest)
        return LsApplied::kDuplicate;
      state.pending[a.task_id] = a;
      ++state.annotations;
      ++state.since_last_job;
      return LsApplied::kCounted;
    }
    case LsEvent::Kind::kDeleted: {
      bool removed = false;
      for (int64_t id : event.deleted_ids) {
        for (auto it = state.pending.begin(); it != state.pending.end();) {
          if (it->second.annotation_id == id) {
            it = state.pending.erase(it);
            removed = true;
          } else {
            ++it;
          }
        }
      }
      return removed ? LsApplied::kRemoved : LsApplied::kIgnored;
    }
    case LsEvent::Kind::kCancelled:
    case LsEvent::Kind::kOther:
      break;
  }
  return LsApplied::kIgnored;
}

json LsPendingExport(const LsWebhookState& state) {
  json tasks = json::array();
  for (const auto& [task, a] : state.pending)
    tasks.push_back({{"id", task},
                     {"data", {{"image", a.image}}},
                     {"annotations", json::array({{{"id", a.annotation_id}, {"result", a.result}}})}});
  return tasks;
}

Result<DatasetMerge> MergeLsPending(store::MetadataStore& meta, store::ArtifactStore& blobs,
                                    const std::string& base, const LsWebhookState& state,
                                    const std::string& images_dir, Env& env,
                                    data::ValidationReport* report_out) {
  KESTREL_ASSIGN_OR_RETURN(data::VersionView v, data::LoadVersion(meta, blobs, base, env));
  // This server's dataset image route of the base's dataset names an image
  // by its SHA-256: as "<split>/<path>", the key the merge matches.
  std::map<std::string, std::string> key_of_sha;
  for (const data::ManifestEntry& e : v.manifest.entries)
    key_of_sha.emplace(e.image_sha, std::string(data::SplitName(e.split)) + "/" + e.path);
  const std::regex route("^(https?://[^/]+)?/api/datasets/([^/?#]+)/images/([0-9a-f]{64})([?#].*)?$");
  json doc = LsPendingExport(state);
  std::string order;
  for (size_t i = 0; i < doc.size(); ++i) {
    json& task = doc[i];
    order += (order.empty() ? "" : ", ") + std::string("tasks[") + std::to_string(i) + "] = task " +
             std::to_string(task["id"].get<int64_t>());
    const std::string image = task["data"]["image"].get<std::string>();
    std::smatch m;
    if (std::regex_match(image, m, route) && m[2].str() == v.record.dataset) {
      auto key = key_of_sha.find(m[3].str());
      if (key != key_of_sha.end()) task["data"]["image"] = key->second;
    }
  }
  KESTREL_ASSIGN_OR_RETURN(data::Corrections c, data::ParseLabelStudioExport(DumpJson(doc), kSource));
  auto merged = MergeReadCorrections(meta, blobs, base, std::move(v), c, images_dir, 0, env, report_out);
  if (!merged.IsOk()) {
    const Status& s = merged.GetStatus();
    return Status(
        s.Code(),
        "the Label Studio annotations (" + order + ") were not merged into " + base + ": " + s.Message(),
        s.Where());
  }
  return merged;
}

void LsMerged(LsWebhookState& state, const std::string& version, int64_t job_id) {
  for (const auto& [task, a] : state.pending) state.merged[task] = a.digest;
  state.pending.clear();
  state.since_last_job = 0;
  state.last_version = version;
  if (job_id != 0) state.last_job_id = job_id;
}

json LsStateJson(const LsWebhookState& state) {
  return {{"annotations", state.annotations},
          {"since_last_job", state.since_last_job},
          {"pending", int64_t(state.pending.size())},
          {"last_job_id", state.last_job_id == 0 ? json(nullptr) : json(state.last_job_id)},
          {"last_version", state.last_version.empty() ? json(nullptr) : json(state.last_version)}};
}

}  // namespace kestrel::app
