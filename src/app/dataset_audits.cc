#include "app/dataset_audits.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"
#include "data/manifest.h"
#include "data/version.h"

namespace kestrel::app {
namespace {

// The stored list; an unset setting is an empty list, a value that is not
// a JSON array is treated as empty too (a later append rewrites it).
Result<std::pair<std::optional<std::string>, nlohmann::json>> ReadList(store::MetadataStore& meta,
                                                                       const std::string& name) {
  Result<std::string> raw = meta.GetSetting(name);
  if (!raw.IsOk() && raw.GetStatus().Code() != StatusCode::kNotFound) return raw.GetStatus();
  std::optional<std::string> text;
  nlohmann::json list = nlohmann::json::array();
  if (raw.IsOk()) {
    text = *raw;
    nlohmann::json parsed = nlohmann::json::parse(*raw, nullptr, false);
    if (parsed.is_array()) list = std::move(parsed);
  }
  return std::make_pair(text, list);
}

StoredAudit FromJson(const nlohmann::json& e, int64_t number) {
  StoredAudit a;
  a.number = number;
  a.sha = e.value("sha", "");
  a.created_ms = e.value("created_ms", int64_t{0});
  a.model = e.value("model", "");
  a.split = e.value("split", "");
  a.images = e.value("images", int64_t{0});
  a.items = e.value("items", int64_t{0});
  if (e.contains("counts") && e["counts"].is_object()) a.counts = e["counts"];
  return a;
}

Result<store::DatasetVersionRecord> VersionOf(store::MetadataStore& meta, const std::string& spec) {
  std::string name, ref;
  store::SplitDatasetRef(spec, &name, &ref);
  return meta.GetVersion(name, ref);
}

std::string BoxKey(const nlohmann::json& box) { return box.dump(); }

}  // namespace

std::string AuditListSetting(const store::DatasetVersionRecord& version) {
  return "dataset.audits." + version.dataset + "@" + version.version_id;
}

nlohmann::json StoredAuditJson(const StoredAudit& a) {
  return {{"number", a.number}, {"sha", a.sha},       {"created_ms", a.created_ms}, {"model", a.model},
          {"split", a.split},   {"images", a.images}, {"items", a.items},           {"counts", a.counts}};
}

Result<StoredAudit> RecordAudit(store::MetadataStore& meta, store::ArtifactStore& blobs,
                                const store::DatasetVersionRecord& version, const nlohmann::json& audit_doc,
                                const std::string& split, int64_t now_ms) {
  KESTREL_ASSIGN_OR_RETURN(std::string sha, blobs.Put(DumpJson(audit_doc)));
  nlohmann::json entry = {{"sha", sha},
                          {"created_ms", now_ms},
                          {"model", audit_doc.value("model", "")},
                          {"split", split},
                          {"images", audit_doc.value("images", int64_t{0})},
                          {"items", audit_doc.value("items_total", int64_t{0})},
                          {"counts", audit_doc.value("counts", nlohmann::json::object())}};
  const std::string name = AuditListSetting(version);
  // Compare-and-set until no other audit of the version appended meanwhile.
  for (int attempt = 0; attempt < 100; ++attempt) {
    KESTREL_ASSIGN_OR_RETURN(auto current, ReadList(meta, name));
    nlohmann::json list = current.second;
    list.push_back(entry);
    while (list.size() > kMaxAuditsListed) list.erase(list.begin());
    KESTREL_ASSIGN_OR_RETURN(bool wrote,
                             meta.CompareAndSetSetting(name, current.first, DumpJson(list), now_ms));
    if (wrote) return FromJson(entry, int64_t(list.size()));
  }
  return Status::Aborted(
      "the audit list of " + version.dataset + " kept changing; audit stored as blob " + sha,
      {"", 0, "audits"});
}

Result<std::vector<StoredAudit>> ListAudits(store::MetadataStore& meta, const std::string& spec) {
  KESTREL_ASSIGN_OR_RETURN(store::DatasetVersionRecord v, VersionOf(meta, spec));
  KESTREL_ASSIGN_OR_RETURN(auto current, ReadList(meta, AuditListSetting(v)));
  std::vector<StoredAudit> out;
  for (size_t i = 0; i < current.second.size(); ++i)
    if (current.second[i].is_object()) out.push_back(FromJson(current.second[i], int64_t(i) + 1));
  return out;
}

Result<nlohmann::json> AuditPage(store::MetadataStore& meta, store::ArtifactStore& blobs,
                                 const AuditPageRequest& req) {
  static const std::vector<std::string> kKinds = {"errors",      "all",          "missing", "spurious",
                                                  "wrong_class", "localisation", "ok"};
  if (std::find(kKinds.begin(), kKinds.end(), req.kind) == kKinds.end())
    return Status::InvalidArgument(
        "kind must be errors, all, missing, spurious, wrong_class, localisation or ok", {"", 0, "kind"});
  if (req.sort != "score" && req.sort != "-score" && req.sort != "image" && req.sort != "kind")
    return Status::InvalidArgument("sort must be score, -score, image or kind", {"", 0, "sort"});
  if (req.offset < 0) return Status::InvalidArgument("offset must be >= 0", {"", 0, "offset"});
  if (req.limit < 1 || req.limit > 500)
    return Status::InvalidArgument("limit must be 1..500", {"", 0, "limit"});
  if (req.number < 0) return Status::InvalidArgument("an audit number is >= 1", {"", 0, "number"});

  KESTREL_ASSIGN_OR_RETURN(data::VersionView v, data::LoadVersion(meta, blobs, req.spec));
  KESTREL_ASSIGN_OR_RETURN(std::vector<StoredAudit> audits, ListAudits(meta, req.spec));
  const std::string label = v.record.dataset + "@v" + std::to_string(v.record.seq);
  if (audits.empty())
    return Status::NotFound(label + " has no stored audit (kestrel dataset audit " + label + " model=...)",
                            {"", 0, "number"});
  if (req.number > int64_t(audits.size()))
    return Status::NotFound(label + " has " + std::to_string(audits.size()) + " stored audit(s)",
                            {"", 0, "number"});
  const StoredAudit& a = audits[size_t(req.number == 0 ? int64_t(audits.size()) : req.number) - 1];
  KESTREL_ASSIGN_OR_RETURN(std::string text, blobs.Get(a.sha));
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (!doc.is_object() || !doc.contains("items") || !doc["items"].is_array())
    return Status::Corruption("audit blob " + a.sha + " is not an audit document", {"", 0, "audit"});
  const nlohmann::json& items = doc["items"];

  auto key_of = [](const nlohmann::json& it) { return it.value("split", "") + "/" + it.value("image", ""); };
  std::vector<size_t> chosen;
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string kind = items[i].value("kind", "");
    if (req.kind == "all" || (req.kind == "errors" ? kind != "ok" : kind == req.kind)) chosen.push_back(i);
  }
  auto score = [&items](size_t i) { return items[i].value("score", 0.0); };
  // Items are stored in review order (score, highest first): a stable sort keeps it within ties.
  if (req.sort == "-score") {
    std::stable_sort(chosen.begin(), chosen.end(), [&](size_t x, size_t y) { return score(x) < score(y); });
  } else if (req.sort == "image") {
    std::stable_sort(chosen.begin(), chosen.end(),
                     [&](size_t x, size_t y) { return key_of(items[x]) < key_of(items[y]); });
  } else if (req.sort == "kind") {
    std::stable_sort(chosen.begin(), chosen.end(), [&](size_t x, size_t y) {
      return items[x].value("kind", "") < items[y].value("kind", "");
    });
  }

  std::map<std::string, const data::ManifestEntry*> entry_of;
  for (const data::ManifestEntry& e : v.manifest.entries)
    entry_of[std::string(data::SplitName(e.split)) + "/" + e.path] = &e;
  nlohmann::json page = nlohmann::json::array();
  nlohmann::json images = nlohmann::json::object();
  const size_t begin = std::min(chosen.size(), size_t(req.offset));
  const size_t end = std::min(chosen.size(), begin + size_t(req.limit));
  for (size_t k = begin; k < end; ++k) {
    const nlohmann::json& it = items[chosen[k]];
    const std::string key = key_of(it);
    nlohmann::json row = {{"rank", it.value("rank", int64_t(chosen[k]) + 1)},
                          {"kind", it.value("kind", "")},
                          {"score", it.value("score", 0.0)},
                          {"image", key}};
    for (const char* f : {"label", "prediction", "iou"})
      if (it.contains(f)) row[f] = it[f];
    page.push_back(std::move(row));
    if (images.contains(key)) continue;
    nlohmann::json im = {{"split", it.value("split", "")},    {"path", it.value("image", "")},
                         {"width", it.value("width", 0)},     {"height", it.value("height", 0)},
                         {"labels", nlohmann::json::array()}, {"predictions", nlohmann::json::array()}};
    auto e = entry_of.find(key);
    if (e != entry_of.end()) {
      const data::ManifestEntry& me = *e->second;
      im["sha"] = me.image_sha;
      for (const data::Box& b : me.boxes)
        im["labels"].push_back({{"class_id", b.cls},
                                {"box",
                                 {(b.cx - b.w / 2) * me.width, (b.cy - b.h / 2) * me.height,
                                  (b.cx + b.w / 2) * me.width, (b.cy + b.h / 2) * me.height}}});
    }
    images[key] = std::move(im);
  }
  // Each shown image's predictions: every one an item of it holds, once.
  std::map<std::string, std::vector<std::string>> seen;
  for (const nlohmann::json& it : items) {
    const std::string key = key_of(it);
    if (!images.contains(key) || !it.contains("prediction") || !it["prediction"].is_object()) continue;
    const nlohmann::json& p = it["prediction"];
    const std::string id = p.contains("index") ? p["index"].dump() : BoxKey(p.value("box", nlohmann::json()));
    std::vector<std::string>& ids = seen[key];
    if (std::find(ids.begin(), ids.end(), id) != ids.end()) continue;
    ids.push_back(id);
    images[key]["predictions"].push_back({{"class_id", p.value("class", -1)},
                                          {"score", p.value("score", 0.0)},
                                          {"box", p.value("box", nlohmann::json::array())}});
  }
  return nlohmann::json{{"ok", true},
                        {"dataset", v.record.dataset},
                        {"version", v.record.seq},
                        {"audit", StoredAuditJson(a)},
                        {"audits", int64_t(audits.size())},
                        {"classes", v.manifest.names},
                        {"counts", doc.value("counts", nlohmann::json::object())},
                        {"kind", req.kind},
                        {"sort", req.sort},
                        {"total", int64_t(chosen.size())},
                        {"offset", req.offset},
                        {"limit", req.limit},
                        {"items", std::move(page)},
                        {"images", std::move(images)}};
}

}  // namespace kestrel::app
