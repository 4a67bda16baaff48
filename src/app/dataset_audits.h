// Stored label audits (issue 34): every `kestrel dataset audit` keeps its
// audit.json document (AuditReportJson with every item) as a blob of the
// artifact store and lists it on the audited version, so `kestrel serve`'s
// audit page finds it wherever the run folder is. The list is the store
// setting "dataset.audits.<dataset>@<version id>": a JSON array, oldest
// first, of at most kMaxAuditsListed entries {sha, created_ms, model,
// split, images, items, counts}; an audit's number is its 1-based place in
// the list. No schema change: settings are shared by every process on
// either backend, and the append is a compare-and-set. docs/label-audit.md.
// Torch-free.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::app {

inline constexpr size_t kMaxAuditsListed = 50;  // older entries leave the list (their blobs stay)

struct StoredAudit {
  int64_t number = 0;  // 1-based place in the version's list
  std::string sha;     // the audit.json blob
  int64_t created_ms = 0;
  std::string model;  // the weights audited with
  std::string split;  // train, val, test or all
  int64_t images = 0, items = 0;
  nlohmann::json counts = nlohmann::json::object();  // items per kind
};

// The setting that lists `version`'s audits ("dataset.audits.NAME@ID");
// `kestrel gc` keeps the blobs it names.
std::string AuditListSetting(const store::DatasetVersionRecord& version);

// Stores `audit_doc` (AuditReportJson(report, 0)) as a blob and appends it
// to `version`'s list. `split` is the audit's split key.
Result<StoredAudit> RecordAudit(store::MetadataStore& meta, store::ArtifactStore& blobs,
                                const store::DatasetVersionRecord& version, const nlohmann::json& audit_doc,
                                const std::string& split, int64_t now_ms);
// The stored audits of `spec` (NAME, NAME@vN, ...), oldest first.
Result<std::vector<StoredAudit>> ListAudits(store::MetadataStore& meta, const std::string& spec);

struct AuditPageRequest {
  std::string spec;    // the dataset version
  int64_t number = 0;  // which audit (StoredAudit::number); 0 = the newest
  // "errors" (every kind but ok), "all", or one kind: missing, spurious,
  // wrong_class, localisation, ok.
  std::string kind = "errors";
  // "score" (highest first: the review order), "-score" (lowest first),
  // "image" (by split/path, then score), "kind" (by kind, then score).
  std::string sort = "score";
  int64_t offset = 0;
  int64_t limit = 50;  // 1..500
};

// One page of an audit's items, filtered and sorted, with every image the
// page shows: {ok, dataset, version, audit: StoredAudit JSON, classes,
// counts, kind, sort, total (after the filter), offset, limit, items:
// [{rank, kind, score, image: KEY, label?, prediction?, iou?}], images:
// {KEY: {sha, split, path, width, height, labels: [{class_id, box}],
// predictions: [{class_id, score, box}]}}}; KEY is "<split>/<path>", the
// labels are the version's (pixels, xyxy) and the predictions every one the
// audit's items of that image hold. kInvalidArgument naming kind, sort,
// offset, limit or number; kNotFound for a version without audits.
Result<nlohmann::json> AuditPage(store::MetadataStore& meta, store::ArtifactStore& blobs,
                                 const AuditPageRequest& req);

nlohmann::json StoredAuditJson(const StoredAudit& a);

}  // namespace kestrel::app
