// `kestrel-deploy` (docs/deploy.md): the commands of the LibTorch-free
// deployment program, built from main.cc with KESTREL_DEPLOY. Torch-free
// header.
#pragma once

#include "cli/cli.h"

namespace kestrel::cli {

// Registers `predict` and `val` for exported ONNX files (deploy_cmd.cc).
void AddDeployCommands(CLI::App& app, Context& ctx, int* exit_code);

}  // namespace kestrel::cli
