#include "eval/metrics.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>

#include "eval/ap.h"

namespace kestrel::eval {

const std::array<double, kNumIouThresholds> kIouThresholds = {0.50, 0.55, 0.60, 0.65, 0.70,
                                                              0.75, 0.80, 0.85, 0.90, 0.95};

namespace {

constexpr size_t kCurvePoints = 1000;
constexpr double kEps = 1e-16;

bool FiniteBox(const Box& b) {
  return std::isfinite(b.x1) && std::isfinite(b.y1) && std::isfinite(b.x2) && std::isfinite(b.y2);
}

ErrorLocation Field(const std::string& f) { return ErrorLocation{"", 0, f}; }

Status CheckInputs(const std::vector<GroundTruth>& gt, const std::vector<Detection>& preds, int nc) {
  for (size_t i = 0; i < gt.size(); ++i) {
    const std::string at = "labels[" + std::to_string(i) + "]";
    if (gt[i].class_id < 0 || gt[i].class_id >= nc) {
      return Status::InvalidArgument(
          "class id " + std::to_string(gt[i].class_id) + " outside [0, " + std::to_string(nc) + ")",
          Field(at + ".class_id"));
    }
    if (!FiniteBox(gt[i].box)) return Status::InvalidArgument("non-finite box", Field(at + ".box"));
  }
  for (size_t i = 0; i < preds.size(); ++i) {
    const std::string at = "predictions[" + std::to_string(i) + "]";
    if (preds[i].class_id < 0 || preds[i].class_id >= nc) {
      return Status::InvalidArgument(
          "class id " + std::to_string(preds[i].class_id) + " outside [0, " + std::to_string(nc) + ")",
          Field(at + ".class_id"));
    }
    if (!FiniteBox(preds[i].box)) {
      return Status::InvalidArgument("non-finite box", Field(at + ".box"));
    }
    if (!std::isfinite(preds[i].score)) {
      return Status::InvalidArgument("non-finite score", Field(at + ".score"));
    }
  }
  return Status();
}

// Indices of `preds` by descending score, stable.
std::vector<uint32_t> ScoreOrder(const std::vector<Detection>& preds) {
  std::vector<uint32_t> order(preds.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return preds[a].score > preds[b].score; });
  return order;
}

}  // namespace

std::vector<Detection> ScoredPredictions(const std::vector<Detection>& preds, double conf, int max_det) {
  const std::vector<uint32_t> order = ScoreOrder(preds);
  std::vector<Detection> kept;
  const size_t cap = size_t(std::max(0, max_det));
  kept.reserve(std::min(order.size(), cap));
  for (uint32_t i : order) {
    if (kept.size() >= cap) break;
    if (double(preds[i].score) > conf) kept.push_back(preds[i]);
  }
  return kept;
}

Status EvalOptions::Validate() const {
  if (num_classes < 1) {
    return Status::InvalidArgument("must be >= 1, got " + std::to_string(num_classes), Field("num_classes"));
  }
  if (!class_names.empty() && class_names.size() != size_t(num_classes)) {
    return Status::InvalidArgument("has " + std::to_string(class_names.size()) + " names for " +
                                       std::to_string(num_classes) + " classes",
                                   Field("class_names"));
  }
  if (!(conf >= 0 && conf < 1)) return Status::InvalidArgument("must be in [0, 1)", Field("conf"));
  if (!(iou >= 0 && iou <= 1)) return Status::InvalidArgument("must be in [0, 1]", Field("iou"));
  if (max_det < 1) return Status::InvalidArgument("must be >= 1", Field("max_det"));
  if (!(confusion_conf >= 0 && confusion_conf < 1)) {
    return Status::InvalidArgument("must be in [0, 1)", Field("confusion_conf"));
  }
  if (!(confusion_iou >= 0 && confusion_iou <= 1)) {
    return Status::InvalidArgument("must be in [0, 1]", Field("confusion_iou"));
  }
  if (!(errors.bg_iou >= 0 && errors.bg_iou <= errors.fg_iou && errors.fg_iou <= 1)) {
    return Status::InvalidArgument("need 0 <= bg_iou <= fg_iou <= 1", Field("errors"));
  }
  return Status();
}

std::vector<uint16_t> MatchPredictions(const std::vector<GroundTruth>& gt,
                                       const std::vector<Detection>& preds) {
  std::vector<uint16_t> tp(preds.size(), 0);
  if (gt.empty() || preds.empty()) return tp;
  // Labels grouped by class (counting sort keeps label order inside a class,
  // so strict '>' below gives IoU ties to the lowest label index).
  int max_class = 0;
  for (const GroundTruth& g : gt) max_class = std::max(max_class, g.class_id);
  std::vector<uint32_t> start(size_t(max_class) + 2, 0);
  for (const GroundTruth& g : gt) ++start[size_t(g.class_id) + 1];
  for (size_t c = 1; c < start.size(); ++c) start[c] += start[c - 1];
  std::vector<uint32_t> by_class(gt.size());
  {
    std::vector<uint32_t> fill(start.begin(), start.end() - 1);
    for (size_t g = 0; g < gt.size(); ++g) by_class[fill[size_t(gt[g].class_id)]++] = uint32_t(g);
  }
  // A prediction can only ever match its best label: at every threshold the
  // reference keeps each prediction's highest-IoU pair. So prediction p is a
  // TP at t iff best_iou(p) >= t and no lower-index prediction with the same
  // best label reached t, i.e. t > (max best_iou of those earlier ones).
  std::vector<double> label_max(gt.size(), -1.0);
  for (size_t p = 0; p < preds.size(); ++p) {
    const int c = preds[p].class_id;
    if (c < 0 || c > max_class) continue;
    double best = 0.0;
    int best_g = -1;
    for (uint32_t k = start[size_t(c)]; k < start[size_t(c) + 1]; ++k) {
      const double v = Iou(preds[p].box, gt[by_class[k]].box);
      if (v > best) {
        best = v;
        best_g = int(by_class[k]);
      }
    }
    if (best_g < 0 || best < kIouThresholds[0]) continue;
    double& before = label_max[size_t(best_g)];
    uint16_t mask = 0;
    for (int t = 0; t < kNumIouThresholds; ++t) {
      if (best >= kIouThresholds[size_t(t)] && before < kIouThresholds[size_t(t)]) {
        mask = uint16_t(mask | (1u << t));
      }
    }
    tp[p] = mask;
    before = std::max(before, best);
  }
  return tp;
}

struct DetectionEvaluator::State {
  struct Entry {
    float conf;
    uint16_t tp;
  };
  EvalOptions opts;
  Status opts_status;
  std::vector<std::vector<Entry>> entries;  // per class, in arrival order
  std::vector<int64_t> labels;              // per class
  std::vector<int64_t> images_with;         // per class
  int64_t images = 0;
  int64_t predictions = 0;
  int64_t dropped = 0;
  ConfusionMatrix confusion;
  ErrorAnalyzer errors;
};

DetectionEvaluator::DetectionEvaluator(EvalOptions opts) : s_(std::make_unique<State>()) {
  s_->opts_status = opts.Validate();
  const size_t nc = size_t(std::max(0, opts.num_classes));
  s_->entries.resize(nc);
  s_->labels.assign(nc, 0);
  s_->images_with.assign(nc, 0);
  s_->confusion = ConfusionMatrix(int(nc), opts.confusion_conf, opts.confusion_iou);
  s_->errors = ErrorAnalyzer(int(nc), opts.errors);
  s_->opts = std::move(opts);
}
DetectionEvaluator::~DetectionEvaluator() = default;
DetectionEvaluator::DetectionEvaluator(DetectionEvaluator&&) noexcept = default;
DetectionEvaluator& DetectionEvaluator::operator=(DetectionEvaluator&&) noexcept = default;

Status DetectionEvaluator::OptionsStatus() const { return s_->opts_status; }

Status DetectionEvaluator::AddImage(const std::vector<GroundTruth>& gt, const std::vector<Detection>& preds) {
  KESTREL_RETURN_IF_ERROR(s_->opts_status);
  KESTREL_RETURN_IF_ERROR(CheckInputs(gt, preds, s_->opts.num_classes));
  const std::vector<Detection> kept = ScoredPredictions(preds, s_->opts.conf, s_->opts.max_det);
  const std::vector<uint16_t> tp = MatchPredictions(gt, kept);
  for (size_t i = 0; i < kept.size(); ++i) {
    s_->entries[size_t(kept[i].class_id)].push_back(State::Entry{kept[i].score, tp[i]});
  }
  std::vector<char> seen(s_->labels.size(), 0);
  for (const GroundTruth& g : gt) {
    ++s_->labels[size_t(g.class_id)];
    if (!seen[size_t(g.class_id)]) {
      seen[size_t(g.class_id)] = 1;
      ++s_->images_with[size_t(g.class_id)];
    }
  }
  s_->confusion.ProcessImage(gt, kept);
  s_->errors.ProcessImage(gt, kept);
  ++s_->images;
  s_->predictions += int64_t(kept.size());
  s_->dropped += int64_t(preds.size() - kept.size());
  return Status();
}

namespace {

// AP per threshold and the confidence curves of one class. `e` sorted by
// descending confidence.
template <typename Entry>
void ScoreClass(const std::vector<Entry>& e, int64_t n_labels, const std::vector<double>& x, ClassMetrics* cm,
                std::vector<double>* p_curve, std::vector<double>* r_curve, std::vector<double>* pr_curve) {
  const size_t n = e.size();
  p_curve->assign(x.size(), 0.0);
  r_curve->assign(x.size(), 0.0);
  pr_curve->assign(x.size(), 0.0);
  if (n == 0 || n_labels == 0) return;
  std::vector<double> recall(n), precision(n);
  std::vector<double> neg_conf(n);
  for (size_t i = 0; i < n; ++i) neg_conf[i] = -double(e[i].conf);
  const double denom = double(n_labels) + kEps;
  for (int t = 0; t < kNumIouThresholds; ++t) {
    double tpc = 0;
    for (size_t i = 0; i < n; ++i) {
      tpc += double((e[i].tp >> t) & 1u);
      recall[i] = tpc / denom;
      precision[i] = tpc / double(i + 1);
    }
    cm->ap[size_t(t)] = ComputeAp(recall, precision);
    if (t != 0) continue;
    // Curves vs confidence at IoU 0.5. numpy-style interp over -conf
    // (ascending) at queries -x, taken in ascending order.
    std::vector<double> q(x.size()), r(x.size()), p(x.size());
    for (size_t k = 0; k < x.size(); ++k) q[k] = -x[x.size() - 1 - k];
    InterpAscending(q.data(), q.size(), neg_conf.data(), recall.data(), n, 0.0, recall.back(), r.data());
    InterpAscending(q.data(), q.size(), neg_conf.data(), precision.data(), n, 1.0, precision.back(),
                    p.data());
    for (size_t k = 0; k < x.size(); ++k) {
      (*r_curve)[x.size() - 1 - k] = r[k];
      (*p_curve)[x.size() - 1 - k] = p[k];
    }
    *pr_curve = PrecisionEnvelopeAt(recall, precision, x.size());
  }
}

}  // namespace

Result<EvalResult> DetectionEvaluator::Finalize() const {
  KESTREL_RETURN_IF_ERROR(s_->opts_status);
  const State& s = *s_;
  EvalResult res;
  res.settings = s.opts;
  res.images = s.images;
  res.predictions = s.predictions;
  res.predictions_dropped = s.dropped;
  res.confusion = s.confusion;
  res.errors = s.errors;
  res.label_counts = s.labels;
  res.curves.x = Linspace01(kCurvePoints);
  const std::vector<double>& x = res.curves.x;

  std::vector<State::Entry> sorted;
  for (size_t c = 0; c < s.labels.size(); ++c) {
    res.instances += s.labels[c];
    if (s.labels[c] == 0) continue;
    sorted = s.entries[c];
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const State::Entry& a, const State::Entry& b) { return a.conf > b.conf; });
    ClassMetrics cm;
    cm.class_id = int(c);
    if (c < s.opts.class_names.size()) cm.name = s.opts.class_names[c];
    cm.images = s.images_with[c];
    cm.instances = s.labels[c];
    cm.predictions = int64_t(sorted.size());
    std::vector<double> p, r, pr;
    ScoreClass(sorted, s.labels[c], x, &cm, &p, &r, &pr);
    cm.ap50 = cm.ap[0];
    double sum = 0;
    for (double a : cm.ap) sum += a;
    cm.ap5095 = sum / kNumIouThresholds;
    std::vector<double> f1(x.size());
    for (size_t k = 0; k < x.size(); ++k) f1[k] = 2 * p[k] * r[k] / (p[k] + r[k] + kEps);
    res.classes.push_back(std::move(cm));
    res.curves.precision.push_back(std::move(p));
    res.curves.recall.push_back(std::move(r));
    res.curves.f1.push_back(std::move(f1));
    res.curves.pr.push_back(std::move(pr));
  }
  const size_t nk = res.classes.size();
  if (nk == 0) return res;

  std::vector<double> mean_f1(x.size(), 0.0);
  for (size_t k = 0; k < x.size(); ++k) {
    double sum = 0;
    for (size_t c = 0; c < nk; ++c) sum += res.curves.f1[c][k];
    mean_f1[k] = sum / double(nk);
  }
  const std::vector<double> smooth = SmoothBox(mean_f1, 0.1);
  const size_t best = size_t(std::max_element(smooth.begin(), smooth.end()) - smooth.begin());
  res.best_conf = x[best];
  res.best_f1 = smooth[best];
  double sp = 0, sr = 0, s50 = 0, s5095 = 0;
  for (size_t c = 0; c < nk; ++c) {
    ClassMetrics& cm = res.classes[c];
    cm.precision = res.curves.precision[c][best];
    cm.recall = res.curves.recall[c][best];
    cm.f1 = res.curves.f1[c][best];
    sp += cm.precision;
    sr += cm.recall;
    s50 += cm.ap50;
    for (double a : cm.ap) s5095 += a;
  }
  res.precision = sp / double(nk);
  res.recall = sr / double(nk);
  res.map50 = s50 / double(nk);
  res.map5095 = s5095 / double(nk * kNumIouThresholds);
  res.fitness = 0.1 * res.map50 + 0.9 * res.map5095;
  return res;
}

nlohmann::json EvalResultToJson(const EvalResult& r, bool with_curves) {
  using nlohmann::json;
  const EvalOptions& o = r.settings;
  json settings{
      {"num_classes", o.num_classes},
      {"conf", o.conf},
      {"iou", o.iou},
      {"max_det", o.max_det},
      {"iou_thresholds", kIouThresholds},
      {"confusion_conf", o.confusion_conf},
      {"confusion_iou", o.confusion_iou},
      {"errors", {{"conf", o.errors.conf}, {"fg_iou", o.errors.fg_iou}, {"bg_iou", o.errors.bg_iou}}}};
  if (!o.class_names.empty()) settings["class_names"] = o.class_names;
  json classes = json::array();
  for (const ClassMetrics& c : r.classes) {
    classes.push_back(json{{"class_id", c.class_id},
                           {"name", c.name},
                           {"images", c.images},
                           {"instances", c.instances},
                           {"predictions", c.predictions},
                           {"precision", c.precision},
                           {"recall", c.recall},
                           {"f1", c.f1},
                           {"map50", c.ap50},
                           {"map5095", c.ap5095},
                           {"ap", c.ap}});
  }
  json out{{"settings", std::move(settings)},
           {"images", r.images},
           {"instances", r.instances},
           {"predictions", r.predictions},
           {"predictions_dropped", r.predictions_dropped},
           {"precision", r.precision},
           {"recall", r.recall},
           {"map50", r.map50},
           {"map5095", r.map5095},
           {"fitness", r.fitness},
           {"best_conf", r.best_conf},
           {"best_f1", r.best_f1},
           {"classes", std::move(classes)},
           {"label_counts", r.label_counts},
           {"confusion", r.confusion.ToJson()},
           {"errors", r.errors.ToJson()}};
  if (with_curves) {
    out["curves"] = json{{"x", r.curves.x},
                         {"precision", r.curves.precision},
                         {"recall", r.curves.recall},
                         {"f1", r.curves.f1},
                         {"pr", r.curves.pr}};
  }
  return out;
}

std::vector<double> MeanOverClasses(const std::vector<std::vector<double>>& rows, size_t n) {
  std::vector<double> m(n, 0.0);
  if (rows.empty()) return m;
  for (const auto& row : rows) {
    for (size_t k = 0; k < n && k < row.size(); ++k) m[k] += row[k];
  }
  for (double& v : m) v /= double(rows.size());
  return m;
}

namespace {

// `y` sampled at x (ascending) read at `points` evenly spaced values 0..1.
std::vector<double> Resample(const std::vector<double>& x, const std::vector<double>& y, size_t points) {
  const std::vector<double> q = Linspace01(points);
  std::vector<double> out(points, 0.0);
  if (x.empty() || y.size() != x.size()) return out;
  InterpAscending(q.data(), q.size(), x.data(), y.data(), x.size(), y.front(), y.back(), out.data());
  return out;
}

}  // namespace

MeanCurves MeanCurvesOf(const EvalResult& r, size_t points) {
  MeanCurves c;
  const std::vector<double>& x = r.curves.x;
  if (x.empty()) return c;
  c.confidence = c.pr_recall = x;
  c.precision = SmoothBox(MeanOverClasses(r.curves.precision, x.size()), kMeanCurveSmoothing);
  c.recall = SmoothBox(MeanOverClasses(r.curves.recall, x.size()), kMeanCurveSmoothing);
  c.f1 = SmoothBox(MeanOverClasses(r.curves.f1, x.size()), kMeanCurveSmoothing);
  c.pr_precision = MeanOverClasses(r.curves.pr, x.size());
  if (points == 0 || points == x.size()) return c;
  for (std::vector<double>* v : {&c.precision, &c.recall, &c.f1, &c.pr_precision})
    *v = Resample(x, *v, points);
  c.confidence = c.pr_recall = Linspace01(points);
  return c;
}

nlohmann::json MeanCurvesJson(const MeanCurves& c) {
  return nlohmann::json{{"confidence", c.confidence},
                        {"precision", c.precision},
                        {"recall", c.recall},
                        {"f1", c.f1},
                        {"pr", {{"recall", c.pr_recall}, {"precision", c.pr_precision}}}};
}

Result<EvalResult> EvalResultFromJson(const nlohmann::json& metrics) {
  using nlohmann::json;
  EvalResult r;
  std::string at = "metrics";
  try {
    const json& s = metrics.at("settings");
    at = "metrics.settings";
    EvalOptions& o = r.settings;
    o.num_classes = s.at("num_classes").get<int>();
    o.conf = s.at("conf").get<double>();
    o.iou = s.at("iou").get<double>();
    o.max_det = s.at("max_det").get<int>();
    o.confusion_conf = s.at("confusion_conf").get<double>();
    o.confusion_iou = s.at("confusion_iou").get<double>();
    if (s.contains("class_names")) o.class_names = s["class_names"].get<std::vector<std::string>>();
    const json& e = s.at("errors");
    o.errors = {e.at("conf").get<double>(), e.at("fg_iou").get<double>(), e.at("bg_iou").get<double>()};
    at = "metrics";
    r.images = metrics.at("images").get<int64_t>();
    r.instances = metrics.at("instances").get<int64_t>();
    r.predictions = metrics.at("predictions").get<int64_t>();
    r.predictions_dropped = metrics.at("predictions_dropped").get<int64_t>();
    r.precision = metrics.at("precision").get<double>();
    r.recall = metrics.at("recall").get<double>();
    r.map50 = metrics.at("map50").get<double>();
    r.map5095 = metrics.at("map5095").get<double>();
    r.fitness = metrics.at("fitness").get<double>();
    r.best_conf = metrics.at("best_conf").get<double>();
    r.best_f1 = metrics.at("best_f1").get<double>();
    r.label_counts = metrics.at("label_counts").get<std::vector<int64_t>>();
    at = "metrics.classes";
    for (const json& c : metrics.at("classes")) {
      ClassMetrics m;
      m.class_id = c.at("class_id").get<int>();
      m.name = c.at("name").get<std::string>();
      m.images = c.at("images").get<int64_t>();
      m.instances = c.at("instances").get<int64_t>();
      m.predictions = c.at("predictions").get<int64_t>();
      m.precision = c.at("precision").get<double>();
      m.recall = c.at("recall").get<double>();
      m.f1 = c.at("f1").get<double>();
      m.ap50 = c.at("map50").get<double>();
      m.ap5095 = c.at("map5095").get<double>();
      m.ap = c.at("ap").get<std::array<double, kNumIouThresholds>>();
      r.classes.push_back(std::move(m));
    }
  } catch (const json::exception& ex) {
    return Status::Corruption(std::string("not an evaluation's metrics: ") + ex.what(), {"", 0, at});
  }
  KESTREL_ASSIGN_OR_RETURN(r.confusion, ConfusionMatrix::FromJson(metrics.value("confusion", json())));
  r.errors = ErrorAnalyzer(r.settings.num_classes, r.settings.errors);
  return r;
}

}  // namespace kestrel::eval
