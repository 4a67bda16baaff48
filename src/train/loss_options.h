// The settings of the YOLOv8 detection loss (loss.h) and of its task-aligned
// assigner (assigner.h), and the loss keys box, cls, dfl: torch-free, so
// TrainOptions (trainer.h) and TrainConfig (train_config.h) carry them
// without LibTorch. The loss itself, which takes these, is loss.h.
#pragma once

#include <string>
#include <vector>

#include "core/options.h"
#include "core/status.h"

namespace kestrel::train {

// The assigner's constants (AssignTaskAligned, assigner.h).
struct AssignerOptions {
  int top_k = 10;      // candidates kept per ground-truth box (>= 1)
  double alpha = 0.5;  // align metric = score^alpha * IoU^beta (>= 0)
  double beta = 6.0;   // (>= 0)
  double eps = 1e-9;   // (> 0)
};

struct LossOptions {
  int num_classes = 80;                       // nc (> 0)
  int reg_max = 16;                           // DFL bins per side (> 1)
  std::vector<double> strides = {8, 16, 32};  // one per head level, input pixels
  double box_gain = 7.5;                      // key "box"
  double cls_gain = 0.5;                      // key "cls"
  double dfl_gain = 1.5;                      // key "dfl"
  std::vector<double> class_weights;          // empty = none, else nc weights >= 0
                                              // multiplying each class's BCE term
  AssignerOptions assigner;                   // top_k 10, alpha 0.5, beta 6, eps 1e-9

  // Binds box, cls, dfl (the Ultralytics keys; the ranges are
  // BindLossKeys', shared with TrainConfig).
  void Bind(OptionSet& set);
  // The bound ranges plus nc, reg_max, strides, class_weights, assigner.
  // kInvalidArgument naming the field.
  Status Validate() const;
};

// Binds the loss keys box, cls and dfl with their ranges: TrainConfig's
// fields and LossOptions' bind through this one function, so the two cannot
// disagree.
void BindLossKeys(OptionSet& s, double* box, double* cls, double* dfl);
// The deprecated key label_smoothing ([0, 1), accepted and stored, no
// effect: docs/training.md "Loss"); TrainConfig binds it, the loss does not.
void BindLabelSmoothingKey(OptionSet& s, double* label_smoothing);
// The warning a run with label_smoothing=`value` carries ("" for 0).
std::string LabelSmoothingWarning(double value);

}  // namespace kestrel::train
