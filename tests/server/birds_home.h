// The server tests' shared first step: a fresh Kestrel home under the temp
// directory with its stores open and a small synthetic 2-class dataset
// (32-px images) imported as "birds".
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "app/datasets.h"
#include "data/synth.h"
#include "store/artifact_store.h"
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
  *blobs = std::make_unique<store::ArtifactStore>(*home);

  data::SynthOptions so;
  so.images = images;
  so.imgsz = 32;
  so.classes = 2;
  so.write_threads = 1;
  ASSERT_TRUE(data::WriteSynthDataset(so, (*dir / "synth").string()).IsOk());
  auto imported = app::Datasets(**meta, **blobs).Import((*dir / "synth").string(), "birds", {});
  ASSERT_TRUE(imported.IsOk()) << imported.GetStatus().ToString();
}

}  // namespace kestrel::server::testing
