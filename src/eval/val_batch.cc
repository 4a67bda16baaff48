#include "eval/val_batch.h"

#include <algorithm>
#include <cmath>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "data/image.h"
#include "eval/plots.h"

namespace kestrel::eval {
namespace {

Box ScaleBox(const Box& b, double sx, double sy) {
  return Box{float(b.x1 * sx), float(b.y1 * sy), float(b.x2 * sx), float(b.y2 * sy)};
}

}  // namespace

Result<ValBatchGrids> RenderValBatch(const EvalSplit& split,
                                     const std::vector<std::vector<Detection>>& per_image,
                                     const ImageBytesReader& read, const ValBatchOptions& opts) {
  return RenderValBatch(split.images, split.names, per_image, read, opts);
}

Result<ValBatchGrids> RenderValBatch(const std::vector<SplitImage>& images,
                                     const std::vector<std::string>& names,
                                     const std::vector<std::vector<Detection>>& per_image,
                                     const ImageBytesReader& read, const ValBatchOptions& opts) {
  if (per_image.size() != images.size()) {
    return Status::Internal("predictions for " + std::to_string(per_image.size()) + " images, split has " +
                            std::to_string(images.size()));
  }
  if (opts.max_images < 1) return Status::InvalidArgument("max_images must be >= 1", {"", 0, "max_images"});
  const size_t n = std::min(opts.max_images, images.size());
  // Each image is shrunk to its tile right after decoding, so a batch of big
  // photos holds 16 thumbnails, not 16 full frames.
  std::vector<cv::Mat> thumbs(n);
  std::vector<GridTile> labels(n), preds(n);
  for (size_t i = 0; i < n; ++i) {
    const SplitImage& im = images[i];
    KESTREL_ASSIGN_OR_RETURN(std::string bytes, read(im));
    KESTREL_ASSIGN_OR_RETURN(cv::Mat rgb, data::DecodeImage(bytes, im.path));
    const double s =
        std::min(1.0, std::min(double(opts.tile_size) / rgb.cols, double(opts.tile_size) / rgb.rows));
    const int w = std::max(1, int(std::lround(rgb.cols * s)));
    const int h = std::max(1, int(std::lround(rgb.rows * s)));
    try {
      cv::Mat small;
      if (w != rgb.cols || h != rgb.rows) {
        cv::resize(rgb, small, cv::Size(w, h), 0, 0, cv::INTER_AREA);
      } else {
        small = rgb;
      }
      cv::cvtColor(small, thumbs[i], cv::COLOR_RGB2BGR);
    } catch (const cv::Exception& e) {
      return Status::Internal(std::string("OpenCV: ") + e.what(), {im.path, 0, ""});
    }
    // Boxes are in pixels of the oriented image (= the decoded size).
    const double sx = double(w) / rgb.cols, sy = double(h) / rgb.rows;
    const ImageView view{thumbs[i].data, thumbs[i].cols, thumbs[i].rows, 3, thumbs[i].step};
    const std::string title =
        im.path.substr(im.path.find_last_of('/') == std::string::npos ? 0 : im.path.find_last_of('/') + 1);
    labels[i].image = view;
    labels[i].title = title;
    for (const GroundTruth& g : im.labels) labels[i].labels.push_back({ScaleBox(g.box, sx, sy), g.class_id});
    preds[i].image = view;
    preds[i].title = title;
    for (const Detection& d : per_image[i]) {
      if (d.score >= opts.min_score)
        preds[i].predictions.push_back({ScaleBox(d.box, sx, sy), d.score, d.class_id});
    }
  }
  GridOptions go;
  go.columns = opts.columns;
  go.tile_size = opts.tile_size;
  go.min_score = opts.min_score;
  go.format = GridFormat::kJpeg;
  go.label_names = true;
  ValBatchGrids out;
  out.images = n;
  KESTREL_ASSIGN_OR_RETURN(out.labels_jpg, RenderDetectionGrid(labels, names, go));
  KESTREL_ASSIGN_OR_RETURN(out.pred_jpg, RenderDetectionGrid(preds, names, go));
  return out;
}

}  // namespace kestrel::eval
