#include "app/dataset_predict.h"

#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "app/datasets.h"
#include "core/staged_dir.h"
#include "data/version.h"
#include "data/version_files.h"

namespace kestrel::app {
namespace {

ErrorLocation Field(const std::string& field) { return {"command line", 0, field}; }

}  // namespace

Result<DatasetPredictResult> PredictDatasetVersion(Env& env, store::MetadataStore& meta,
                                                   store::ArtifactStore& blobs,
                                                   const DatasetPredictRequest& req,
                                                   const WeightsResolver& resolve, const DetectorLoader& load,
                                                   const PredictSink& sink) {
  if (req.pre.format.empty())
    return Status::InvalidArgument(
        "format=label-studio|cvat|yolo|coco is required: the documents are the output", Field("format"));
  KESTREL_RETURN_IF_ERROR(ValidatePreannotationOptions(req.pre));
  if (req.predict.stream)
    return Status::InvalidArgument(
        "dataset predict keeps every image for the documents: not with stream=true", Field("stream"));
  std::optional<data::Split> only;
  if (!req.split.empty()) {
    Result<data::Split> s = data::ParseSplit(req.split);
    if (!s.IsOk() || *s == data::Split::kUnassigned)
      return Status::InvalidArgument("split must be train, val or test, got '" + req.split + "'",
                                     Field("split"));
    only = *s;
  }
  KESTREL_ASSIGN_OR_RETURN(data::VersionView v, data::LoadVersion(meta, blobs, req.spec, env));
  std::vector<const data::ManifestEntry*> entries;
  for (const data::ManifestEntry& e : v.manifest.entries)
    if (!only || e.split == *only) entries.push_back(&e);
  if (entries.empty())
    return Status::InvalidArgument(
        req.spec + " has no image" + (only ? " in split " + req.split : std::string()),
        Field(only ? "split" : "dataset"));

  // The images as files, where predict lists them: <staging>/<split>/<path>.
  KESTREL_ASSIGN_OR_RETURN(StagedDir images,
                           StagedDir::Create(env, req.predict.project + "/.dataset-predict-images"));
  std::set<std::string> made;
  for (const data::ManifestEntry* e : entries) {
    const std::string path = images.Path() + "/" + data::SplitName(e->split) + "/" + e->path;
    const std::string parent = std::filesystem::path(path).parent_path().string();
    if (made.insert(parent).second) KESTREL_RETURN_IF_ERROR(env.CreateDirs(parent));
    KESTREL_ASSIGN_OR_RETURN(std::string bytes,
                             data::ReadEntryImage(*e, data::VersionName(v.record), blobs, env));
    KESTREL_RETURN_IF_ERROR(env.WriteFileDeferred(path, bytes));
  }
  PredictRequest p = req.predict;
  p.source = images.Path();
  KESTREL_ASSIGN_OR_RETURN(PredictResult run, PredictWith(env, p, resolve, load, sink));

  // The images move into the run folder beside what predict wrote, so the
  // documents' paths (and Label Studio's local-files URLs) stay valid.
  const std::string kept = run.dir + "/images";
  KESTREL_RETURN_IF_ERROR(env.Rename(images.Path(), kept));
  KESTREL_RETURN_IF_ERROR(env.SyncDir(run.dir));
  const std::string staged_root = std::filesystem::path(images.Path()).generic_string();
  for (PredictedImage& im : run.images) {
    const std::string src = std::filesystem::path(im.source).generic_string();
    if (src.compare(0, staged_root.size(), staged_root) == 0)
      im.source = kept + src.substr(staged_root.size());
  }
  for (PredictSkip& s : run.skipped) {
    if (s.source.compare(0, staged_root.size(), staged_root) == 0)
      s.source = kept + s.source.substr(staged_root.size());
  }
  PreannotationOptions pre = req.pre;
  pre.source_root = kept;
  if (pre.model_version.empty()) pre.model_version = req.predict.model;
  DatasetPredictResult out;
  out.record = v.record;
  KESTREL_ASSIGN_OR_RETURN(out.files, WritePreannotations(env, run, pre));
  out.predict = std::move(run);
  return out;
}

nlohmann::json DatasetPredictJson(const DatasetPredictResult& r, const std::string& split,
                                  const std::string& format) {
  nlohmann::json j = PredictResultJson(r.predict);
  j["version"] = DatasetVersionJson(r.record);
  j["split"] = split;
  j["preannotations"] = {{"format", format}, {"files", r.files}};
  return j;
}

}  // namespace kestrel::app
