// The keys that choose which labels and images a run sees, with the
// reference framework's meaning (Ultralytics 8.3; docs/training.md "Keys
// copied from the reference"): classes= keeps only the labels of those
// classes (the images stay, as background where nothing is left),
// single_cls makes every label class 0 of one class named "item", and
// fraction trains on the first share of the train split. Torch-free: the
// trainer applies it to the dataset version's manifest, `kestrel val` to
// the split it scores.
#pragma once

#include <string>
#include <vector>

#include "core/options.h"
#include "core/status.h"
#include "data/manifest.h"

namespace kestrel::train {

struct DataSubset {
  std::string classes;      // "" = every class; "0,2" or "[0, 2]": the class indices whose labels stay
  bool single_cls = false;  // every label becomes class 0, the one class "item"
  double fraction = 1.0;    // train split only: its first round(fraction * n) images, in manifest order

  // classes and single_cls; with `train`, fraction too (val has no fraction,
  // as the reference's validator).
  void Bind(OptionSet& s, bool train = true);
  // The form of classes= (non-negative integers) and the bound ranges;
  // kInvalidArgument naming the key.
  Status Validate() const;
  // classes= as indices, sorted and deduplicated (empty: every class).
  Result<std::vector<int>> ClassList() const;
  // Whether any key differs from its default.
  bool Active() const { return !classes.empty() || single_cls || fraction < 1.0; }

  // `m` with the keys applied: labels of other classes dropped (classes=,
  // every split), then single_cls, then fraction (of kTrain entries; the
  // other splits kept whole). A class index that `m` does not have, or a
  // fraction that keeps no train image, is kInvalidArgument naming the key.
  // *summary (optional) gets one line saying what changed ("" when nothing).
  Result<data::Manifest> Apply(const data::Manifest& m, std::string* summary = nullptr) const;
};

// "0,2", "[0, 2]", "3": the integers of a list key (classes=, freeze=),
// each in [0, max]; kInvalidArgument naming `key`.
Result<std::vector<int>> ParseIndexList(const std::string& text, const std::string& key, int max);

}  // namespace kestrel::train
