#include "train/results_png.h"

#include <spdlog/spdlog.h>

namespace kestrel::train {

eval::ResultsTable ResultsTableFromHistory(const std::vector<EpochRecord>& history, bool has_val) {
  eval::ResultsTable t;
  t.columns = 5;
  for (const EpochRecord& e : history) t.epochs.push_back(e.epoch);
  auto series = [&](const char* title, const char* ylabel, double EpochRecord::*field, bool needs_val) {
    eval::ResultsSeries s;
    s.title = title;
    s.ylabel = ylabel;
    if (needs_val && !has_val) {
      s.missing = "no val split: not computed";
    } else {
      for (const EpochRecord& e : history) s.values.push_back(e.*field);
    }
    t.series.push_back(std::move(s));
  };
  series("train/box_loss", "loss", &EpochRecord::box, false);
  series("train/cls_loss", "loss", &EpochRecord::cls, false);
  series("train/dfl_loss", "loss", &EpochRecord::dfl, false);
  series("metrics/precision", "precision", &EpochRecord::precision, true);
  series("metrics/recall", "recall", &EpochRecord::recall, true);
  series("val/box_loss", "loss", &EpochRecord::val_box, true);
  series("val/cls_loss", "loss", &EpochRecord::val_cls, true);
  series("val/dfl_loss", "loss", &EpochRecord::val_dfl, true);
  series("metrics/mAP50", "mAP50", &EpochRecord::map50, true);
  series("metrics/mAP50-95", "mAP50-95", &EpochRecord::map5095, true);
  return t;
}

Status WriteResultsPng(Env& env, const std::string& path, const std::vector<EpochRecord>& history,
                       bool has_val) {
  Result<std::string> png = eval::RenderResultsPlot(ResultsTableFromHistory(history, has_val));
  if (!png.IsOk()) {
    spdlog::warn("results.png not updated: {}", png.GetStatus().ToString());
    return Status();
  }
  return env.WriteFileAtomic(path, *png);
}

}  // namespace kestrel::train
