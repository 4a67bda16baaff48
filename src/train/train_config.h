// TrainConfig: every key of `kestrel train`, without LibTorch: names,
// defaults, ranges and checks. `kestrel submit` binds and validates it to
// resolve a job's effective config in a build without the trainer (the
// worker host may be the only one with LibTorch); the trainer's
// TrainOptions (trainer.h) derives from it, so the two cannot drift.
#pragma once

#include <cstdint>
#include <string>

#include "core/device_spec.h"
#include "core/options.h"
#include "core/status.h"
#include "data/loader.h"
#include "train/data_subset.h"
#include "train/loss_options.h"
#include "train/no_effect_keys.h"
#include "train/schedule.h"

namespace kestrel::train {

// imgsz range of every command that runs a model (train, val, predict,
// compare): a multiple of the model stride 32 in [32, 4096].
inline constexpr int kMinImgsz = 32;
inline constexpr int kMaxImgsz = 4096;

// The key groups shared by several commands, each bound by one function so
// a key's type, range and default text are written once; each command keeps
// its own fields and defaults (set before binding; the help prints them).
//
// Inference: conf, iou, imgsz, max_det and (when `batch` is non-null) batch,
// for every command that runs a model on images (val model=, predict,
// compare). The ranges agree with eval::NmsOptions::Validate; imgsz 0 (the
// commands' default) is "not given": the weights' training size (app/imgsz.h).
void BindInferenceKeys(OptionSet& s, double* conf, double* iou, int* imgsz, int* max_det, int* batch);
// Run folders: project, name, exist_ok (train, val, predict, compare).
void BindRunFolderKeys(OptionSet& s, std::string* project, std::string* name, bool* exist_ok);

// The loss keys (BindLossKeys, BindLabelSmoothingKey, LabelSmoothingWarning)
// are loss_options.h's, shared with LossOptions.
// batch=-1: the trainer picks the batch size (train/autobatch.h): on CUDA the
// largest that fits ~60% of the device's memory, on the CPU kAutoBatchCpu.
inline constexpr int kAutoBatch = -1;
inline constexpr int kAutoBatchCpu = 16;

// The `format` metadata of a training checkpoint (train/checkpoint.cc).
inline constexpr const char* kCheckpointFormat = "kestrel-checkpoint";

struct TrainConfig {
  std::string data;            // registry spec NAME[@vN|@idprefix]
  std::string model = "n";     // n|s|m|l|x|t|yolov8n.yaml|yolo11n|yolov5su ...
  int epochs = 100;            // total epochs
  double time = 0;             // hours; > 0: the run ends when they are spent, epochs adapt (0 = off)
  std::string device = "cpu";  // cpu | cuda | cuda:N | N (core/device_spec.h)
  bool amp = true;             // CUDA: autocast (bf16) forward; CPU: float32 (logged)
  int64_t seed = 0;            // torch init + loader randomness
  bool deterministic = true;   // torch deterministic algorithms
  int patience = 100;          // epochs without fitness improvement before stopping (0 = off)
  double save_period_min = 0;  // also checkpoint mid-epoch every N minutes (0 = off)
  int save_period = 0;         // also keep weights/epoch<N>.ckpt every N epochs (0 or -1 = off)
  int keep_ckpts = 3;          // epoch checkpoints a succeeded job keeps (newest; docs/disk.md)
  std::string pretrained;      // weights to start from (fine-tune load); true|false (PretrainedWeights)
  std::string resume;          // checkpoint (weights/last.ckpt) to continue exactly; true: ResolveResume
  int threads = 0;             // torch intra-op threads, 0 = this process's CPU budget
  std::string freeze = "0";    // N: the first N layers (model.0 .. model.N-1); [0,1,2]: those (FrozenLayers)
  // The reference's layout: runs/detect/train, train2, ... (ResolveRunDir).
  std::string project = "runs/detect";  // run dir = project/name unless run_dir is set
  std::string name = "train";
  bool exist_ok = false;  // reuse project/name instead of train2, train3, ...
  std::string run_dir;    // explicit run directory (overrides project/name)
  bool val = true;        // validate every epoch
  bool plots = true;      // eval plots + train_batch0.jpg
  bool save_pt = true;  // also write weights/best.pt, last.pt: the reference's checkpoint (model/pt_writer.h)
  int val_samples = 4;  // first N val images whose predictions each epoch keeps (train/samples.h)
  // imgsz, batch, workers (-1: the CPU budget's share, docs/speed.md), prefetch, max_bad_fraction, rect
  data::LoaderOptions loader = [] {
    data::LoaderOptions l;
    l.workers = -1;
    return l;
  }();
  data::AugmentOptions augment;  // hsv_*, degrees, ..., mosaic, mixup, close_mosaic
  OptimizerOptions optimizer;    // optimizer, lr0, lrf, momentum, ..., cos_lr
  // The loss keys (LossOptions' gains; TrainOptions::EffectiveLoss).
  double box = 7.5, cls = 0.5, dfl = 1.5;
  // Deprecated, no effect (LabelSmoothingWarning): kept so Ultralytics
  // configs that set it still load; stored with the effective config.
  double label_smoothing = 0.0;
  DataSubset subset;       // classes, single_cls, fraction (data_subset.h)
  NoEffectKeys no_effect;  // dropout, overlap_mask, ...: accepted with a warning (no_effect_keys.h)

  // Every key with its type, range and default: the only place they are
  // written (`kestrel help keys` and docs/training.md's table print them).
  void Bind(OptionSet& s);
  // Every check that needs no dataset, model or file: the bound ranges
  // (CheckBoundValues), and the rules a range cannot say: data= or resume=
  // given, the model spec name (n|s|m|l|x|t|yolov8n.yaml...), the device
  // (ParseDeviceSpec: its form only; whether CUDA is there is
  // model::CheckDeviceAvailable's question), batch -1 or >= 1, imgsz a
  // multiple of the stride, and that every text key is valid UTF-8 (it is
  // stored as JSON). kInvalidArgument naming the key.
  Status Validate() const;
  // The files the run will read: pretrained= must be a readable safetensors
  // file and resume= a readable Kestrel checkpoint (headers only are read).
  // kInvalidArgument naming the key ("pretrained=/etc/passwd: not a
  // safetensors weights file (...)"). `kestrel train` and `kestrel submit`
  // both call it, so both reject a bad file with the same text.
  Status ValidateFiles() const;

  // The layer indices freeze= names: N is 0..N-1, a list is those layers.
  Result<std::vector<int>> FrozenLayers() const;
  // pretrained= as the reference takes it: "true" (any case) or "" is the
  // default (model=*.pt loads its weights; a scale or yaml starts from
  // scratch), "false" trains model=*.pt's architecture from scratch, else a
  // weights file. The weights file to load, "" for none; `model_weights`
  // is model= when it is a weights file, else "".
  std::string PretrainedWeights(const std::string& model_weights) const;
  // The warnings of keys that have no effect (no_effect, label_smoothing).
  std::vector<std::string> Warnings() const;
};

// True for "true"/"false" in any case (pretrained=, resume= as booleans).
bool IsBoolText(const std::string& text, bool* value = nullptr);

// resume=true (or a bare `resume`): the newest weights/last.ckpt under
// `project` by modification time, at any depth (runs/detect/train2/...,
// the older runs/train/exp/...); kNotFound naming resume= and the folder
// when there is none. resume=false is "" (start a new run).
Result<std::string> ResolveResume(const std::string& resume, const std::string& project);

}  // namespace kestrel::train
