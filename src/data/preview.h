// A picture of what the trainer sees: a grid of augmented training images
// with their boxes and class names drawn, so a user can check that labels
// survive augmentation (`kestrel dataset preview NAME aug=true`).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "data/loader.h"
#include "data/manifest.h"

namespace kestrel::data {

// Builds a Loader over the train split of `manifest` (augment forced on,
// shuffle on, batch = `images`, drop_last off), takes batch 0 of epoch 0 —
// exactly the pixels and targets the trainer would get for that seed — and
// writes a PNG grid (ceil(sqrt(images)) columns, each cell imgsz x imgsz)
// with every target box outlined and labelled "names[cls]" (or the class id
// when out of range). `images` in [1, 64]. The PNG is written atomically
// through Env::Default(). Errors: the loader's, kFailedPrecondition for an
// empty train split, kIoError when writing fails.
Status WriteAugmentedPreview(const Manifest& manifest, const ImageSource& source,
                             const AugmentOptions& augment, const LoaderOptions& loader,
                             const std::vector<std::string>& names, const std::string& out_png,
                             int images = 16);

}  // namespace kestrel::data
