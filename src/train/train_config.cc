#include "train/train_config.h"

#include <cmath>

namespace kestrel::train {

void TrainConfig::Bind(OptionSet& s) {
  s.String("data", &data, "dataset in the registry: NAME, NAME@vN or NAME@<version id prefix>");
  s.String("model", &model, "model scale or yaml: n|s|m|l|x|t|yolov8n.yaml");
  s.Int("epochs", &epochs, "total training epochs", 1, 100000);
  s.String("device", &device, "cpu or a CUDA device index (0)");
  s.Int("seed", &seed, "random seed (weights init and data order/augmentation)");
  s.Bool("deterministic", &deterministic, "use deterministic torch algorithms");
  s.Int("patience", &patience, "epochs without fitness improvement before early stopping", 1, 1000000);
  s.Float("save_period_min", &save_period_min, "also checkpoint mid-epoch every N minutes (0 = off)", 0, 1e9);
  s.String("pretrained", &pretrained, "safetensors weights to start from (class count may differ)");
  s.String("resume", &resume, "checkpoint to continue exactly (runs/train/NAME/weights/last.ckpt)");
  s.Int("threads", &threads, "torch intra-op threads (0 = all cores)", 0, 4096);
  s.Int("freeze", &freeze, "freeze the first N model layers", 0, 23);
  s.String("project", &project, "parent folder of run directories");
  s.String("name", &name, "run name (project/name)");
  s.Bool("exist_ok", &exist_ok, "reuse project/name instead of creating name2, name3, ...");
  s.String("run_dir", &run_dir, "explicit run directory (overrides project/name)");
  s.Bool("val", &val, "validate every epoch");
  s.Bool("plots", &plots, "write evaluation plots and train_batch0.jpg");
  loader.Bind(s);
  augment.Bind(s);
  optimizer.Bind(s);
  s.Float("box", &box, "box (CIoU) loss gain", 0.0, 1e4);
  s.Float("cls", &cls, "classification (BCE) loss gain", 0.0, 1e4);
  s.Float("dfl", &dfl, "distribution focal loss gain", 0.0, 1e4);
  s.Float("label_smoothing", &label_smoothing, "BCE label smoothing epsilon, [0, 1)", 0.0, 1.0);
}

Status TrainConfig::Validate() const {
  if (data.empty() && resume.empty()) {
    return Status::InvalidArgument("data= is required (a registry dataset name)", {"", 0, "data"});
  }
  if (device != "cpu" && (device.empty() || device.find_first_not_of("0123456789") != std::string::npos)) {
    return Status::InvalidArgument("device must be 'cpu' or a CUDA index like 0, got '" + device + "'",
                                   {"", 0, "device"});
  }
  KESTREL_RETURN_IF_ERROR(loader.Validate());
  KESTREL_RETURN_IF_ERROR(augment.Validate());
  KESTREL_RETURN_IF_ERROR(optimizer.Validate());
  for (auto [name, v] : {std::pair<const char*, double>{"box", box}, {"cls", cls}, {"dfl", dfl}}) {
    if (!(v >= 0) || !std::isfinite(v)) return Status::InvalidArgument("must be a finite gain >= 0", {"", 0, name});
  }
  if (!(label_smoothing >= 0 && label_smoothing < 1)) {
    return Status::InvalidArgument("must be in [0, 1)", {"", 0, "label_smoothing"});
  }
  return {};
}

}  // namespace kestrel::train
