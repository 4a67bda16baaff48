#include "app/label_studio_backend.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <opencv2/core.hpp>
#include <system_error>
#include <utility>

#include "app/backends.h"
#include "app/models.h"
#include "app/preannotations.h"
#include "app/predict.h"
#include "core/hash.h"
#include "data/image.h"

namespace kestrel::app {
namespace {

namespace fs = std::filesystem;

ErrorLocation At(const std::string& field) { return {"request", 0, field}; }  // app/jobs.h kRequestFile

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decodes a query value ('+' is a space, as browsers encode it);
// false for a malformed escape.
bool DecodeQueryValue(const std::string& text, std::string* out) {
  out->clear();
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out->push_back(' ');
    } else if (text[i] == '%') {
      if (i + 2 >= text.size()) return false;
      const int hi = HexValue(text[i + 1]);
      const int lo = HexValue(text[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out->push_back(static_cast<char>((hi << 4) | lo));
      i += 2;
    } else {
      out->push_back(text[i]);
    }
  }
  return true;
}

// "http(s)://AUTHORITY/rest" -> AUTHORITY and "/rest"; a URL without a
// scheme is a path on this server (authority "").
bool SplitUrl(const std::string& url, std::string* authority, std::string* path, bool* remote) {
  *remote = false;
  for (const char* scheme : {"http://", "https://"}) {
    const std::string s = scheme;
    if (url.size() >= s.size() && std::equal(s.begin(), s.end(), url.begin(), [](char a, char b) {
          return a == std::tolower(static_cast<unsigned char>(b));
        })) {
      const size_t slash = url.find('/', s.size());
      *authority = url.substr(s.size(), slash == std::string::npos ? std::string::npos : slash - s.size());
      *path = slash == std::string::npos ? "/" : url.substr(slash);
      *remote = true;
      return true;
    }
  }
  if (url.empty() || url[0] != '/') return false;
  authority->clear();
  *path = url;
  return true;
}

std::string LowerAscii(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Result<LsImageRef> LocalFile(const std::string& query, const LsImageOptions& options,
                             const std::string& field) {
  std::string d;
  bool have_d = false;
  size_t start = 0;
  while (start <= query.size()) {
    const size_t amp = query.find('&', start);
    const std::string pair = query.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
    if (pair.rfind("d=", 0) == 0) {
      if (!DecodeQueryValue(pair.substr(2), &d))
        return Status::InvalidArgument("a local-files URL's d= has a malformed percent escape", At(field));
      have_d = true;
    }
    if (amp == std::string::npos) break;
    start = amp + 1;
  }
  if (!have_d || d.empty())
    return Status::InvalidArgument("a local-files URL needs d=PATH (/data/local-files/?d=images/x.jpg)",
                                   At(field));
  if (options.local_files_root.empty())
    return Status::InvalidArgument(
        "local-files images are off: start kestrel serve with --ls-local-files-root DIR (Label Studio's "
        "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT as this host sees it)",
        At(field));
  if (d.find('\0') != std::string::npos)
    return Status::InvalidArgument("a local-files path may not hold NUL", At(field));
  // Label Studio's d= is relative to its document root; a leading '/' is
  // the same place.
  while (!d.empty() && d[0] == '/') d.erase(0, 1);
  auto rel = SafeRelativePath(d);
  if (!rel.IsOk())
    return Status::InvalidArgument(
        "local-files path '" + d + "' leaves the local-files root (a '..' segment)", At(field));
  std::error_code ec;
  const fs::path root = fs::weakly_canonical(options.local_files_root, ec);
  if (ec) return Status::Internal("cannot resolve the local-files root: " + ec.message(), At(field));
  const fs::path joined = root / *rel;
  if (!fs::exists(joined, ec))
    return Status::NotFound("no local file '" + *rel + "' under the local-files root", At(field));
  const fs::path canonical = fs::canonical(joined, ec);
  if (ec) return Status::NotFound("cannot resolve local file '" + *rel + "': " + ec.message(), At(field));
  const std::string root_text = root.string();
  const std::string text = canonical.string();
  const bool inside = text.size() > root_text.size() && text.compare(0, root_text.size(), root_text) == 0 &&
                      (root_text.back() == '/' || text[root_text.size()] == '/');
  if (!inside)
    return Status::InvalidArgument("local-files path '" + *rel + "' resolves outside the local-files root",
                                   At(field));
  if (!fs::is_regular_file(canonical, ec))
    return Status::InvalidArgument("local-files path '" + *rel + "' is not a file", At(field));
  LsImageRef ref;
  ref.kind = LsImageRef::Kind::kLocalFile;
  ref.path = text;
  return ref;
}

}  // namespace

Result<LsImageRef> ResolveLsImage(const std::string& url, const LsImageOptions& options,
                                  const std::string& field) {
  std::string authority, path;
  bool absolute = false;
  if (!SplitUrl(url, &authority, &path, &absolute))
    return Status::InvalidArgument(
        "'" + url.substr(0, 200) +
            "' is no image URL this server reads: a dataset image "
            "(/api/datasets/NAME/images/SHA) or a local file (/data/local-files/?d=PATH)",
        At(field));
  const size_t q = path.find('?');
  const std::string route = path.substr(0, q);
  const std::string query = q == std::string::npos ? "" : path.substr(q + 1);
  if (route == "/data/local-files/" || route == "/data/local-files") return LocalFile(query, options, field);
  const std::string prefix = "/api/datasets/";
  if (route.rfind(prefix, 0) == 0 && (!absolute || LowerAscii(authority) == LowerAscii(options.own_host))) {
    const std::string rest = route.substr(prefix.size());
    const size_t mid = rest.find("/images/");
    if (mid != std::string::npos && mid > 0) {
      LsImageRef ref;
      ref.kind = LsImageRef::Kind::kDatasetImage;
      ref.dataset = rest.substr(0, mid);
      ref.sha = rest.substr(mid + 8);
      if (ref.dataset.find('/') == std::string::npos && IsSha256Hex(ref.sha)) return ref;
    }
  }
  if (absolute)
    return Status::InvalidArgument("image URL '" + url.substr(0, 200) +
                                       "' is on another host: kestrel serve fetches nothing from the network "
                                       "(use a dataset image URL of this server or a local-files path)",
                                   At(field));
  return Status::InvalidArgument(
      "'" + url.substr(0, 200) +
          "' is no image URL this server reads: a dataset image "
          "(/api/datasets/NAME/images/SHA) or a local file (/data/local-files/?d=PATH)",
      At(field));
}

LsModel::LsModel(std::string model_ref, std::unique_ptr<Detector> detector)
    : ref_(model_ref), model_version_(std::move(model_ref)), detector_(std::move(detector)) {
  names_ = detector_->Names();
  arch_ = detector_->Arch();
}

Result<std::unique_ptr<LsModel>> LsModel::Load(store::MetadataStore& meta, store::ArtifactStore& blobs,
                                               Env& env, const std::string& ref) {
  const eval::InferenceOptions options = InferenceOptionsOf(PredictRequest{});
  ModelRegistry reg(meta, blobs, env);
  auto resolved = reg.Resolve(ref);
  if (!resolved.IsOk()) {
    const Status& s = resolved.GetStatus();
    return Status(s.Code(), "--ls-model " + ref + ": " + s.Message(), {"command line", 0, "ls-model"});
  }
  const store::ModelRecord m = std::move(resolved).Value();
  const std::string version = m.name + "@v" + std::to_string(m.seq);
  std::string why = "it has no verified ONNX export";
  // Newest first: the latest verified export that is still as recorded.
  for (auto it = m.exports.rbegin(); it != m.exports.rend(); ++it) {
    if (it->format != "onnx" || !it->verified) continue;
    auto sha = Sha256File(it->path);
    if (!sha.IsOk() || *sha != it->sha256) {
      why = "its verified ONNX export " + it->path +
            (sha.IsOk() ? " changed since it was recorded" : " is gone");
      continue;
    }
    // The side the export was made at (a fixed-input file replaces it with
    // its own anyway): what predict's imgsz=0 would read from the file.
    eval::InferenceOptions o = options;
    int side = 0;
    const nlohmann::json rec = nlohmann::json::parse(it->options_json, nullptr, false);
    if (rec.is_object() && rec.contains("imgsz") && rec["imgsz"].is_array()) {
      for (const auto& v : rec["imgsz"]) {
        if (v.is_number_integer()) side = std::max(side, v.get<int>());
      }
    }
    o.imgsz = side > 0 ? side : 640;
    auto det = LoadDetector(it->path, o, DetectorPlacement{"cpu", "opencv"});
    if (!det.IsOk()) {
      if (det.GetStatus().Code() == StatusCode::kFailedPrecondition)
        return Status::FailedPrecondition("--ls-model " + ref + ": " + det.GetStatus().Message(),
                                          {"command line", 0, "ls-model"});
      return det.GetStatus();
    }
    auto model = std::make_unique<LsModel>(version, std::move(det).Value());
    model->ref_ = ref;
    model->onnx_path_ = it->path;
    return model;
  }
  return Status::FailedPrecondition(
      "--ls-model " + ref + " (" + version + "): " + why + "; `kestrel export model=" + version +
          " format=onnx` makes one, and the Label Studio backend runs it in OpenCV DNN",
      {"command line", 0, "ls-model"});
}

Result<nlohmann::json> LsModel::PredictTasks(const std::vector<LsTaskImage>& images,
                                             const std::string& from_name, const std::string& to_name) {
  std::vector<PredictedImage> predicted;
  for (const LsTaskImage& in : images) {
    auto img = data::DecodeImage(in.bytes, in.source);
    if (!img.IsOk())
      return Status::InvalidArgument(
          "the image of " + in.field + " cannot be decoded: " + img.GetStatus().Message(), At(in.field));
    const cv::Mat& rgb = *img;
    const std::vector<eval::ImageView> views{{rgb.data, rgb.cols, rgb.rows, 3, rgb.step[0]}};
    Result<std::vector<eval::ImagePrediction>> preds = Status::Internal("not run");
    {
      MutexLock l(mu_);
      preds = detector_->Predict(views);
    }
    if (!preds.IsOk()) return preds.GetStatus();
    if (preds->size() != 1) return Status::Internal("the detector returned a wrong number of images");
    PredictedImage out;
    out.source = in.source;
    out.output = in.source;
    out.width = (*preds)[0].width;
    out.height = (*preds)[0].height;
    out.detections = std::move((*preds)[0].detections);
    predicted.push_back(std::move(out));
  }
  PreannotationOptions po;
  po.format = "label-studio";
  po.ls_from_name = from_name;
  po.ls_to_name = to_name;
  po.model_version = model_version_;
  const nlohmann::json tasks = LabelStudioTasksJson(predicted, names_, po);
  nlohmann::json results = nlohmann::json::array();
  for (const auto& task : tasks) results.push_back(task["predictions"][0]);
  return nlohmann::json{{"results", std::move(results)}, {"model_version", model_version_}};
}

}  // namespace kestrel::app
