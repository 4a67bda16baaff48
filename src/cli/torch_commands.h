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

// In the order `kestrel --help` lists them.
inline constexpr std::array<TorchCommand, 5> kTorchCommands = {kTrainCommand, kExportCommand, kValCommand,
                                                               kPredictCommand, kCompareCommand};

}  // namespace kestrel::cli
