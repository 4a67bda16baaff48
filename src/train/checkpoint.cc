#include "train/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/serialize/archive.h>

#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/hash.h"
#include "core/json.h"
#include "model/model_yaml.h"
#include "model/weights.h"

namespace kestrel::train {
namespace {

constexpr const char* kFormatName = "kestrel-checkpoint";

std::string ChecksumOf(const SafeTensorFile& f, const std::string& state) {
  std::string buf = state;
  buf.push_back('\0');
  // A custom graph is part of what resumes (files without one hash as before).
  if (auto g = f.metadata.find("graph"); g != f.metadata.end()) {
    buf += "graph:" + g->second;
    buf.push_back('\0');
  }
  for (const auto& [name, t] : f.tensors) {
    buf += name;
    buf.push_back('\0');
    buf += t.dtype;
    for (int64_t d : t.shape) buf += ":" + std::to_string(d);
    buf.push_back('\0');
    buf += t.data;
  }
  return Sha256Hex(buf);
}

SafeTensor BytesTensor(std::string bytes) {
  SafeTensor t;
  t.dtype = "U8";
  t.shape = {static_cast<int64_t>(bytes.size())};
  t.data = std::move(bytes);
  return t;
}

Status PutTensor(SafeTensorFile& f, const std::string& name, const torch::Tensor& t) {
  auto st = model::FromTorch(t.detach());
  if (!st.IsOk()) return st.GetStatus().WithContext(name);
  f.tensors[name] = std::move(st).Value();
  return {};
}

// Copies `src` (CPU) into `dst` after checking the shape.
Status CopyInto(torch::Tensor& dst, const SafeTensorFile& f, const std::string& key,
                const std::string& origin) {
  auto it = f.tensors.find(key);
  if (it == f.tensors.end()) return Status::Corruption(origin + ": checkpoint lacks tensor '" + key + "'");
  auto t = model::ToTorch(it->second, key);
  if (!t.IsOk()) return t.GetStatus().WithContext(origin);
  if (t->sizes() != dst.sizes()) {
    return Status::InvalidArgument(origin + ": tensor '" + key + "' has the wrong shape for this model");
  }
  torch::NoGradGuard no_grad;
  dst.copy_(t->to(dst.device(), dst.scalar_type()));
  return {};
}

}  // namespace

bool IsNewBest(const CheckpointState& s, double fitness) {
  return s.best_epoch == 0 || fitness > s.best_fitness;
}

std::string CheckpointStateToJson(const CheckpointState& s) {
  nlohmann::json j = {
      {"format_version", s.format_version},
      {"schedule", nlohmann::json::parse(ScheduleStateToJson(s.schedule))},
      {"batches_per_epoch", s.batches_per_epoch},
      {"epochs", s.epochs},
      {"lr_scale", s.lr_scale},
      {"rollbacks", s.rollbacks},
      {"best_fitness", s.best_fitness},
      {"best_epoch", s.best_epoch},
      {"ema_updates", s.ema_updates},
      {"loader_seed", s.loader_seed},
      {"dataset_version", s.dataset_version},
      {"config", nlohmann::json::parse(s.config_json.empty() ? "{}" : s.config_json)},
      {"history", nlohmann::json::parse(s.history_json.empty() ? "[]" : s.history_json)},
      {"accum",
       {{"box", s.accum.box},
        {"cls", s.accum.cls},
        {"dfl", s.accum.dfl},
        {"batches", s.accum.batches},
        {"instances", s.accum.instances},
        {"nonfinite", s.accum.nonfinite}}},
  };
  return DumpJson(j);
}

Result<CheckpointState> CheckpointStateFromJson(const std::string& text, const std::string& origin) {
  try {
    auto j = nlohmann::json::parse(text);
    CheckpointState s;
    s.format_version = j.at("format_version").get<int>();
    if (s.format_version != kCheckpointFormatVersion) {
      return Status::InvalidArgument(
          origin + ": checkpoint format_version " + std::to_string(s.format_version) +
          " is not supported (this build reads " + std::to_string(kCheckpointFormatVersion) + ")");
    }
    auto sched = ScheduleStateFromJson(DumpJson(j.at("schedule")));
    if (!sched.IsOk()) return sched.GetStatus().WithContext(origin);
    s.schedule = *sched;
    s.batches_per_epoch = j.at("batches_per_epoch").get<int64_t>();
    s.epochs = j.at("epochs").get<int>();
    s.lr_scale = j.at("lr_scale").get<double>();
    s.rollbacks = j.at("rollbacks").get<int>();
    s.best_fitness = j.at("best_fitness").get<double>();
    s.best_epoch = j.at("best_epoch").get<int>();
    s.ema_updates = j.at("ema_updates").get<int64_t>();
    s.loader_seed = j.at("loader_seed").get<uint64_t>();
    s.dataset_version = j.at("dataset_version").get<std::string>();
    s.config_json = DumpJson(j.at("config"));
    s.history_json = DumpJson(j.at("history"));
    const auto& a = j.at("accum");
    s.accum.box = a.at("box").get<double>();
    s.accum.cls = a.at("cls").get<double>();
    s.accum.dfl = a.at("dfl").get<double>();
    s.accum.batches = a.at("batches").get<int64_t>();
    s.accum.instances = a.at("instances").get<int64_t>();
    s.accum.nonfinite = a.at("nonfinite").get<int64_t>();
    return s;
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption(origin + ": checkpoint state is not valid: " + e.what());
  }
}

Result<std::string> SerializeCheckpoint(const CheckpointState& state, model::YoloImpl& model,
                                        const ModelEma& ema, torch::optim::Optimizer& optimizer) {
  try {
    SafeTensorFile f;
    for (const auto& p : model.named_parameters()) {
      KESTREL_RETURN_IF_ERROR(PutTensor(f, "model/" + p.key(), p.value()));
      if (p.value().grad().defined())
        KESTREL_RETURN_IF_ERROR(PutTensor(f, "grad/" + p.key(), p.value().grad()));
    }
    for (const auto& b : model.named_buffers())
      KESTREL_RETURN_IF_ERROR(PutTensor(f, "model/" + b.key(), b.value()));
    for (const auto& [name, t] : ema.Entries()) KESTREL_RETURN_IF_ERROR(PutTensor(f, "ema/" + name, t));

    torch::serialize::OutputArchive archive;
    optimizer.save(archive);
    std::ostringstream os;
    archive.save_to(os);
    f.tensors["optimizer"] = BytesTensor(os.str());

    auto gen = at::detail::getDefaultCPUGenerator();
    at::Tensor rng;
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      rng = gen.get_state();
    }
    KESTREL_RETURN_IF_ERROR(PutTensor(f, "rng/cpu", rng));

    const std::string state_json = CheckpointStateToJson(state);
    f.metadata["format"] = kFormatName;
    f.metadata["format_version"] = std::to_string(kCheckpointFormatVersion);
    f.metadata["state"] = state_json;
    if (model.Spec().graph) f.metadata["graph"] = model::GraphYaml(model.Spec()).dump();
    f.metadata["checksum"] = ChecksumOf(f, state_json);
    return SerializeSafeTensors(f);
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("checkpoint: torch error while saving: ") +
                            e.what_without_backtrace());
  }
}

Result<ParsedCheckpoint> ParseCheckpoint(const std::string& bytes, const std::string& origin) {
  auto parsed = ParseSafeTensors(bytes, origin);
  if (!parsed.IsOk()) {
    return Status::Corruption(origin + ": not a readable checkpoint (" + parsed.GetStatus().ToString() + ")");
  }
  ParsedCheckpoint out;
  out.file = std::move(parsed).Value();
  const auto& md = out.file.metadata;
  auto get = [&](const char* key) -> std::string {
    auto it = md.find(key);
    return it == md.end() ? std::string() : it->second;
  };
  if (get("format") != kFormatName) {
    return Status::InvalidArgument(origin + ": not a Kestrel training checkpoint (metadata format='" +
                                   get("format") + "'); weights files go to pretrained=, not resume=");
  }
  const std::string state_json = get("state");
  const std::string want = get("checksum");
  if (want.empty() || ChecksumOf(out.file, state_json) != want) {
    return Status::Corruption(
        origin + ": checkpoint checksum mismatch: the file is corrupted; refusing to resume from it");
  }
  KESTREL_ASSIGN_OR_RETURN(out.state, CheckpointStateFromJson(state_json, origin));
  return out;
}

Result<std::optional<model::ModelSpec>> CheckpointGraph(const ParsedCheckpoint& ckpt, int nc,
                                                        const std::string& origin) {
  auto g = ckpt.file.metadata.find("graph");
  if (g == ckpt.file.metadata.end()) return std::optional<model::ModelSpec>();
  KESTREL_ASSIGN_OR_RETURN(model::ModelSpec spec, model::SpecFromGraphYaml(g->second, nc, origin));
  return std::optional<model::ModelSpec>(std::move(spec));
}

Result<ParsedCheckpoint> ReadCheckpoint(Env& env, const std::string& path) {
  KESTREL_ASSIGN_OR_RETURN(std::string bytes, env.ReadFile(path));
  return ParseCheckpoint(bytes, path);
}

Status ApplyCheckpoint(const ParsedCheckpoint& ckpt, const std::string& origin, model::YoloImpl& model,
                       model::YoloImpl& ema_model, torch::optim::Optimizer& optimizer) {
  const SafeTensorFile& f = ckpt.file;
  try {
    for (auto& p : model.named_parameters()) {
      KESTREL_RETURN_IF_ERROR(CopyInto(p.value(), f, "model/" + p.key(), origin));
      auto g = f.tensors.find("grad/" + p.key());
      if (g != f.tensors.end()) {
        auto t = model::ToTorch(g->second, g->first);
        if (!t.IsOk()) return t.GetStatus().WithContext(origin);
        p.value().mutable_grad() = t->to(p.value().device(), p.value().scalar_type());
      } else {
        p.value().mutable_grad() = torch::Tensor();
      }
    }
    for (auto& b : model.named_buffers())
      KESTREL_RETURN_IF_ERROR(CopyInto(b.value(), f, "model/" + b.key(), origin));
    for (auto& p : ema_model.named_parameters())
      KESTREL_RETURN_IF_ERROR(CopyInto(p.value(), f, "ema/" + p.key(), origin));
    for (auto& b : ema_model.named_buffers())
      KESTREL_RETURN_IF_ERROR(CopyInto(b.value(), f, "ema/" + b.key(), origin));

    auto opt = f.tensors.find("optimizer");
    if (opt == f.tensors.end()) return Status::Corruption(origin + ": checkpoint lacks the optimizer state");
    std::istringstream is(opt->second.data);
    torch::serialize::InputArchive archive;
    // Onto the model's device: a checkpoint written on CUDA resumes on the
    // CPU and the other way round (the archive records where its tensors were).
    const auto params = model.parameters();
    archive.load_from(is, params.empty() ? torch::Device(torch::kCPU) : params.front().device());
    optimizer.load(archive);

    auto rng = f.tensors.find("rng/cpu");
    if (rng == f.tensors.end()) return Status::Corruption(origin + ": checkpoint lacks the RNG state");
    auto rt = model::ToTorch(rng->second, "rng/cpu");
    if (!rt.IsOk()) return rt.GetStatus().WithContext(origin);
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(*rt);
    return {};
  } catch (const c10::Error& e) {
    return Status::Corruption(
        origin + ": checkpoint does not fit this model/optimizer: " + e.what_without_backtrace());
  }
}

}  // namespace kestrel::train
