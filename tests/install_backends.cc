// Linked into a test binary whose tests run a model in process (predict, val
// model=, compare, export): installs kestrel-torch's backends
// (app/backends.h) and its video I/O (app/video_io.h) before the first
// test, as kestrel-torch's main() does. The binary links
// kestrel_backend_torch, kestrel_backend_onnx and kestrel_backend_video.
#include <gtest/gtest.h>

#include "app/backends.h"
#include "app/job_kinds.h"
#include "app/video_io.h"
#include "backend_onnx/onnx_backend.h"
#include "backend_torch/torch_backend.h"
#include "backend_video/video_backend.h"

namespace kestrel {
namespace {

class TorchProgramBackends : public testing::Environment {
 public:
  void SetUp() override {
    app::Backends backends;
    backends.program = "kestrel-torch";
    backend_torch::RegisterTorchBackend(backends);
    backend_onnx::RegisterOnnxBackend(backends);
    const Status s = app::InstallBackends(std::move(backends), app::JobKinds());
    ASSERT_TRUE(s.IsOk()) << s.ToString();
    app::InstallVideoBackend(backend_video::OpenCvVideoBackend());
  }
};

// gtest owns the environment; registered before main() runs the tests.
testing::Environment* const kBackends = testing::AddGlobalTestEnvironment(new TorchProgramBackends);

}  // namespace
}  // namespace kestrel
