#include "eval/prediction_io.h"

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "core/json.h"

namespace kestrel::eval {

namespace {

constexpr const char* kYoloFields[6] = {"class", "cx", "cy", "w", "h", "conf"};

// Whitespace-separated tokens of one line.
std::vector<std::string_view> Tokens(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

bool ParseDouble(std::string_view s, double* v) {
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, *v);
  return ec == std::errc() && ptr == end;
}

}  // namespace

Result<std::vector<Detection>> ParseYoloPredictions(const std::string& text, const std::string& origin,
                                                    ImageSize size, int num_classes) {
  if (size.width <= 0 || size.height <= 0) {
    return Status::InvalidArgument(
        "image size must be positive, got " + std::to_string(size.width) + "x" + std::to_string(size.height),
        {origin, 0, ""});
  }
  std::vector<Detection> out;
  int line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string_view line(text.data() + pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    const std::vector<std::string_view> tok = Tokens(line);
    if (tok.empty()) continue;
    if (tok.size() != 6) {
      return Status::InvalidArgument(
          "expected 6 fields 'class cx cy w h conf', got " + std::to_string(tok.size()),
          {origin, line_no, ""});
    }
    double v[6];
    for (int f = 0; f < 6; ++f) {
      if (!ParseDouble(tok[size_t(f)], &v[f]) || !std::isfinite(v[f])) {
        return Status::InvalidArgument("not a finite number: '" + std::string(tok[size_t(f)]) + "'",
                                       {origin, line_no, kYoloFields[f]});
      }
    }
    if (v[0] != std::floor(v[0]) || v[0] < 0 || v[0] >= num_classes) {
      return Status::InvalidArgument(
          "unknown class id " + std::string(tok[0]) + " (nc " + std::to_string(num_classes) + ")",
          {origin, line_no, "class"});
    }
    for (int f = 3; f <= 4; ++f) {
      if (v[f] < 0) {
        return Status::InvalidArgument("negative size", {origin, line_no, kYoloFields[f]});
      }
    }
    if (v[5] < 0 || v[5] > 1) {
      return Status::InvalidArgument("confidence outside [0, 1]", {origin, line_no, "conf"});
    }
    Detection d;
    d.class_id = int(v[0]);
    d.score = float(v[5]);
    d.box = BoxFromCxCyWh(v[1] * size.width, v[2] * size.height, v[3] * size.width, v[4] * size.height);
    out.push_back(d);
  }
  return out;
}

Result<std::map<std::string, std::vector<Detection>>> ReadYoloPredictionDir(
    Env& env, const std::string& dir, const std::map<std::string, ImageSize>& sizes, int num_classes) {
  KESTREL_ASSIGN_OR_RETURN(std::vector<std::string> names, env.ListDir(dir));
  std::map<std::string, std::vector<Detection>> out;
  for (const auto& [stem, size] : sizes) out[stem];
  for (const std::string& name : names) {
    if (Extension(name) != "txt") continue;
    const std::string path = JoinPath(dir, name);
    auto it = sizes.find(Stem(name));
    if (it == sizes.end()) {
      return Status::NotFound("no image size given for this prediction file", {path, 0, ""});
    }
    KESTREL_ASSIGN_OR_RETURN(std::string text, env.ReadFile(path));
    KESTREL_ASSIGN_OR_RETURN(out[it->first], ParseYoloPredictions(text, path, it->second, num_classes));
  }
  return out;
}

Result<std::map<int64_t, std::vector<Detection>>> ParseCocoResults(const std::string& json_text,
                                                                   const std::string& origin,
                                                                   const std::vector<int>& category_ids,
                                                                   int num_classes) {
  nlohmann::json doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status::InvalidArgument("not valid JSON", {origin, 0, ""});
  if (!doc.is_array()) {
    return Status::InvalidArgument("expected a JSON array of results", {origin, 0, ""});
  }
  std::unordered_map<int64_t, int> to_class;
  if (category_ids.empty()) {
    for (int c = 0; c < num_classes; ++c) to_class[c] = c;
  } else {
    for (size_t c = 0; c < category_ids.size(); ++c) to_class[category_ids[c]] = int(c);
  }
  std::map<int64_t, std::vector<Detection>> out;
  for (size_t i = 0; i < doc.size(); ++i) {
    const nlohmann::json& r = doc[i];
    const std::string at = "[" + std::to_string(i) + "]";
    auto bad = [&](const std::string& field, const std::string& msg) {
      return Status::InvalidArgument(msg, {origin, 0, at + "." + field});
    };
    if (!r.is_object()) return Status::InvalidArgument("expected an object", {origin, 0, at});
    for (const char* key : {"image_id", "category_id", "bbox", "score"}) {
      if (!r.contains(key)) return bad(key, "missing");
    }
    if (!r["image_id"].is_number_integer()) return bad("image_id", "expected an integer");
    if (!r["category_id"].is_number_integer()) return bad("category_id", "expected an integer");
    const auto cat = r["category_id"].get<int64_t>();
    auto ct = to_class.find(cat);
    if (ct == to_class.end()) return bad("category_id", "unknown category id " + std::to_string(cat));
    const nlohmann::json& bb = r["bbox"];
    if (!bb.is_array() || bb.size() != 4) return bad("bbox", "expected [x, y, w, h]");
    double v[4];
    for (size_t k = 0; k < 4; ++k) {
      if (!bb[k].is_number() || !std::isfinite(bb[k].get<double>())) {
        return bad("bbox[" + std::to_string(k) + "]", "expected a finite number");
      }
      v[k] = bb[k].get<double>();
    }
    if (v[2] < 0 || v[3] < 0) return bad("bbox", "negative width or height");
    if (!r["score"].is_number() || !std::isfinite(r["score"].get<double>())) {
      return bad("score", "expected a finite number");
    }
    Detection d;
    d.box = BoxFromXyWh(v[0], v[1], v[2], v[3]);
    d.score = float(r["score"].get<double>());
    d.class_id = ct->second;
    out[r["image_id"].get<int64_t>()].push_back(d);
  }
  return out;
}

Result<std::map<int64_t, std::vector<Detection>>> ReadCocoResults(Env& env, const std::string& path,
                                                                  const std::vector<int>& category_ids,
                                                                  int num_classes) {
  KESTREL_ASSIGN_OR_RETURN(std::string text, env.ReadFile(path));
  return ParseCocoResults(text, path, category_ids, num_classes);
}

std::string CocoResultsJson(const std::vector<std::pair<int64_t, std::vector<Detection>>>& images,
                            const std::vector<int>& category_ids) {
  return CocoResultsJson(images, category_ids, CocoWriteOptions{});
}

std::string CocoResultsJson(const std::vector<std::pair<int64_t, std::vector<Detection>>>& images,
                            const std::vector<int>& category_ids, const CocoWriteOptions& opts) {
  // Exact mode: x2 - x1 of two floats is exact in double, and the reader's
  // float(x + w) then gives back x2 bit for bit.
  auto round_to = [&opts](double v, double scale) { return opts.round ? std::round(v * scale) / scale : v; };
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& [image_id, dets] : images) {
    for (const Detection& d : dets) {
      const int cat = category_ids.empty() || size_t(d.class_id) >= category_ids.size()
                          ? d.class_id
                          : category_ids[size_t(d.class_id)];
      arr.push_back(nlohmann::json{
          {"image_id", image_id},
          {"category_id", cat},
          {"bbox",
           {round_to(d.box.x1, 1e3), round_to(d.box.y1, 1e3), round_to(double(d.box.x2) - d.box.x1, 1e3),
            round_to(double(d.box.y2) - d.box.y1, 1e3)}},
          {"score", round_to(d.score, 1e5)}});
    }
  }
  return DumpJson(arr);
}

Status WriteCocoResults(Env& env, const std::string& path,
                        const std::vector<std::pair<int64_t, std::vector<Detection>>>& images,
                        const std::vector<int>& category_ids) {
  return env.WriteFileAtomic(path, CocoResultsJson(images, category_ids));
}

}  // namespace kestrel::eval
