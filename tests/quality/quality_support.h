// Shared by the slow training-quality gates (quality_test.cc,
// large_objects_test.cc): environment knobs and the "generate a synthetic
// set, import it into a fresh home" step both gates start with.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "data/synth.h"
#include "data/version.h"
#include "store/artifact_store.h"
#include "store/local_artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::train::quality {

inline std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

// Writes the synthetic set `so` to `root`/synth and imports it as `name`
// (resized on import to `imgsz`) into the store at `root`/home. Use with
// ASSERT_NO_FATAL_FAILURE.
inline void SynthAndImport(const data::SynthOptions& so, const std::string& root, const std::string& name,
                           int imgsz) {
  ASSERT_TRUE(data::WriteSynthDataset(so, root + "/synth").IsOk());
  auto meta = store::MetadataStore::Open(store::MetadataUrl(root + "/home"));
  ASSERT_TRUE(meta.IsOk()) << meta.GetStatus().ToString();
  store::LocalArtifactStore blobs(root + "/home");
  data::ImportOptions io;
  io.imgsz = imgsz;
  // Stored as `dataset import` would (clean data: no import policy involved).
  auto analyzed = data::AnalyzeDataset(root + "/synth", io);
  ASSERT_TRUE(analyzed.IsOk()) << analyzed.GetStatus().ToString();
  auto imp = data::CommitVersion(**meta, blobs, name, root + "/synth", *analyzed, io);
  ASSERT_TRUE(imp.IsOk()) << imp.GetStatus().ToString();
}

}  // namespace kestrel::train::quality
