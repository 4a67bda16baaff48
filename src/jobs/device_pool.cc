#include "jobs/device_pool.h"

#include <nlohmann/json.hpp>

#include "core/json.h"

namespace kestrel::jobs {
namespace {

bool ParseInt(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 15 || s.find_first_not_of("0123456789") != std::string::npos) return false;
  *out = std::stoll(s);
  return true;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t p = s.find(sep, start);
    parts.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return parts;
}

}  // namespace

Result<std::vector<Device>> ParseDevices(const std::string& spec) {
  std::vector<Device> out;
  int cpu_slots = 0;
  for (const auto& raw : Split(spec, ',')) {
    auto bad = [&](const std::string& why) {
      return Status::InvalidArgument("device '" + raw + "': " + why + " (cpu, cpu:N or gpu:IDX:MB)",
                                     {"command line", 0, "devices"});
    };
    auto f = Split(raw, ':');
    int64_t a = 0, b = 0;
    if (f[0] == "cpu" && f.size() <= 2) {
      int64_t n = 1;
      if (f.size() == 2 && (!ParseInt(f[1], &n) || n < 1 || n > 1024))
        return bad("slot count must be 1..1024");
      for (int64_t i = 0; i < n; ++i) out.push_back({"cpu", cpu_slots++, 0});
    } else if (f[0] == "gpu" && f.size() == 3) {
      if (!ParseInt(f[1], &a) || a > 1023) return bad("bad GPU index");
      if (!ParseInt(f[2], &b) || b < 1) return bad("memory must be a positive number of MB");
      for (const auto& d : out) {
        if (d.kind == "gpu" && d.index == a) return bad("GPU listed twice");
      }
      out.push_back({"gpu", static_cast<int>(a), b});
    } else {
      return bad("unknown device");
    }
  }
  return out;
}

std::string DevicesJson(const std::vector<Device>& devices) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& d : devices) {
    nlohmann::json e = {{"kind", d.kind}, {"index", d.index}};
    if (d.kind == "gpu") e["memory_mb"] = d.memory_mb;
    j.push_back(e);
  }
  return DumpJson(j);
}

DevicePool::DevicePool(std::vector<Device> devices)
    : devices_(std::move(devices)), used_mb_(devices_.size(), 0), busy_(devices_.size(), false) {}

std::vector<store::DeviceOffer> DevicePool::FreeOffers() const {
  std::vector<store::DeviceOffer> offers;
  for (size_t i = 0; i < devices_.size(); ++i) {
    const Device& d = devices_[i];
    if (d.kind == "cpu") {
      if (!busy_[i]) offers.push_back({"cpu", d.index, 0});
    } else {
      offers.push_back({"gpu", d.index, d.memory_mb - used_mb_[i]});
    }
  }
  return offers;
}

int DevicePool::Acquire(const store::DeviceOffer& where, int64_t memory_mb) {
  for (size_t i = 0; i < devices_.size(); ++i) {
    const Device& d = devices_[i];
    if (d.kind != where.kind || d.index != where.index) continue;
    if (d.kind == "cpu") {
      if (busy_[i]) return -1;
      busy_[i] = true;
    } else {
      if (memory_mb < 0 || used_mb_[i] + memory_mb > d.memory_mb) return -1;
      used_mb_[i] += memory_mb;
    }
    for (size_t t = 0; t < uses_.size(); ++t) {
      if (uses_[t].device < 0) {
        uses_[t] = {static_cast<int>(i), memory_mb};
        return static_cast<int>(t);
      }
    }
    uses_.push_back({static_cast<int>(i), memory_mb});
    return static_cast<int>(uses_.size() - 1);
  }
  return -1;
}

void DevicePool::Release(int token) {
  if (token < 0 || token >= static_cast<int>(uses_.size()) || uses_[token].device < 0) return;
  const size_t i = static_cast<size_t>(uses_[token].device);
  if (devices_[i].kind == "cpu") {
    busy_[i] = false;
  } else {
    used_mb_[i] -= uses_[token].memory_mb;
  }
  uses_[token] = {};
}

int64_t DevicePool::UsedMb(int gpu_index) const {
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (devices_[i].kind == "gpu" && devices_[i].index == gpu_index) return used_mb_[i];
  }
  return 0;
}

}  // namespace kestrel::jobs
