#include "app/preannotations.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/staged_dir.h"

namespace kestrel::app {
namespace {

constexpr const char* kLabelStudio = "label-studio";
constexpr const char* kCvat = "cvat";
constexpr const char* kYolo = "yolo";
constexpr const char* kCoco = "coco";

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

std::string Fixed6(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6f", v);
  return buf;
}

// A YAML double-quoted scalar: class names may hold ':', '#' or quotes.
std::string YamlQuoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

void PutLe16(std::string& out, uint32_t v) {
  out += char(v & 0xff);
  out += char((v >> 8) & 0xff);
}
void PutLe32(std::string& out, uint32_t v) {
  PutLe16(out, v & 0xffff);
  PutLe16(out, v >> 16);
}

uint32_t Crc32(const std::string& data) {
  static const std::array<uint32_t, 256> kTable = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : data) c = kTable[(c ^ b) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
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
  if (options.format != kLabelStudio && options.format != kCvat && options.format != kYolo &&
      options.format != kCoco)
    return Status::InvalidArgument(
        "format must be label-studio, cvat, yolo or coco, got '" + options.format + "'", Field("format"));
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

Result<std::vector<std::pair<std::string, std::string>>> YoloLabelTree(
    const std::vector<PredictedImage>& images, const std::vector<std::string>& names,
    const PreannotationOptions& options) {
  std::string yaml = "path: ./\ntrain: train.txt\nnames:\n";
  for (size_t c = 0; c < names.size(); ++c)
    yaml += "  " + std::to_string(c) + ": " + YamlQuoted(names[c]) + "\n";
  std::string train;
  std::vector<std::pair<std::string, std::string>> labels;
  std::map<std::string, std::string> owner;  // label file -> the image that has it
  for (const PredictedImage& im : images) {
    const std::string name = PreannotationImageName(im, options);
    const std::string label =
        "labels/train/" + std::filesystem::path(name).replace_extension(".txt").generic_string();
    auto [it, fresh] = owner.emplace(label, im.source);
    if (!fresh)
      return Status::InvalidArgument("format=yolo: " + it->second + " and " + im.source + " would share " +
                                         label + "; rename one (CVAT matches labels to images by name)",
                                     Field("format"));
    train += "images/train/" + name + "\n";
    const double w = std::max(1, im.width), h = std::max(1, im.height);
    std::string text;
    for (const eval::Detection& d : im.detections) {
      const eval::Box b = Clipped(d.box, im.width, im.height);
      text += std::to_string(d.class_id) + " " + Fixed6((double(b.x1) + b.x2) / 2 / w) + " " +
              Fixed6((double(b.y1) + b.y2) / 2 / h) + " " + Fixed6((double(b.x2) - b.x1) / w) + " " +
              Fixed6((double(b.y2) - b.y1) / h) + "\n";
    }
    labels.emplace_back(label, std::move(text));
  }
  std::vector<std::pair<std::string, std::string>> tree = {{"data.yaml", std::move(yaml)},
                                                           {"train.txt", std::move(train)}};
  for (auto& l : labels) tree.push_back(std::move(l));
  return tree;
}

nlohmann::json CocoPredictionsJson(const std::vector<PredictedImage>& images,
                                   const std::vector<std::string>& names,
                                   const PreannotationOptions& options) {
  nlohmann::json cats = nlohmann::json::array(), imgs = nlohmann::json::array(),
                 anns = nlohmann::json::array();
  for (size_t c = 0; c < names.size(); ++c) cats.push_back({{"id", c + 1}, {"name", names[c]}});
  int64_t ann_id = 1;
  for (size_t i = 0; i < images.size(); ++i) {
    const PredictedImage& im = images[i];
    const int64_t image_id = int64_t(i) + 1;
    imgs.push_back({{"id", image_id},
                    {"file_name", PreannotationImageName(im, options)},
                    {"width", im.width},
                    {"height", im.height}});
    for (const eval::Detection& d : im.detections) {
      const eval::Box b = Clipped(d.box, im.width, im.height);
      const double bw = double(b.x2) - b.x1, bh = double(b.y2) - b.y1;
      anns.push_back({{"id", ann_id++},
                      {"image_id", image_id},
                      {"category_id", d.class_id + 1},
                      {"bbox", {b.x1, b.y1, bw, bh}},
                      {"area", bw * bh},
                      {"iscrowd", 0},
                      {"score", d.score}});
    }
  }
  return {{"info", {{"description", "kestrel predictions"}, {"model_version", options.model_version}}},
          {"images", std::move(imgs)},
          {"annotations", std::move(anns)},
          {"categories", std::move(cats)}};
}

Result<std::string> StoredZip(const std::vector<std::pair<std::string, std::string>>& entries) {
  if (entries.size() >= 0xFFFF)
    return Status::ResourceExhausted("a zip of 65535 entries or more needs zip64");
  std::string out, central;
  for (const auto& entry : entries) {
    // Named references, not a structured binding: the header lambda below
    // captures them, which clang (and so clang-tidy) rejects before C++20's
    // P1091 is implemented.
    const std::string& name = entry.first;
    const std::string& data = entry.second;
    if (out.size() + data.size() + name.size() + 64 >= 0xFFFFFFFFull)
      return Status::ResourceExhausted("a zip of 4 GiB or more needs zip64");
    const uint32_t offset = uint32_t(out.size()), crc = Crc32(data), size = uint32_t(data.size());
    // Local header: version 2.0, flag bit 11 (UTF-8 names), stored, the
    // DOS date 1980-01-01 00:00 (the same bytes for the same content).
    auto header = [&](std::string& h, bool central_dir) {
      PutLe32(h, central_dir ? 0x02014b50u : 0x04034b50u);
      if (central_dir) PutLe16(h, 20);  // version made by
      PutLe16(h, 20);                   // version needed
      PutLe16(h, 0x0800);
      PutLe16(h, 0);       // method: stored
      PutLe16(h, 0);       // time
      PutLe16(h, 0x0021);  // date
      PutLe32(h, crc);
      PutLe32(h, size);
      PutLe32(h, size);
      PutLe16(h, uint32_t(name.size()));
      PutLe16(h, 0);  // extra
      if (central_dir) {
        PutLe16(h, 0);  // comment
        PutLe16(h, 0);  // disk
        PutLe16(h, 0);  // internal attributes
        PutLe32(h, 0);  // external attributes
        PutLe32(h, offset);
      }
      h += name;
    };
    header(out, false);
    out += data;
    header(central, true);
  }
  const uint32_t cd_offset = uint32_t(out.size()), cd_size = uint32_t(central.size());
  out += central;
  PutLe32(out, 0x06054b50u);
  PutLe16(out, 0);
  PutLe16(out, 0);
  PutLe16(out, uint32_t(entries.size()));
  PutLe16(out, uint32_t(entries.size()));
  PutLe32(out, cd_size);
  PutLe32(out, cd_offset);
  PutLe16(out, 0);
  return out;
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
  } else if (options.format == kCvat) {
    const std::string path = options.out.empty() ? result.dir + "/cvat_annotations.xml" : options.out;
    KESTREL_RETURN_IF_ERROR(env.WriteFileAtomic(path, CvatXml(result.images, result.names, options)));
    written = {path};
  } else if (options.format == kCoco) {
    const std::string path = options.out.empty() ? result.dir + "/coco_annotations.json" : options.out;
    KESTREL_RETURN_IF_ERROR(
        env.WriteFileAtomic(path, CocoPredictionsJson(result.images, result.names, options).dump(1) + "\n"));
    written = {path};
  } else {
    std::string dir = options.out.empty() ? result.dir + "/yolo" : options.out;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    KESTREL_ASSIGN_OR_RETURN(auto tree, YoloLabelTree(result.images, result.names, options));
    KESTREL_ASSIGN_OR_RETURN(std::string zip, StoredZip(tree));
    KESTREL_ASSIGN_OR_RETURN(StagedDir staged, StagedDir::Create(env, dir));
    for (const auto& [rel, text] : tree) {
      const std::string path = staged.Path() + "/" + rel;
      KESTREL_RETURN_IF_ERROR(env.CreateDirs(std::filesystem::path(path).parent_path().string()));
      KESTREL_RETURN_IF_ERROR(env.WriteFileDeferred(path, text));
    }
    KESTREL_RETURN_IF_ERROR(staged.CommitFresh());
    KESTREL_RETURN_IF_ERROR(env.WriteFileAtomic(dir + ".zip", zip));
    written = {dir, dir + ".zip"};
  }
  return written;
}

}  // namespace kestrel::app
