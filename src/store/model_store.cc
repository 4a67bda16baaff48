// Model-registry operations of SqlStore (docs/models.md; migration 8; the
// export records of migration 12).
// Versions are numbered per name under a `counters` row ("model:<name>")
// locked by the registering transaction, so concurrent registrations of one
// name (in any process, either backend) get v1, v2, ... without gaps or
// duplicates. Promotion to `production` locks a per-dataset counters row
// ("production:<dataset>") and moves the tag in the same transaction; the
// partial unique index model_tags_one_production is the last line of defence.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "core/hash.h"
#include "core/names.h"
#include "store/internal/sql_store.h"

namespace kestrel::store {
namespace {

constexpr const char* kModelColumns =
    "id, name, seq, created_at, weights_sha, weights_bytes, format, dataset, dataset_version, config_hash, "
    "job_id, "
    "attempt, host, kestrel_version, map50, map50_95, lineage_json, eval_json, comparison_json";

// map50 / map50_95: "" = not measured (ModelRecord); rows written before
// that was possible hold a number, "0" included, and read back as written.
std::optional<double> OptionalDouble(const std::string& text) {
  if (text.empty()) return std::nullopt;
  return std::strtod(text.c_str(), nullptr);
}
std::string OptionalDoubleText(const std::optional<double>& v) { return v ? DoubleText(*v) : ""; }

ModelRecord ReadModel(const SqlRow& r) {
  ModelRecord m;
  m.id = r.Text(0);
  m.name = r.Text(1);
  m.seq = r.Int(2);
  m.created_ms = r.Int(3);
  m.weights_sha = r.Text(4);
  m.weights_bytes = r.Int(5);
  m.format = r.Text(6);
  m.dataset = r.Text(7);
  m.dataset_version = r.Text(8);
  m.config_hash = r.Text(9);
  m.job_id = r.Int(10);
  m.attempt = r.Int(11);
  m.host = r.Text(12);
  m.kestrel_version = r.Text(13);
  m.map50 = OptionalDouble(r.Text(14));
  m.map50_95 = OptionalDouble(r.Text(15));
  m.lineage_json = r.Text(16);
  m.eval_json = r.Text(17);
  m.comparison_json = r.Text(18);
  return m;
}

constexpr const char* kExportColumns =
    "id, model_id, created_at, format, path, sha256, bytes, options_json, verified, verification_json, "
    "kestrel_version";

ModelExportRecord ReadExport(const SqlRow& r) {
  ModelExportRecord e;
  e.id = r.Text(0);
  e.model_id = r.Text(1);
  e.created_ms = r.Int(2);
  e.format = r.Text(3);
  e.path = r.Text(4);
  e.sha256 = r.Text(5);
  e.bytes = r.Int(6);
  e.options_json = r.Text(7);
  e.verified = r.Int(8) != 0;
  e.verification_json = r.Text(9);
  e.kestrel_version = r.Text(10);
  return e;
}

}  // namespace

bool IsValidModelTag(const std::string& tag) { return IsValidName(NameKind::kTag, tag); }

bool IsValidModelName(const std::string& name) { return IsValidName(NameKind::kModel, name); }

Result<std::vector<ModelRecord>> SqlStore::SelectModels(const ModelFilter& f, bool lock) {
  std::string sql = std::string("SELECT ") + kModelColumns + " FROM models WHERE 1 = 1";
  SqlParams params;
  auto add = [&](const std::string& cond, SqlValue v) {
    params.push_back(std::move(v));
    sql += " AND " + cond + "$" + std::to_string(params.size());
  };
  if (!f.id_prefix.empty()) {
    params.push_back(f.id_prefix);
    sql +=
        " AND substr(id, 1, " + std::to_string(f.id_prefix.size()) + ") = $" + std::to_string(params.size());
  }
  if (!f.name.empty()) add("name = ", f.name);
  if (f.seq > 0) add("seq = ", f.seq);
  if (!f.dataset.empty()) add("dataset = ", f.dataset);
  if (!f.dataset_version.empty()) add("dataset_version = ", f.dataset_version);
  if (f.job_id > 0) add("job_id = ", f.job_id);
  if (!f.weights_sha.empty()) add("weights_sha = ", f.weights_sha);
  if (!f.tag.empty()) {
    add("id IN (SELECT model_id FROM model_tags WHERE tag = ", f.tag);
    sql += ")";
  }
  sql += " ORDER BY created_at, name, seq";
  if (lock) sql += conn_->ForUpdate();
  KESTREL_ASSIGN_OR_RETURN(auto rows, conn_->Query(sql, params));
  std::vector<ModelRecord> out;
  out.reserve(rows.size());
  for (const auto& r : rows) out.push_back(ReadModel(r));
  if (out.empty()) return out;
  // Tags of the selected models (a second small query: no aggregate
  // functions that differ between the engines).
  std::map<std::string, ModelRecord*> by_id;
  for (auto& m : out) by_id[m.id] = &m;
  KESTREL_ASSIGN_OR_RETURN(auto tags, conn_->Query("SELECT model_id, tag FROM model_tags ORDER BY tag", {}));
  for (const auto& t : tags) {
    auto it = by_id.find(t.Text(0));
    if (it != by_id.end()) it->second->tags.push_back(t.Text(1));
  }
  // Their exports (one model: only its rows).
  std::string esql = std::string("SELECT ") + kExportColumns + " FROM model_exports";
  SqlParams eparams;
  if (out.size() == 1) {
    esql += " WHERE model_id = $1";
    eparams.push_back(out[0].id);
  }
  KESTREL_ASSIGN_OR_RETURN(auto exports, conn_->Query(esql + " ORDER BY created_at, id", eparams));
  for (const auto& e : exports) {
    auto it = by_id.find(e.Text(1));
    if (it != by_id.end()) it->second->exports.push_back(ReadExport(e));
  }
  return out;
}

Result<ModelExportRecord> SqlStore::AddModelExport(const ModelExportRecord& rec, bool* created) {
  if (!IsSha256Hex(rec.id))
    return Status::InvalidArgument("model export id is not 64 hex chars", {"", 0, "id"});
  if (!IsSha256Hex(rec.sha256))
    return Status::InvalidArgument("model export sha256 is not a sha256 hex digest", {"", 0, "sha256"});
  ModelExportRecord out;
  bool made = false;
  Status st = InTransaction([&]() -> Status {
    made = false;
    // The model's row locked first (PostgreSQL; SQLite's write transaction
    // is exclusive anyway): concurrent records of one model serialize, so
    // the lookup below sees every earlier commit and one file gets one row.
    KESTREL_ASSIGN_OR_RETURN(
        auto model, conn_->Query(std::string("SELECT id FROM models WHERE id = $1") + conn_->ForUpdate(),
                                 {rec.model_id}));
    if (model.empty()) return Status::NotFound("no model with id " + rec.model_id, {"", 0, "model"});
    KESTREL_ASSIGN_OR_RETURN(auto same_file,
                             conn_->Query(std::string("SELECT ") + kExportColumns +
                                              " FROM model_exports WHERE model_id = $1 AND path = $2 AND "
                                              "sha256 = $3 ORDER BY created_at, id",
                                          {rec.model_id, rec.path, rec.sha256}));
    if (!same_file.empty()) {
      out = ReadExport(same_file[0]);
      out.format = rec.format;
      out.bytes = rec.bytes;
      out.options_json = rec.options_json;
      out.verified = rec.verified;
      out.verification_json = rec.verification_json;
      out.kestrel_version = rec.kestrel_version;
      return conn_
          ->Exec(
              "UPDATE model_exports SET format = $1, bytes = $2, options_json = $3, verified = $4, "
              "verification_json = $5, kestrel_version = $6 WHERE id = $7",
              {out.format, out.bytes, out.options_json, int64_t{out.verified ? 1 : 0}, out.verification_json,
               out.kestrel_version, out.id})
          .GetStatus();
    }
    KESTREL_ASSIGN_OR_RETURN(auto same, conn_->Query("SELECT id FROM model_exports WHERE id = $1", {rec.id}));
    if (!same.empty())
      return Status::AlreadyExists("a model export with id " + rec.id + " exists", {"", 0, "id"});
    KESTREL_RETURN_IF_ERROR(
        conn_
            ->Exec(
                std::string("INSERT INTO model_exports(") + kExportColumns +
                    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                {rec.id, rec.model_id, rec.created_ms, rec.format, rec.path, rec.sha256, rec.bytes,
                 rec.options_json, int64_t{rec.verified ? 1 : 0}, rec.verification_json, rec.kestrel_version})
            .GetStatus());
    out = rec;
    made = true;
    return Status();
  });
  if (!st.IsOk()) return st;
  if (created != nullptr) *created = made;
  return out;
}

Result<ModelRecord> SqlStore::AddModel(const ModelRecord& rec, bool* created) {
  if (!IsValidModelName(rec.name)) {
    return Status::InvalidArgument(
        "invalid model name '" + rec.name + "' (letters, digits, '-', '_', '.'; no '@' or '/')",
        {"", 0, "name"});
  }
  if (rec.id.size() != 64) return Status::InvalidArgument("model id must be 64 hex chars", {"", 0, "id"});
  ModelRecord out;
  bool made = false;
  const std::string counter = "model:" + rec.name;
  Status st = InTransaction([&]() -> Status {
    made = false;
    // The name's counter row first: it serializes registrations of this
    // name, so the existence checks below see every earlier commit.
    KESTREL_RETURN_IF_ERROR(
        conn_
            ->Exec("INSERT INTO counters(name, value) VALUES ($1, 0) ON CONFLICT (name) DO NOTHING",
                   {counter})
            .GetStatus());
    KESTREL_RETURN_IF_ERROR(
        conn_
            ->Query(std::string("SELECT value FROM counters WHERE name = $1") + conn_->ForUpdate(), {counter})
            .GetStatus());
    // Idempotent: a job registers one model (a worker that retries after a
    // lost reply gets the same record); hand registrations of the same
    // weights under the same name are one version.
    ModelFilter same;
    if (rec.job_id > 0) {
      same.job_id = rec.job_id;
    } else {
      same.name = rec.name;
    }
    KESTREL_ASSIGN_OR_RETURN(auto existing, SelectModels(same, false));
    for (const auto& m : existing) {
      if (rec.job_id > 0 || (m.job_id == 0 && m.weights_sha == rec.weights_sha)) {
        out = m;
        return {};
      }
    }
    KESTREL_ASSIGN_OR_RETURN(int64_t seq, NextId(counter.c_str()));
    out = rec;
    out.seq = seq;
    out.tags.clear();
    KESTREL_RETURN_IF_ERROR(
        conn_
            ->Exec(std::string("INSERT INTO models(") + kModelColumns +
                       ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, "
                       "$17, $18, "
                       "$19)",
                   {out.id, out.name, out.seq, out.created_ms, out.weights_sha, out.weights_bytes, out.format,
                    out.dataset, out.dataset_version, out.config_hash, out.job_id, out.attempt, out.host,
                    out.kestrel_version, OptionalDoubleText(out.map50), OptionalDoubleText(out.map50_95),
                    out.lineage_json, out.eval_json, out.comparison_json})
            .GetStatus());
    made = true;
    return {};
  });
  if (!st.IsOk()) return st;
  if (created != nullptr) *created = made;
  return out;
}

Result<std::vector<ModelRecord>> SqlStore::ListModels(const ModelFilter& filter) {
  return SelectModels(filter, false);
}

Result<std::string> SqlStore::TagModel(const std::string& model_id, const std::string& tag, int64_t now_ms) {
  if (!IsValidModelTag(tag)) {
    return Status::InvalidArgument(
        "invalid tag '" + tag + "' (lowercase letters, digits, '-', '_', '.'; a letter first)",
        {"", 0, "tag"});
  }
  std::string previous;
  Status st = InTransaction([&]() -> Status {
    previous.clear();
    ModelFilter f;
    f.id_prefix = model_id;
    KESTREL_ASSIGN_OR_RETURN(auto found, SelectModels(f, true));
    if (found.size() != 1 || found[0].id != model_id) {
      return Status::NotFound("no model with id " + model_id, {"", 0, "model"});
    }
    const ModelRecord& m = found[0];
    if (tag == kProductionTag) {
      // One holder per dataset: serialize promotions of this dataset, then
      // move the tag (delete the old holder's, insert ours) in this transaction.
      const std::string lock = std::string("production:") + m.dataset;
      KESTREL_RETURN_IF_ERROR(
          conn_
              ->Exec("INSERT INTO counters(name, value) VALUES ($1, 0) ON CONFLICT (name) DO NOTHING", {lock})
              .GetStatus());
      KESTREL_RETURN_IF_ERROR(
          conn_->Query(std::string("SELECT value FROM counters WHERE name = $1") + conn_->ForUpdate(), {lock})
              .GetStatus());
      KESTREL_ASSIGN_OR_RETURN(
          auto holders,
          conn_->Query("SELECT model_id FROM model_tags WHERE tag = $1 AND dataset = $2", {tag, m.dataset}));
      for (const auto& h : holders) {
        if (h.Text(0) != model_id) previous = h.Text(0);
      }
      KESTREL_RETURN_IF_ERROR(
          conn_
              ->Exec("DELETE FROM model_tags WHERE tag = $1 AND dataset = $2 AND model_id <> $3",
                     {tag, m.dataset, model_id})
              .GetStatus());
    }
    return conn_
        ->Exec(
            "INSERT INTO model_tags(model_id, tag, dataset, created_at) VALUES ($1, $2, $3, $4) "
            "ON CONFLICT (model_id, tag) DO NOTHING",
            {model_id, tag, m.dataset, now_ms})
        .GetStatus();
  });
  if (!st.IsOk()) return st;
  return previous;
}

Result<bool> SqlStore::UntagModel(const std::string& model_id, const std::string& tag) {
  bool removed = false;
  Status st = InTransaction([&]() -> Status {
    KESTREL_ASSIGN_OR_RETURN(
        int64_t n, conn_->Exec("DELETE FROM model_tags WHERE model_id = $1 AND tag = $2", {model_id, tag}));
    removed = n > 0;
    return {};
  });
  if (!st.IsOk()) return st;
  return removed;
}

Status SqlStore::DeleteModel(const std::string& model_id, bool even_production) {
  return InTransaction([&]() -> Status {
    ModelFilter f;
    f.id_prefix = model_id;
    KESTREL_ASSIGN_OR_RETURN(auto found, SelectModels(f, true));
    if (found.size() != 1 || found[0].id != model_id) {
      return Status::NotFound("no model with id " + model_id, {"", 0, "model"});
    }
    const auto& tags = found[0].tags;
    if (!even_production && std::find(tags.begin(), tags.end(), kProductionTag) != tags.end()) {
      return Status::FailedPrecondition("model " + found[0].name + "@v" + std::to_string(found[0].seq) +
                                            " holds 'production' for dataset '" + found[0].dataset +
                                            "'; promote another model or untag it first (or --force)",
                                        {"", 0, "model"});
    }
    KESTREL_RETURN_IF_ERROR(
        conn_->Exec("DELETE FROM model_tags WHERE model_id = $1", {model_id}).GetStatus());
    KESTREL_RETURN_IF_ERROR(
        conn_->Exec("DELETE FROM model_exports WHERE model_id = $1", {model_id}).GetStatus());
    return conn_->Exec("DELETE FROM models WHERE id = $1", {model_id}).GetStatus();
  });
}

}  // namespace kestrel::store
