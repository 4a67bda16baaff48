#include "app/job_checkpoints.h"

#include <nlohmann/json.hpp>
#include <vector>

#include "app/job_kinds.h"
#include "core/hash.h"
#include "core/json.h"

namespace kestrel::app {

CheckpointUploader::CheckpointUploader(std::unique_ptr<store::ArtifactStore> artifacts,
                                       std::unique_ptr<store::MetadataStore> meta, int64_t job_id,
                                       int64_t attempt, std::string weights_dir, Env& env)
    : artifacts_(std::move(artifacts)),
      meta_(std::move(meta)),
      job_id_(job_id),
      attempt_(attempt),
      weights_dir_(std::move(weights_dir)),
      env_(env) {}

Status CheckpointUploader::AfterEpoch(int epoch) {
  if (fenced_)
    return Status::Aborted("job " + std::to_string(job_id_) + " attempt " + std::to_string(attempt_) +
                           " is no longer the job's; its checkpoints are not shared");
  std::map<std::string, Uploaded> now = uploaded_;
  for (const char* name : kSharedCheckpointFiles) {
    const std::string path = JoinPath(weights_dir_, name);
    if (!env_.Stat(path).is_regular) continue;
    KESTREL_ASSIGN_OR_RETURN(std::string bytes, env_.ReadFile(path));
    const std::string sha = Sha256Hex(bytes);
    if (auto it = now.find(name); it != now.end() && it->second.sha == sha) continue;
    KESTREL_ASSIGN_OR_RETURN(std::string key, artifacts_->PutJobFile(job_id_, attempt_, name, bytes, sha));
    now[name] = {key, sha, bytes.size()};
    ++uploads_;
  }
  if (now.find("last.ckpt") == now.end()) return {};  // nothing to resume from yet
  nlohmann::json files = nlohmann::json::object();
  for (const auto& [name, u] : now) files[name] = {{"key", u.key}, {"sha256", u.sha}, {"bytes", u.bytes}};
  const nlohmann::json record = {{"epoch", epoch}, {"files", files}};
  Status recorded = meta_->RecordCheckpoint(job_id_, attempt_, DumpJson(record), env_.UnixMillis());
  if (recorded.Code() == StatusCode::kAborted) fenced_ = true;
  KESTREL_RETURN_IF_ERROR(recorded);
  uploaded_ = std::move(now);
  // The record names the new objects: this attempt's older ones are garbage.
  std::vector<std::string> keep;
  for (const auto& [name, u] : uploaded_) keep.push_back(u.key);
  auto removed = artifacts_->RemoveJobFiles(job_id_, attempt_, keep);
  if (!removed.IsOk()) return removed.GetStatus();  // harmless: the next epoch or gc removes them
  return {};
}

namespace {

struct RecordedFile {
  std::string name, key, sha;
};

// The files of one record, best.safetensors first (kSharedCheckpointFiles'
// order); kCorruption when the record is not what an uploader writes.
Result<std::vector<RecordedFile>> ParseRecord(const store::CheckpointRecord& rec) {
  auto j = nlohmann::json::parse(rec.json, nullptr, false);
  const std::string what = "job " + std::to_string(rec.job_id) + " attempt " + std::to_string(rec.attempt) +
                           "'s recorded checkpoint";
  if (!j.is_object() || !j.contains("files") || !j["files"].is_object())
    return Status::Corruption(what + " is not a checkpoint record");
  std::vector<RecordedFile> out;
  for (const char* name : kSharedCheckpointFiles) {
    if (!j["files"].contains(name)) continue;
    const auto& f = j["files"][name];
    if (!f.is_object() || !f.contains("key") || !f["key"].is_string() || !f.contains("sha256") ||
        !f["sha256"].is_string())
      return Status::Corruption(what + " names " + name + " without a key and sha256");
    out.push_back({name, f["key"].get<std::string>(), f["sha256"].get<std::string>()});
  }
  if (out.empty() || out.back().name != "last.ckpt") return Status::Corruption(what + " has no last.ckpt");
  return out;
}

}  // namespace

Result<int64_t> FetchNewestCheckpoint(store::ArtifactStore& artifacts, store::MetadataStore& meta,
                                      const AttemptContext& ctx, Env& env, std::ostream& log) {
  KESTREL_ASSIGN_OR_RETURN(std::vector<store::CheckpointRecord> records, meta.ListCheckpoints(ctx.job_id));
  for (const auto& rec : records) {  // newest attempt first
    if (rec.attempt >= ctx.attempt) continue;
    const std::string weights =
        JoinPath(JoinPath(ctx.JobDir(), "attempt-" + std::to_string(rec.attempt)), "weights");
    // This host ran that attempt (or fetched it before): its own files are
    // at least as new as what it uploaded.
    if (env.Stat(JoinPath(weights, "last.ckpt")).is_regular) return 0;
    auto files = ParseRecord(rec);
    if (!files.IsOk()) {
      log << files.GetStatus().Message() << "; trying an older one" << std::endl;
      continue;
    }
    Status fetched;
    for (const auto& f : *files) {
      auto bytes = artifacts.GetJobFile(f.key, f.sha);
      if (!bytes.IsOk()) {
        fetched = bytes.GetStatus();
        break;
      }
      fetched = env.CreateDirs(weights);
      if (fetched.IsOk()) fetched = env.WriteFileAtomic(JoinPath(weights, f.name), *bytes);
      if (!fetched.IsOk()) break;
    }
    if (fetched.Code() == StatusCode::kUnavailable) return fetched;
    if (!fetched.IsOk()) {
      log << "job " << ctx.job_id << ": the checkpoint attempt " << rec.attempt
          << " recorded cannot be used: " << fetched.ToString() << "; trying an older one" << std::endl;
      continue;
    }
    log << "job " << ctx.job_id << " attempt " << ctx.attempt << ": fetched attempt " << rec.attempt
        << "'s checkpoint from " << artifacts.Describe() << " into " << weights << std::endl;
    return rec.attempt;
  }
  return 0;
}

Result<std::unique_ptr<CheckpointUploader>> ShareCheckpoints(AttemptContext& ctx, Env& env,
                                                             std::ostream& log) {
  KESTREL_ASSIGN_OR_RETURN(std::unique_ptr<store::ArtifactStore> artifacts,
                           store::OpenArtifactStore(ctx.home, env));
  if (!artifacts->SharesJobFiles() || ctx.meta == nullptr) return std::unique_ptr<CheckpointUploader>();
  KESTREL_ASSIGN_OR_RETURN(int64_t fetched, FetchNewestCheckpoint(*artifacts, *ctx.meta, ctx, env, log));
  (void)fetched;  // logged; the attempt's resume scan finds the files where this host's own would be
  return std::make_unique<CheckpointUploader>(std::move(artifacts), std::move(ctx.meta), ctx.job_id,
                                              ctx.attempt, JoinPath(ctx.AttemptDir(), "weights"), env);
}

}  // namespace kestrel::app
