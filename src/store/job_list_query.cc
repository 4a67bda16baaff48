// The job list's query of SqlStore (GET /api/jobs, `kestrel jobs list`;
// docs/server.md "Job list"): the filters, the sort, the keyset cursor
// (`before=`), limit/offset, and the count of the filtered jobs. One SQL text
// for SQLite and PostgreSQL except the config's kind (JSON functions differ).
#include <algorithm>
#include <string>
#include <vector>

#include "store/internal/job_rows.h"
#include "store/internal/sql_store.h"

namespace kestrel::store {
namespace {

// JobSort::kState's lifecycle rank (job_types.h), in SQL and in C++.
constexpr const char* kStateRankSql =
    "(CASE state WHEN 'queued' THEN 0 WHEN 'running' THEN 1 WHEN 'failed_retryable' THEN 2 WHEN 'succeeded' "
    "THEN 3 WHEN 'failed_permanent' THEN 4 ELSE 5 END)";
int64_t StateRank(JobState s) {
  switch (s) {
    case JobState::kQueued:
      return 0;
    case JobState::kRunning:
      return 1;
    case JobState::kFailedRetryable:
      return 2;
    case JobState::kSucceeded:
      return 3;
    case JobState::kFailedPermanent:
      return 4;
    case JobState::kCancelled:
      return 5;
  }
  return 5;
}

// " WHERE ..." of a job filter's selection (not its cursor), "" for none;
// its values are appended to `params` and named by position.
std::string JobWhere(const JobFilter& f, SqlDialect dialect, SqlParams* params) {
  std::vector<std::string> terms;
  auto param = [&](SqlValue v) {
    params->push_back(std::move(v));
    return "$" + std::to_string(params->size());
  };
  if (!f.states.empty()) {
    std::string t = "state IN (";
    for (size_t i = 0; i < f.states.size(); ++i)
      t += (i ? ", " : "") + param(std::string(JobStateName(f.states[i])));
    terms.push_back(t + ")");
  }
  if (!f.priorities.empty()) {
    std::string t = "priority IN (";
    for (size_t i = 0; i < f.priorities.size(); ++i)
      t += (i ? ", " : "") + param(static_cast<int64_t>(f.priorities[i]));
    terms.push_back(t + ")");
  }
  if (!f.kind.empty()) {
    // The kind is a key of the stored config (absent: train); every stored
    // config is a JSON object (SubmitJob parses it for the dedup key).
    const std::string kind =
        dialect == SqlDialect::kPostgres
            ? "COALESCE(config_json::jsonb ->> 'kind', 'train')"
            : "(CASE WHEN json_valid(config_json) THEN COALESCE(json_extract(config_json, "
              "'$.kind'), 'train') ELSE 'train' END)";
    terms.push_back(kind + " = " + param(f.kind));
  }
  if (!f.dataset.empty())
    terms.push_back("dataset_version IN (SELECT version_id FROM dataset_versions WHERE dataset = " +
                    param(f.dataset) + ")");
  if (!f.dataset_version.empty()) terms.push_back("dataset_version = " + param(f.dataset_version));
  if (!f.search.empty()) {
    // A substring of the name, the tags (their JSON text: tags hold no
    // quote or backslash, app::LabelJob) or the note; LIKE's wildcards in
    // the text are escaped with '!'. LOWER folds ASCII alike in both SQLs.
    std::string pattern = "%";
    for (char c : f.search) {
      if (c == '%' || c == '_' || c == '!') pattern += '!';
      pattern += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    }
    pattern += '%';
    const std::string k = param(pattern);
    terms.push_back("(LOWER(name) LIKE " + k + " ESCAPE '!' OR LOWER(tags_json) LIKE " + k +
                    " ESCAPE '!' OR LOWER(note) LIKE " + k + " ESCAPE '!')");
  }
  std::string out;
  for (size_t i = 0; i < terms.size(); ++i) out += (i ? " AND " : " WHERE ") + terms[i];
  return out;
}

}  // namespace

Result<std::vector<JobRecord>> SqlStore::ListJobs(const JobFilter& filter) {
  SqlParams params;
  std::string where = JobWhere(filter, conn_->Dialect(), &params);
  // The sort key (none: the id alone) and each column's direction.
  std::string key;
  bool key_asc = false;
  if (filter.sort == JobSort::kPriority) {
    key = "priority";
    key_asc = filter.descending;  // descending = high first = the column's 0 first
  } else if (filter.sort == JobSort::kState) {
    key = kStateRankSql;
    key_asc = !filter.descending;
  }
  const bool id_asc = key.empty() ? !filter.descending : key_asc;
  if (filter.after_id > 0) {
    KESTREL_ASSIGN_OR_RETURN(
        auto at, conn_->Query("SELECT priority, state FROM jobs WHERE id = $1", {filter.after_id}));
    if (at.empty()) {
      return Status::NotFound(
          "job " + std::to_string(filter.after_id) + " (the list's cursor) does not exist",
          {"", 0, "before"});
    }
    const std::string id_cmp = std::string(id_asc ? " > " : " < ") + "$" + std::to_string(params.size() + 1);
    params.push_back(filter.after_id);
    std::string term = "id" + id_cmp;
    if (!key.empty()) {
      JobState st = JobState::kQueued;
      ParseJobState(at[0].Text(1), &st);
      params.push_back(filter.sort == JobSort::kPriority ? at[0].Int(0) : StateRank(st));
      const std::string k = "$" + std::to_string(params.size());
      term = "(" + key + (key_asc ? " > " : " < ") + k + " OR (" + key + " = " + k + " AND " + term + "))";
    }
    where += (where.empty() ? " WHERE " : " AND ") + term;
  }
  std::string order = " ORDER BY ";
  if (!key.empty()) order += key + (key_asc ? " ASC, " : " DESC, ");
  order += std::string("id") + (id_asc ? " ASC" : " DESC");
  // The page's ids first, then their rows: a scan that sorts carries only
  // (key, id) per job instead of every column with its config (10,000 jobs
  // with full configs over HTTP, sort=priority: 108 -> 14 ms median;
  // docs/server.md "Job list").
  std::string ids = "SELECT id FROM jobs" + where + order;
  params.push_back(std::max<int64_t>(filter.limit, 0));
  ids += " LIMIT $" + std::to_string(params.size());
  if (filter.offset > 0) {
    params.push_back(filter.offset);
    ids += " OFFSET $" + std::to_string(params.size());
  }
  const std::string sql =
      std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id IN (" + ids + ")" + order;
  KESTREL_ASSIGN_OR_RETURN(auto rows, conn_->Query(sql, params));
  std::vector<JobRecord> out;
  out.reserve(rows.size());
  for (const auto& r : rows) out.push_back(ReadJob(r));
  return out;
}

Result<int64_t> SqlStore::CountJobs(const JobFilter& filter) {
  SqlParams params;
  const std::string where = JobWhere(filter, conn_->Dialect(), &params);
  KESTREL_ASSIGN_OR_RETURN(auto rows, conn_->Query("SELECT COUNT(*) FROM jobs" + where, params));
  return rows.empty() ? int64_t{0} : rows[0].Int(0);
}

}  // namespace kestrel::store
