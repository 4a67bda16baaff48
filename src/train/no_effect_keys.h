// Keys of the reference framework's training configuration that mean
// nothing for what Kestrel trains (a segmentation, pose or classification
// setting) or that Kestrel does not do: accepted, so a copied args.yaml or
// command line runs, and each one set to something other than the
// reference's default gets a warning naming it and why (docs/training.md
// "Keys copied from the reference"). Torch-free.
#pragma once

#include <string>
#include <vector>

#include "core/options.h"

namespace kestrel::train {

struct NoEffectKeys {
  // The reference's defaults (Ultralytics 8.3 default.yaml), as text.
  std::string dropout = "0.0";               // classification head dropout
  std::string overlap_mask = "true";         // segmentation masks
  std::string mask_ratio = "4";              // segmentation masks
  std::string pose = "12.0";                 // pose loss gain
  std::string kobj = "1.0";                  // pose keypoint objectness gain
  std::string copy_paste = "0.0";            // needs segmentation polygons
  std::string copy_paste_mode = "flip";      // needs segmentation polygons
  std::string auto_augment = "randaugment";  // classification augmentation
  std::string erasing = "0.4";               // classification augmentation
  std::string crop_fraction = "1.0";         // classification crops
  std::string bgr = "0.0";                   // channel-swap augmentation (not in Kestrel)
  std::string profile = "false";             // ONNX/TensorRT speed profiling
  std::string verbose = "true";              // Kestrel's console is the same either way
  std::string save = "true";                 // Kestrel always writes checkpoints

  void Bind(OptionSet& s);
  // "dropout=0.1 has no effect: ..." for each key whose value differs from
  // the reference's default (as a number, a boolean or text: dropout=0 and
  // verbose=True are the defaults).
  std::vector<std::string> Warnings() const;
};

}  // namespace kestrel::train
