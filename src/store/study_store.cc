// Hyperparameter-study operations of SqlStore (docs/tune.md "In the store";
// migration 14). Study ids come from a `counters` row ("study"); every
// state change is a compare-and-set on the stored state, so one event
// moves a study or trial once, whoever else writes meanwhile.
#include "store/internal/sql_store.h"

namespace kestrel::store {
namespace {

constexpr const char* kStudyColumns =
    "id, name, space_hash, space_json, settings_json, state, job_id, created_at, updated_at";
constexpr const char* kTrialColumns =
    "study_id, number, job_id, state, params_json, value, intermediate_json, epochs_run, pruned_at, "
    "promotions, created_at, updated_at";

StudyRecord ReadStudy(const SqlRow& r) {
  StudyRecord s;
  s.id = r.Int(0);
  s.name = r.Text(1);
  s.space_hash = r.Text(2);
  s.space_json = r.Text(3);
  s.settings_json = r.Text(4);
  s.state = r.Text(5);
  s.job_id = r.Int(6);
  s.created_ms = r.Int(7);
  s.updated_ms = r.Int(8);
  return s;
}

TrialRecord ReadTrial(const SqlRow& r) {
  TrialRecord t;
  t.study_id = r.Int(0);
  t.number = r.Int(1);
  t.job_id = r.Int(2);
  t.state = r.Text(3);
  t.params_json = r.Text(4);
  t.value = r.Text(5);
  t.intermediate_json = r.Text(6);
  t.epochs_run = r.Int(7);
  t.pruned_at = r.Int(8);
  t.promotions = r.Int(9);
  t.created_ms = r.Int(10);
  t.updated_ms = r.Int(11);
  return t;
}

}  // namespace

Result<StudyRecord> SqlStore::CreateStudy(const StudyRecord& rec, bool* created) {
  if (!IsValidModelName(rec.name)) {
    return Status::InvalidArgument(
        "invalid study name '" + rec.name + "' (letters, digits, '-', '_', '.'; no '@', ':' or '/')",
        {"", 0, "name"});
  }
  StudyRecord out;
  bool made = false;
  Status st = InTransaction([&]() -> Status {
    made = false;
    KESTREL_RETURN_IF_ERROR(
        conn_->Exec("INSERT INTO counters(name, value) VALUES ('study', 0) ON CONFLICT (name) DO NOTHING", {})
            .GetStatus());
    // The counter row serializes creations, so two creators of one name
    // cannot both miss the other's row.
    KESTREL_RETURN_IF_ERROR(
        conn_->Query(std::string("SELECT value FROM counters WHERE name = 'study'") + conn_->ForUpdate(), {})
            .GetStatus());
    KESTREL_ASSIGN_OR_RETURN(
        auto rows,
        conn_->Query(std::string("SELECT ") + kStudyColumns + " FROM studies WHERE name = $1", {rec.name}));
    if (!rows.empty()) {
      out = ReadStudy(rows[0]);
      if (out.space_hash != rec.space_hash) {
        return Status::AlreadyExists("study '" + rec.name + "' exists with search space " + out.space_hash +
                                         "; this command's space is " + rec.space_hash +
                                         " (give another name= for a new study)",
                                     {"", 0, "name"});
      }
      return {};
    }
    KESTREL_ASSIGN_OR_RETURN(int64_t id, NextId("study"));
    out = rec;
    out.id = id;
    KESTREL_RETURN_IF_ERROR(conn_
                                ->Exec(std::string("INSERT INTO studies(") + kStudyColumns +
                                           ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                                       {out.id, out.name, out.space_hash, out.space_json, out.settings_json,
                                        out.state, out.job_id, out.created_ms, out.updated_ms})
                                .GetStatus());
    made = true;
    return {};
  });
  if (!st.IsOk()) return st;
  if (created != nullptr) *created = made;
  return out;
}

Result<StudyRecord> SqlStore::GetStudy(const std::string& name) {
  KESTREL_ASSIGN_OR_RETURN(
      auto rows,
      conn_->Query(std::string("SELECT ") + kStudyColumns + " FROM studies WHERE name = $1", {name}));
  if (rows.empty()) return Status::NotFound("no study named '" + name + "'", {"", 0, "study"});
  return ReadStudy(rows[0]);
}

Result<std::vector<StudyRecord>> SqlStore::ListStudies() {
  KESTREL_ASSIGN_OR_RETURN(
      auto rows, conn_->Query(std::string("SELECT ") + kStudyColumns + " FROM studies ORDER BY id DESC", {}));
  std::vector<StudyRecord> out;
  out.reserve(rows.size());
  for (const auto& r : rows) out.push_back(ReadStudy(r));
  return out;
}

Result<bool> SqlStore::UpdateStudy(const StudyRecord& rec, const std::string& expected_state) {
  KESTREL_ASSIGN_OR_RETURN(
      int64_t n, conn_->Exec("UPDATE studies SET state = $1, job_id = $2, updated_at = $3 WHERE id = $4 AND "
                             "state = $5",
                             {rec.state, rec.job_id, rec.updated_ms, rec.id, expected_state}));
  return n > 0;
}

Result<TrialRecord> SqlStore::AddTrial(const TrialRecord& rec, bool* created) {
  TrialRecord out;
  bool made = false;
  Status st = InTransaction([&]() -> Status {
    made = false;
    KESTREL_ASSIGN_OR_RETURN(auto study,
                             conn_->Query("SELECT id FROM studies WHERE id = $1", {rec.study_id}));
    if (study.empty()) {
      return Status::NotFound("no study with id " + std::to_string(rec.study_id), {"", 0, "study"});
    }
    KESTREL_ASSIGN_OR_RETURN(
        int64_t n,
        conn_->Exec(std::string("INSERT INTO study_trials(") + kTrialColumns +
                        ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT DO "
                        "NOTHING",
                    {rec.study_id, rec.number, rec.job_id, rec.state, rec.params_json, rec.value,
                     rec.intermediate_json, rec.epochs_run, rec.pruned_at, rec.promotions, rec.created_ms,
                     rec.updated_ms}));
    if (n > 0) {
      out = rec;
      made = true;
      return {};
    }
    KESTREL_ASSIGN_OR_RETURN(auto rows,
                             conn_->Query(std::string("SELECT ") + kTrialColumns +
                                              " FROM study_trials WHERE study_id = $1 AND number = $2",
                                          {rec.study_id, rec.number}));
    if (rows.empty())
      return Status::Aborted("trial insert race, retrying").WithReason(FailureReason::kStoreConflict);
    out = ReadTrial(rows[0]);
    return {};
  });
  if (!st.IsOk()) return st;
  if (created != nullptr) *created = made;
  return out;
}

Result<bool> SqlStore::UpdateTrial(const TrialRecord& rec, const std::string& expected_state) {
  KESTREL_ASSIGN_OR_RETURN(
      int64_t n,
      conn_->Exec("UPDATE study_trials SET job_id = $1, state = $2, params_json = $3, value = $4, "
                  "intermediate_json = $5, epochs_run = $6, pruned_at = $7, promotions = $8, updated_at = $9 "
                  "WHERE study_id = $10 AND number = $11 AND state = $12",
                  {rec.job_id, rec.state, rec.params_json, rec.value, rec.intermediate_json, rec.epochs_run,
                   rec.pruned_at, rec.promotions, rec.updated_ms, rec.study_id, rec.number, expected_state}));
  return n > 0;
}

Result<std::vector<TrialRecord>> SqlStore::ListTrials(int64_t study_id) {
  KESTREL_ASSIGN_OR_RETURN(auto rows,
                           conn_->Query(std::string("SELECT ") + kTrialColumns +
                                            " FROM study_trials WHERE study_id = $1 ORDER BY number",
                                        {study_id}));
  std::vector<TrialRecord> out;
  out.reserve(rows.size());
  for (const auto& r : rows) out.push_back(ReadTrial(r));
  return out;
}

}  // namespace kestrel::store
