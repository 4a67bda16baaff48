// `kestrel export` and an export job's attempt as one use case: model=
// resolved through the registry, the file exported and verified
// (app/export.h ExportModel, with int8 calibration and the mAP check fed
// from the stores), and the export recorded on the registered model it came
// from. Torch-free and OpenCV-free header.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "app/export.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"
#include "store/model_types.h"

namespace kestrel::app {

struct RegisteredExport {  // NOLINT(bugprone-exception-escape): an aggregate; the check misreads its
                           // implicit moves (strings, optionals, a json: noexcept in practice)
  ExportResult result;
  // The registered model model= named (NAME@vN, NAME@TAG, id prefix); unset
  // for a plain weights file, whose export is recorded nowhere.
  std::optional<store::ModelRecord> registered;
  // The export's record on `registered` (set exactly when `registered` is);
  // record_created false: this file's earlier record, updated.
  std::optional<store::ModelExportRecord> record;
  bool record_created = false;
  // Views of the above: ExportResultJson plus "registry": {"model",
  // "model_id", "export_id", "created"}, or null.
  nlohmann::json doc;
  std::string text;  // ExportResultText, the mAP check's note and the record's line
};

// Resolves request.model (ModelRegistry::ResolveWeights; `on_resolved` is
// told which registered model it named, before anything runs). A registered
// model's dataset version is data='s default for the mAP check (a square or
// dynamic imgsz only), the class names' fallback and int8's calibration
// set, and the file's provenance names it. Then ExportModel, and the export
// recorded on the model (ModelRegistry::RecordExport, idempotent per file,
// so a retried export job updates its earlier record). An error after the
// file was written says so and keeps its code.
Result<RegisteredExport> ExportAndRecord(
    Env& env, store::MetadataStore& meta, store::ArtifactStore& blobs, ExportRequest request,
    const std::function<void(const store::ModelRecord& model, const std::string& weights)>& on_resolved = {});

// "model NAME@vN (<id, 12 hex>): WEIGHTS", the line `kestrel export` and an
// export job print when model= named a registered model (on_resolved).
std::string ResolvedModelText(const store::ModelRecord& model, const std::string& weights);

// {"model": "NAME@vN", "model_id", "export_id", "created"} of e.record, or
// null when the export is recorded nowhere (RegisteredExport::doc's "registry").
nlohmann::json ExportRegistryJson(const RegisteredExport& e);

}  // namespace kestrel::app
