// The doctor's device check (issue 31, docs/jobs.md "Doctor"): a tiny
// forward and backward pass on one device, so a host whose LibTorch, CUDA
// driver or GPU cannot train is found before a job is given to it.
// Torch-free header (strings only): `kestrel-torch fingerprint --selftest`
// (cli/train_cmd.cc) calls it and prints the results as JSON.
#pragma once

#include <string>
#include <vector>

namespace kestrel::model {

struct DeviceSelfTest {
  std::string device;  // "cpu", "cuda:0"
  bool ok = false;
  double ms = 0;      // wall time of the pass (CUDA: synchronised), first use included
  std::string error;  // why it failed ("" when ok): LibTorch's message, cut to its first line (300 bytes)
};

// Runs a [2, 3, 32, 32] batch through two convolutions, a mean-square loss
// and its backward pass on `device` and checks that the loss and every
// gradient are finite. Never throws: LibTorch's errors become `error`.
DeviceSelfTest RunDeviceSelfTest(const std::string& device);

// The devices `spec` names: "auto" = cpu and every CUDA device LibTorch
// sees; else a comma-separated list of "cpu" and "cuda:N" (a worker's
// "gpu:N:MB" is "cuda:N"; "cpu:N" is "cpu"), each once. An unknown word is
// returned as is, so its self-test fails naming it.
std::vector<std::string> SelfTestDevices(const std::string& spec);

}  // namespace kestrel::model
