// The server tests' shared first steps: a fresh Kestrel home under the temp
// directory with its stores open and a small synthetic 2-class dataset
// (32-px images) imported as "birds"; a model "birds" registered from tiny
// weights.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "app/datasets.h"
#include "app/models.h"
#include "core/env.h"
#include "core/safetensors.h"
#include "data/synth.h"
#include "store/artifact_store.h"
#include "store/local_artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::server::testing {

// `dir` is <temp>/<prefix><pid>_<running test's name> (emptied first),
// `home` its "home" folder. Check HasFatalFailure() after the call.
inline void OpenHomeWithBirds(const std::string& prefix, int images, std::filesystem::path* dir,
                              std::string* home, std::unique_ptr<store::MetadataStore>* meta,
                              std::unique_ptr<store::ArtifactStore>* blobs) {
  const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  *dir = std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(*dir);
  *home = (*dir / "home").string();
  std::filesystem::create_directories(*home);
  auto m = store::MetadataStore::Open(store::MetadataUrl(*home));
  ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
  *meta = std::move(m).Value();
  *blobs = std::make_unique<store::LocalArtifactStore>(*home);

  data::SynthOptions so;
  so.images = images;
  so.imgsz = 32;
  so.classes = 2;
  so.write_threads = 1;
  ASSERT_TRUE(data::WriteSynthDataset(so, (*dir / "synth").string()).IsOk());
  auto imported = app::Datasets(**meta, **blobs).Import((*dir / "synth").string(), "birds", {});
  ASSERT_TRUE(imported.IsOk()) << imported.GetStatus().ToString();
}

// A safetensors file of one F32 tensor "w" = [1]: weights the registry
// takes (it hashes them; no model reads them).
inline std::string TinyWeightsBytes() {
  SafeTensorFile f;
  const float v = 1;
  f.tensors["w"] = SafeTensor{"F32", {1}, std::string(reinterpret_cast<const char*>(&v), sizeof v)};
  return SerializeSafeTensors(f);
}

// Registers model "birds" (dataset "birds", config {"data":"birds",
// "epochs":1}) at `now_ms` from TinyWeightsBytes() written to
// `dir`/w.safetensors. Check HasFatalFailure() after the call.
inline void RegisterBirdsModel(store::MetadataStore& meta, store::ArtifactStore& blobs,
                               const std::filesystem::path& dir, int64_t now_ms,
                               store::ModelRecord* out = nullptr) {
  const std::string weights = (dir / "w.safetensors").string();
  std::ofstream(weights, std::ios::binary) << TinyWeightsBytes();
  app::RegisterRequest rr;
  rr.weights_path = weights;
  rr.name = "birds";
  rr.dataset = "birds";
  rr.config_json = R"({"data":"birds","epochs":1})";
  auto model = app::ModelRegistry(meta, blobs, Env::Default()).Register(rr, now_ms);
  ASSERT_TRUE(model.IsOk()) << model.GetStatus().ToString();
  if (out != nullptr) *out = std::move(model).Value();
}

}  // namespace kestrel::server::testing
