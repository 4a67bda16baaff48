// The precompiled header of the torch targets (CMake option KESTREL_TORCH_PCH,
// kestrel_torch_pch() in the top-level CMakeLists.txt): the LibTorch headers
// that the model and train sources and their tests include, parsed
// once per build instead of once per translation unit (~40% of a torch TU's
// compile time; docs/ARCHITECTURE.md "Build time"). Never include it by hand.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include <torch/optim/optimizer.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <string>
#include <vector>
