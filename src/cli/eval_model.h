// The model-running commands of the eval family (model_cmd.cc): `predict`
// and `compare`, whose use cases are app::Predict and app::CompareModels
// (src/app). Defined only with LibTorch (KESTREL_CLI_WITH_TORCH);
// torch-free header.
#pragma once

#include "cli/cli.h"

namespace kestrel::cli {

// Registers `predict` and `compare`.
void AddModelCommands(CLI::App& app, Context& ctx, int* exit_code);

}  // namespace kestrel::cli
