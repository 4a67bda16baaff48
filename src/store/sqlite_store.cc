#include "store/sqlite_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <cctype>

#include "core/env.h"

namespace kestrel::store {
namespace {

// A prepared statement that finalizes itself.
class Stmt {
 public:
  Stmt(sqlite3* db, const std::string& sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr);
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Status Prepared() const {
    if (rc_ != SQLITE_OK) return Status::Internal(std::string("sqlite prepare: ") + sqlite3_errmsg(db_));
    return {};
  }
  void Bind(int i, const std::string& v) { sqlite3_bind_text(stmt_, i, v.c_str(), -1, SQLITE_TRANSIENT); }
  void Bind(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  // SQLITE_ROW -> true, SQLITE_DONE -> false, else error.
  Result<bool> Step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) {
      return Status::Aborted(std::string("database is busy: ") + sqlite3_errmsg(db_));
    }
    return Status::IoError(std::string("sqlite: ") + sqlite3_errmsg(db_));
  }
  std::string Text(int col) {
    const unsigned char* p = sqlite3_column_text(stmt_, col);
    return p ? reinterpret_cast<const char*>(p) : "";
  }
  int64_t Int(int col) { return sqlite3_column_int64(stmt_, col); }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_ = SQLITE_OK;
};

constexpr const char* kVersionColumns =
    "dataset, seq, version_id, manifest_sha, report_sha, created_at, num_images, num_boxes, "
    "num_classes, source, summary_json";

DatasetVersionRecord ReadVersion(Stmt& s) {
  DatasetVersionRecord r;
  r.dataset = s.Text(0);
  r.seq = s.Int(1);
  r.version_id = s.Text(2);
  r.manifest_sha = s.Text(3);
  r.report_sha = s.Text(4);
  r.created_at = s.Int(5);
  r.num_images = s.Int(6);
  r.num_boxes = s.Int(7);
  r.num_classes = static_cast<int>(s.Int(8));
  r.source = s.Text(9);
  r.summary_json = s.Text(10);
  return r;
}

class SqliteStore final : public MetadataStore {
 public:
  explicit SqliteStore(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  ~SqliteStore() override { sqlite3_close_v2(db_); }

  Status Exec(const std::string& sql) {
    char* err = nullptr;
    int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
      std::string msg = err ? err : "unknown";
      sqlite3_free(err);
      if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) return Status::Aborted("database is busy: " + msg, {path_});
      return Status::IoError("sqlite: " + msg + " (in: " + sql.substr(0, 80) + ")", {path_});
    }
    return {};
  }

  // Runs `body` inside BEGIN IMMEDIATE ... COMMIT, rolling back on error.
  template <typename F>
  Status InTransaction(F&& body) {
    KESTREL_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
    Status s = body();
    if (!s.IsOk()) {
      Exec("ROLLBACK");
      return s;
    }
    Status c = Exec("COMMIT");
    if (!c.IsOk()) Exec("ROLLBACK");
    return c;
  }

  Status Migrate() {
    KESTREL_RETURN_IF_ERROR(Exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"));
    return InTransaction([&]() -> Status {
      KESTREL_ASSIGN_OR_RETURN(int current, SchemaVersion());
      const auto& migrations = Migrations();
      if (current > static_cast<int>(migrations.size())) {
        return Status::FailedPrecondition("database schema version " + std::to_string(current) +
                                              " is newer than this kestrel (" +
                                              std::to_string(migrations.size()) + "); upgrade kestrel",
                                          {path_});
      }
      for (size_t i = static_cast<size_t>(current); i < migrations.size(); ++i) {
        for (const auto& sql : migrations[i]) KESTREL_RETURN_IF_ERROR(Exec(sql));
        KESTREL_RETURN_IF_ERROR(Exec("DELETE FROM schema_version"));
        KESTREL_RETURN_IF_ERROR(
            Exec("INSERT INTO schema_version(version) VALUES (" + std::to_string(i + 1) + ")"));
      }
      return {};
    });
  }

  Result<int> SchemaVersion() override {
    Stmt s(db_, "SELECT version FROM schema_version");
    KESTREL_RETURN_IF_ERROR(s.Prepared());
    KESTREL_ASSIGN_OR_RETURN(bool row, s.Step());
    return row ? static_cast<int>(s.Int(0)) : 0;
  }

  Result<DatasetVersionRecord> AddDatasetVersion(const DatasetVersionRecord& rec, bool* created) override {
    DatasetVersionRecord out = rec;
    bool made = false;
    Status st = InTransaction([&]() -> Status {
      {
        Stmt s(db_, "INSERT INTO datasets(name, created_at) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING");
        KESTREL_RETURN_IF_ERROR(s.Prepared());
        s.Bind(1, rec.dataset);
        s.Bind(2, rec.created_at);
        KESTREL_RETURN_IF_ERROR(s.Step().GetStatus());
      }
      {
        Stmt s(db_, std::string("SELECT ") + kVersionColumns +
                        " FROM dataset_versions WHERE dataset = ?1 AND version_id = ?2");
        KESTREL_RETURN_IF_ERROR(s.Prepared());
        s.Bind(1, rec.dataset);
        s.Bind(2, rec.version_id);
        KESTREL_ASSIGN_OR_RETURN(bool row, s.Step());
        if (row) {
          out = ReadVersion(s);
          return {};
        }
      }
      int64_t seq = 1;
      {
        Stmt s(db_, "SELECT COALESCE(MAX(seq), 0) + 1 FROM dataset_versions WHERE dataset = ?1");
        KESTREL_RETURN_IF_ERROR(s.Prepared());
        s.Bind(1, rec.dataset);
        KESTREL_ASSIGN_OR_RETURN(bool row, s.Step());
        if (row) seq = s.Int(0);
      }
      out.seq = seq;
      Stmt s(db_, std::string("INSERT INTO dataset_versions (") + kVersionColumns +
                      ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)");
      KESTREL_RETURN_IF_ERROR(s.Prepared());
      s.Bind(1, out.dataset);
      s.Bind(2, out.seq);
      s.Bind(3, out.version_id);
      s.Bind(4, out.manifest_sha);
      s.Bind(5, out.report_sha);
      s.Bind(6, out.created_at);
      s.Bind(7, out.num_images);
      s.Bind(8, out.num_boxes);
      s.Bind(9, static_cast<int64_t>(out.num_classes));
      s.Bind(10, out.source);
      s.Bind(11, out.summary_json);
      KESTREL_RETURN_IF_ERROR(s.Step().GetStatus());
      made = true;
      return {};
    });
    if (!st.IsOk()) return st;
    if (created != nullptr) *created = made;
    return out;
  }

  Result<std::vector<DatasetSummary>> ListDatasets() override {
    Stmt s(db_, std::string("SELECT ") + kVersionColumns +
                    ", (SELECT COUNT(*) FROM dataset_versions c WHERE c.dataset = v.dataset)"
                    " FROM dataset_versions v WHERE seq = (SELECT MAX(seq) FROM dataset_versions m"
                    " WHERE m.dataset = v.dataset) ORDER BY dataset");
    KESTREL_RETURN_IF_ERROR(s.Prepared());
    std::vector<DatasetSummary> out;
    while (true) {
      KESTREL_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      DatasetSummary d;
      d.latest = ReadVersion(s);
      d.name = d.latest.dataset;
      d.num_versions = s.Int(11);
      out.push_back(std::move(d));
    }
    return out;
  }

  Result<std::vector<DatasetVersionRecord>> ListVersions(const std::string& dataset) override {
    Stmt s(db_, std::string("SELECT ") + kVersionColumns +
                    " FROM dataset_versions WHERE dataset = ?1 ORDER BY seq");
    KESTREL_RETURN_IF_ERROR(s.Prepared());
    s.Bind(1, dataset);
    std::vector<DatasetVersionRecord> out;
    while (true) {
      KESTREL_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      out.push_back(ReadVersion(s));
    }
    return out;
  }

  Result<DatasetVersionRecord> GetVersion(const std::string& dataset, const std::string& ref) override {
    KESTREL_ASSIGN_OR_RETURN(auto versions, ListVersions(dataset));
    if (versions.empty()) return Status::NotFound("no dataset named '" + dataset + "'", {"", 0, "data"});
    if (ref.empty() || ref == "latest") return versions.back();
    if (ref.size() >= 2 && (ref[0] == 'v' || ref[0] == 'V') &&
        std::all_of(ref.begin() + 1, ref.end(), [](unsigned char c) { return std::isdigit(c); })) {
      int64_t seq = std::stoll(ref.substr(1));
      for (const auto& v : versions) {
        if (v.seq == seq) return v;
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

 private:
  sqlite3* db_;
  std::string path_;
};

}  // namespace

Result<std::unique_ptr<MetadataStore>> OpenSqliteStore(const std::string& path) {
  std::string dir = DirName(path);
  KESTREL_RETURN_IF_ERROR(Env::Default().CreateDirs(dir));
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close_v2(db);
    return Status::IoError("cannot open database: " + msg, {path});
  }
  sqlite3_busy_timeout(db, 10000);
  auto store = std::make_unique<SqliteStore>(db, path);
  KESTREL_RETURN_IF_ERROR(store->Exec("PRAGMA journal_mode=WAL"));
  KESTREL_RETURN_IF_ERROR(store->Exec("PRAGMA synchronous=NORMAL"));
  KESTREL_RETURN_IF_ERROR(store->Exec("PRAGMA foreign_keys=ON"));
  // Two processes may race to create the schema; the loser waits on the
  // busy timeout and then finds it done.
  KESTREL_RETURN_IF_ERROR(store->Migrate());
  return std::unique_ptr<MetadataStore>(std::move(store));
}

Result<std::unique_ptr<MetadataStore>> MetadataStore::Open(const std::string& url) {
  if (url.rfind("postgres://", 0) == 0 || url.rfind("postgresql://", 0) == 0) {
    return Status::InvalidArgument("PostgreSQL stores are not supported by this build yet: '" + url + "'",
                                   {"", 0, "KESTREL_DB"});
  }
  std::string path = url.rfind("sqlite:", 0) == 0 ? url.substr(7) : url;
  if (path.empty()) return Status::InvalidArgument("empty database path", {"", 0, "KESTREL_DB"});
  return OpenSqliteStore(path);
}

}  // namespace kestrel::store
