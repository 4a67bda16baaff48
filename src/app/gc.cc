#include "app/gc.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <system_error>

#include "app/dataset_audits.h"
#include "app/job_kinds.h"
#include "core/hash.h"
#include "core/json.h"

namespace kestrel::app {
namespace {

using nlohmann::json;

// Record blobs larger than this are not JSON records (images, weights).
constexpr uint64_t kMaxRecordBlobBytes = uint64_t{64} << 20;

void CollectShas(const json& j, std::set<std::string>* out) {
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (IsSha256Hex(s)) out->insert(s);
  } else if (j.is_structured()) {
    for (const auto& v : j) CollectShas(v, out);
    if (j.is_object()) {
      for (const auto& [k, v] : j.items()) {
        if (IsSha256Hex(k)) out->insert(k);
        (void)v;
      }
    }
  }
}

void CollectShasFromText(const std::string& text, std::set<std::string>* out) {
  if (text.empty()) return;
  const json j = json::parse(text, nullptr, false);
  if (!j.is_discarded()) CollectShas(j, out);
}

std::string ModelRef(const store::ModelRecord& m) { return m.name + "@v" + std::to_string(m.seq); }

// The candidate blobs that are val/compare records, and what they name.
Result<std::set<std::string>> RecordRoots(store::ArtifactStore& blobs,
                                          const std::vector<store::ArtifactStore::BlobInfo>& candidates) {
  std::set<std::string> roots;
  for (const auto& b : candidates) {
    if (b.bytes > kMaxRecordBlobBytes || b.bytes < 2) continue;
    auto bytes = blobs.Get(b.sha);
    if (!bytes.IsOk()) {
      if (bytes.GetStatus().Code() == StatusCode::kNotFound) continue;  // removed meanwhile
      return bytes.GetStatus();
    }
    if (!IsRecordBlob(*bytes)) continue;
    roots.insert(b.sha);
    CollectShasFromText(*bytes, &roots);
  }
  return roots;
}

}  // namespace

bool IsRecordBlob(const std::string& bytes) {
  if (bytes.empty() || bytes[0] != '{') return false;
  const json j = json::parse(bytes, nullptr, false);
  if (!j.is_object()) return false;
  const auto it = j.find("kind");
  return it != j.end() && it->is_string() && (*it == "kestrel.eval_result" || *it == "kestrel.compare");
}

Result<References> CollectReferences(store::MetadataStore& meta, store::ArtifactStore& blobs) {
  References refs;
  KESTREL_ASSIGN_OR_RETURN(auto datasets, meta.ListDatasets());
  for (const auto& d : datasets) {
    KESTREL_ASSIGN_OR_RETURN(auto versions, meta.ListVersions(d.name));
    for (auto& v : versions) {
      References::Version rv;
      rv.shas.insert(v.manifest_sha);
      rv.shas.insert(v.report_sha);
      CollectShasFromText(v.summary_json, &rv.shas);
      // The label audits stored on the version (app/dataset_audits.h): the
      // audit page reads their blobs.
      auto audits = meta.GetSetting(AuditListSetting(v));
      if (audits.IsOk()) {
        CollectShasFromText(*audits, &rv.shas);
      } else if (audits.GetStatus().Code() != StatusCode::kNotFound) {
        return audits.GetStatus();
      }
      // The manifest lists the image blobs; unknown images = no gc.
      auto manifest = blobs.Get(v.manifest_sha);
      if (!manifest.IsOk()) {
        const Status& s = manifest.GetStatus();
        return Status(
            s.Code(),
            "dataset " + v.dataset + "@v" + std::to_string(v.seq) +
                ": its manifest cannot be read, so its image references are unknown: " + s.Message(),
            s.Where());
      }
      CollectShasFromText(*manifest, &rv.shas);
      rv.stored = {v.manifest_sha, v.report_sha};
      const json mj = json::parse(*manifest, nullptr, false);
      if (mj.is_object() && mj.contains("entries") && mj["entries"].is_array()) {
        for (const auto& e : mj["entries"]) {
          if (!e.is_object()) continue;
          // data_mode=reference: the image is a file outside the store,
          // neither a blob to keep nor one to count as missing.
          if (const auto f = e.find("file"); f != e.end() && f->is_object()) {
            ++rv.referenced_files;
            if (const auto sz = f->find("size"); sz != f->end() && sz->is_number_unsigned())
              rv.referenced_bytes += sz->get<uint64_t>();
            continue;
          }
          if (e.contains("image_sha") && e["image_sha"].is_string()) {
            rv.stored.insert(e["image_sha"].get<std::string>());
          }
        }
      }
      rv.record = std::move(v);
      refs.all.insert(rv.shas.begin(), rv.shas.end());
      refs.versions.push_back(std::move(rv));
    }
  }
  KESTREL_ASSIGN_OR_RETURN(auto models, meta.ListModels(store::ModelFilter{}));
  for (auto& m : models) {
    References::Model rm;
    rm.shas.insert(m.weights_sha);
    CollectShasFromText(m.lineage_json, &rm.shas);
    CollectShasFromText(m.eval_json, &rm.shas);
    CollectShasFromText(m.comparison_json, &rm.shas);
    rm.record = std::move(m);
    refs.all.insert(rm.shas.begin(), rm.shas.end());
    refs.models.push_back(std::move(rm));
  }
  store::JobFilter jf;
  jf.limit = std::numeric_limits<int32_t>::max();
  KESTREL_ASSIGN_OR_RETURN(auto jobs, meta.ListJobs(jf));
  for (const auto& j : jobs) {
    CollectShasFromText(j.spec.config_json, &refs.jobs);
    CollectShasFromText(j.spec.spec_json, &refs.jobs);
    CollectShasFromText(j.result_json, &refs.jobs);
  }
  refs.all.insert(refs.jobs.begin(), refs.jobs.end());
  return refs;
}

Status ValidateGcOptions(const GcOptions& o) {
  if (o.grace_s < 0 || o.grace_s > int64_t{100} * 365 * 86400) {
    return Status::InvalidArgument("the grace period must be in [0, 100 years] seconds",
                                   {"command line", 0, "grace-s"});
  }
  return {};
}

const char* JobFileVerdictName(JobFileVerdict v) {
  switch (v) {
    case JobFileVerdict::kKeep:
      return "keep";
    case JobFileVerdict::kJobGone:
      return "job_gone";
    case JobFileVerdict::kJobSucceeded:
      return "job_succeeded";
    case JobFileVerdict::kUnrecorded:
      return "unrecorded";
  }
  return "keep";
}

Result<std::vector<ClassifiedJobFile>> ClassifyJobFiles(store::MetadataStore& meta,
                                                        store::ArtifactStore& blobs) {
  std::vector<ClassifiedJobFile> out;
  if (!blobs.SharesJobFiles()) return out;
  // 1. List first; 2. then each job's record, then its checkpoint records.
  KESTREL_ASSIGN_OR_RETURN(auto listed, blobs.ListJobFiles());
  struct JobView {
    bool gone = false, succeeded = false;
    int64_t running_attempt = 0;  // 0: no attempt running
    std::set<std::string> recorded;
  };
  std::map<int64_t, JobView> views;
  for (const auto& f : listed) {
    if (f.job_id <= 0 || views.count(f.job_id) != 0) continue;
    JobView v;
    auto job = meta.GetJob(f.job_id);
    if (!job.IsOk()) {
      if (job.GetStatus().Code() != StatusCode::kNotFound) return job.GetStatus();
      v.gone = true;
    } else {
      v.succeeded = job->state == store::JobState::kSucceeded;
      if (job->state == store::JobState::kRunning) v.running_attempt = job->attempt;
      KESTREL_ASSIGN_OR_RETURN(auto records, meta.ListCheckpoints(f.job_id));
      for (const auto& rec : records) {
        // {"epoch", "files": {name: {"key", "sha256", "bytes"}}} (app/job_checkpoints.h).
        const json j = json::parse(rec.json, nullptr, false);
        if (!j.is_object() || !j.contains("files") || !j["files"].is_object()) continue;
        for (const auto& [name, file] : j["files"].items()) {
          (void)name;
          if (file.is_object() && file.contains("key") && file["key"].is_string())
            v.recorded.insert(file["key"].get<std::string>());
        }
      }
    }
    views.emplace(f.job_id, std::move(v));
  }
  for (const auto& f : listed) {
    ClassifiedJobFile c;
    c.file = f;
    if (f.job_id > 0) {
      const JobView& v = views.at(f.job_id);
      if (v.gone) {
        c.verdict = JobFileVerdict::kJobGone;
      } else if (v.succeeded) {
        c.verdict = JobFileVerdict::kJobSucceeded;
      } else if (f.attempt != v.running_attempt && v.recorded.count(f.key) == 0) {
        c.verdict = JobFileVerdict::kUnrecorded;
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

Result<GcReport> CollectGarbage(store::MetadataStore& meta, store::ArtifactStore& blobs,
                                const GcOptions& options, int64_t now_s) {
  KESTREL_RETURN_IF_ERROR(ValidateGcOptions(options));
  GcReport r;
  r.dry_run = options.dry_run;
  r.grace_s = options.grace_s;
  r.store = blobs.Describe();
  const int64_t keep_since = now_s - options.grace_s;
  // 0. Crashed writers' temp files and folders (leftovers.h), as old as the
  //    grace period asks of blobs; a blob a crashed collector left aside is
  //    put back first, so the steps below decide on it again.
  LeftoverOptions lo;
  lo.dry_run = options.dry_run;
  lo.min_age_s = options.grace_s;
  KESTREL_ASSIGN_OR_RETURN(r.leftovers, ReclaimLeftovers(blobs.Root(), lo, now_s));
  //    And the store's own unfinished writes as old (S3: multipart uploads
  //    a killed writer never completed; invisible, and billed).
  if (!options.dry_run) {
    KESTREL_ASSIGN_OR_RETURN(r.incomplete_writes, blobs.SweepIncompleteWrites(keep_since));
  }
  // 1. List first: a blob written after this point is not considered at all.
  KESTREL_ASSIGN_OR_RETURN(auto listed, blobs.List());
  // 2. Then the references: every record committed before this read is seen;
  //    one committed later Put (wrote or touched) its blobs within the grace.
  KESTREL_ASSIGN_OR_RETURN(References refs, CollectReferences(meta, blobs));
  std::vector<store::ArtifactStore::BlobInfo> unreferenced;
  for (const auto& b : listed) {
    ++r.blobs;
    r.blob_bytes += b.bytes;
    if (refs.all.count(b.sha) != 0) {
      ++r.referenced;
      r.referenced_bytes += b.bytes;
    } else {
      unreferenced.push_back(b);
    }
  }
  KESTREL_ASSIGN_OR_RETURN(auto roots, RecordRoots(blobs, unreferenced));
  for (const auto& b : unreferenced) {
    if (roots.count(b.sha) != 0) {
      ++r.records;
      r.records_bytes += b.bytes;
      continue;
    }
    if (b.mtime_s >= keep_since) {
      ++r.recent;
      r.recent_bytes += b.bytes;
      continue;
    }
    // 3. Remove; the store re-checks the mtime after moving the blob aside.
    bool removed = true;
    if (!options.dry_run) {
      KESTREL_ASSIGN_OR_RETURN(removed, blobs.RemoveIfUntouchedSince(b.sha, keep_since));
    }
    if (!removed) {
      ++r.raced;
      continue;
    }
    ++r.deleted;
    r.freed_bytes += b.bytes;
    r.deleted_shas.push_back(b.sha);
  }
  // 4. Job files on a shared store: the same list-then-read order, the same
  //    grace period (an upload in flight is younger than it).
  KESTREL_ASSIGN_OR_RETURN(auto job_files, ClassifyJobFiles(meta, blobs));
  for (const auto& c : job_files) {
    ++r.job_files;
    r.job_file_bytes += c.file.bytes;
    if (c.verdict == JobFileVerdict::kKeep) {
      ++r.job_files_kept;
      r.job_files_kept_bytes += c.file.bytes;
      continue;
    }
    if (c.file.mtime_s >= keep_since) {
      ++r.job_files_recent;
      r.job_files_recent_bytes += c.file.bytes;
      continue;
    }
    bool removed = true;
    if (!options.dry_run) {
      KESTREL_ASSIGN_OR_RETURN(removed, blobs.RemoveJobFile(c.file.key));
    }
    if (!removed) continue;  // already gone (the job's own retention, another collector)
    ++r.job_files_deleted;
    r.job_files_freed_bytes += c.file.bytes;
    ++r.job_files_deleted_by_reason[JobFileVerdictName(c.verdict)];
    r.deleted_job_files.push_back(c.file.key);
  }
  return r;
}

json GcReportJson(const GcReport& r) {
  return {{"ok", true},
          {"dry_run", r.dry_run},
          {"grace_s", r.grace_s},
          {"store", r.store},
          {"incomplete_writes", r.incomplete_writes},
          {"blobs", r.blobs},
          {"blob_bytes", r.blob_bytes},
          {"referenced", r.referenced},
          {"referenced_bytes", r.referenced_bytes},
          {"records", r.records},
          {"records_bytes", r.records_bytes},
          {"recent", r.recent},
          {"recent_bytes", r.recent_bytes},
          {"deleted", r.deleted},
          {"freed_bytes", r.freed_bytes},
          {"raced", r.raced},
          {"deleted_shas", r.deleted_shas},
          {"leftovers", LeftoverReportJson(r.leftovers)},
          {"job_files",
           {{"count", r.job_files},
            {"bytes", r.job_file_bytes},
            {"kept", r.job_files_kept},
            {"kept_bytes", r.job_files_kept_bytes},
            {"recent", r.job_files_recent},
            {"recent_bytes", r.job_files_recent_bytes},
            {"deleted", r.job_files_deleted},
            {"freed_bytes", r.job_files_freed_bytes},
            {"deleted_by_reason", r.job_files_deleted_by_reason},
            {"deleted_keys", r.deleted_job_files}}}};
}

Result<DuReport> DiskUsage(store::MetadataStore& meta, store::ArtifactStore& blobs, Env& env) {
  DuReport r;
  KESTREL_ASSIGN_OR_RETURN(auto listed, blobs.List());
  KESTREL_ASSIGN_OR_RETURN(References refs, CollectReferences(meta, blobs));
  std::map<std::string, uint64_t> size;
  for (const auto& b : listed) {
    size[b.sha] = b.bytes;
    ++r.blobs;
    r.blob_bytes += b.bytes;
  }
  for (const auto& v : refs.versions) {
    DuReport::VersionUsage u;
    u.dataset = v.record.dataset;
    u.version_id = v.record.version_id;
    u.seq = v.record.seq;
    u.data_mode = v.record.data_mode;
    u.referenced_files = v.referenced_files;
    u.referenced_bytes = v.referenced_bytes;
    r.referenced_bytes += v.referenced_bytes;
    for (const auto& sha : v.stored) {
      auto it = size.find(sha);
      if (it == size.end()) {
        ++u.missing;
      } else {
        ++u.blobs;
        u.bytes += it->second;
      }
    }
    r.versions.push_back(std::move(u));
  }
  for (const auto& m : refs.models) {
    DuReport::ModelUsage u;
    u.id = m.record.id;
    u.ref = ModelRef(m.record);
    u.dataset = m.record.dataset;
    for (const auto& sha : m.shas) {
      auto it = size.find(sha);
      if (it == size.end()) continue;  // lineage may name files that were never stored
      ++u.blobs;
      u.bytes += it->second;
    }
    r.models.push_back(std::move(u));
  }
  std::vector<store::ArtifactStore::BlobInfo> unreferenced;
  for (const auto& b : listed) {
    if (refs.all.count(b.sha) == 0) unreferenced.push_back(b);
  }
  KESTREL_ASSIGN_OR_RETURN(auto roots, RecordRoots(blobs, unreferenced));
  for (const auto& b : unreferenced) {
    if (roots.count(b.sha) != 0) {
      ++r.records;
      r.records_bytes += b.bytes;
    } else {
      ++r.unreferenced;
      r.unreferenced_bytes += b.bytes;
    }
  }
  // Job folders: home/jobs/<id>/attempt-<n>/... and the attempt logs.
  std::map<int64_t, std::string> states;
  store::JobFilter jf;
  jf.limit = std::numeric_limits<int32_t>::max();
  KESTREL_ASSIGN_OR_RETURN(auto jobs, meta.ListJobs(jf));
  for (const auto& j : jobs) states[j.id] = store::JobStateName(j.state);
  const std::string jobs_dir = JoinPath(blobs.Root(), "jobs");
  if (env.Stat(jobs_dir).is_dir) {
    KESTREL_ASSIGN_OR_RETURN(auto names, env.ListDir(jobs_dir));
    for (const auto& n : names) {
      if (n.empty() || n.size() > 18 ||
          !std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        continue;
      }
      DuReport::JobUsage u;
      u.job_id = std::stoll(n);
      auto st = states.find(u.job_id);
      if (st != states.end()) u.state = st->second;
      std::error_code ec;
      for (auto it = std::filesystem::recursive_directory_iterator(JoinPath(jobs_dir, n), ec);
           !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        std::error_code fe;
        if (!it->is_regular_file(fe) || fe) continue;
        const uint64_t bytes = it->file_size(fe);
        if (fe) continue;  // removed while walking
        u.bytes += bytes;
        if (it->path().extension() == ".ckpt") {
          ++u.checkpoints;
          u.checkpoint_bytes += bytes;
        }
      }
      r.job_bytes += u.bytes;
      r.jobs.push_back(std::move(u));
    }
    std::sort(r.jobs.begin(), r.jobs.end(),
              [](const DuReport::JobUsage& a, const DuReport::JobUsage& b) { return a.job_id < b.job_id; });
  }
  // Job files on a shared store (S3 jobs/).
  KESTREL_ASSIGN_OR_RETURN(auto job_files, ClassifyJobFiles(meta, blobs));
  for (const auto& c : job_files) {
    ++r.job_files;
    r.job_file_bytes += c.file.bytes;
    if (c.verdict != JobFileVerdict::kKeep) {
      ++r.job_files_garbage;
      r.job_files_garbage_bytes += c.file.bytes;
    }
  }
  return r;
}

json DuReportJson(const DuReport& r) {
  json datasets = json::array(), models = json::array(), jobs = json::array();
  for (const auto& v : r.versions) {
    datasets.push_back({{"dataset", v.dataset},
                        {"version", "v" + std::to_string(v.seq)},
                        {"version_id", v.version_id},
                        {"blobs", v.blobs},
                        {"bytes", v.bytes},
                        {"missing", v.missing},
                        {"data_mode", v.data_mode},
                        {"referenced_files", v.referenced_files},
                        {"referenced_bytes", v.referenced_bytes}});
  }
  for (const auto& m : r.models) {
    models.push_back(
        {{"id", m.id}, {"ref", m.ref}, {"dataset", m.dataset}, {"blobs", m.blobs}, {"bytes", m.bytes}});
  }
  for (const auto& j : r.jobs) {
    jobs.push_back({{"job_id", j.job_id},
                    {"state", j.state.empty() ? json(nullptr) : json(j.state)},
                    {"bytes", j.bytes},
                    {"checkpoints", j.checkpoints},
                    {"checkpoint_bytes", j.checkpoint_bytes}});
  }
  return {{"ok", true},
          {"datasets", datasets},
          {"models", models},
          {"jobs", jobs},
          {"records", {{"count", r.records}, {"bytes", r.records_bytes}}},
          {"unreferenced", {{"count", r.unreferenced}, {"bytes", r.unreferenced_bytes}}},
          {"total",
           {{"blobs", r.blobs},
            {"blob_bytes", r.blob_bytes},
            {"job_bytes", r.job_bytes},
            {"referenced_bytes", r.referenced_bytes}}},
          {"job_files",
           {{"count", r.job_files},
            {"bytes", r.job_file_bytes},
            {"garbage", r.job_files_garbage},
            {"garbage_bytes", r.job_files_garbage_bytes}}}};
}

namespace {

// "epoch<N>.ckpt" -> N, else -1.
int64_t EpochCheckpointNumber(const std::string& name) {
  constexpr std::string_view kPrefix = "epoch", kSuffix = ".ckpt";
  if (name.size() <= kPrefix.size() + kSuffix.size() || name.compare(0, kPrefix.size(), kPrefix) != 0 ||
      name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
    return -1;
  }
  const std::string digits = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  if (digits.empty() || digits.size() > 9 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return -1;
  }
  return std::stoll(digits);
}

Status RemoveCounted(Env& env, const std::string& path, RetentionResult* out) {
  const FileInfo info = env.Stat(path);
  if (!info.is_regular) return {};
  KESTREL_RETURN_IF_ERROR(env.RemoveFile(path));
  out->deleted.push_back(path);
  out->freed_bytes += info.size;
  return {};
}

}  // namespace

Result<RetentionResult> ApplyRetention(Env& env, const std::string& weights_dir, int keep) {
  if (keep < 0) return Status::InvalidArgument("keep_ckpts must be >= 0", {"", 0, "keep_ckpts"});
  RetentionResult out;
  if (!env.Stat(weights_dir).is_dir) return out;
  KESTREL_ASSIGN_OR_RETURN(auto names, env.ListDir(weights_dir));
  std::vector<std::pair<int64_t, std::string>> epochs;
  for (const auto& n : names) {
    const int64_t e = EpochCheckpointNumber(n);
    if (e >= 0) epochs.emplace_back(e, n);
  }
  std::sort(epochs.begin(), epochs.end());
  const size_t drop = epochs.size() > static_cast<size_t>(keep) ? epochs.size() - keep : 0;
  for (size_t i = 0; i < drop; ++i) {
    KESTREL_RETURN_IF_ERROR(RemoveCounted(env, JoinPath(weights_dir, epochs[i].second), &out));
  }
  return out;
}

Result<RetentionResult> ApplyJobRetention(Env& env, const std::string& home, const store::JobRecord& job,
                                          int keep) {
  if (job.state != store::JobState::kSucceeded) {
    return Status::FailedPrecondition("job " + std::to_string(job.id) +
                                      " has not succeeded: its checkpoints stay");
  }
  const auto result = AttemptResult::Parse(job.result_json.empty() ? "{}" : job.result_json);
  const std::string run_dir = result.IsOk() ? result->run_dir : "";
  if (run_dir.empty()) {
    return Status::FailedPrecondition("job " + std::to_string(job.id) + " result names no run_dir");
  }
  KESTREL_ASSIGN_OR_RETURN(RetentionResult out, ApplyRetention(env, JoinPath(run_dir, "weights"), keep));
  const std::string job_dir = JoinPath(JoinPath(home, "jobs"), std::to_string(job.id));
  for (int64_t k = 1; k < job.attempt; ++k) {
    const std::string weights = JoinPath(JoinPath(job_dir, "attempt-" + std::to_string(k)), "weights");
    if (!env.Stat(weights).is_dir || JoinPath(run_dir, "weights") == weights) continue;
    KESTREL_ASSIGN_OR_RETURN(auto names, env.ListDir(weights));
    for (const auto& n : names) {
      if (n.size() > 5 && n.compare(n.size() - 5, 5, ".ckpt") == 0) {
        KESTREL_RETURN_IF_ERROR(RemoveCounted(env, JoinPath(weights, n), &out));
      }
    }
  }
  return out;
}

}  // namespace kestrel::app
