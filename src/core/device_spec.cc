#include "core/device_spec.h"

#include "core/parse.h"
#include "core/utf8.h"

namespace kestrel {

std::string DeviceSpec::Canonical() const {
  return kind == Kind::kCpu ? std::string("cpu") : "cuda:" + std::to_string(index);
}

Result<DeviceSpec> ParseDeviceSpec(std::string_view text, std::string_view key) {
  DeviceSpec spec;
  spec.text = std::string(text);
  const ErrorLocation where{"", 0, std::string(key)};
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(std::string(key) + "=" + EscapeInvalidUtf8(spec.text) + ": " + why, where);
  };
  const std::string expected =
      "expected cpu, cuda, cuda:N or a CUDA device index N in [0, " + std::to_string(kMaxDeviceIndex) + "]";
  if (text == "cpu") return spec;
  if (text.find(',') != std::string_view::npos) {
    return bad("one device per run (a list of devices is not supported); " + expected);
  }
  std::string_view number = text;
  if (text == "cuda") {
    number = "0";
  } else if (text.substr(0, 5) == "cuda:") {
    number = text.substr(5);
  }
  if (number.empty() || number.find_first_not_of("0123456789") != std::string_view::npos) {
    return bad(expected);
  }
  auto index = ParseInt64(number, where, 0, kMaxDeviceIndex, "a CUDA device index");
  if (!index.IsOk()) return bad(expected);
  spec.kind = DeviceSpec::Kind::kCuda;
  spec.index = static_cast<int>(*index);
  return spec;
}

}  // namespace kestrel
