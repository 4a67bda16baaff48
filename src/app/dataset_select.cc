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

// Greedy farthest-point (k-center) sampling over n pool images and
// `labelled` already labelled ones. `dist(i, j)` between pool images,
// `to_labelled(i, k)` from pool image i to labelled image k; without
// labelled images the medoid opens.
std::vector<SelectedImage> FarthestPoint(size_t n, size_t labelled, size_t budget,
                                         const std::function<double(size_t, size_t)>& dist,
                                         const std::function<double(size_t, size_t)>& to_labelled,
                                         const std::function<std::string(double)>& unit) {
  std::vector<SelectedImage> out;
  if (n == 0) return out;
  std::vector<double> nearest(n, std::numeric_limits<double>::infinity());  // to the picks (and labelled)
  std::vector<bool> taken(n, false);
  size_t last = n;
  const bool with_labelled = labelled > 0;
  if (with_labelled) {
    for (size_t i = 0; i < n; ++i) {
      for (size_t k = 0; k < labelled; ++k) nearest[i] = std::min(nearest[i], to_labelled(i, k));
    }
  } else {
    // The medoid: least summed distance to the pool (n^2 distances: for
    // 10k images 10^8 popcounts, under a second, or 10^8 distances between
    // 896-long embeddings, about a minute on one core).
    size_t first = 0;
    double best_sum = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < n; ++i) {
      double sum = 0;
      for (size_t j = 0; j < n; ++j) sum += dist(i, j);
      if (sum < best_sum) {
        best_sum = sum;
        first = i;
      }
    }
    const double mean = n > 1 ? best_sum / double(n - 1) : 0.0;
    out.push_back({first, mean, "the pool's medoid: mean " + unit(mean)});
    taken[first] = true;
    last = first;
  }
  while (out.size() < budget && out.size() < n) {
    size_t pick = n;
    for (size_t i = 0; i < n; ++i) {
      if (taken[i]) continue;
      if (last < n) nearest[i] = std::min(nearest[i], dist(i, last));
      if (pick == n || nearest[i] > nearest[pick]) pick = i;
    }
    taken[pick] = true;
    last = pick;
    out.push_back({pick, nearest[pick],
                   unit(nearest[pick]) + " from the nearest image " +
                       (with_labelled ? "labelled or picked before" : "picked before")});
  }
  return out;
}

double EmbeddingDistance(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (size_t k = 0; k < a.size() && k < b.size(); ++k) {
    const double d = double(a[k]) - double(b[k]);
    sum += d * d;
  }
  return std::sqrt(sum);
}

std::vector<SelectedImage> Diversity(const std::vector<SelectCandidate>& c, size_t budget,
                                     const std::vector<SelectCandidate>& labelled) {
  const bool embedded = !c.empty() && std::all_of(c.begin(), c.end(), [&](const SelectCandidate& x) {
    return !x.embedding.empty() && x.embedding.size() == c[0].embedding.size();
  });
  auto between = [embedded](const SelectCandidate& a, const SelectCandidate& b) {
    return embedded ? EmbeddingDistance(a.embedding, b.embedding)
                    : double(data::HammingDistance(a.phash, b.phash));
  };
  return FarthestPoint(
      c.size(), labelled.size(), budget, [&](size_t i, size_t j) { return between(c[i], c[j]); },
      [&](size_t i, size_t k) { return between(c[i], labelled[k]); },
      [embedded](double d) {
        return embedded ? "embedding distance " + Num(d, "%.3f")
                        : Num(d, d == std::floor(d) ? "%.0f" : "%.1f") + " hash bits";
      });
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
    case SelectStrategy::kMargin:
      return "margin";
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
        SelectStrategy::kMargin, SelectStrategy::kDiversity, SelectStrategy::kRandom}) {
    if (name == SelectStrategyName(s)) return s;
  }
  return Status::InvalidArgument(
      "strategy must be uncertainty, entropy, entropy_sum, margin, diversity or random, got '" + name + "'",
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

double SmallestClassMargin(const std::vector<eval::Detection>& detections, size_t* at) {
  double m = 1.0;
  for (size_t i = 0; i < detections.size(); ++i) {
    const double margin = std::clamp(double(detections[i].score) - double(detections[i].runner_up), 0.0, 1.0);
    if (margin < m || i == 0) {
      m = std::min(m, margin);
      if (at != nullptr) *at = i;
    }
  }
  return m;
}

double MeanBoxEntropy(const std::vector<eval::Detection>& detections) {
  if (detections.empty()) return 1.0;
  return TotalBoxEntropy(detections) / double(detections.size());
}

Result<std::vector<SelectedImage>> RankForSelection(const std::vector<SelectCandidate>& candidates,
                                                    SelectStrategy strategy, size_t budget, uint64_t seed,
                                                    const std::vector<SelectCandidate>& labelled) {
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
    case SelectStrategy::kMargin:
      for (size_t i = 0; i < candidates.size(); ++i)
        score[i] = 1.0 - SmallestClassMargin(candidates[i].detections);
      return TopByScore(score, budget, [&](size_t i) {
        const auto& ds = candidates[i].detections;
        if (ds.empty()) return std::string("no box at or above conf");
        size_t at = 0;
        SmallestClassMargin(ds, &at);
        return "class margin " + Num(ds[at].score - ds[at].runner_up, "%.3f") + " (" +
               Num(ds[at].score, "%.3f") + " for class " + std::to_string(ds[at].class_id) + ", " +
               Num(ds[at].runner_up, "%.3f") + " for the next)";
      });
    case SelectStrategy::kDiversity:
      return Diversity(candidates, budget, labelled);
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
  s.Choice("strategy", &strategy, {"uncertainty", "entropy", "entropy_sum", "margin", "diversity", "random"},
           "uncertainty: lowest best box score; entropy: highest mean score entropy; entropy_sum: highest "
           "summed score entropy (many unsure boxes); margin: smallest gap between a box's class and the "
           "runner-up class at its place; diversity: spread-out images (embedding=); random: "
           "seeded draw");
  s.Int("budget", &budget, "how many images to pick (required)", 0, 10000000);
  s.Choice(
      "embedding", &embedding, {"model", "phash"},
      "strategy=diversity: what distances are measured on: model (the network's pooled features; LibTorch "
      "weights) or phash (64-bit perceptual hashes; any model)");
  s.String("labelled", &labelled,
           "strategy=diversity: a folder of the images already labelled (subfolders included): picks start "
           "far from them (\"\" = none)");
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

Result<cv::Mat> ReadRgb(Env& env, const std::string& path) {
  KESTREL_ASSIGN_OR_RETURN(std::string bytes, env.ReadFile(path, uint64_t{2} << 30));
  return data::DecodeImage(bytes, path);
}

// The labelled images as diversity sees them: embeddings from `detector`
// (`batch` images a forward) or phashes. An unreadable file is an error
// naming labelled= (a labelled set the picks are measured against must be
// whole).
Result<std::vector<SelectCandidate>> LabelledCandidates(Env& env, const std::vector<std::string>& files,
                                                        bool embed, int batch, Detector& detector) {
  std::vector<SelectCandidate> out(files.size());
  for (size_t start = 0; start < files.size(); start += size_t(batch)) {
    const size_t end = std::min(files.size(), start + size_t(batch));
    std::vector<cv::Mat> images;
    for (size_t i = start; i < end; ++i) {
      Result<cv::Mat> rgb = ReadRgb(env, files[i]);
      if (!rgb.IsOk())
        return Status(rgb.GetStatus().Code(), files[i] + ": " + rgb.GetStatus().Message(), Field("labelled"));
      if (embed) {
        images.push_back(std::move(rgb).Value());
      } else {
        out[i].phash = data::PerceptualHash(*rgb);
      }
    }
    if (!embed) continue;
    std::vector<eval::ImageView> views;
    for (const cv::Mat& m : images) views.push_back({m.data, m.cols, m.rows, 3, m.step});
    KESTREL_ASSIGN_OR_RETURN(std::vector<eval::ImagePrediction> preds, detector.Predict(views));
    for (size_t k = 0; k < preds.size() && start + k < end; ++k) {
      if (preds[k].embedding.empty())
        return Status::InvalidArgument("the model gives no embeddings: use embedding=phash",
                                       Field("embedding"));
      out[start + k].embedding = std::move(preds[k].embedding);
    }
  }
  return out;
}

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
  if (!labelled.empty() && strategy != "diversity") {
    return Status::InvalidArgument(
        "labelled= is read by strategy=diversity only (got strategy=" + strategy + ")", Field("labelled"));
  }
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
  const bool embed = strategy == SelectStrategy::kDiversity && keys.embedding == "model";
  if (embed && IsOnnxModelPath(weights)) {
    return Status::InvalidArgument(weights +
                                       ": an ONNX export gives no embeddings (its graph ends at the "
                                       "detections): use the LibTorch weights or embedding=phash",
                                   Field("embedding"));
  }
  eval::InferenceOptions io = InferenceOptionsOf(p);
  io.embeddings = embed;
  Result<PredictSource> labelled_src = PredictSource{};
  if (!keys.labelled.empty()) {
    if (!env.Stat(keys.labelled).is_dir)
      return Status::InvalidArgument(keys.labelled + " is not a folder (labelled= takes a folder of images)",
                                     Field("labelled"));
    labelled_src = ResolvePredictSource(env, keys.labelled);
    if (!labelled_src.IsOk())
      return Status(labelled_src.GetStatus().Code(), labelled_src.GetStatus().Message(), Field("labelled"));
  }
  Result<std::unique_ptr<Detector>> loaded = load(weights, io, DetectorPlacement{p.device, p.runtime});
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
      if (embed) {
        if (im.embedding.empty()) {
          return Status::InvalidArgument(weights + " gives no embeddings: use embedding=phash",
                                         Field("embedding"));
        }
        candidates[i].embedding = im.embedding;
      } else {
        KESTREL_ASSIGN_OR_RETURN(cv::Mat rgb, ReadRgb(env, im.source));
        candidates[i].phash = data::PerceptualHash(rgb);
      }
    }
  }
  std::vector<SelectCandidate> labelled;
  if (!keys.labelled.empty()) {
    KESTREL_ASSIGN_OR_RETURN(labelled,
                             LabelledCandidates(env, labelled_src->files, embed, keys.batch, *detector));
  }
  KESTREL_ASSIGN_OR_RETURN(
      std::vector<SelectedImage> picks,
      RankForSelection(candidates, strategy, size_t(keys.budget), uint64_t(keys.seed), labelled));

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
          {"embedding",
           r.keys.strategy == "diversity" ? nlohmann::json(r.keys.embedding) : nlohmann::json(nullptr)},
          {"labelled", r.keys.labelled.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.keys.labelled)},
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
