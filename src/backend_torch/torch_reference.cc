// The reference_forward slot (torch_backend.h): the weights' network as
// trained — model::Predictor with BatchNorm not fused — run on each input
// and decoded without NMS, what `kestrel export` verifies a written file
// against (app/export.h VerifyOnnxFile). model/predictor.h is torch-free: no
// torch precompiled header.
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend_torch/torch_backend.h"
#include "core/safetensors.h"
#include "model/predictor.h"

namespace kestrel::backend_torch {

Result<std::vector<app::FloatTensor>> TorchReferenceForward(const std::string& weights,
                                                            const std::vector<app::FloatTensor>& inputs) {
  std::vector<app::FloatTensor> refs;
  if (inputs.empty()) return refs;
  for (const app::FloatTensor& in : inputs) {
    if (in.shape.size() != 4 || in.shape[1] != 3)
      return Status::InvalidArgument("reference forward: an input is not [B, 3, H, W]");
  }
  // Load's imgsz and batch are the first input's; ForwardDecoded takes any
  // [B, 3, H, W] (a dynamic export's shapes differ between inputs).
  model::PredictorOptions popts;
  popts.imgsz = static_cast<int>(inputs.front().shape[2]);
  popts.batch = static_cast<int>(inputs.front().shape[0]);
  popts.fuse = false;
  KESTREL_ASSIGN_OR_RETURN(std::unique_ptr<model::Predictor> net, model::Predictor::Load(weights, popts));
  refs.reserve(inputs.size());
  for (const app::FloatTensor& in : inputs) {
    SafeTensor t{"F32", in.shape,
                 std::string(reinterpret_cast<const char*>(in.data.data()), in.data.size() * sizeof(float))};
    KESTREL_ASSIGN_OR_RETURN(SafeTensor ref, net->ForwardDecoded(t));
    app::FloatTensor r{ref.shape, std::vector<float>(ref.data.size() / sizeof(float))};
    std::memcpy(r.data.data(), ref.data.data(), ref.data.size());
    refs.push_back(std::move(r));
  }
  return refs;
}

}  // namespace kestrel::backend_torch
