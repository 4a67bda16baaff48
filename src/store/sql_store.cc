// Backend-independent half of SqlStore: migrations, the dataset registry, and
// MetadataStore::Open. Job operations are in job_store.cc.
#include "store/internal/sql_store.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "core/parse.h"
#include "store/postgres_store.h"
#include "store/sqlite_store.h"

namespace kestrel::store {

const std::string& SqlRow::Text(size_t i) const {
  static const std::string kEmpty;
  return IsNull(i) ? kEmpty : *cols_[i];
}

int64_t SqlRow::Int(size_t i) const {
  if (IsNull(i)) return 0;
  return std::strtoll(cols_[i]->c_str(), nullptr, 10);
}

std::string SqlitePlaceholders(const std::string& sql) {
  std::string out;
  out.reserve(sql.size());
  char quote = 0;
  for (size_t i = 0; i < sql.size(); ++i) {
    char c = sql[i];
    if (quote != 0) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '$' && i + 1 < sql.size() && std::isdigit(static_cast<unsigned char>(sql[i + 1]))) {
      c = '?';
    }
    out.push_back(c);
  }
  return out;
}

namespace {

constexpr const char* kVersionColumns =
    "dataset, seq, version_id, manifest_sha, report_sha, created_at, num_images, num_boxes, "
    "num_classes, source, summary_json, data_mode";

DatasetVersionRecord ReadVersion(const SqlRow& r) {
  DatasetVersionRecord v;
  v.dataset = r.Text(0);
  v.seq = r.Int(1);
  v.version_id = r.Text(2);
  v.manifest_sha = r.Text(3);
  v.report_sha = r.Text(4);
  v.created_at = r.Int(5);
  v.num_images = r.Int(6);
  v.num_boxes = r.Int(7);
  v.num_classes = static_cast<int>(r.Int(8));
  v.source = r.Text(9);
  v.summary_json = r.Text(10);
  v.data_mode = r.Text(11);
  return v;
}

}  // namespace

std::string DoubleText(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

Status SqlStore::Migrate() {
  return InTransaction([&]() -> Status {
    if (conn_->Dialect() == SqlDialect::kPostgres) {
      // Concurrent first opens would race on CREATE TABLE; serialize them.
      KESTREL_RETURN_IF_ERROR(conn_->Query("SELECT pg_advisory_xact_lock(4242424242)", {}).GetStatus());
    }
    KESTREL_RETURN_IF_ERROR(
        conn_->ExecScript("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"));
    KESTREL_ASSIGN_OR_RETURN(int current, SchemaVersion());
    const auto& migrations = Migrations();
    if (current > static_cast<int>(migrations.size())) {
      return Status::FailedPrecondition("database schema version " + std::to_string(current) +
                                            " is newer than this kestrel (" +
                                            std::to_string(migrations.size()) + "); upgrade kestrel",
                                        {conn_->Location()});
    }
    for (size_t i = static_cast<size_t>(current); i < migrations.size(); ++i) {
      for (const auto& sql : migrations[i]) {
        if (sql.rfind(kPostgresOnly, 0) == 0 && conn_->Dialect() != SqlDialect::kPostgres) continue;
        if (sql.rfind(kSqliteOnly, 0) == 0 && conn_->Dialect() == SqlDialect::kPostgres) continue;
        KESTREL_RETURN_IF_ERROR(conn_->ExecScript(sql));
      }
      KESTREL_RETURN_IF_ERROR(conn_->ExecScript("DELETE FROM schema_version"));
      KESTREL_RETURN_IF_ERROR(
          conn_->ExecScript("INSERT INTO schema_version(version) VALUES (" + std::to_string(i + 1) + ")"));
    }
    return {};
  });
}

Result<int> SqlStore::SchemaVersion() {
  KESTREL_ASSIGN_OR_RETURN(auto rows, conn_->Query("SELECT version FROM schema_version", {}));
  return rows.empty() ? 0 : static_cast<int>(rows[0].Int(0));
}

Result<DatasetVersionRecord> SqlStore::AddDatasetVersion(const DatasetVersionRecord& rec, bool* created) {
  DatasetVersionRecord out;
  bool made = false;
  Status st = InTransaction([&]() -> Status {
    out = rec;
    made = false;
    KESTREL_RETURN_IF_ERROR(
        conn_
            ->Exec("INSERT INTO datasets(name, created_at) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
                   {rec.dataset, rec.created_at})
            .GetStatus());
    // Lock the dataset row (PostgreSQL; SQLite holds the database lock) so
    // the lookup and MAX(seq) + 1 below cannot race another importer.
    KESTREL_RETURN_IF_ERROR(
        conn_
            ->Query(std::string("SELECT name FROM datasets WHERE name = $1") + conn_->ForUpdate(),
                    {rec.dataset})
            .GetStatus());
    KESTREL_ASSIGN_OR_RETURN(auto existing,
                             conn_->Query(std::string("SELECT ") + kVersionColumns +
                                              " FROM dataset_versions WHERE dataset = $1 AND version_id = $2",
                                          {rec.dataset, rec.version_id}));
    if (!existing.empty()) {
      out = ReadVersion(existing[0]);
      return {};
    }
    KESTREL_ASSIGN_OR_RETURN(
        auto seq, conn_->Query("SELECT COALESCE(MAX(seq), 0) + 1 FROM dataset_versions WHERE dataset = $1",
                               {rec.dataset}));
    out.seq = seq.empty() ? 1 : seq[0].Int(0);
    KESTREL_RETURN_IF_ERROR(
        conn_
            ->Exec(std::string("INSERT INTO dataset_versions (") + kVersionColumns +
                       ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
                   {out.dataset, out.seq, out.version_id, out.manifest_sha, out.report_sha, out.created_at,
                    out.num_images, out.num_boxes, static_cast<int64_t>(out.num_classes), out.source,
                    out.summary_json, out.data_mode})
            .GetStatus());
    made = true;
    return {};
  });
  if (!st.IsOk()) return st;
  if (created != nullptr) *created = made;
  return out;
}

Result<std::vector<DatasetSummary>> SqlStore::ListDatasets() {
  KESTREL_ASSIGN_OR_RETURN(
      auto rows, conn_->Query(std::string("SELECT ") + kVersionColumns +
                                  ", (SELECT COUNT(*) FROM dataset_versions c WHERE c.dataset = v.dataset)"
                                  " FROM dataset_versions v WHERE seq = (SELECT MAX(seq) FROM "
                                  "dataset_versions m WHERE m.dataset = v.dataset) ORDER BY dataset",
                              {}));
  std::vector<DatasetSummary> out;
  for (const auto& r : rows) {
    DatasetSummary d;
    d.latest = ReadVersion(r);
    d.name = d.latest.dataset;
    d.num_versions = r.Int(12);
    out.push_back(std::move(d));
  }
  return out;
}

Result<std::vector<DatasetVersionRecord>> SqlStore::ListVersions(const std::string& dataset) {
  KESTREL_ASSIGN_OR_RETURN(auto rows,
                           conn_->Query(std::string("SELECT ") + kVersionColumns +
                                            " FROM dataset_versions WHERE dataset = $1 ORDER BY seq",
                                        {dataset}));
  std::vector<DatasetVersionRecord> out;
  out.reserve(rows.size());
  for (const auto& r : rows) out.push_back(ReadVersion(r));
  return out;
}

Result<std::vector<DatasetVersionRecord>> SqlStore::ListVersionsById(
    const std::vector<std::string>& version_ids) {
  // At most 500 ids a statement (SQLite's bound-parameter limit is 999 in
  // older builds); a job list page names a handful.
  constexpr size_t kChunk = 500;
  std::vector<DatasetVersionRecord> out;
  for (size_t at = 0; at < version_ids.size(); at += kChunk) {
    SqlParams params;
    std::string in;
    for (size_t i = at; i < std::min(version_ids.size(), at + kChunk); ++i) {
      params.push_back(version_ids[i]);
      in += (in.empty() ? "$" : ", $") + std::to_string(params.size());
    }
    KESTREL_ASSIGN_OR_RETURN(auto rows,
                             conn_->Query(std::string("SELECT ") + kVersionColumns +
                                              " FROM dataset_versions WHERE version_id IN (" + in + ")",
                                          params));
    for (const auto& r : rows) out.push_back(ReadVersion(r));
  }
  std::sort(out.begin(), out.end(), [](const DatasetVersionRecord& a, const DatasetVersionRecord& b) {
    return a.dataset != b.dataset ? a.dataset < b.dataset : a.seq < b.seq;
  });
  return out;
}

Result<DatasetVersionRecord> SqlStore::GetVersion(const std::string& dataset, const std::string& ref) {
  KESTREL_ASSIGN_OR_RETURN(auto versions, ListVersions(dataset));
  if (versions.empty()) return Status::NotFound("no dataset named '" + dataset + "'", {"", 0, "data"});
  if (ref == kEmptyVersionRef) {
    return Status::InvalidArgument("'" + dataset + "@' names no version: write " + dataset +
                                       " (the latest), " + dataset + "@vN or " + dataset + "@<id prefix>",
                                   {"", 0, "data"});
  }
  if (ref.empty() || ref == "latest") return versions.back();
  if (ref.size() >= 2 && (ref[0] == 'v' || ref[0] == 'V') &&
      std::all_of(ref.begin() + 1, ref.end(), [](unsigned char c) { return std::isdigit(c); })) {
    // A number past int64 (v99999999999999999999) names no version either.
    auto seq = ParseInt64(std::string_view(ref).substr(1), {"", 0, "data"}, 1, INT64_MAX, "a version number");
    for (const auto& v : versions) {
      if (seq.IsOk() && v.seq == *seq) return v;
    }
    return Status::NotFound("dataset '" + dataset + "' has no version " + ref + " (it has v1..v" +
                                std::to_string(versions.back().seq) + ")",
                            {"", 0, "data"});
  }
  if (ref.size() < 6) {
    return Status::InvalidArgument("version '" + ref + "' must be vN or at least 6 hex chars of the id",
                                   {"", 0, "data"});
  }
  const DatasetVersionRecord* found = nullptr;
  for (const auto& v : versions) {
    if (v.version_id.compare(0, ref.size(), ref) == 0) {
      if (found != nullptr) {
        return Status::InvalidArgument("version prefix '" + ref + "' is ambiguous", {"", 0, "data"});
      }
      found = &v;
    }
  }
  if (found == nullptr) {
    return Status::NotFound("dataset '" + dataset + "' has no version '" + ref + "'", {"", 0, "data"});
  }
  return *found;
}

Result<std::unique_ptr<MetadataStore>> MetadataStore::Open(const std::string& url) {
  std::unique_ptr<SqlConn> conn;
  if (url.rfind("postgres://", 0) == 0 || url.rfind("postgresql://", 0) == 0) {
    KESTREL_ASSIGN_OR_RETURN(conn, ConnectPostgres(url));
  } else {
    std::string path = url.rfind("sqlite:", 0) == 0 ? url.substr(7) : url;
    if (path.empty()) return Status::InvalidArgument("empty database path", {"", 0, "KESTREL_DB"});
    KESTREL_ASSIGN_OR_RETURN(conn, ConnectSqlite(path));
  }
  auto store = std::make_unique<SqlStore>(std::move(conn));
  KESTREL_RETURN_IF_ERROR(store->Migrate());
  return std::unique_ptr<MetadataStore>(std::move(store));
}

Result<std::unique_ptr<MetadataStore>> OpenSqliteStore(const std::string& path) {
  return MetadataStore::Open("sqlite:" + path);
}

Result<std::unique_ptr<MetadataStore>> OpenPostgresStore(const std::string& url) {
  if (url.rfind("postgres://", 0) != 0 && url.rfind("postgresql://", 0) != 0) {
    return Status::InvalidArgument("not a PostgreSQL URL: '" + url + "'", {"", 0, "KESTREL_DB"});
  }
  return MetadataStore::Open(url);
}

}  // namespace kestrel::store
