#include "app/preannotations.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace kestrel::app {
namespace {

constexpr const char* kLabelStudio = "label-studio";
constexpr const char* kCvat = "cvat";

ErrorLocation Field(const std::string& field) { return {"command line", 0, field}; }

bool IsTagName(const std::string& s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

std::string XmlEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Everything but RFC 3986's unreserved characters and '/' is %XX, so a name
// with spaces, '#', '?' or '&' stays one path in a URL or a query value.
std::string PercentEncode(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || c == '.' || c == '~' || c == '/';
    if (keep) {
      out += char(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string ClassName(int class_id, const std::vector<std::string>& names) {
  if (class_id >= 0 && size_t(class_id) < names.size()) return names[size_t(class_id)];
  return std::to_string(class_id);
}

// The box in the image's pixels: the detector's box may reach a fraction
// past the border, which neither tool accepts.
eval::Box Clipped(const eval::Box& b, int width, int height) {
  auto clip = [](float v, int hi) { return std::clamp(v, 0.0f, float(hi)); };
  return {clip(b.x1, width), clip(b.y1, height), clip(b.x2, width), clip(b.y2, height)};
}

std::string Fixed2(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string ImageUrl(const PredictedImage& image, const PreannotationOptions& options) {
  if (!options.ls_image_root.empty())
    return options.ls_image_root + PercentEncode(PreannotationImageName(image, options));
  std::string abs = std::filesystem::absolute(image.source).lexically_normal().generic_string();
  if (!abs.empty() && abs[0] == '/') abs.erase(0, 1);
  return "/data/local-files/?d=" + PercentEncode(abs);
}

// "tasks.json" -> "tasks.label_config.xml" (same folder).
std::string ConfigPathBeside(const std::string& tasks_path) {
  std::filesystem::path p(tasks_path);
  p.replace_extension(".label_config.xml");
  return p.string();
}

}  // namespace

Status ValidatePreannotationOptions(const PreannotationOptions& options) {
  if (options.format != kLabelStudio && options.format != kCvat)
    return Status::InvalidArgument("format must be label-studio or cvat, got '" + options.format + "'",
                                   Field("format"));
  if (!IsTagName(options.ls_from_name))
    return Status::InvalidArgument(
        "ls_from_name must be a Label Studio tag name (letters, digits, '_', '-'), got '" +
            options.ls_from_name + "'",
        Field("ls_from_name"));
  if (!IsTagName(options.ls_to_name))
    return Status::InvalidArgument(
        "ls_to_name must be a Label Studio tag name (letters, digits, '_', '-'), got '" + options.ls_to_name +
            "'",
        Field("ls_to_name"));
  return Status();
}

std::string PreannotationImageName(const PredictedImage& image, const PreannotationOptions& options) {
  std::string src = std::filesystem::path(image.source).generic_string();
  std::string root = std::filesystem::path(options.source_root).generic_string();
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  if (!root.empty() && src.size() > root.size() + 1 && src.compare(0, root.size(), root) == 0 &&
      src[root.size()] == '/')
    return src.substr(root.size() + 1);
  if (src.rfind("./", 0) == 0) src.erase(0, 2);
  return src;
}

nlohmann::json LabelStudioTasksJson(const std::vector<PredictedImage>& images,
                                    const std::vector<std::string>& names,
                                    const PreannotationOptions& options) {
  nlohmann::json tasks = nlohmann::json::array();
  for (size_t t = 0; t < images.size(); ++t) {
    const PredictedImage& im = images[t];
    const double w = std::max(1, im.width), h = std::max(1, im.height);
    nlohmann::json results = nlohmann::json::array();
    float max_score = 0;
    for (size_t b = 0; b < im.detections.size(); ++b) {
      const eval::Detection& d = im.detections[b];
      const eval::Box box = Clipped(d.box, im.width, im.height);
      max_score = std::max(max_score, d.score);
      results.push_back({
          {"id", std::to_string(t) + "-" + std::to_string(b)},
          {"type", "rectanglelabels"},
          {"from_name", options.ls_from_name},
          {"to_name", options.ls_to_name},
          {"original_width", im.width},
          {"original_height", im.height},
          {"image_rotation", 0},
          {"score", d.score},
          {"value",
           {{"x", 100.0 * box.x1 / w},
            {"y", 100.0 * box.y1 / h},
            {"width", 100.0 * (double(box.x2) - box.x1) / w},
            {"height", 100.0 * (double(box.y2) - box.y1) / h},
            {"rotation", 0},
            {"rectanglelabels", nlohmann::json::array({ClassName(d.class_id, names)})}}},
      });
    }
    const double uncertainty = im.detections.empty() ? 1.0 : 1.0 - double(max_score);
    nlohmann::json prediction = {
        {"model_version", options.model_version}, {"score", uncertainty}, {"result", std::move(results)}};
    tasks.push_back({{"data", {{"image", ImageUrl(im, options)}}},
                     {"predictions", nlohmann::json::array({std::move(prediction)})}});
  }
  return tasks;
}

std::string LabelStudioConfigXml(const std::vector<std::string>& names, const PreannotationOptions& options) {
  std::string x = "<View>\n";
  x += "  <Image name=\"" + XmlEscape(options.ls_to_name) + "\" value=\"$image\"/>\n";
  x += "  <RectangleLabels name=\"" + XmlEscape(options.ls_from_name) + "\" toName=\"" +
       XmlEscape(options.ls_to_name) + "\">\n";
  for (const std::string& n : names) x += "    <Label value=\"" + XmlEscape(n) + "\"/>\n";
  x += "  </RectangleLabels>\n</View>\n";
  return x;
}

std::string CvatXml(const std::vector<PredictedImage>& images, const std::vector<std::string>& names,
                    const PreannotationOptions& options) {
  std::string x = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<annotations>\n  <version>1.1</version>\n";
  x += "  <meta>\n    <task>\n      <size>" + std::to_string(images.size()) +
       "</size>\n      <mode>annotation</mode>\n      <labels>\n";
  for (const std::string& n : names)
    x += "        <label>\n          <name>" + XmlEscape(n) +
         "</name>\n          <type>rectangle</type>\n          <attributes>\n          </attributes>\n"
         "        </label>\n";
  x += "      </labels>\n    </task>\n  </meta>\n";
  for (size_t i = 0; i < images.size(); ++i) {
    const PredictedImage& im = images[i];
    x += "  <image id=\"" + std::to_string(i) + "\" name=\"" +
         XmlEscape(PreannotationImageName(im, options)) + "\" width=\"" + std::to_string(im.width) +
         "\" height=\"" + std::to_string(im.height) + "\">\n";
    for (const eval::Detection& d : im.detections) {
      const eval::Box b = Clipped(d.box, im.width, im.height);
      x += "    <box label=\"" + XmlEscape(ClassName(d.class_id, names)) +
           "\" source=\"auto\" occluded=\"0\" xtl=\"" + Fixed2(b.x1) + "\" ytl=\"" + Fixed2(b.y1) +
           "\" xbr=\"" + Fixed2(b.x2) + "\" ybr=\"" + Fixed2(b.y2) + "\" z_order=\"0\">\n    </box>\n";
    }
    x += "  </image>\n";
  }
  x += "</annotations>\n";
  return x;
}

Result<std::vector<std::string>> WritePreannotations(Env& env, const PredictResult& result,
                                                     const PreannotationOptions& options) {
  KESTREL_RETURN_IF_ERROR(ValidatePreannotationOptions(options));
  if (result.predicted != int64_t(result.images.size()))
    return Status::InvalidArgument(
        "format=" + options.format + " needs the predicted images kept: not with stream=true",
        Field("format"));
  for (const PredictedImage& im : result.images) {
    if (im.frame != 0)
      return Status::InvalidArgument("format=" + options.format + " takes still images; " + im.source +
                                         " is a video, camera or stream (frame " + std::to_string(im.frame) +
                                         "): no image file for a labelling tool to open",
                                     Field("format"));
  }
  std::vector<std::string> written;
  if (options.format == kLabelStudio) {
    const std::string tasks = options.out.empty() ? result.dir + "/label_studio.json" : options.out;
    const std::string config = ConfigPathBeside(tasks);
    KESTREL_RETURN_IF_ERROR(env.WriteFileAtomic(
        tasks, LabelStudioTasksJson(result.images, result.names, options).dump(2) + "\n"));
    KESTREL_RETURN_IF_ERROR(env.WriteFileAtomic(config, LabelStudioConfigXml(result.names, options)));
    written = {tasks, config};
  } else {
    const std::string path = options.out.empty() ? result.dir + "/cvat_annotations.xml" : options.out;
    KESTREL_RETURN_IF_ERROR(env.WriteFileAtomic(path, CvatXml(result.images, result.names, options)));
    written = {path};
  }
  return written;
}

}  // namespace kestrel::app
