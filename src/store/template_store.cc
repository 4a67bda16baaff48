// Config-template operations of SqlStore (docs/templates.md; migration 9).
// Versions are numbered per name under a `counters` row ("template:<name>")
// locked by the saving transaction, so concurrent saves of one name (any
// process, either backend) get v1, v2, ... without gaps or duplicates, and
// the "same content as the newest version" check sees every earlier commit.
#include "store/internal/sql_store.h"

namespace kestrel::store {
namespace {

constexpr const char* kTemplateColumns = "name, seq, created_at, keys_json, content_sha";

TemplateRecord ReadTemplate(const SqlRow& r) {
  TemplateRecord t;
  t.name = r.Text(0);
  t.seq = r.Int(1);
  t.created_ms = r.Int(2);
  t.keys_json = r.Text(3);
  t.content_sha = r.Text(4);
  return t;
}

}  // namespace

bool IsValidTemplateName(const std::string& name) { return IsValidModelName(name); }

Result<TemplateRecord> SqlStore::AddTemplate(const TemplateRecord& rec, bool* created) {
  if (!IsValidTemplateName(rec.name)) {
    return Status::InvalidArgument(
        "invalid template name '" + rec.name + "' (letters, digits, '-', '_', '.'; no '@', ':' or '/')",
        {"", 0, "name"});
  }
  if (rec.content_sha.empty())
    return Status::InvalidArgument("template content_sha is empty", {"", 0, "content_sha"});
  TemplateRecord out;
  bool made = false;
  const std::string counter = "template:" + rec.name;
  Status st = InTransaction([&]() -> Status {
    made = false;
    KESTREL_RETURN_IF_ERROR(
        conn_
            ->Exec("INSERT INTO counters(name, value) VALUES ($1, 0) ON CONFLICT (name) DO NOTHING",
                   {counter})
            .GetStatus());
    KESTREL_RETURN_IF_ERROR(
        conn_
            ->Query(std::string("SELECT value FROM counters WHERE name = $1") + conn_->ForUpdate(), {counter})
            .GetStatus());
    KESTREL_ASSIGN_OR_RETURN(
        auto newest, conn_->Query(std::string("SELECT ") + kTemplateColumns +
                                      " FROM config_templates WHERE name = $1 ORDER BY seq DESC LIMIT 1",
                                  {rec.name}));
    if (!newest.empty() && newest[0].Text(4) == rec.content_sha) {
      out = ReadTemplate(newest[0]);
      return {};
    }
    KESTREL_ASSIGN_OR_RETURN(int64_t seq, NextId(counter.c_str()));
    out = rec;
    out.seq = seq;
    KESTREL_RETURN_IF_ERROR(conn_
                                ->Exec(std::string("INSERT INTO config_templates(") + kTemplateColumns +
                                           ") VALUES ($1, $2, $3, $4, $5)",
                                       {out.name, out.seq, out.created_ms, out.keys_json, out.content_sha})
                                .GetStatus());
    made = true;
    return {};
  });
  if (!st.IsOk()) return st;
  if (created != nullptr) *created = made;
  return out;
}

Result<std::vector<TemplateRecord>> SqlStore::ListTemplates(const TemplateFilter& f) {
  std::string sql = std::string("SELECT ") + kTemplateColumns + " FROM config_templates WHERE 1 = 1";
  SqlParams params;
  if (!f.name.empty()) {
    params.push_back(f.name);
    sql += " AND name = $" + std::to_string(params.size());
  }
  if (f.seq > 0) {
    params.push_back(f.seq);
    sql += " AND seq = $" + std::to_string(params.size());
  }
  sql += " ORDER BY name, seq";
  KESTREL_ASSIGN_OR_RETURN(auto rows, conn_->Query(sql, params));
  std::vector<TemplateRecord> out;
  out.reserve(rows.size());
  for (const auto& r : rows) out.push_back(ReadTemplate(r));
  return out;
}

}  // namespace kestrel::store
