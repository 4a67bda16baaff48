// `kestrel gc [--dry-run] [--grace-s S]` and `kestrel du` (docs/disk.md):
// parse, call the application layer (app/gc.h), print. `--json` prints the
// app layer's view unchanged.
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "app/gc.h"
#include "app/job_kinds.h"
#include "cli/cli.h"
#include "core/env.h"
#include "store/artifact_store.h"
#include "train/train_config.h"

namespace kestrel::cli {
namespace {

std::string Bytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  std::ostringstream o;
  if (u == 0) {
    o << b << " B";
  } else {
    o << std::fixed << std::setprecision(1) << v << " " << units[u];
  }
  return o.str();
}

// The leftovers line of gc's report (app/leftovers.h).
std::string LeftoversText(const app::LeftoverReport& l, bool dry_run, int64_t grace_s) {
  std::ostringstream t;
  t << "leftovers of crashed writers (temp files and folders): " << (dry_run ? "would remove " : "removed ")
    << l.removed << " (" << Bytes(l.removed_bytes) << ")";
  if (l.restored > 0) t << ", " << l.restored << " blobs moved back from <sha>.gc";
  if (l.kept_running > 0) t << ", " << l.kept_running << " kept: their writer runs";
  if (l.kept_recent > 0) t << ", " << l.kept_recent << " kept: younger than " << grace_s << " s";
  for (const auto& p : l.removed_paths) t << "\n  " << p;
  return t.str();
}

std::string GcText(const app::GcReport& r) {
  std::ostringstream t;
  t << r.blobs << " blobs (" << Bytes(r.blob_bytes) << "): " << r.referenced << " referenced ("
    << Bytes(r.referenced_bytes) << "), " << r.records << " val/compare records (" << Bytes(r.records_bytes)
    << "), " << r.recent << " unreferenced but younger than " << r.grace_s << " s (" << Bytes(r.recent_bytes)
    << ", kept)\n";
  if (r.dry_run) {
    t << "dry run: would delete " << r.deleted << " blobs, would free " << Bytes(r.freed_bytes) << " ("
      << r.freed_bytes << " bytes)";
  } else {
    t << "deleted " << r.deleted << " blobs, freed " << Bytes(r.freed_bytes) << " (" << r.freed_bytes
      << " bytes)";
    if (r.raced > 0) t << "; " << r.raced << " kept: a writer re-used them meanwhile";
  }
  t << "\n" << LeftoversText(r.leftovers, r.dry_run, r.grace_s);
  // The S3 store's unfinished multipart uploads (docs/disk.md "Artifacts on S3").
  if (r.incomplete_writes > 0) {
    t << "\naborted " << r.incomplete_writes << " incomplete uploads older than " << r.grace_s << " s in "
      << r.store;
  }
  // Job files on a shared store (docs/disk.md "Job checkpoints on S3").
  if (r.job_files > 0) {
    t << "\njob files (jobs/): " << r.job_files << " (" << Bytes(r.job_file_bytes)
      << "): " << r.job_files_kept << " kept: resume points and running attempts ("
      << Bytes(r.job_files_kept_bytes) << "), " << r.job_files_recent << " garbage but younger than "
      << r.grace_s << " s (kept); " << (r.dry_run ? "would delete " : "deleted ") << r.job_files_deleted
      << " (" << Bytes(r.job_files_freed_bytes) << ")";
    for (const auto& [reason, n] : r.job_files_deleted_by_reason) t << ", " << reason << " " << n;
    for (const auto& k : r.deleted_job_files) t << "\n  " << k;
  }
  return t.str();
}

std::string DuText(const app::DuReport& r) {
  std::ostringstream t;
  char line[512];
  std::snprintf(line, sizeof line, "%-24s %-8s %-14s %8s %12s\n", "DATASET", "VERSION", "ID", "BLOBS",
                "SIZE");
  t << "datasets\n" << line;
  for (const auto& v : r.versions) {
    std::snprintf(line, sizeof line, "%-24s %-8s %-14s %8lld %12s%s\n", v.dataset.c_str(),
                  ("v" + std::to_string(v.seq)).c_str(), v.version_id.substr(0, 12).c_str(),
                  static_cast<long long>(v.blobs), Bytes(v.bytes).c_str(),
                  v.missing > 0 ? ("  (" + std::to_string(v.missing) + " missing)").c_str() : "");
    t << line;
    // data_mode=reference: the images are the user's files, not blobs of the home.
    if (v.referenced_files > 0) {
      t << "  + " << v.referenced_files << " referenced image files outside the home, "
        << Bytes(v.referenced_bytes) << "\n";
    }
  }
  std::snprintf(line, sizeof line, "%-24s %-14s %-14s %8s %12s\n", "MODEL", "ID", "DATASET", "BLOBS", "SIZE");
  t << "models\n" << line;
  for (const auto& m : r.models) {
    std::snprintf(line, sizeof line, "%-24s %-14s %-14s %8lld %12s\n", m.ref.c_str(),
                  m.id.substr(0, 12).c_str(), m.dataset.c_str(), static_cast<long long>(m.blobs),
                  Bytes(m.bytes).c_str());
    t << line;
  }
  std::snprintf(line, sizeof line, "%-8s %-18s %12s %6s %12s\n", "JOB", "STATE", "SIZE", "CKPTS",
                "CKPT SIZE");
  t << "jobs ("
    << "home/jobs/<id>)\n"
    << line;
  for (const auto& j : r.jobs) {
    std::snprintf(line, sizeof line, "%-8lld %-18s %12s %6lld %12s\n", static_cast<long long>(j.job_id),
                  j.state.empty() ? "(no record)" : j.state.c_str(), Bytes(j.bytes).c_str(),
                  static_cast<long long>(j.checkpoints), Bytes(j.checkpoint_bytes).c_str());
    t << line;
  }
  t << "val/compare records: " << r.records << " blobs, " << Bytes(r.records_bytes) << "\n";
  t << "unreferenced: " << r.unreferenced << " blobs, " << Bytes(r.unreferenced_bytes)
    << " (kestrel gc deletes those older than its grace period)\n";
  if (r.job_files > 0) {
    t << "job files on the artifact store (jobs/): " << r.job_files << ", " << Bytes(r.job_file_bytes)
      << "; of them garbage (their job succeeded or is gone, or no record names them): "
      << r.job_files_garbage << ", " << Bytes(r.job_files_garbage_bytes)
      << " (kestrel gc deletes those older than its grace period)\n";
  }
  t << "total: " << r.blobs << " blobs, " << Bytes(r.blob_bytes) << "; job folders " << Bytes(r.job_bytes);
  if (r.referenced_bytes > 0) {
    t << "; referenced image files outside the home " << Bytes(r.referenced_bytes);
  }
  return t.str();
}

}  // namespace

std::function<void(store::MetadataStore&, const store::JobRecord&, int64_t)> WithCheckpointRetention(
    std::function<void(store::MetadataStore&, const store::JobRecord&, int64_t)> then,
    const std::string& home) {
  return [then = std::move(then), home](store::MetadataStore& meta, const store::JobRecord& job,
                                        int64_t now_ms) {
    if (then) then(meta, job, now_ms);
    // Checkpoints are a training job's (a tune job's result names no run folder).
    if (app::JobKindText(job) != "train") return;
    // The job's keep_ckpts (its stored effective config; the key's default
    // for jobs submitted before the key existed).
    int keep = train::TrainConfig{}.keep_ckpts;
    const auto cfg = nlohmann::json::parse(job.spec.config_json, nullptr, false);
    if (cfg.is_object() && cfg.contains("keep_ckpts") && cfg["keep_ckpts"].is_number_integer() &&
        cfg["keep_ckpts"].get<int64_t>() >= 0 && cfg["keep_ckpts"].get<int64_t>() <= 100000) {
      keep = cfg["keep_ckpts"].get<int>();
    }
    // On S3 the attempts' shared checkpoints (docs/disk.md "Job checkpoints
    // on S3") are no resume point any more: the job succeeded.
    if (auto artifacts = store::OpenArtifactStore(home); artifacts.IsOk() && (*artifacts)->SharesJobFiles()) {
      auto removed = (*artifacts)->RemoveJobFiles(job.id, 0, {});
      if (!removed.IsOk()) {
        std::cerr << "warning: job " << job.id << ": deleting its checkpoints on " << (*artifacts)->Describe()
                  << " failed: " << removed.GetStatus().ToString() << std::endl;
      } else if (*removed > 0) {
        std::cerr << "job " << job.id << ": deleted " << *removed << " shared checkpoint objects on "
                  << (*artifacts)->Describe() << std::endl;
      }
    }
    auto r = app::ApplyJobRetention(Env::Default(), home, job, keep);
    if (!r.IsOk()) {
      std::cerr << "warning: job " << job.id << ": checkpoint retention failed: " << r.GetStatus().ToString()
                << std::endl;
    } else if (!r->deleted.empty()) {
      std::cerr << "job " << job.id << ": retention deleted " << r->deleted.size() << " checkpoints ("
                << r->freed_bytes << " bytes; keep_ckpts=" << keep << ")" << std::endl;
    }
  };
}

void AddDiskCommands(CLI::App& app, Context& ctx, int* exit_code) {
  auto opts = std::make_shared<app::GcOptions>();
  CLI::App* gc = app.add_subcommand(
      "gc",
      "Delete artifact-store blobs no record references and crashed writers' temp files (docs/disk.md)");
  gc->add_flag("--dry-run", opts->dry_run, "only report what would be deleted and freed");
  gc->add_option("--grace-s", opts->grace_s,
                 "keep unreferenced blobs written or re-used this recently (an import or job in flight), and "
                 "temp files written this recently")
      ->capture_default_str()
      ->check(IntArg(0, int64_t{100} * 365 * 86400));
  gc->callback(Callback(ctx, exit_code, [&ctx, opts]() -> CommandResult {
    KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
    auto r = app::CollectGarbage(*stores.meta, *stores.blobs, *opts, Env::Default().UnixSeconds());
    if (!r.IsOk()) return r.GetStatus();
    return Output{GcText(*r), app::GcReportJson(*r)};
  }));

  CLI::App* du =
      app.add_subcommand("du", "Disk usage per dataset version, model, job and unreferenced (docs/disk.md)");
  du->callback(Callback(ctx, exit_code, [&ctx]() -> CommandResult {
    KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
    auto r = app::DiskUsage(*stores.meta, *stores.blobs, Env::Default());
    if (!r.IsOk()) return r.GetStatus();
    return Output{DuText(*r), app::DuReportJson(*r)};
  }));
}

}  // namespace kestrel::cli
