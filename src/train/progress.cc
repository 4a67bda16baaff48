#include "train/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "core/json.h"
#include "data/codec.h"
#include "data/text_render.h"
#include "eval/box.h"
#include "eval/val_batch.h"

namespace kestrel::train {

std::string HistoryToJson(const std::vector<EpochRecord>& history) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& r : history) {
    arr.push_back({{"epoch", r.epoch},
                   {"box", r.box},
                   {"cls", r.cls},
                   {"dfl", r.dfl},
                   {"lr", r.lr},
                   {"precision", r.precision},
                   {"recall", r.recall},
                   {"map50", r.map50},
                   {"map5095", r.map5095},
                   {"fitness", r.fitness},
                   {"seconds", r.seconds},
                   {"val_box", r.val_box},
                   {"val_cls", r.val_cls},
                   {"val_dfl", r.val_dfl}});
  }
  return DumpJson(arr);
}

Result<std::vector<EpochRecord>> HistoryFromJson(const std::string& text) {
  try {
    std::vector<EpochRecord> out;
    for (const auto& j : nlohmann::json::parse(text)) {
      EpochRecord r;
      r.epoch = j.at("epoch").get<int>();
      r.box = j.at("box").get<double>();
      r.cls = j.at("cls").get<double>();
      r.dfl = j.at("dfl").get<double>();
      r.lr = j.at("lr").get<std::array<double, 3>>();
      r.precision = j.at("precision").get<double>();
      r.recall = j.at("recall").get<double>();
      r.map50 = j.at("map50").get<double>();
      r.map5095 = j.at("map5095").get<double>();
      r.fitness = j.at("fitness").get<double>();
      r.seconds = j.at("seconds").get<double>();
      r.val_box = j.value("val_box", 0.0);  // absent in checkpoints of format 1 runs
      r.val_cls = j.value("val_cls", 0.0);
      r.val_dfl = j.value("val_dfl", 0.0);
      out.push_back(r);
    }
    return out;
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption(std::string("epoch history: ") + e.what());
  }
}

std::string ResultsCsvText(const std::vector<EpochRecord>& history) {
  std::string out;
  for (const char* c : kResultsCsvColumns) out += std::string(out.empty() ? "" : ",") + c;
  out += "\n";
  double time = 0;
  char line[512];
  for (const auto& r : history) {
    time += r.seconds;
    std::snprintf(line, sizeof line,
                  "%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g\n", r.epoch, time,
                  r.box, r.cls, r.dfl, r.precision, r.recall, r.map50, r.map5095, r.val_box, r.val_cls,
                  r.val_dfl, r.lr[0], r.lr[1], r.lr[2]);
    out += line;
  }
  return out;
}

Status WriteResultsCsv(Env& env, const std::string& path, const std::vector<EpochRecord>& history) {
  return env.WriteFileAtomic(path, ResultsCsvText(history));
}

Status WriteArgsYaml(Env& env, const std::string& path, const nlohmann::json& config) {
  // The reference's args.yaml starts with the task and the mode and ends
  // with save_dir; scripts look these up to tell runs apart.
  std::string out = "task: \"detect\"\nmode: \"train\"\n";
  for (auto it = config.begin(); it != config.end(); ++it) {
    if (it.key() == "task" || it.key() == "mode" || it.key() == "save_dir") continue;
    out += it.key() + ": " + DumpJson(it.value()) + "\n";
  }
  out += "save_dir: " + DumpJson(nlohmann::json(DirName(path))) + "\n";
  return env.WriteFileAtomic(path, out);
}

std::string FormatProgress(const ProgressLine& p) {
  char line[256];
  std::snprintf(
      line, sizeof line,
      "epoch %d/%d  batch %lld/%lld  box %.4f  cls %.4f  dfl %.4f  instances %lld  %.2f it/s  ETA %.0fs",
      p.epoch, p.epochs, static_cast<long long>(p.batch), static_cast<long long>(p.batches), p.box, p.cls,
      p.dfl, static_cast<long long>(p.instances), p.it_per_s, p.eta_s);
  return line;
}

namespace {

// "m:ss" (or "h:mm:ss") of a non-negative number of seconds.
std::string Clock(double seconds) {
  const long long t = std::llround(std::max(0.0, seconds));
  char buf[32];
  if (t >= 3600) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", t / 60, t % 60);
  }
  return buf;
}

}  // namespace

std::string FormatProgressBar(const ProgressLine& p, double epoch_elapsed_s) {
  constexpr int kWidth = 20;
  const double frac = p.batches > 0 ? std::clamp(double(p.batch) / double(p.batches), 0.0, 1.0) : 0.0;
  const int filled = static_cast<int>(frac * kWidth);
  const std::string bar = std::string(size_t(filled), '#') + std::string(size_t(kWidth - filled), '-');
  const double left = p.it_per_s > 0 ? double(p.batches - p.batch) / p.it_per_s : 0.0;
  char line[320];
  std::snprintf(line, sizeof line,
                "epoch %d/%d [%s] %3d%% %lld/%lld %s<%s %.2f it/s  box %.4f  cls %.4f  dfl %.4f  inst %lld",
                p.epoch, p.epochs, bar.c_str(), static_cast<int>(frac * 100), static_cast<long long>(p.batch),
                static_cast<long long>(p.batches), Clock(epoch_elapsed_s).c_str(), Clock(left).c_str(),
                p.it_per_s, p.box, p.cls, p.dfl, static_cast<long long>(p.instances));
  return line;
}

Status WriteBatchPreview(Env& env, const std::string& path, const data::Batch& batch,
                         const std::vector<std::string>& names) {
  const int n = std::min(batch.size, 16);
  if (n <= 0) return {};
  const int cols = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(n))));
  const int rows = (n + cols - 1) / cols;
  const int h = batch.height, w = batch.width;
  cv::Mat grid(rows * h, cols * w, CV_8UC3, cv::Scalar(114, 114, 114));
  const size_t plane = static_cast<size_t>(h) * w;
  for (int i = 0; i < n; ++i) {
    cv::Mat tile = grid(cv::Rect((i % cols) * w, (i / cols) * h, w, h));
    const float* img = batch.images.data() + static_cast<size_t>(i) * 3 * plane;
    for (int y = 0; y < h; ++y) {
      auto* row = tile.ptr<cv::Vec3b>(y);
      for (int x = 0; x < w; ++x) {
        const size_t k = static_cast<size_t>(y) * w + x;
        // CHW RGB floats -> BGR bytes.
        for (int c = 0; c < 3; ++c) {
          row[x][2 - c] = cv::saturate_cast<uint8_t>(img[c * plane + k] * 255.0f + 0.5f);
        }
      }
    }
  }
  for (int64_t t = 0; t < batch.NumTargets(); ++t) {
    const float* r = batch.targets.data() + t * 6;
    const int i = static_cast<int>(r[0]);
    if (i >= n) continue;
    const int cls = static_cast<int>(r[1]);
    const double ox = (i % cols) * w, oy = (i / cols) * h;
    cv::Point p1(static_cast<int>(ox + (r[2] - r[4] / 2) * w), static_cast<int>(oy + (r[3] - r[5] / 2) * h));
    cv::Point p2(static_cast<int>(ox + (r[2] + r[4] / 2) * w), static_cast<int>(oy + (r[3] + r[5] / 2) * h));
    const cv::Scalar color((cls * 67) % 256, (cls * 151 + 80) % 256, (cls * 29 + 160) % 256);
    cv::rectangle(grid, p1, p2, color, 1);
    const std::string label =
        cls >= 0 && cls < static_cast<int>(names.size()) ? names[cls] : std::to_string(cls);
    data::DrawBoxLabel(grid, label, p1, 11, color, static_cast<int>(oy));
  }
  Result<std::string> jpeg = data::EncodeJpeg(grid);
  if (!jpeg.IsOk()) return Status::IoError(path + ": " + jpeg.GetStatus().Message());
  return env.WriteFileAtomic(path, *jpeg);
}

Status WriteValBatchGrids(Env& env, const std::string& run_dir,
                          const std::vector<std::vector<SampleImage>>& grids, const data::ImageSource& source,
                          const std::vector<std::string>& names) {
  for (size_t b = 0; b < grids.size(); ++b) {
    if (grids[b].empty()) continue;
    std::vector<eval::SplitImage> images;
    std::vector<std::vector<eval::Detection>> preds;
    std::vector<const data::ManifestEntry*> entries;
    for (const SampleImage& s : grids[b]) {
      const data::ManifestEntry& e = *s.entry;
      eval::SplitImage& im = images.emplace_back();
      im.path = e.path;
      im.image_sha = e.image_sha;
      im.width = e.width;
      im.height = e.height;
      for (const data::Box& box : e.boxes) {
        im.labels.push_back(
            {eval::BoxFromCxCyWh(box.cx * e.width, box.cy * e.height, box.w * e.width, box.h * e.height),
             box.cls});
      }
      preds.push_back(s.detections);
      entries.push_back(&e);
    }
    eval::ValBatchOptions vo;
    vo.max_images = images.size();
    vo.min_score = static_cast<float>(kSampleConf);
    // RenderValBatch hands back an element of `images`: its index finds the entry.
    auto grid = eval::RenderValBatch(
        images, names, preds,
        [&](const eval::SplitImage& im) { return source(*entries[size_t(&im - images.data())]); }, vo);
    const std::string stem = "val_batch" + std::to_string(b);
    if (!grid.IsOk()) return grid.GetStatus().WithContext(stem);
    KESTREL_RETURN_IF_ERROR(env.WriteFileAtomic(JoinPath(run_dir, stem + "_labels.jpg"), grid->labels_jpg));
    KESTREL_RETURN_IF_ERROR(env.WriteFileAtomic(JoinPath(run_dir, stem + "_pred.jpg"), grid->pred_jpg));
  }
  return {};
}

}  // namespace kestrel::train
