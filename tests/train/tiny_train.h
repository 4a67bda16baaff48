// The end-to-end trainer tests' shared set-up (trainer_test.cc,
// trainer_options_test.cc, trainer_start_test.cc, trainer_plots_test.cc): a
// tiny synthetic dataset stored in a Kestrel home as `dataset import` stores
// clean data, and the options of a tiny deterministic run on it.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "data/synth.h"
#include "data/version.h"
#include "store/artifact_store.h"
#include "store/local_artifact_store.h"
#include "store/metadata_store.h"
#include "train/trainer.h"

namespace kestrel::train::testing {

// Writes 11 synthetic images (8 train + 3 val; `classes` classes, 64 px,
// seed 7, no backgrounds) to `folder` and stores them in `home` as dataset
// `name` (imgsz 64). Check HasFatalFailure() after the call.
inline void ImportTinyDataset(const std::string& home, const std::string& folder, const std::string& name,
                              int classes = 2) {
  data::SynthOptions so;
  so.images = 11;
  so.classes = classes;
  so.imgsz = 64;
  so.seed = 7;
  so.val_fraction = 0.25;
  so.background_fraction = 0;
  so.write_threads = 2;
  ASSERT_TRUE(data::WriteSynthDataset(so, folder).IsOk());
  auto meta = store::MetadataStore::Open(store::MetadataUrl(home));
  ASSERT_TRUE(meta.IsOk()) << meta.GetStatus().ToString();
  store::LocalArtifactStore blobs(home);
  data::ImportOptions io;
  io.imgsz = 64;
  // Clean data: no import policy involved.
  auto analyzed = data::AnalyzeDataset(folder, io);
  ASSERT_TRUE(analyzed.IsOk()) << analyzed.GetStatus().ToString();
  auto imp = data::CommitVersion(**meta, blobs, name, folder, *analyzed, io);
  ASSERT_TRUE(imp.IsOk()) << imp.GetStatus().ToString();
}

// `epochs` epochs of model "t" on dataset `data` of `home`: imgsz 64,
// batches of 2 (4 a train epoch), one loader worker, threads=1
// (deterministic), AdamW at lr0 0.01 without warm-up, nbs 4 (an optimizer
// step every 2 batches, so gradients accumulate across a checkpoint), no
// mosaic, no plots. The caller says where the run goes (run_dir, or project and name).
inline TrainOptions TinyRunOptions(const std::string& home, const std::string& data, int epochs) {
  TrainOptions o;
  o.data = data;
  o.model = "t";
  o.epochs = epochs;
  o.threads = 1;
  o.home = home;
  o.loader.imgsz = 64;
  o.loader.batch = 2;
  o.loader.workers = 1;
  o.optimizer.optimizer = "AdamW";
  o.optimizer.lr0 = 0.01;
  o.optimizer.warmup_epochs = 0;
  o.optimizer.nbs = 4;
  // These runs are shorter than close_mosaic (10), which, as in the
  // reference, keeps mosaic on in every epoch (data::MosaicOpenAt); the
  // suites were written for letterboxed samples (a mosaic of four 64-pixel
  // images is mostly boxes too small to learn in a few epochs), so say so.
  o.augment.mosaic = 0;
  o.plots = false;
  return o;
}

}  // namespace kestrel::train::testing
