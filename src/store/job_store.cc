// Job operations of SqlStore (semantics: docs/jobs.md). Written once against
// SqlConn; the only backend differences are the row locks ForUpdate*() adds
// on PostgreSQL (SQLite's BEGIN IMMEDIATE already serializes writers) and
// event ids (job_events.cc: a counter row on SQLite; a sequence plus an advisory lock on
// PostgreSQL: InsertEvent, ReadEvents).
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/hash.h"
#include "core/json.h"
#include "store/internal/job_rows.h"
#include "store/internal/sql_store.h"
#include "store/retry_decision.h"

namespace kestrel::store {
namespace {

constexpr const char* kAttemptColumns =
    "job_id, attempt, worker, host, pid, started_at, ended_at, exit_code, signal, succeeded, stage, "
    "failure_class, infra, reason, message, detected_at, fingerprint";
constexpr const char* kLiveStates = "('queued', 'running', 'failed_retryable')";

std::string JoinMs(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

std::vector<int64_t> SplitMs(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, ',')) {
    // Stored by JoinMs; a damaged value is skipped rather than thrown on.
    int64_t v = 0;
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (ec == std::errc() && end == part.data() + part.size()) out.push_back(v);
  }
  return out;
}

}  // namespace

// The job row of kJobColumns (store/internal/job_rows.h).
JobRecord ReadJob(const SqlRow& r) {
  JobRecord j;
  j.id = r.Int(0);
  j.spec.spec_json = r.Text(1);
  j.spec.config_json = r.Text(2);
  j.spec.dataset_version = r.Text(3);
  j.spec.priority = static_cast<JobPriority>(std::clamp<int64_t>(r.Int(4), 0, 2));
  j.dedup_key = r.Text(5);
  ParseJobState(r.Text(6), &j.state);
  j.attempt = r.Int(7);
  j.lease_owner = r.Text(8);
  j.lease_until_ms = r.Int(9);
  j.not_before_ms = r.Int(10);
  j.spec.retry.max_retries = static_cast<int>(r.Int(11));
  j.retries_used = static_cast<int>(r.Int(12));
  j.spec.retry.max_infra_retries = static_cast<int>(r.Int(13));
  j.infra_retries_used = static_cast<int>(r.Int(14));
  j.spec.retry.backoff_ms = SplitMs(r.Text(15));
  j.spec.device_kind = r.Text(16);
  j.spec.device_memory_mb = r.Int(17);
  j.spec.wall_clock_limit_ms = r.Int(18);
  j.created_ms = r.Int(19);
  j.updated_ms = r.Int(20);
  j.finished_ms = r.Int(21);
  j.result_json = r.Text(22);
  j.last_reason = r.Text(23);
  j.spec.min_map50 = std::strtod(r.Text(24).c_str(), nullptr);
  j.spec.name = r.Text(25);
  // tags_json is written by LabelJob only (an array of strings); anything
  // else reads as no tags.
  const auto tags = nlohmann::json::parse(r.Text(26), nullptr, false);
  if (tags.is_array()) {
    for (const auto& t : tags)
      if (t.is_string()) j.tags.push_back(t.get<std::string>());
  }
  j.note = r.Text(27);
  return j;
}

namespace {

AttemptRecord ReadAttempt(const SqlRow& r) {
  AttemptRecord a;
  a.job_id = r.Int(0);
  a.attempt = r.Int(1);
  a.worker = r.Text(2);
  a.host = r.Text(3);
  a.pid = r.Int(4);
  a.started_ms = r.Int(5);
  a.ended_ms = r.Int(6);
  a.exit_code = static_cast<int>(r.Int(7));
  a.signal = static_cast<int>(r.Int(8));
  a.succeeded = r.Int(9) != 0;
  ParseFailureStage(r.Text(10), &a.stage);
  ParseFailureClass(r.Text(11), &a.failure_class);
  a.infrastructure = r.Int(12) != 0;
  a.reason = r.Text(13);
  a.message = r.Text(14);
  a.detected_ms = r.Int(15);
  a.fingerprint = r.Text(16);
  return a;
}

Status ValidateSpec(const JobSpec& s) {
  auto bad = [](const std::string& field, const std::string& msg) {
    return Status::InvalidArgument(msg, {"", 0, field});
  };
  // dataset_version may be "": an export job of a model whose dataset is not
  // known has none (app::SubmitJob resolves one for every train and val job).
  if (s.device_kind != "cpu" && s.device_kind != "gpu") {
    return bad("device", "device kind must be cpu or gpu, not '" + s.device_kind + "'");
  }
  if (s.device_memory_mb < 0) return bad("gpu_mem", "device memory must be >= 0");
  if (s.wall_clock_limit_ms < 0) return bad("time_limit", "wall-clock limit must be >= 0");
  if (!(s.min_map50 >= 0 && s.min_map50 <= 1)) return bad("min_map50", "min_map50 must be in [0, 1]");
  return ValidateRetryPolicy(s.retry);
}

void ClearLease(JobRecord& j) {
  j.lease_owner.clear();
  j.lease_until_ms = 0;
}

}  // namespace

Result<std::string> JobDedupKey(const JobSpec& spec) {
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(spec.config_json);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("effective config is not valid JSON: ") + e.what(),
                                   {"", 0, "config"});
  }
  if (!config.is_object())
    return Status::InvalidArgument("effective config is not a JSON object", {"", 0, "config"});
  if (config.contains("min_map50")) {
    return Status::InvalidArgument("min_map50 is the job's column (JobSpec::min_map50), not a config key",
                                   {"", 0, "min_map50"});
  }
  // As submit stored it before migration 10, so old live jobs keep their key.
  config["min_map50"] = spec.min_map50;
  // nlohmann objects keep keys sorted; dump() without indent is compact.
  return Sha256Hex(spec.dataset_version + "\n" + DumpJson(config));
}

Result<int64_t> SqlStore::NextId(const char* counter) {
  KESTREL_ASSIGN_OR_RETURN(
      auto rows, conn_->Query("UPDATE counters SET value = value + 1 WHERE name = $1 RETURNING value",
                              {std::string(counter)}));
  if (rows.empty()) return Status::Internal(std::string("missing counter '") + counter + "'");
  return rows[0].Int(0);
}

Result<JobRecord> SqlStore::LoadJob(int64_t job_id, bool lock) {
  KESTREL_ASSIGN_OR_RETURN(auto rows,
                           conn_->Query(std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = $1" +
                                            (lock ? conn_->ForUpdate() : ""),
                                        {job_id}));
  if (rows.empty()) return Status::NotFound("no job " + std::to_string(job_id), {"", 0, "job"});
  return ReadJob(rows[0]);
}

Status SqlStore::SaveJob(const JobRecord& j) {
  return conn_->ExecLater(
      "UPDATE jobs SET state = $1, attempt = $2, lease_owner = $3, lease_until = $4, not_before = $5, "
      "retries_used = $6, infra_retries_used = $7, updated_at = $8, finished_at = $9, result_json = $10, "
      "last_reason = $11 WHERE id = $12",
      {std::string(JobStateName(j.state)), j.attempt, j.lease_owner, j.lease_until_ms, j.not_before_ms,
       static_cast<int64_t>(j.retries_used), static_cast<int64_t>(j.infra_retries_used), j.updated_ms,
       j.finished_ms, j.result_json, j.last_reason, j.id});
}

Status SqlStore::EndAttempt(int64_t job_id, int64_t attempt, const AttemptOutcome& o, int64_t ended_ms,
                            int64_t detected_ms) {
  // The pid came in with RecordAttemptPid when the child started; an outcome
  // without one (a lease that expired, a cancel) must not erase it.
  const bool pid = o.pid != 0;
  SqlParams params = {ended_ms,
                      detected_ms,
                      static_cast<int64_t>(o.exit_code),
                      static_cast<int64_t>(o.signal),
                      static_cast<int64_t>(o.success ? 1 : 0),
                      std::string(FailureStageName(o.stage)),
                      std::string(o.success ? "" : FailureClassName(o.failure_class)),
                      static_cast<int64_t>(o.infrastructure ? 1 : 0),
                      std::string(FailureReasonToken(o.reason)),
                      o.message,
                      job_id,
                      attempt};
  if (pid) params.push_back(o.pid);
  return conn_->ExecLater(
      std::string("UPDATE attempts SET ended_at = $1, detected_at = $2, exit_code = $3, signal = $4, "
                  "succeeded = $5, stage = $6, failure_class = $7, infra = $8, reason = $9, message = $10") +
          (pid ? ", pid = $13" : "") + " WHERE job_id = $11 AND attempt = $12",
      params);
}

Result<JobRecord> SqlStore::InsertJob(const JobSpec& spec, const std::string& key, int64_t now_ms,
                                      bool* made) {
  const std::string live =
      std::string("SELECT ") + kJobColumns + " FROM jobs WHERE dedup_key = $1 AND state IN " + kLiveStates;
  *made = false;
  KESTREL_ASSIGN_OR_RETURN(auto rows, conn_->Query(live, {key}));
  if (!rows.empty()) return ReadJob(rows[0]);
  KESTREL_ASSIGN_OR_RETURN(int64_t id, NextId("job"));
  // A concurrent submitter may have inserted the same key since the check:
  // the partial unique index turns our insert into a no-op, then we return
  // theirs (READ COMMITTED: the next statement sees their commit).
  KESTREL_ASSIGN_OR_RETURN(
      int64_t n,
      conn_->Exec(
          std::string("INSERT INTO jobs (") + kJobColumns +
              ") VALUES ($1, $2, $3, $4, $5, $6, 'queued', 0, '', 0, $7, $8, 0, $9, 0, $10, $11, $12, "
              "$13, $7, $7, 0, '', '', $14, $15, '[]', '') ON CONFLICT DO NOTHING",
          {id, spec.spec_json, spec.config_json, spec.dataset_version, static_cast<int64_t>(spec.priority),
           key, now_ms, static_cast<int64_t>(spec.retry.max_retries),
           static_cast<int64_t>(spec.retry.max_infra_retries), JoinMs(spec.retry.backoff_ms),
           spec.device_kind, spec.device_memory_mb, spec.wall_clock_limit_ms, DoubleText(spec.min_map50),
           spec.name}));
  if (n == 0) {
    KESTREL_ASSIGN_OR_RETURN(auto again, conn_->Query(live, {key}));
    if (again.empty()) {
      return Status::Aborted("dedup race, retrying").WithReason(FailureReason::kStoreConflict);
    }
    return ReadJob(again[0]);
  }
  KESTREL_ASSIGN_OR_RETURN(JobRecord out, LoadJob(id, false));
  *made = true;
  KESTREL_RETURN_IF_ERROR(StateEvent(out, now_ms));
  return out;
}

Result<JobRecord> SqlStore::SubmitJob(const JobSpec& spec, int64_t now_ms, bool* created) {
  KESTREL_RETURN_IF_ERROR(ValidateSpec(spec));
  KESTREL_ASSIGN_OR_RETURN(std::string key, JobDedupKey(spec));
  JobRecord out;
  bool made = false;
  Status st = InTransaction([&]() -> Status {
    KESTREL_ASSIGN_OR_RETURN(out, InsertJob(spec, key, now_ms, &made));
    return {};
  });
  if (!st.IsOk()) return st;
  if (created != nullptr) *created = made;
  return out;
}

Result<JobRecord> SqlStore::SubmitTrialJob(int64_t study_id, int64_t number, const JobSpec& spec,
                                           int64_t now_ms, bool* created) {
  KESTREL_RETURN_IF_ERROR(ValidateSpec(spec));
  KESTREL_ASSIGN_OR_RETURN(std::string config_key, JobDedupKey(spec));
  // The trial's own key: two trials that sample the same config get a job
  // each (one trial drives one job: a prune or a promotion never acts on
  // another trial's job), and a trial never attaches to someone else's live
  // job of that config (docs/tune.md "Studies over the queue").
  const std::string key =
      Sha256Hex(config_key + "\nstudy " + std::to_string(study_id) + " trial " + std::to_string(number));
  JobRecord out;
  bool made = false;
  Status st = InTransaction([&]() -> Status {
    made = false;
    KESTREL_ASSIGN_OR_RETURN(
        auto trial, conn_->Query(std::string("SELECT job_id FROM study_trials WHERE study_id = $1 AND "
                                             "number = $2") +
                                     conn_->ForUpdate(),
                                 {study_id, number}));
    if (trial.empty()) {
      return Status::NotFound("study " + std::to_string(study_id) + " has no trial " + std::to_string(number),
                              {"", 0, "trial"});
    }
    if (trial[0].Int(0) != 0) {
      KESTREL_ASSIGN_OR_RETURN(out, LoadJob(trial[0].Int(0), false));
      return {};
    }
    KESTREL_ASSIGN_OR_RETURN(out, InsertJob(spec, key, now_ms, &made));
    return conn_
        ->Exec("UPDATE study_trials SET job_id = $1, updated_at = $2 WHERE study_id = $3 AND number = $4",
               {out.id, now_ms, study_id, number})
        .GetStatus();
  });
  if (!st.IsOk()) return st;
  if (created != nullptr) *created = made;
  return out;
}

Result<JobRecord> SqlStore::ExpireLease(JobRecord job, int64_t now_ms) {
  // When did the attempt fail? Its worker's last sign of life was the last
  // lease renewal (or the claim): for a running job that is updated_at, which
  // only ClaimJob and RenewLease write. That is when the attempt ends. The
  // failure was *detected* when the lease ran out. The re-claim itself (now)
  // can come any time later and is only when a worker next looked; it is the
  // next attempt's start (docs/jobs.md "Stats").
  const int64_t last_renewal = std::max<int64_t>(1, std::min(job.updated_ms, job.lease_until_ms));
  AttemptOutcome o;
  o.failure_class = FailureClass::kRetryable;
  o.infrastructure = true;
  o.reason = FailureReason::kLeaseExpired;
  o.message = "worker '" + job.lease_owner + "' stopped renewing its lease: last renewal at " +
              std::to_string(last_renewal) + " ms, expired at " + std::to_string(job.lease_until_ms) +
              " ms, reclaimed at " + std::to_string(now_ms) + " ms";
  KESTREL_RETURN_IF_ERROR(
      EndAttempt(job.id, job.attempt, o, last_renewal, std::max(last_renewal, job.lease_until_ms)));
  ApplyNextState(DecideAfterAttempt(job, o, job.spec.retry, now_ms), job);
  ClearLease(job);
  job.updated_ms = now_ms;
  KESTREL_RETURN_IF_ERROR(SaveJob(job));
  KESTREL_RETURN_IF_ERROR(StateEvent(job, now_ms));
  return job;
}

Result<ClaimedJob> SqlStore::ClaimJob(const ClaimRequest& req) {
  if (req.worker.empty()) return Status::InvalidArgument("a claim needs a worker id", {"", 0, "worker"});
  if (req.lease_ms <= 0) return Status::InvalidArgument("lease must be > 0 ms", {"", 0, "lease"});
  int64_t cpu_mem = -1, gpu_mem = -1;
  for (const auto& d : req.devices) {
    int64_t& m = d.kind == "gpu" ? gpu_mem : cpu_mem;
    m = std::max(m, d.free_memory_mb);
  }
  std::string ready =
      req.allow_retries ? "(state = 'queued' OR state = 'failed_retryable')" : "state = 'queued'";
  // Two candidates in one statement, each the head of its own partial index
  // (migration 6): the first ready job (jobs_ready, in claim order) and the
  // first running job whose lease expired (jobs_leased, by lease_until).
  // The better of the two by (priority, id) is claimed, the same order one
  // query over both sets gave; but running jobs no longer sit in the index
  // every claim walks, so a claim costs the same with 10 or 10,000 jobs
  // running. Each head repeats its index's predicate word for word (SQLite
  // only uses a partial index whose predicate is a term of the query);
  // PostgreSQL locks each with SKIP LOCKED (held to COMMIT; the one not
  // taken is released then).
  // A job that failed with an `environment` failure on this host since the
  // host was last unquarantined is not this host's to run (docs/jobs.md
  // "Quarantine and drain"): its retry goes elsewhere. `x.job_id = jobs.id`
  // walks the attempts' primary key, a few rows per job.
  const auto excluded = [](const char* host_param) {
    return std::string(
               " AND NOT EXISTS (SELECT 1 FROM attempts x WHERE x.job_id = jobs.id AND x.reason = "
               "'environment' AND x.host = ") +
           host_param +
           " AND x.ended_at > COALESCE((SELECT h.cleared_at FROM hosts h WHERE h.host = " + host_param +
           "), 0))";
  };
  const std::string fit =
      " AND ((device_kind = 'cpu' AND device_memory_mb <= $2) OR"
      " (device_kind = 'gpu' AND device_memory_mb <= $3))" +
      excluded("$4") + " ORDER BY priority, id LIMIT 1" + std::string(conn_->ForUpdateSkipLocked());
  const std::string sql = std::string("WITH r AS (SELECT ") + kJobColumns +
                          " FROM jobs WHERE state IN ('queued', 'failed_retryable') AND " + ready +
                          " AND not_before <= $1" + fit + "), e AS (SELECT " + kJobColumns +
                          " FROM jobs WHERE state = 'running' AND lease_until <= $1" + fit +
                          ") SELECT * FROM r UNION ALL SELECT * FROM e";
  ClaimedJob out;
  // Best fit: the offer of the right kind with the least spare memory.
  auto place = [&](JobRecord job) {
    const DeviceOffer* best = nullptr;
    for (const auto& d : req.devices) {
      if (d.kind != job.spec.device_kind || d.free_memory_mb < job.spec.device_memory_mb) continue;
      if (best == nullptr || d.free_memory_mb < best->free_memory_mb) best = &d;
    }
    out.device = best != nullptr ? *best : DeviceOffer{};
    out.job = std::move(job);
  };
  if (conn_->Dialect() == SqlDialect::kPostgres) {
    // The common case in one autocommit statement, one round trip: lock the
    // ready head, start its attempt, record the attempt and the state event.
    // Row locks then live for one statement instead of across a client round
    // trip, so 32 claimers step over far fewer locked heads. It defers to
    // the transaction below when nothing is ready or any lease has expired
    // (an expired job may come first, and its expiry has more to record).
    // The event text is what StateEvent() writes for a running job.
    const std::string fast_sql =
        "WITH l AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared(" + std::to_string(kEventLock) +
        ")), c AS (SELECT id AS cid FROM jobs WHERE state IN ('queued', 'failed_retryable') AND " + ready +
        " AND not_before <= $1::bigint AND ((device_kind = 'cpu' AND device_memory_mb <= $2::bigint) OR"
        " (device_kind = 'gpu' AND device_memory_mb <= $3::bigint))" +
        excluded("$6::text") +
        " AND NOT EXISTS (SELECT 1 FROM jobs x"
        " WHERE x.state = 'running' AND x.lease_until <= $1::bigint) ORDER BY priority, id LIMIT 1"
        " FOR UPDATE SKIP LOCKED), u AS (UPDATE jobs SET state = 'running', attempt = attempt + 1,"
        " lease_owner = $4::text, lease_until = $5::bigint, updated_at = $1::bigint FROM c WHERE id = c.cid"
        " RETURNING " +
        std::string(kJobColumns) + "), a AS (INSERT INTO attempts (" + kAttemptColumns +
        ") SELECT id, attempt, $4::text, $6::text, 0, $1::bigint, 0, 0, 0, 0, '', '', 0, '', '', 0, $7::text "
        "FROM u),"
        " e AS (INSERT INTO events(id, job_id, attempt, kind, payload_json, created_at) SELECT"
        " nextval('event_ids'), u.id, u.attempt, 'state', '{\"attempt\":' || u.attempt ||"
        " ',\"state\":\"running\"}', $1::bigint FROM u, l) SELECT " +
        kJobColumns + " FROM u";
    KESTREL_ASSIGN_OR_RETURN(auto rows,
                             conn_->Query(fast_sql, {req.now_ms, cpu_mem, gpu_mem, req.worker,
                                                     req.now_ms + req.lease_ms, req.host, req.fingerprint}));
    if (!rows.empty()) {
      place(ReadJob(rows[0]));
      return out;
    }
  }
  bool found = false;
  Status st = InTransaction([&]() -> Status {
    found = false;
    while (true) {
      KESTREL_ASSIGN_OR_RETURN(auto rows, conn_->Query(sql, {req.now_ms, cpu_mem, gpu_mem, req.host}));
      if (rows.empty()) return {};
      JobRecord job = ReadJob(rows[0]);
      if (rows.size() > 1) {
        JobRecord other = ReadJob(rows[1]);
        if (std::make_pair(static_cast<int>(other.spec.priority), other.id) <
            std::make_pair(static_cast<int>(job.spec.priority), job.id)) {
          job = std::move(other);
        }
      }
      if (job.state == JobState::kRunning) {
        KESTREL_ASSIGN_OR_RETURN(job, ExpireLease(std::move(job), req.now_ms));
        if (job.state == JobState::kFailedPermanent) continue;
      }
      ++job.attempt;
      job.state = JobState::kRunning;
      job.lease_owner = req.worker;
      job.lease_until_ms = req.now_ms + req.lease_ms;
      job.updated_ms = req.now_ms;
      KESTREL_RETURN_IF_ERROR(SaveJob(job));
      KESTREL_RETURN_IF_ERROR(
          conn_->ExecLater(std::string("INSERT INTO attempts (") + kAttemptColumns +
                               ") VALUES ($1, $2, $3, $4, 0, $5, 0, 0, 0, 0, '', '', 0, '', '', 0, $6)",
                           {job.id, job.attempt, req.worker, req.host, req.now_ms, req.fingerprint}));
      KESTREL_RETURN_IF_ERROR(StateEvent(job, req.now_ms));
      place(std::move(job));
      found = true;
      return {};
    }
  });
  if (!st.IsOk()) return st;
  if (!found) return Status::NotFound("no claimable job", {"", 0, "job"});
  return out;
}

Status SqlStore::RenewLease(int64_t job_id, int64_t attempt, const std::string& worker, int64_t now_ms,
                            int64_t lease_ms) {
  // One conditional UPDATE is atomic on its own (autocommit): no BEGIN/COMMIT
  // round trips on the hot path. The fencing condition is the WHERE clause.
  KESTREL_ASSIGN_OR_RETURN(
      int64_t n,
      conn_->Exec("UPDATE jobs SET lease_until = $1, updated_at = $2 WHERE id = $3 AND attempt = $4 "
                  "AND state = 'running' AND lease_owner = $5",
                  {now_ms + lease_ms, now_ms, job_id, attempt, worker}));
  if (n == 1) return {};
  KESTREL_ASSIGN_OR_RETURN(JobRecord job, LoadJob(job_id, false));
  return Status::Aborted("job " + std::to_string(job_id) + " attempt " + std::to_string(attempt) +
                         " lost its lease (job is " + JobStateName(job.state) + " at attempt " +
                         std::to_string(job.attempt) + ")");
}

Status SqlStore::RecordAttemptPid(int64_t job_id, int64_t attempt, const std::string& worker, int64_t pid) {
  if (pid <= 0) return Status::InvalidArgument("pid must be > 0", {"", 0, "pid"});
  // One autocommit UPDATE; the attempt row says who runs it and whether it
  // ended, which is all the fencing this needs (it moves no job state).
  KESTREL_ASSIGN_OR_RETURN(int64_t n,
                           conn_->Exec("UPDATE attempts SET pid = $1 WHERE job_id = $2 AND attempt = $3 "
                                       "AND worker = $4 AND ended_at = 0",
                                       {pid, job_id, attempt, worker}));
  if (n == 1) return {};
  return Status::Aborted("job " + std::to_string(job_id) + " attempt " + std::to_string(attempt) +
                         " is not running on worker '" + worker + "'; pid not recorded");
}

Result<JobRecord> SqlStore::CompleteAttempt(int64_t job_id, int64_t attempt, const std::string& worker,
                                            const AttemptOutcome& o, int64_t now_ms) {
  JobRecord job;
  Status st = InTransaction([&]() -> Status {
    KESTREL_ASSIGN_OR_RETURN(job, LoadJob(job_id, true));
    if (!IsCurrentAttempt(job, attempt, worker)) {
      return Status::Aborted("job " + std::to_string(job_id) + " attempt " + std::to_string(attempt) +
                             " is no longer current (job is " + JobStateName(job.state) + " at attempt " +
                             std::to_string(job.attempt) + "); result discarded");
    }
    KESTREL_RETURN_IF_ERROR(EndAttempt(job_id, attempt, o, now_ms, now_ms));
    ApplyNextState(DecideAfterAttempt(job, o, job.spec.retry, now_ms), job);
    ClearLease(job);
    job.updated_ms = now_ms;
    KESTREL_RETURN_IF_ERROR(SaveJob(job));
    return StateEvent(job, now_ms);
  });
  if (!st.IsOk()) return st;
  return job;
}

Result<JobRecord> SqlStore::CancelJob(int64_t job_id, int64_t now_ms) {
  JobRecord job;
  Status st = InTransaction([&]() -> Status {
    KESTREL_ASSIGN_OR_RETURN(job, LoadJob(job_id, true));
    KESTREL_ASSIGN_OR_RETURN(NextJobState next, DecideCancel(job, now_ms));
    if (job.state == JobState::kRunning) {
      AttemptOutcome o;
      o.failure_class = FailureClass::kNone;
      o.reason = FailureReason::kCancelled;
      o.message = "cancelled by the user";
      KESTREL_RETURN_IF_ERROR(EndAttempt(job_id, job.attempt, o, now_ms, now_ms));
    }
    ApplyNextState(next, job);
    ClearLease(job);
    job.updated_ms = now_ms;
    KESTREL_RETURN_IF_ERROR(SaveJob(job));
    return StateEvent(job, now_ms);
  });
  if (!st.IsOk()) return st;
  return job;
}

Result<JobRecord> SqlStore::LabelJob(int64_t job_id, const JobLabelChange& change) {
  JobRecord job;
  Status st = InTransaction([&]() -> Status {
    KESTREL_ASSIGN_OR_RETURN(job, LoadJob(job_id, true));
    if (change.name) job.spec.name = *change.name;
    if (change.tags) job.tags = *change.tags;
    if (change.note) job.note = *change.note;
    return conn_->ExecLater("UPDATE jobs SET name = $1, tags_json = $2, note = $3 WHERE id = $4",
                            {job.spec.name, DumpJson(nlohmann::json(job.tags)), job.note, job_id});
  });
  if (!st.IsOk()) return st;
  return job;
}

Result<JobRecord> SqlStore::RetryJob(int64_t job_id, int64_t now_ms) {
  JobRecord job;
  Status st = InTransaction([&]() -> Status {
    KESTREL_ASSIGN_OR_RETURN(job, LoadJob(job_id, true));
    if (job.state == JobState::kQueued || job.state == JobState::kRunning ||
        job.state == JobState::kSucceeded) {
      return Status::FailedPrecondition("job " + std::to_string(job_id) + " is " + JobStateName(job.state) +
                                        "; only failed or cancelled jobs can be retried");
    }
    if (job.state != JobState::kFailedRetryable) {
      KESTREL_ASSIGN_OR_RETURN(auto twins,
                               conn_->Query(std::string("SELECT id FROM jobs WHERE dedup_key = $1 AND "
                                                        "state IN ") +
                                                kLiveStates,
                                            {job.dedup_key}));
      if (!twins.empty()) {
        return Status::AlreadyExists("an identical job " + twins[0].Text(0) + " is already live");
      }
    }
    job.state = JobState::kQueued;
    job.not_before_ms = now_ms;
    job.retries_used = 0;
    job.infra_retries_used = 0;
    job.finished_ms = 0;
    job.updated_ms = now_ms;
    KESTREL_RETURN_IF_ERROR(SaveJob(job));
    return StateEvent(job, now_ms);
  });
  if (!st.IsOk()) return st;
  return job;
}

Result<JobRecord> SqlStore::GetJob(int64_t job_id) { return LoadJob(job_id, false); }

// ListJobs and CountJobs: job_list_query.cc.

Result<std::vector<AttemptRecord>> SqlStore::ListAttempts(int64_t job_id) {
  KESTREL_ASSIGN_OR_RETURN(auto rows, conn_->Query(std::string("SELECT ") + kAttemptColumns +
                                                       " FROM attempts WHERE job_id = $1 ORDER BY attempt",
                                                   {job_id}));
  std::vector<AttemptRecord> out;
  for (const auto& r : rows) out.push_back(ReadAttempt(r));
  return out;
}

Result<std::vector<AttemptRecord>> SqlStore::RecentAttempts(int n) {
  KESTREL_ASSIGN_OR_RETURN(auto rows,
                           conn_->Query(std::string("SELECT ") + kAttemptColumns +
                                            " FROM attempts WHERE ended_at > 0 AND reason <> 'cancelled'"
                                            " ORDER BY ended_at DESC, job_id DESC, attempt DESC LIMIT $1",
                                        {static_cast<int64_t>(n)}));
  std::vector<AttemptRecord> out;
  for (const auto& r : rows) out.push_back(ReadAttempt(r));
  return out;
}

Status SqlStore::UpsertWorker(const WorkerRecord& w) {
  return InTransaction([&]() -> Status {
    return conn_
        ->Exec(
            "INSERT INTO workers(id, host, devices_json, started_at, heartbeat_at, stopped_at, fingerprint) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7) "
            "ON CONFLICT (id) DO UPDATE SET host = excluded.host, devices_json = excluded.devices_json, "
            "heartbeat_at = excluded.heartbeat_at, stopped_at = excluded.stopped_at, "
            "fingerprint = excluded.fingerprint",
            {w.id, w.host, w.devices_json, w.started_ms, w.heartbeat_ms, w.stopped_ms, w.fingerprint})
        .GetStatus();
  });
}

Result<std::vector<WorkerRecord>> SqlStore::ListWorkers() {
  KESTREL_ASSIGN_OR_RETURN(
      auto rows,
      conn_->Query(
          "SELECT id, host, devices_json, started_at, heartbeat_at, stopped_at, fingerprint, drain_at FROM "
          "workers ORDER BY id",
          {}));
  std::vector<WorkerRecord> out;
  for (const auto& r : rows) {
    out.push_back({r.Text(0), r.Text(1), r.Text(2), r.Int(3), r.Int(4), r.Int(5), r.Text(6), r.Int(7)});
  }
  return out;
}

Result<std::string> SqlStore::GetSetting(const std::string& name) {
  KESTREL_ASSIGN_OR_RETURN(auto rows, conn_->Query("SELECT value FROM settings WHERE name = $1", {name}));
  if (rows.empty()) return Status::NotFound("setting '" + name + "' is not set");
  return rows[0].Text(0);
}

Status SqlStore::PutSetting(const std::string& name, const std::string& value, int64_t now_ms) {
  if (name.empty()) return Status::InvalidArgument("setting name must not be empty");
  return InTransaction([&]() -> Status {
    return conn_
        ->Exec(
            "INSERT INTO settings(name, value, updated_at) VALUES ($1, $2, $3) "
            "ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            {name, value, now_ms})
        .GetStatus();
  });
}

Result<bool> SqlStore::CompareAndSetSetting(const std::string& name,
                                            const std::optional<std::string>& expected,
                                            const std::string& value, int64_t now_ms) {
  if (name.empty()) return Status::InvalidArgument("setting name must not be empty");
  bool wrote = false;
  Status st = InTransaction([&]() -> Status {
    // PostgreSQL (READ COMMITTED): a concurrent UPDATE of the row waits for
    // the row lock, then re-checks `value = expected` against the committed
    // row, so exactly one of two racing writers matches. SQLite: BEGIN
    // IMMEDIATE serializes writers. An absent row is claimed by the insert;
    // ON CONFLICT turns a lost race into zero rows.
    int64_t n = 0;
    if (expected.has_value()) {
      KESTREL_ASSIGN_OR_RETURN(n, conn_->Exec("UPDATE settings SET value = $1, updated_at = $2 "
                                              "WHERE name = $3 AND value = $4",
                                              {value, now_ms, name, *expected}));
    } else {
      KESTREL_ASSIGN_OR_RETURN(
          n, conn_->Exec("INSERT INTO settings(name, value, updated_at) VALUES ($1, $2, $3) "
                         "ON CONFLICT (name) DO NOTHING",
                         {name, value, now_ms}));
    }
    wrote = n == 1;
    return {};
  });
  if (!st.IsOk()) return st;
  return wrote;
}

Result<JobStats> SqlStore::Stats() {
  JobStats s;
  KESTREL_ASSIGN_OR_RETURN(auto states, conn_->Query("SELECT state, COUNT(*), SUM(retries_used), "
                                                     "SUM(infra_retries_used) FROM jobs GROUP BY state",
                                                     {}));
  for (const auto& r : states) {
    JobState st = JobState::kQueued;
    ParseJobState(r.Text(0), &st);
    int64_t n = r.Int(1);
    s.jobs += n;
    s.retries += r.Int(2);
    s.infra_retries += r.Int(3);
    if (st == JobState::kSucceeded) s.succeeded += n;
    if (st == JobState::kFailedPermanent) s.failed_permanent += n;
    if (st == JobState::kCancelled) s.cancelled += n;
    if (IsLive(st)) s.live += n;
  }
  int64_t finished = s.succeeded + s.failed_permanent;
  s.availability = finished > 0 ? static_cast<double>(s.succeeded) / static_cast<double>(finished) : 0.0;
  KESTREL_ASSIGN_OR_RETURN(auto fails,
                           conn_->Query("SELECT succeeded, stage, failure_class, infra, reason, "
                                        "COUNT(*) FROM attempts WHERE ended_at > 0 AND reason <> "
                                        "'cancelled' GROUP BY succeeded, stage, failure_class, infra, "
                                        "reason",
                                        {}));
  KESTREL_ASSIGN_OR_RETURN(
      auto cancelled,
      conn_->Query("SELECT COUNT(*) FROM attempts WHERE ended_at > 0 AND reason = 'cancelled'", {}));
  if (!cancelled.empty()) s.cancelled_attempts = cancelled[0].Int(0);
  for (const auto& r : fails) {
    int64_t n = r.Int(5);
    s.attempts += n;
    if (r.Int(0) != 0) continue;
    s.failed_attempts += n;
    s.failures_by_stage[r.Text(1).empty() ? "unknown" : r.Text(1)] += n;
    s.failures_by_class[r.Int(3) != 0 ? "infra" : r.Text(2)] += n;
    s.failures_by_reason[r.Text(4)] += n;
  }
  // Recovery figures (docs/jobs.md "Stats"), from recorded times only. A
  // failed attempt ended when it failed (for a lost worker: its last lease
  // renewal) and was detected at detected_at (= ended_at, or the lease
  // expiry for a lost worker).
  // Time to restart: each failed attempt that was followed by another one,
  // from its detection to the next attempt's start.
  KESTREL_ASSIGN_OR_RETURN(
      auto restart, conn_->Query("SELECT COUNT(*), SUM(n.started_at - f.detected_at) FROM attempts f "
                                 "JOIN attempts n ON n.job_id = f.job_id AND n.attempt = f.attempt + 1 "
                                 "WHERE f.succeeded = 0 AND f.ended_at > 0 AND f.reason <> 'cancelled'",
                                 {}));
  if (!restart.empty() && restart[0].Int(0) > 0) {
    s.restarted_attempts = restart[0].Int(0);
    s.mean_time_to_restart_ms =
        static_cast<double>(restart[0].Int(1)) / static_cast<double>(s.restarted_attempts);
  }
  // Time to recover: each job that failed at least once and then succeeded,
  // from its first failure to its success.
  KESTREL_ASSIGN_OR_RETURN(
      auto rec, conn_->Query("SELECT COUNT(*), SUM(t.finished_at - t.first_failure) FROM (SELECT "
                             "j.finished_at AS finished_at, MIN(a.ended_at) AS first_failure FROM jobs j "
                             "JOIN attempts a ON a.job_id = j.id WHERE j.state = 'succeeded' "
                             "AND a.succeeded = 0 AND a.ended_at > 0 AND a.reason <> 'cancelled' "
                             "GROUP BY j.id, j.finished_at) t",
                             {}));
  if (!rec.empty() && rec[0].Int(0) > 0) {
    s.recovered_jobs = rec[0].Int(0);
    s.mean_time_to_recovery_ms = static_cast<double>(rec[0].Int(1)) / static_cast<double>(s.recovered_jobs);
  }
  return s;
}

}  // namespace kestrel::store
