// `kestrel dataset predict NAME@vN model=... format=...` (issue 34): a model
// run over a registered dataset version's images, written as
// pre-annotations for a labelling tool (app/preannotations.h). The images
// are the version's blobs, written into the run folder as
// images/<split>/<path> (the layout of `dataset export`), so every document
// names an image "<split>/<path>" and Label Studio's local-files URLs point
// at files that stay. Torch-free: the model runs in the backend the program
// registered (app/backends.h).
#pragma once

#include <string>
#include <vector>

#include "app/preannotations.h"
#include "app/predict.h"
#include "core/env.h"
#include "core/status.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::app {

struct DatasetPredictRequest {
  std::string spec;        // NAME, NAME@vN or NAME@<id prefix>
  std::string split;       // "" = every split; else train, val or test
  PredictRequest predict;  // model and inference keys; source is set here (ignored)
  // format is required; source_root is set here (the run's images/ folder).
  PreannotationOptions pre;
};

struct DatasetPredictResult {
  store::DatasetVersionRecord record;
  PredictResult predict;           // image sources under <run>/images/<split>/<path>
  std::vector<std::string> files;  // the pre-annotation documents (WritePreannotations)
};

// Loads the version, writes its images (of `split`) into a staging folder,
// predicts them with PredictWith(load), moves the images into the run folder
// as images/ and writes the documents. kInvalidArgument naming "format" (no
// or a bad format), "split" (unknown, or no image in it) or "stream"
// (stream=true keeps no image); the store's kNotFound for a missing version;
// Predict's errors. Nothing is left in `project` on a failure before the
// run folder exists.
Result<DatasetPredictResult> PredictDatasetVersion(Env& env, store::MetadataStore& meta,
                                                   store::ArtifactStore& blobs,
                                                   const DatasetPredictRequest& req,
                                                   const WeightsResolver& resolve, const DetectorLoader& load,
                                                   const PredictSink& sink = {});

// {"version": DatasetVersionJson, "split", "preannotations": {"format",
// "files"}} + PredictResultJson's fields.
nlohmann::json DatasetPredictJson(const DatasetPredictResult& r, const std::string& split,
                                  const std::string& format);

}  // namespace kestrel::app
