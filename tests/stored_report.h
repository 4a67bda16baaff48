// Test helper for the rule "never text back into data" (STYLE.md 16): a copy
// of a dataset version, registered under another name, whose stored report
// was edited after the import (messages replaced with nonsense or with other
// findings' messages, or the typed fields removed as in a report stored
// before they existed). A consumer of stored findings (app::Datasets::
// Findings, the findings route, show) that reads a finding's message would
// answer differently for the copy. Nothing in src/ knows about it: the
// copy is an ordinary version (same manifest and version id, another report
// blob), so no test hook is compiled into Kestrel.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "data/version.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::testing {

// Registers dataset `to` (one version) with `from`'s manifest and a report
// whose "findings" array `edit` changed.
inline Status AddVersionWithEditedFindings(store::MetadataStore& meta, store::ArtifactStore& blobs,
                                           const std::string& from, const std::string& to,
                                           const std::function<void(nlohmann::json& findings)>& edit) {
  KESTREL_ASSIGN_OR_RETURN(data::VersionView v, data::LoadVersion(meta, blobs, from));
  if (!v.report.is_object() || !v.report.contains("findings") || !v.report["findings"].is_array())
    return Status::FailedPrecondition(from + " has no stored findings");
  edit(v.report["findings"]);
  KESTREL_ASSIGN_OR_RETURN(std::string sha, blobs.Put(v.report.dump()));
  store::DatasetVersionRecord rec = v.record;
  rec.dataset = to;
  rec.report_sha = sha;
  return meta.AddDatasetVersion(rec, nullptr).GetStatus();
}

// Every message replaced with the same nonsense.
inline void ScrambleMessages(nlohmann::json& findings) {
  for (auto& f : findings) f["message"] = "zq xv (qq) and kw (zz), pHash distance 99: 'nope.jpg'";
}

// Every message replaced with the next finding's: plausible text that names
// other files, other splits and other distances.
inline void RotateMessages(nlohmann::json& findings) {
  if (findings.size() < 2) return;
  const nlohmann::json first = findings[0]["message"];
  for (size_t i = 0; i + 1 < findings.size(); ++i) findings[i]["message"] = findings[i + 1]["message"];
  findings[findings.size() - 1]["message"] = first;
}

// The typed fields removed: a report as stored before they existed.
inline void DropTypedFields(nlohmann::json& findings) {
  for (auto& f : findings) {
    f.erase("image");
    f.erase("other");
    f.erase("distance");
  }
}

}  // namespace kestrel::testing
