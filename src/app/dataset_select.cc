#include "app/dataset_select.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <sstream>
#include <utility>

#include "app/preannotations.h"
#include "app/predict_source.h"
#include "core/staged_dir.h"
#include "data/augment.h"
#include "data/image.h"
#include "data/phash.h"
#include "eval/dataset_eval.h"

namespace kestrel::app {
namespace {

ErrorLocation Field(const std::string& field) { return {"command line", 0, field}; }

std::string Num(double v, const char* fmt = "%.4f") {
  char b[64];
  std::snprintf(b, sizeof b, fmt, v);
  return b;
}

// Indexes sorted by score, highest first; ties keep pool order.
std::vector<SelectedImage> TopByScore(const std::vector<double>& score, size_t budget,
                                      const std::function<std::string(size_t)>& reason) {
  std::vector<size_t> order(score.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return score[a] > score[b]; });
  std::vector<SelectedImage> out;
  for (size_t k = 0; k < budget && k < order.size(); ++k)
    out.push_back({order[k], score[order[k]], reason(order[k])});
  return out;
}

std::vector<SelectedImage> FarthestPoint(const std::vector<SelectCandidate>& c, size_t budget) {
  const size_t n = c.size();
  std::vector<SelectedImage> out;
  if (n == 0) return out;
  // The medoid: least summed distance to the pool (n^2 popcounts: 10k
  // images are 10^8, well under a second).
  size_t first = 0;
  uint64_t best_sum = std::numeric_limits<uint64_t>::max();
  for (size_t i = 0; i < n; ++i) {
    uint64_t sum = 0;
    for (size_t j = 0; j < n; ++j) sum += uint64_t(data::HammingDistance(c[i].phash, c[j].phash));
    if (sum < best_sum) {
      best_sum = sum;
      first = i;
    }
  }
  const double mean = n > 1 ? double(best_sum) / double(n - 1) : 0.0;
  out.push_back({first, mean, "the pool's medoid: mean hash distance " + Num(mean, "%.1f") + " bits"});
  std::vector<int> nearest(n, std::numeric_limits<int>::max());  // to the picks so far
  std::vector<bool> taken(n, false);
  taken[first] = true;
  size_t last = first;
  while (out.size() < budget && out.size() < n) {
    size_t pick = n;
    for (size_t i = 0; i < n; ++i) {
      if (taken[i]) continue;
      nearest[i] = std::min(nearest[i], data::HammingDistance(c[i].phash, c[last].phash));
      if (pick == n || nearest[i] > nearest[pick]) pick = i;
    }
    taken[pick] = true;
    last = pick;
    out.push_back({pick, double(nearest[pick]),
                   std::to_string(nearest[pick]) + " hash bits from the nearest image picked before"});
  }
  return out;
}

}  // namespace

const char* SelectStrategyName(SelectStrategy s) {
  switch (s) {
    case SelectStrategy::kUncertainty:
      return "uncertainty";
    case SelectStrategy::kEntropy:
      return "entropy";
    case SelectStrategy::kEntropySum:
      return "entropy_sum";
    case SelectStrategy::kDiversity:
      return "diversity";
    case SelectStrategy::kRandom:
      return "random";
  }
  return "?";
}

Result<SelectStrategy> ParseSelectStrategy(const std::string& name) {
  for (SelectStrategy s :
       {SelectStrategy::kUncertainty, SelectStrategy::kEntropy, SelectStrategy::kEntropySum,
        SelectStrategy::kDiversity, SelectStrategy::kRandom}) {
    if (name == SelectStrategyName(s)) return s;
  }
  return Status::InvalidArgument(
      "strategy must be uncertainty, entropy, entropy_sum, diversity or random, got '" + name + "'",
      Field("strategy"));
}

double MaxBoxScore(const std::vector<eval::Detection>& detections) {
  double m = 0;
  for (const eval::Detection& d : detections) m = std::max(m, double(d.score));
  return m;
}

double TotalBoxEntropy(const std::vector<eval::Detection>& detections) {
  double sum = 0;
  for (const eval::Detection& d : detections) {
    const double p = std::clamp(double(d.score), 0.0, 1.0);
    if (p > 0 && p < 1) sum -= p * std::log2(p) + (1 - p) * std::log2(1 - p);
  }
  return sum;
}

double MeanBoxEntropy(const std::vector<eval::Detection>& detections) {
  if (detections.empty()) return 1.0;
  return TotalBoxEntropy(detections) / double(detections.size());
}

Result<std::vector<SelectedImage>> RankForSelection(const std::vector<SelectCandidate>& candidates,
                                                    SelectStrategy strategy, size_t budget, uint64_t seed) {
  if (budget < 1) return Status::InvalidArgument("budget must be at least 1", Field("budget"));
  std::vector<double> score(candidates.size());
  switch (strategy) {
    case SelectStrategy::kUncertainty:
      for (size_t i = 0; i < candidates.size(); ++i)
        score[i] = candidates[i].detections.empty() ? 1.0 : 1.0 - MaxBoxScore(candidates[i].detections);
      return TopByScore(score, budget, [&](size_t i) {
        return candidates[i].detections.empty()
                   ? std::string("no box at or above conf")
                   : "highest box score " + Num(MaxBoxScore(candidates[i].detections), "%.3f");
      });
    case SelectStrategy::kEntropy:
    case SelectStrategy::kEntropySum: {
      const bool summed = strategy == SelectStrategy::kEntropySum;
      for (size_t i = 0; i < candidates.size(); ++i) {
        score[i] =
            summed ? TotalBoxEntropy(candidates[i].detections) : MeanBoxEntropy(candidates[i].detections);
      }
      return TopByScore(score, budget, [&](size_t i) {
        const size_t n = candidates[i].detections.size();
        return n == 0 ? std::string("no box at or above conf")
                      : std::string(summed ? "summed" : "mean") + " score entropy " + Num(score[i], "%.3f") +
                            " bits over " + std::to_string(n) + (n == 1 ? " box" : " boxes");
      });
    }
    case SelectStrategy::kDiversity:
      return FarthestPoint(candidates, budget);
    case SelectStrategy::kRandom:
      for (size_t i = 0; i < candidates.size(); ++i)
        score[i] = double(data::SeedFrom({seed, uint64_t(i)}) >> 11) * 0x1.0p-53;
      return TopByScore(score, budget,
                        [&](size_t) { return "random draw (seed " + std::to_string(seed) + ")"; });
  }
  return Status::InvalidArgument("unknown strategy", Field("strategy"));
}

void SelectKeys::Bind(OptionSet& s) {
  s.String("pool", &pool, "the folder of unlabelled images to choose from (subfolders included)");
  s.String("model", &model, "the weights that predict the pool (a file or a registered model)");
  s.Choice("strategy", &strategy, {"uncertainty", "entropy", "entropy_sum", "diversity", "random"},
           "uncertainty: lowest best box score; entropy: highest mean score entropy; entropy_sum: highest "
           "summed score entropy (many unsure boxes); diversity: spread-out perceptual hashes; random: "
           "seeded draw");
  s.Int("budget", &budget, "how many images to pick (required)", 0, 10000000);
  s.Int("seed", &seed, "strategy=random: the draw's seed", 0, std::numeric_limits<int64_t>::max());
  s.Choice("format", &format, {"label-studio", "cvat", "yolo", "coco"},
           "the tasks written for the picked images: label-studio (tasks JSON + labelling config), cvat "
           "(CVAT for images 1.1 XML), yolo (Ultralytics YOLO Detection 1.0 folder + zip) or coco");
  s.Float("conf", &conf, "boxes at or above this score are what the strategies see", Range::Open(0, 1));
  s.Float("pre_conf", &pre_conf, "boxes at or above this score are written as pre-annotations (>= conf)",
          Range::Open(0, 1));
  s.Float("iou", &iou, "NMS IoU threshold", Range::Open(0, 1));
  s.Int("imgsz", &imgsz, "network input side; 0: the size the weights were trained at", 0, 8192);
  s.Int("batch", &batch, "images per forward pass", 1, 1024);
  s.Int("max_det", &max_det, "boxes kept per image after NMS", 1, 100000);
  s.String("device", &device, "cpu, cuda, cuda:N or N (LibTorch weights)");
  s.String("ls_image_root", &ls_image_root,
           "format=label-studio: data.image = this prefix + the image's path under pool= (\"\" = "
           "/data/local-files/?d=ABSOLUTE_PATH)");
  s.String("ls_from_name", &ls_from_name, "format=label-studio: the RectangleLabels tag's name");
  s.String("ls_to_name", &ls_to_name, "format=label-studio: the Image tag's name");
  s.String("project", &project, "run folder parent");
  s.String("name", &name, "run folder name (default select, select2, ...)");
  s.String("out", &out, "the run folder itself (overrides project and name)");
  s.Bool("exist_ok", &exist_ok, "reuse an existing run folder");
}

namespace {

PreannotationOptions PreOptions(const SelectKeys& k) {
  PreannotationOptions pre;
  pre.format = k.format;
  pre.source_root = k.pool;
  pre.ls_image_root = k.ls_image_root;
  pre.ls_from_name = k.ls_from_name;
  pre.ls_to_name = k.ls_to_name;
  pre.model_version = k.model;
  return pre;
}

}  // namespace

Status SelectKeys::Validate() const {
  KESTREL_RETURN_IF_ERROR(CheckBoundValues(*this));
  if (pool.empty())
    return Status::InvalidArgument("give the folder of images to choose from (pool=DIR)", Field("pool"));
  if (model.empty())
    return Status::InvalidArgument("give the model that predicts the pool (model=WEIGHTS)", Field("model"));
  if (budget < 1)
    return Status::InvalidArgument("give how many images to pick (budget=N, N >= 1)", Field("budget"));
  if (pre_conf < conf) {
    return Status::InvalidArgument("pre_conf (" + Num(pre_conf, "%g") + ") must not be below conf (" +
                                       Num(conf, "%g") +
                                       "): the pre-annotations are boxes the model reported",
                                   Field("pre_conf"));
  }
  return ValidatePreannotationOptions(PreOptions(*this));
}

Result<SelectReport> SelectFromPool(Env& env, const SelectKeys& keys, const WeightsResolver& resolve,
                                    const DetectorLoader& load) {
  KESTREL_RETURN_IF_ERROR(keys.Validate());
  KESTREL_ASSIGN_OR_RETURN(SelectStrategy strategy, ParseSelectStrategy(keys.strategy));
  if (!env.Stat(keys.pool).is_dir)
    return Status::InvalidArgument(keys.pool + " is not a folder (pool= takes a folder of images)",
                                   Field("pool"));
  // The pool's images, the run folder and the model before anything is
  // written: a bad pool, name or model leaves nothing behind.
  Result<PredictSource> src = ResolvePredictSource(env, keys.pool);
  if (!src.IsOk()) return Status(src.GetStatus().Code(), src.GetStatus().Message(), Field("pool"));
  for (const std::string& f : src->files) {
    if (IsVideoExtension(std::filesystem::path(f).extension().string()))
      return Status::InvalidArgument(f + " is a video: pool= takes a folder of still images", Field("pool"));
  }
  const std::string dir =
      keys.out.empty() ? eval::NextRunDir(env, keys.project, keys.name, "select", keys.exist_ok) : keys.out;
  if (!keys.out.empty() && !keys.exist_ok) KESTREL_RETURN_IF_ERROR(RequireEmptyOrAbsent(env, dir));
  PredictRequest p;
  p.model = keys.model;
  p.source = keys.pool;
  p.conf = keys.conf;
  p.iou = keys.iou;
  p.imgsz = keys.imgsz;
  p.batch = keys.batch;
  p.max_det = keys.max_det;
  p.device = keys.device;
  p.save = false;
  p.save_txt = false;
  p.save_json = true;  // every pool image's boxes: the evidence behind the scores
  p.name = "predictions";
  p.exist_ok = true;
  std::string weights = keys.model;
  if (resolve) KESTREL_RETURN_IF_ERROR(resolve(&weights));
  Result<std::unique_ptr<Detector>> loaded =
      load(weights, InferenceOptionsOf(p), DetectorPlacement{p.device, p.runtime});
  if (!loaded.IsOk()) {
    const Status& s = loaded.GetStatus();
    // The loader's message may not say which file: name it and the key.
    if (s.Where().field.empty() && s.Where().file.empty())
      return Status(s.Code(), weights + ": " + s.Message(), Field("model"));
    return s;
  }
  std::unique_ptr<Detector> detector = std::move(loaded).Value();

  KESTREL_ASSIGN_OR_RETURN(StagedDir staged, StagedDir::Create(env, dir));
  p.project = staged.Path();
  KESTREL_ASSIGN_OR_RETURN(PredictResult run, PredictFiles(env, p, src->root, src->files, *detector));
  if (run.images.empty()) {
    return Status::InvalidArgument(
        keys.pool + " holds no image that could be read (" + std::to_string(run.skipped.size()) + " skipped)",
        Field("pool"));
  }

  std::vector<SelectCandidate> candidates(run.images.size());
  for (size_t i = 0; i < run.images.size(); ++i) {
    const PredictedImage& im = run.images[i];
    candidates[i].detections = im.detections;
    if (strategy == SelectStrategy::kDiversity) {
      KESTREL_ASSIGN_OR_RETURN(std::string bytes, env.ReadFile(im.source, uint64_t{2} << 30));
      KESTREL_ASSIGN_OR_RETURN(cv::Mat rgb, data::DecodeImage(bytes, im.source));
      candidates[i].phash = data::PerceptualHash(rgb);
    }
  }
  KESTREL_ASSIGN_OR_RETURN(std::vector<SelectedImage> picks,
                           RankForSelection(candidates, strategy, size_t(keys.budget), uint64_t(keys.seed)));

  SelectReport report;
  report.keys = keys;
  report.dir = dir;
  report.pool = run.images.size();
  report.imgsz = detector->Options().imgsz;
  report.skipped = run.skipped;
  const PreannotationOptions pre = PreOptions(keys);
  PredictResult chosen;
  chosen.dir = staged.Path();
  chosen.names = run.names;
  for (const SelectedImage& s : picks) {
    const PredictedImage& im = run.images[s.index];
    SelectRow row;
    row.pick = s;
    row.image = PreannotationImageName(im, pre);
    row.source = im.source;
    row.width = im.width;
    row.height = im.height;
    row.boxes = im.detections.size();
    row.max_score = MaxBoxScore(im.detections);
    row.mean_entropy = MeanBoxEntropy(im.detections);
    report.selected.push_back(std::move(row));
    PredictedImage kept = im;
    std::erase_if(kept.detections, [&](const eval::Detection& d) { return d.score < keys.pre_conf; });
    chosen.images.push_back(std::move(kept));
  }
  chosen.predicted = int64_t(chosen.images.size());
  KESTREL_ASSIGN_OR_RETURN(std::vector<std::string> docs, WritePreannotations(env, chosen, pre));
  for (std::string& f : docs) {
    if (f.compare(0, staged.Path().size(), staged.Path()) == 0) f = dir + f.substr(staged.Path().size());
    report.files.push_back(f);
  }
  report.files.push_back(dir + "/selection.csv");
  report.files.push_back(dir + "/selection.json");
  KESTREL_RETURN_IF_ERROR(env.WriteFileAtomic(staged.Path() + "/selection.csv", SelectReportCsv(report)));
  KESTREL_RETURN_IF_ERROR(
      env.WriteFileAtomic(staged.Path() + "/selection.json", SelectReportJson(report).dump(1) + "\n"));
  KESTREL_RETURN_IF_ERROR(staged.Commit({"selection.json"}));
  return report;
}

nlohmann::json SelectReportJson(const SelectReport& r) {
  nlohmann::json selected = nlohmann::json::array();
  for (size_t i = 0; i < r.selected.size(); ++i) {
    const SelectRow& s = r.selected[i];
    selected.push_back({{"rank", i + 1},
                        {"image", s.image},
                        {"source", s.source},
                        {"score", s.pick.score},
                        {"reason", s.pick.reason},
                        {"width", s.width},
                        {"height", s.height},
                        {"boxes", s.boxes},
                        {"max_score", s.max_score},
                        {"mean_entropy", s.mean_entropy}});
  }
  nlohmann::json skipped = nlohmann::json::array();
  for (const PredictSkip& s : r.skipped) skipped.push_back({{"source", s.source}, {"reason", s.reason}});
  return {{"pool", r.keys.pool},
          {"model", r.keys.model},
          {"strategy", r.keys.strategy},
          {"budget", r.keys.budget},
          {"seed", r.keys.seed},
          {"conf", r.keys.conf},
          {"pre_conf", r.keys.pre_conf},
          {"imgsz", r.imgsz},
          {"format", r.keys.format},
          {"dir", r.dir},
          {"pool_images", r.pool},
          {"files", r.files},
          {"selected", std::move(selected)},
          {"skipped", std::move(skipped)}};
}

namespace {

// CSV field: quoted when it holds a comma, quote or line break.
std::string Csv(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

std::string SelectReportCsv(const SelectReport& r) {
  std::string out = "rank,image,score,reason,boxes,max_score,mean_entropy\n";
  for (size_t i = 0; i < r.selected.size(); ++i) {
    const SelectRow& s = r.selected[i];
    out += std::to_string(i + 1) + "," + Csv(s.image) + "," + Num(s.pick.score) + "," + Csv(s.pick.reason) +
           "," + std::to_string(s.boxes) + "," + Num(s.max_score) + "," + Num(s.mean_entropy) + "\n";
  }
  return out;
}

std::string SelectReportText(const SelectReport& r, size_t top) {
  std::ostringstream s;
  s << "selected " << r.selected.size() << " of " << r.pool << " images in " << r.keys.pool << " by "
    << r.keys.strategy << " (budget " << r.keys.budget << ", " << r.keys.model << ", imgsz=" << r.imgsz
    << ")\n";
  for (const PredictSkip& k : r.skipped) s << "skipped " << k.source << ": " << k.reason << "\n";
  const size_t shown = std::min(top, r.selected.size());
  if (shown > 0) s << "\n rank   score  image  (why)\n";
  for (size_t i = 0; i < shown; ++i) {
    const SelectRow& row = r.selected[i];
    char head[48];
    std::snprintf(head, sizeof head, "%5zu  %6.3f  ", i + 1, row.pick.score);
    s << head << row.image << "  (" << row.pick.reason << ")\n";
  }
  if (shown < r.selected.size()) s << "  ... " << r.selected.size() - shown << " more in selection.csv\n";
  s << "\n";
  for (const std::string& f : r.files) s << "written: " << f << "\n";
  return s.str();
}

}  // namespace kestrel::app
