// Label Studio annotations brought in through the ML backend's webhook
// (issue 34; docs/server.md "Label Studio ML backend", server/api_ls.h):
// each ANNOTATION_CREATED / ANNOTATION_UPDATED event's annotation is kept
// as the pending labels of its task (the latest per task wins, a deleted
// annotation is dropped, the same delivery twice counts once), durably in a
// small JSON file under the server's home; on a train the pending
// annotations become the Label Studio export `dataset merge` reads, merged
// on top of a version as a new version (app/dataset_merge.h). Torch-free.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/dataset_merge.h"
#include "core/env.h"
#include "core/status.h"
#include "data/analyze.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::app {

// One task's latest annotation.
struct LsAnnotation {
  int64_t task_id = 0;
  int64_t annotation_id = 0;
  std::string image;                                // the task's data.image as Label Studio sent it
  nlohmann::json result = nlohmann::json::array();  // annotation.result, as sent
  // sha256 of {annotation id, image, result}: a delivery with the digest a
  // task already has (pending, or merged last) is a retry, not counted.
  std::string digest;
};

// What the webhook keeps (the file LsStatePath names).
struct LsWebhookState {
  int64_t annotations = 0;                  // counted events, all time
  int64_t since_last_job = 0;               // counted since the last merge (or job)
  int64_t last_job_id = 0;                  // 0: none yet
  std::string last_version;                 // "NAME@vN" the last merge made ("": none yet)
  std::map<int64_t, LsAnnotation> pending;  // task id -> its latest annotation, not merged yet
  std::map<int64_t, std::string> merged;    // task id -> the digest of its annotation merged last
};

// <home>/ls/webhook-state.json.
std::string LsStatePath(const std::string& home);
// The state in `path`; a missing file is the empty state. kCorruption naming
// the file and field when it is not the document SaveLsState writes.
Result<LsWebhookState> LoadLsState(const std::string& path, Env& env = Env::Default());
// Writes `state` to `path` atomically (temp + fsync + rename), creating its
// folder.
Status SaveLsState(const std::string& path, const LsWebhookState& state, Env& env = Env::Default());

// A webhook body, read. kInvalidArgument naming the field ("annotation.id",
// "task.data.image", "annotations[2].id") when an annotation event lacks
// what it needs; events this backend does not act on are kOther.
struct LsEvent {
  enum class Kind { kAnnotation, kCancelled, kDeleted, kOther };
  Kind kind = Kind::kOther;
  LsAnnotation annotation;           // kAnnotation
  std::vector<int64_t> deleted_ids;  // kDeleted: annotation ids
};
// `body` is the webhook's JSON object; `action` its validated "action":
// ANNOTATION_CREATED / ANNOTATION_UPDATED ({"annotation": {"id", "result",
// "was_cancelled"?}, "task": {"id", "data": {"image"}}}; a cancelled
// (skipped) annotation is kCancelled), ANNOTATION_DELETED ({"annotation":
// {"id"}}) and ANNOTATIONS_DELETED ({"annotations": [{"id"}...]}). An
// annotation's result is also checked as `dataset merge` reads it (boxes in
// the image, one label, no rotation): its error findings are
// kInvalidArgument naming "annotation.result[i]...".
Result<LsEvent> ParseLsEvent(const nlohmann::json& body, const std::string& action);

// What one event did to the state.
enum class LsApplied { kCounted, kDuplicate, kRemoved, kIgnored };
LsApplied ApplyLsEvent(LsWebhookState& state, const LsEvent& event);

// The pending annotations as a Label Studio JSON export (an array of tasks
// in task-id order: {"id", "data": {"image"}, "annotations": [{"id",
// "result"}]}), what `dataset merge corrections=FILE` reads.
nlohmann::json LsPendingExport(const LsWebhookState& state);

// The pending annotations merged on top of `base` (NAME@vN) as a new
// version (MergeReadCorrections; a task image that is this server's dataset
// image route of the base's dataset, /api/datasets/NAME/images/SHA, is the
// version's image with that SHA-256; new images under `images_dir`, "" =
// none). The findings name "ls-webhook" and the export's "tasks[i]"
// fields; the message maps each tasks[i] to its Label Studio task id.
Result<DatasetMerge> MergeLsPending(store::MetadataStore& meta, store::ArtifactStore& blobs,
                                    const std::string& base, const LsWebhookState& state,
                                    const std::string& images_dir, Env& env = Env::Default(),
                                    data::ValidationReport* report_out = nullptr);

// After a merge (and the job, 0 when none): the pending annotations become
// the merged ones, the count since the last job restarts.
void LsMerged(LsWebhookState& state, const std::string& version, int64_t job_id);

// {"annotations", "since_last_job", "pending", "last_job_id", "last_version"}
// (null for none).
nlohmann::json LsStateJson(const LsWebhookState& state);

}  // namespace kestrel::app
