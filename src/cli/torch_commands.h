// The commands that run LibTorch (train, predict, compare, export, and val,
// whose model= does): their names and one-line help, shared by the
// commands themselves (kestrel-torch) and by the LibTorch-free `kestrel`
// front, which lists them in its help and hands any command line that
// starts with one to kestrel-torch (main.cc, docs/ARCHITECTURE.md "Two
// programs"). Torch-free header.
#pragma once

#include <array>

namespace kestrel::cli {

struct TorchCommand {
  const char* name;
  const char* help;
};

inline constexpr TorchCommand kTrainCommand{
    "train", "Train a YOLOv8 detector on a registry dataset (docs/training.md)"};
inline constexpr TorchCommand kPredictCommand{
    "predict", "Run a model on images: annotated images, YOLO txt, JSON, speed"};
inline constexpr TorchCommand kCompareCommand{
    "compare", "Two models on one dataset split: metric deltas, PR curves, confusion matrices, HTML report"};
inline constexpr TorchCommand kExportCommand{
    "export", "Write a model as ONNX, verified in OpenCV DNN and ONNX Runtime against LibTorch"};
inline constexpr TorchCommand kValCommand{
    "val", "Score a model or predictions made elsewhere on a dataset version (mAP, P, R, errors, plots)"};

// `kestrel dataset predict` (issue 34, model_cmd.cc): one of
// kTorchDatasetCommands below.
inline constexpr TorchCommand kDatasetPredictCommand{
    "predict", "Run a model over a version's images: pre-annotations for Label Studio, CVAT, YOLO or COCO"};

inline constexpr TorchCommand kFingerprintCommand{
    "fingerprint",
    "This host's environment fingerprint with LibTorch's facts, as kestrel worker records it (docs/jobs.md)"};

// Subcommands of the torch-free `dataset` group that run a model: listed in
// `kestrel dataset --help` and handed to kestrel-torch when the first two
// command words name one (main.cc).
inline constexpr TorchCommand kDatasetAuditCommand{
    "audit", "Rank the labels a model disagrees with: missing, spurious, wrong class, misplaced boxes"};
inline constexpr TorchCommand kDatasetSelectCommand{
    "select",
    "Pick the unlabelled images to label next (uncertainty, "
    "entropy, entropy_sum, margin, diversity, random) as tasks"};
inline constexpr std::array<TorchCommand, 3> kTorchDatasetCommands = {
    kDatasetAuditCommand, kDatasetPredictCommand, kDatasetSelectCommand};

// In the order `kestrel --help` lists them.
inline constexpr std::array<TorchCommand, 6> kTorchCommands = {
    kTrainCommand, kExportCommand, kValCommand, kPredictCommand, kCompareCommand, kFingerprintCommand};

}  // namespace kestrel::cli
