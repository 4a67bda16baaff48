// The Label Studio ML backend's use cases (issue 34; docs/server.md "Label
// Studio ML backend"): a registered model's verified ONNX export loaded once
// through the ONNX backend (app/backends.h LoadDetector: the program must
// have registered it), the image a task names found and read, and the
// predictions in Label Studio's format — the same results
// LabelStudioTasksJson (app/preannotations.h) writes for `predict
// format=label-studio`. `kestrel serve --ls-model` puts them on HTTP
// (server/api_ls.h). Torch-free and OpenCV-free header.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/detector.h"
#include "core/env.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::app {

// Where a task's data.image is read from.
struct LsImageOptions {
  // Label Studio's LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT as this host sees
  // it: "/data/local-files/?d=REL" reads ROOT/REL, never a file whose
  // canonical path (symlinks resolved) leaves ROOT. "" refuses local files.
  std::string local_files_root;
  // The Host (name[:port]) the request came in on: an absolute URL to this
  // server's dataset image route must name it (a relative one always may).
  std::string own_host;
};

// A task image, found: a dataset image by SHA-256 or a local file.
struct LsImageRef {
  enum class Kind { kDatasetImage, kLocalFile };
  Kind kind = Kind::kLocalFile;
  std::string dataset;  // kDatasetImage: the dataset name (its images route's {name})
  std::string sha;      // kDatasetImage: the image's SHA-256
  std::string path;     // kLocalFile: the canonical path inside local_files_root
};

// Where data.image `url` points (kInvalidArgument naming `field`, e.g.
// "tasks[0].data.image", otherwise):
// - "[http(s)://OWN_HOST]/api/datasets/NAME/images/SHA" (this server's
//   dataset image route; a query is ignored);
// - "[http(s)://ANY_HOST]/data/local-files/?d=REL" (REL percent-decoded,
//   relative, no NUL, no ".." segment, and inside local_files_root after
//   symlinks are resolved; kNotFound when the file is missing);
// - anything else, remote http(s) URLs included, is refused: the server
//   fetches nothing from the network.
Result<LsImageRef> ResolveLsImage(const std::string& url, const LsImageOptions& options,
                                  const std::string& field);

// One task's image, read: its bytes, data.image as given (the predictions'
// source) and the request field it came from ("tasks[0].data.image").
struct LsTaskImage {
  std::string bytes;
  std::string source;
  std::string field;
};

// A registered model, ready to predict for Label Studio. Thread-safety:
// Predict may be called from any thread (one network, one call at a time).
class LsModel {
 public:
  // Resolves `ref` (NAME@TAG, NAME@vN, NAME: app/models.h) and loads its
  // newest verified ONNX export whose file is still there with the recorded
  // SHA-256, in OpenCV DNN (LoadDetector, runtime "opencv"). kFailedPrecondition naming "ls-model"
  // when the model has no such export (`kestrel export model=REF` makes one)
  // or the program lacks the ONNX backend; the registry's errors otherwise.
  // The options are `kestrel predict`'s defaults (conf 0.25, iou 0.7,
  // max_det 300, batch 1).
  static Result<std::unique_ptr<LsModel>> Load(store::MetadataStore& meta, store::ArtifactStore& blobs,
                                               Env& env, const std::string& ref);
  // A loaded detector as is (tests): `model_ref` is the model_version.
  LsModel(std::string model_ref, std::unique_ptr<Detector> detector);

  // "NAME@vN" of the registered model: each prediction's model_version.
  const std::string& ModelVersion() const { return model_version_; }
  const std::string& Ref() const { return ref_; }
  const std::vector<std::string>& Names() const { return names_; }
  const std::string& Arch() const { return arch_; }
  const std::string& OnnxPath() const { return onnx_path_; }

  // Decodes each image (EXIF-oriented RGB; kInvalidArgument naming its
  // field when the bytes are no image), predicts it and returns the
  // response of POST /ls/predict: {"results": [PREDICTION...],
  // "model_version"}, one PREDICTION per image in order: the one prediction
  // LabelStudioTasksJson (app/preannotations.h) gives that image's task,
  // {"model_version", "score", "result": [rectanglelabels in percent of the
  // original image, ids "<task>-<box>" unique in the response, from_name and
  // to_name as given]}.
  Result<nlohmann::json> PredictTasks(const std::vector<LsTaskImage>& images, const std::string& from_name,
                                      const std::string& to_name) EXCLUDES(mu_);

 private:
  std::string ref_, model_version_, arch_, onnx_path_;
  std::vector<std::string> names_;
  Mutex mu_;
  std::unique_ptr<Detector> detector_ GUARDED_BY(mu_);
};

}  // namespace kestrel::app
