// export_latency_bench [model=WEIGHTS] [data=DATASET] [sizes=320,640] [runs=20] [warmup=3] [int8=auto]
//                      [calib=32]
//
// One run, per input size: the model exported FP32, FP16 and (int8=auto:
// when ONNX Runtime is installed) INT8 by app::ExportModel with the mAP
// check on data='s validation split (export_map.h: LibTorch, OpenCV DNN and
// ONNX Runtime, one letterbox, one NMS), then the per-image forward latency
// (batch 1, p50 over `runs` after `warmup`) of
//   libtorch FP32     model::Predictor::ForwardDecoded (BatchNorm fused, as predict runs it)
//   opencv-dnn FP32   the FP32 file (INT8 too when OpenCV DNN loads it)
//   onnxruntime       FP32, FP16, INT8: session.run as the node helper times it
//                     ("ort ms"), and the round trip through the helper
//                     (tensor files + socket, "rt ms")
// and the mAP50 / mAP50-95 each reached. Every figure is from this run;
// ratios are against LibTorch FP32 at the same size (the machine is shared:
// compare ratios, not milliseconds).
//
// Defaults: model = the reference shapes detector
// (../shared/reference/val_parity/yolov8n_shapes_p.safetensors) and data =
// its validation images (val_parity/square); with an 80-class model= and no
// data=, ../shared/datasets/coco128; with no reference files, a generated
// dataset (data::WriteSynthDataset) for the model's class count.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "app/backends.h"
#include "app/datasets.h"
#include "app/evaluate.h"
#include "app/export.h"
#include "app/export_map.h"
#include "app/job_kinds.h"
#include "app/onnx_runtime.h"
#include "backend_onnx/export_runtimes.h"
#include "backend_onnx/onnx_backend.h"
#include "backend_torch/torch_backend.h"
#include "core/env.h"
#include "data/synth.h"
#include "model/predictor.h"
#include "model/pt_checkpoint.h"
#include "store/artifact_store.h"
#include "store/local_artifact_store.h"
#include "store/metadata_store.h"

using namespace kestrel;

namespace {

namespace fs = std::filesystem;

[[noreturn]] void Die(const std::string& what, const Status& s) {
  std::fprintf(stderr, "export_latency_bench: %s: %s\n", what.c_str(), s.ToString().c_str());
  std::exit(1);
}

struct Args {
  std::string model, data;
  std::vector<int> sizes = {320, 640};
  int runs = 20, warmup = 3, calib = 32;
  std::string int8 = "auto";  // auto | true | false
};

Args Parse(int argc, char** argv) {
  Args a;
  const std::string shared = std::string(KESTREL_SHARED_DIR);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (eq == std::string::npos) Die("argument " + arg, Status::InvalidArgument("expected key=value"));
    const std::string k = arg.substr(0, eq), v = arg.substr(eq + 1);
    if (k == "model") {
      a.model = v;
    } else if (k == "data") {
      a.data = v;
    } else if (k == "sizes") {
      a.sizes.clear();
      size_t pos = 0;
      while (pos <= v.size()) {
        const size_t comma = std::min(v.find(',', pos), v.size());
        a.sizes.push_back(std::atoi(v.substr(pos, comma - pos).c_str()));
        pos = comma + 1;
      }
    } else if (k == "runs") {
      a.runs = std::atoi(v.c_str());
    } else if (k == "warmup") {
      a.warmup = std::atoi(v.c_str());
    } else if (k == "calib") {
      a.calib = std::atoi(v.c_str());
    } else if (k == "int8") {
      a.int8 = v;
    } else {
      Die("argument " + arg, Status::InvalidArgument("unknown key " + k));
    }
  }
  for (int s : a.sizes) {
    if (s < 32 || s % 32 != 0) Die("sizes", Status::InvalidArgument("each size a multiple of 32"));
  }
  if (a.runs < 1 || a.warmup < 0) Die("runs", Status::InvalidArgument("runs >= 1, warmup >= 0"));
  if (a.model.empty()) a.model = shared + "/reference/val_parity/yolov8n_shapes_p.safetensors";
  return a;
}

double P50(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : (v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
}

using Clock = std::chrono::steady_clock;
double Ms(Clock::time_point a) { return std::chrono::duration<double, std::milli>(Clock::now() - a).count(); }

// One letterboxed-looking input [1, 3, s, s]: grey bands around noise.
std::vector<float> Input(int s) {
  std::vector<float> px(static_cast<size_t>(3) * s * s, 114.0F / 255.0F);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0, 1);
  for (int c = 0; c < 3; ++c) {
    for (int y = s / 8; y < s - s / 8; ++y) {
      for (int x = 0; x < s; ++x) px[(static_cast<size_t>(c) * s + y) * s + x] = u(rng);
    }
  }
  return px;
}

struct Row {
  std::string runtime, precision;
  double p50 = 0, p50_round_trip = 0;  // ms per image
  bool has_map = false;
  double map50 = 0, map50_95 = 0;
  std::string note;
};

}  // namespace

int main(int argc, char** argv) {
  const Args a = Parse(argc, argv);
  {
    // The engines the export and its mAP check run in, as kestrel-torch's main() registers them.
    app::Backends backends;
    backends.program = "export_latency_bench";
    backend_torch::RegisterTorchBackend(backends);
    backend_onnx::RegisterOnnxBackend(backends);
    if (Status s = app::InstallBackends(std::move(backends), app::JobKinds()); !s.IsOk()) Die("backends", s);
  }
  const std::string shared = std::string(KESTREL_SHARED_DIR);
  Result<model::WeightsInfo> info = model::ReadWeightsInfo(a.model);
  if (!info.IsOk()) Die("model " + a.model, info.GetStatus());
  const int nc = info->spec.nc;

  // A fresh home holding the dataset.
  const std::string root =
      (fs::temp_directory_path() / ("kestrel-export-bench-" + std::to_string(::getpid()))).string();
  fs::create_directories(root);
  std::string data = a.data;
  if (data.empty()) {
    if (nc == 80 && fs::exists(shared + "/datasets/coco128")) {
      data = shared + "/datasets/coco128";
    } else if (nc == 3 && fs::exists(shared + "/reference/val_parity/square")) {
      data = shared + "/reference/val_parity/square";
    } else {
      data::SynthOptions so;
      so.images = 48;
      so.classes = nc;
      so.seed = 1;
      data = root + "/synth";
      if (Status s = data::WriteSynthDataset(so, data); !s.IsOk()) Die("synth", s);
    }
  }
  auto meta = store::MetadataStore::Open(store::MetadataUrl(root + "/home"));
  if (!meta.IsOk()) Die("metadata store", meta.GetStatus());
  store::LocalArtifactStore blobs(root + "/home");
  app::Datasets datasets(**meta, blobs);
  auto imp = datasets.Import(data, "bench", data::ImportOptions());
  if (!imp.IsOk()) Die("import " + data, imp.GetStatus());

  app::ExportMapSource source;
  source.load = [&](const std::string& spec) { return app::LoadSplit(**meta, blobs, spec, "val"); };
  source.blobs = &blobs;
  const app::OnnxRuntimeLocation ort = app::LocateOnnxRuntime();
  const bool int8 = a.int8 == "true" || (a.int8 == "auto" && ort.unavailable.empty());
  std::printf(
      "export_latency_bench: %s (%s, %d classes) on %s val; p50 of %d runs after %d warm-up, batch 1\n",
      a.model.c_str(), info->spec.Name().c_str(), nc, data.c_str(), a.runs, a.warmup);
  if (!ort.unavailable.empty()) std::printf("ONNX Runtime not available: %s\n", ort.unavailable.c_str());

  for (int s : a.sizes) {
    std::vector<Row> rows;
    std::vector<std::pair<std::string, std::string>> files;  // precision, .onnx; FP32 first
    std::map<std::string, app::MapCheck> maps;
    for (const std::string precision : {"FP32", "FP16", "INT8"}) {
      if (precision != "FP32" && !ort.unavailable.empty()) continue;  // verified in ONNX Runtime only
      if (precision == "INT8" && !int8) continue;
      app::ExportRequest req;
      req.model = a.model;
      req.imgsz_h = req.imgsz_w = s;
      req.half = precision == "FP16";
      req.int8 = precision == "INT8";
      req.calib = a.calib;
      req.data = "bench";
      req.force = true;  // the figures are wanted even when a check fails (reported below)
      req.output = root + "/m" + std::to_string(s) + "_" + precision + ".onnx";
      const app::ExportCalibrationLoader calibrate = [&](const std::string& spec, int count, double fraction,
                                                         int h, int w) {
        return app::LoadCalibrationImages(**meta, blobs, spec, count, fraction, h, w);
      };
      const auto t0 = Clock::now();
      Result<app::ExportResult> r = app::ExportModel(Env::Default(), req, {}, calibrate, source);
      if (!r.IsOk()) Die("export " + precision + " at " + std::to_string(s), r.GetStatus());
      std::printf("imgsz %d %s: exported and checked in %.1f s%s%s\n", s, precision.c_str(), Ms(t0) / 1000,
                  r->verified ? "" : " — UNVERIFIED: ", r->verified ? "" : r->verification_error.c_str());
      files.emplace_back(precision, req.output);
      maps[precision] = r->map;
    }
    const std::vector<float> input = Input(s);
    const std::vector<int64_t> shape = {1, 3, s, s};

    // LibTorch FP32.
    {
      model::PredictorOptions po;
      po.imgsz = s;
      po.batch = 1;
      auto p = model::Predictor::Load(a.model, po);
      if (!p.IsOk()) Die("libtorch", p.GetStatus());
      SafeTensor t{"F32", shape,
                   std::string(reinterpret_cast<const char*>(input.data()), input.size() * sizeof(float))};
      std::vector<double> ms;
      for (int i = 0; i < a.warmup + a.runs; ++i) {
        const auto t0 = Clock::now();
        if (auto out = (*p)->ForwardDecoded(t); !out.IsOk()) Die("libtorch forward", out.GetStatus());
        if (i >= a.warmup) ms.push_back(Ms(t0));
      }
      Row row{
          "libtorch", "FP32", P50(ms), 0, true, maps["FP32"].libtorch.map50, maps["FP32"].libtorch.map50_95,
          ""};
      rows.push_back(row);
    }
    // The ONNX files in each runtime.
    for (const auto& [precision, file] : files) {
      for (int k = 0; k < app::kMapRuntimes; ++k) {
        Result<std::unique_ptr<backend_onnx::OnnxSession>> session =
            k == 0 ? backend_onnx::OpenOpenCvDnnSession(file)
                   : (ort.unavailable.empty() ? backend_onnx::OpenOnnxRuntimeSession(ort, file)
                                              : Result<std::unique_ptr<backend_onnx::OnnxSession>>(
                                                    Status::FailedPrecondition(ort.unavailable)));
        Row row;
        row.runtime = k == 0 ? "opencv-dnn" : "onnxruntime";
        row.precision = precision;
        if (!session.IsOk()) {
          if (k == 0 && precision == "FP32") Die("opencv-dnn", session.GetStatus());
          continue;  // OpenCV DNN 4.6 loads no FLOAT16 (and maybe no QDQ) file
        }
        std::vector<double> compute, round_trip;
        bool ok = true;
        for (int i = 0; i < a.warmup + a.runs && ok; ++i) {
          const auto t0 = Clock::now();
          Result<app::FloatTensor> out = (*session)->Run(input.data(), shape);
          const double wall = Ms(t0);
          if (!out.IsOk()) {
            row.note = out.GetStatus().Message();
            ok = false;
            break;
          }
          if (i >= a.warmup) {
            compute.push_back((*session)->LastRunMs());
            round_trip.push_back(wall);
          }
        }
        if (!ok) continue;
        row.p50 = P50(compute);
        row.p50_round_trip = P50(round_trip);
        const app::MapCheck& m = maps[precision];
        if (m.ran && k < static_cast<int>(m.runtimes.size()) && m.runtimes[k].scored) {
          row.has_map = true;
          row.map50 = m.runtimes[k].map50;
          row.map50_95 = m.runtimes[k].map50_95;
        }
        rows.push_back(row);
      }
    }
    const double base = rows.front().p50;
    std::printf("\nimgsz %d  %-12s %-5s %9s %9s %8s %8s %9s\n", s, "runtime", "prec", "p50 ms", "rt ms",
                "vs LT", "mAP50", "mAP50-95");
    for (const Row& r : rows) {
      char rt[16] = "-", m50[16] = "-", m95[16] = "-";
      if (r.runtime == "onnxruntime") std::snprintf(rt, sizeof rt, "%.2f", r.p50_round_trip);
      if (r.has_map) {
        std::snprintf(m50, sizeof m50, "%.4f", r.map50);
        std::snprintf(m95, sizeof m95, "%.4f", r.map50_95);
      }
      std::printf("            %-12s %-5s %9.2f %9s %7.2fx %8s %9s\n", r.runtime.c_str(), r.precision.c_str(),
                  r.p50, rt, base / r.p50, m50, m95);
    }
    const auto find = [&](const std::string& rt, const std::string& prec) -> const Row* {
      for (const Row& r : rows) {
        if (r.runtime == rt && r.precision == prec) return &r;
      }
      return nullptr;
    };
    const Row* ort32 = find("onnxruntime", "FP32");
    const Row* ort8 = find("onnxruntime", "INT8");
    if (ort32 != nullptr && ort8 != nullptr) {
      std::printf(
          "            INT8 speed-up in ONNX Runtime: %.2fx FP32 (goal >= 1.5x); mAP50-95 drop %.4f\n",
          ort32->p50 / ort8->p50, ort32->map50_95 - ort8->map50_95);
    }
    std::printf("\n");
  }
  std::error_code ec;
  fs::remove_all(root, ec);
  return 0;
}
