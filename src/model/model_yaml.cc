#include "model/model_yaml.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "core/env.h"
#include "core/utf8.h"

// A file's rows are normalized to the reference's spelling of each module's
// args (the defaults filled in or dropped as ReferenceModelYaml writes them)
// and `from` to absolute layer indices, then compared with the built-in
// families' rows: equal rows are that family's graph.

namespace kestrel::model {

namespace {

using J = nlohmann::ordered_json;

class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  Status Bad(const YAML::Node& at, const std::string& field, const std::string& msg) const {
    const int line = at.IsDefined() && at.Mark().line >= 0 ? at.Mark().line + 1 : 0;
    // The place is in the text too: callers that bind model= to the command
    // line replace the location with their own.
    return Status::InvalidArgument(
        msg + " (" + path_ + (line > 0 ? " line " + std::to_string(line) : std::string()) + ")",
        {path_, line, field});
  }

  static bool Int(const YAML::Node& n, int64_t* out) {
    if (!n.IsScalar()) return false;
    try {
      *out = n.as<int64_t>();
      return true;
    } catch (const YAML::Exception&) {
      return false;
    }
  }
  static bool Number(const YAML::Node& n, double* out) {
    if (!n.IsScalar()) return false;
    try {
      *out = n.as<double>();
      return std::isfinite(*out);
    } catch (const YAML::Exception&) {
      return false;
    }
  }
  static bool Bool(const YAML::Node& n, bool* out) {
    if (!n.IsScalar()) return false;
    const std::string s = n.Scalar();
    if (s == "True" || s == "true") {
      *out = true;
      return true;
    }
    if (s == "False" || s == "false") {
      *out = false;
      return true;
    }
    return false;
  }
  static bool IsNone(const YAML::Node& n) {
    return n.IsNull() ||
           (n.IsScalar() && (n.Scalar() == "None" || n.Scalar() == "null" || n.Scalar() == "~"));
  }

  // One row's args in the reference's spelling (ReferenceModelYaml).
  Result<J> Args(const std::string& module, const YAML::Node& args, int nc, const std::string& field) const {
    if (!args.IsSequence()) return Bad(args, field, "args of " + module + " must be a list");
    const size_t n = args.size();
    auto count = [&](size_t lo, size_t hi, const char* form) -> Status {
      if (n < lo || n > hi)
        return Bad(args, field, module + " takes args " + form + "; got " + std::to_string(n) + " values");
      return Status();
    };
    auto channels = [&](int64_t* c) -> Status {
      if (!Int(args[0], c) || *c < 1 || *c > 65536)
        return Bad(args[0], field + ".args[0]",
                   module + "'s output channels must be an integer in [1, 65536]");
      return Status();
    };
    auto integer = [&](size_t i, int64_t lo, int64_t hi, const char* what, int64_t* v) -> Status {
      if (!Int(args[i], v) || *v < lo || *v > hi) {
        return Bad(args[i], field + ".args[" + std::to_string(i) + "]",
                   module + "'s " + what + " must be an integer in [" + std::to_string(lo) + ", " +
                       std::to_string(hi) + "]");
      }
      return Status();
    };
    auto boolean = [&](size_t i, const char* what, bool* v) -> Status {
      if (!Bool(args[i], v))
        return Bad(args[i], field + ".args[" + std::to_string(i) + "]",
                   module + "'s " + what + " must be True or False");
      return Status();
    };
    auto ratio = [&](size_t i, double* v) -> Status {
      if (!Number(args[i], v) || *v <= 0 || *v > 4)
        return Bad(args[i], field + ".args[" + std::to_string(i) + "]",
                   module + "'s expansion e must be in (0, 4]");
      return Status();
    };
    int64_t c = 0;
    if (module == "Conv") {
      KESTREL_RETURN_IF_ERROR(count(1, 4, "[c2, k, s, p]"));
      KESTREL_RETURN_IF_ERROR(channels(&c));
      int64_t k = 1, s = 1, p = -1;
      if (n > 1) KESTREL_RETURN_IF_ERROR(integer(1, 1, 15, "kernel", &k));
      if (n > 2) KESTREL_RETURN_IF_ERROR(integer(2, 1, 8, "stride", &s));
      if (n > 3 && !IsNone(args[3])) KESTREL_RETURN_IF_ERROR(integer(3, 0, 15, "padding", &p));
      J out = J::array({c, k, s});
      if (p >= 0) out.push_back(p);
      return out;
    }
    if (module == "C2f" || module == "C3") {
      KESTREL_RETURN_IF_ERROR(count(1, 2, "[c2, shortcut]"));
      KESTREL_RETURN_IF_ERROR(channels(&c));
      bool shortcut = module == "C3";
      if (n > 1) KESTREL_RETURN_IF_ERROR(boolean(1, "shortcut", &shortcut));
      J out = J::array({c});
      if (module == "C2f" && shortcut) out.push_back(true);
      if (module == "C3" && !shortcut) out.push_back(false);
      return out;
    }
    if (module == "C3k2") {
      KESTREL_RETURN_IF_ERROR(count(1, 3, "[c2, c3k, e]"));
      KESTREL_RETURN_IF_ERROR(channels(&c));
      bool c3k = false;
      double e = 0.5;
      if (n > 1) KESTREL_RETURN_IF_ERROR(boolean(1, "c3k", &c3k));
      if (n > 2) KESTREL_RETURN_IF_ERROR(ratio(2, &e));
      J out = J::array({c, c3k});
      if (e != 0.5) out.push_back(e);
      return out;
    }
    if (module == "SPPF") {
      KESTREL_RETURN_IF_ERROR(count(1, 2, "[c2, k]"));
      KESTREL_RETURN_IF_ERROR(channels(&c));
      int64_t k = 5;
      if (n > 1) KESTREL_RETURN_IF_ERROR(integer(1, 1, 15, "pool kernel", &k));
      return J::array({c, k});
    }
    if (module == "C2PSA") {
      KESTREL_RETURN_IF_ERROR(count(1, 2, "[c2, e]"));
      KESTREL_RETURN_IF_ERROR(channels(&c));
      double e = 0.5;
      if (n > 1) KESTREL_RETURN_IF_ERROR(ratio(1, &e));
      J out = J::array({c});
      if (e != 0.5) out.push_back(e);
      return out;
    }
    if (module == "nn.Upsample") {
      KESTREL_RETURN_IF_ERROR(count(3, 3, "[None, scale_factor, mode]"));
      if (!IsNone(args[0])) return Bad(args[0], field + ".args[0]", "nn.Upsample's size must be None");
      int64_t scale = 0;
      KESTREL_RETURN_IF_ERROR(integer(1, 1, 8, "scale_factor", &scale));
      if (!args[2].IsScalar() || args[2].Scalar() != "nearest")
        return Bad(args[2], field + ".args[2]", "nn.Upsample's mode must be 'nearest'");
      return J::array({"None", scale, "nearest"});
    }
    if (module == "Concat") {
      KESTREL_RETURN_IF_ERROR(count(1, 1, "[dimension]"));
      int64_t d = 0;
      KESTREL_RETURN_IF_ERROR(integer(0, 1, 1, "dimension (channels)", &d));
      return J::array({d});
    }
    // Detect
    KESTREL_RETURN_IF_ERROR(count(1, 1, "[nc]"));
    int64_t v = 0;
    if (!(args[0].IsScalar() && args[0].Scalar() == "nc") && !(Int(args[0], &v) && v == nc))
      return Bad(args[0], field + ".args[0]",
                 "Detect's arg must be nc (the file's nc, " + std::to_string(nc) + ")");
    return J::array({"nc"});
  }

  std::string path_;
};

// The module registry by the reference's names; LayerKindName spells the rest.
std::string RegistryName(const std::string& module) {
  if (module == "nn.Upsample" || module == "Upsample" || module == "torch.nn.Upsample") return "nn.Upsample";
  for (LayerKind k : {LayerKind::kConv, LayerKind::kC2f, LayerKind::kC3, LayerKind::kC3k2, LayerKind::kSppf,
                      LayerKind::kC2psa, LayerKind::kConcat, LayerKind::kDetect}) {
    if (module == LayerKindName(k)) return module;
  }
  return "";
}

// The scale letter in a reference model name: yolov8s -> s, yolo11n -> n,
// yolov5mu -> m; "" when the name has none.
std::string ScaleLetter(const std::string& stem) {
  std::string s;
  for (char ch : stem) s += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const size_t at = s.find("yolo");
  if (at == std::string::npos) return "";
  size_t i = at + 4;
  if (s.compare(i, 2, "e-") == 0) i += 2;
  if (i < s.size() && s[i] == 'v') ++i;
  const size_t digits = i;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  if (i == digits || i >= s.size()) return "";
  return std::string("nslmx").find(s[i]) != std::string::npos ? std::string(1, s[i]) : "";
}

std::vector<int> AbsoluteFrom(const J& from, int i) {
  std::vector<int> out;
  auto one = [&](int f) { out.push_back(f < 0 ? i + f : f); };
  if (from.is_array()) {
    for (const auto& f : from) one(f.get<int>());
  } else {
    one(from.get<int>());
  }
  return out;
}

// A flow list as the reference's yaml files write one: [-1, 6].
std::string Flow(const J& v) {
  if (!v.is_array()) return v.dump();
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + Flow(v[i]);
  return out + "]";
}

std::string RowText(const J& row) { return Flow(row); }

}  // namespace

bool IsModelYamlFile(const std::string& model) {
  auto ends = [&](const std::string& suffix) {
    if (model.size() < suffix.size()) return false;
    for (size_t i = 0; i < suffix.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(model[model.size() - suffix.size() + i])) != suffix[i])
        return false;
    }
    return true;
  };
  return (ends(".yaml") || ends(".yml")) && Env::Default().Stat(model).is_regular;
}

namespace {

// A normalized row (Reader::Args' spelling) as a GraphRow; `from` keeps -1
// and makes other negative indices absolute.
GraphRow ToGraphRow(const J& row, int i) {
  GraphRow r;
  for (int f : AbsoluteFrom(row[0], i)) r.from.push_back(f == i - 1 && i > 0 ? -1 : f);
  if (i == 0) r.from = {-1};
  r.n = row[1].get<int>();
  const std::string module = row[2].get<std::string>();
  const J& a = row[3];
  if (module == "Conv") {
    r.kind = LayerKind::kConv;
    r.c = a[0].get<int>();
    r.k = a[1].get<int>();
    r.s = a[2].get<int>();
    if (a.size() > 3) r.p = a[3].get<int>();
  } else if (module == "C2f" || module == "C3") {
    r.kind = module == "C2f" ? LayerKind::kC2f : LayerKind::kC3;
    r.c = a[0].get<int>();
    r.shortcut = a.size() > 1 ? a[1].get<bool>() : module == "C3";
  } else if (module == "C3k2") {
    r.kind = LayerKind::kC3k2;
    r.c = a[0].get<int>();
    r.c3k = a[1].get<bool>();
    r.shortcut = true;
    if (a.size() > 2) r.e = a[2].get<double>();
  } else if (module == "SPPF") {
    r.kind = LayerKind::kSppf;
    r.c = a[0].get<int>();
    r.k = a[1].get<int>();
    r.s = 1;
  } else if (module == "C2PSA") {
    r.kind = LayerKind::kC2psa;
    r.c = a[0].get<int>();
    if (a.size() > 1) r.e = a[1].get<double>();
  } else if (module == "nn.Upsample") {
    r.kind = LayerKind::kUpsample;
    r.s = a[1].get<int>();
  } else if (module == "Concat") {
    r.kind = LayerKind::kConcat;
  } else {
    r.kind = LayerKind::kDetect;
  }
  return r;
}

// A name that is safe in file names, ONNX graph names and logs.
std::string GraphName(const std::string& stem) {
  std::string out;
  for (char ch : stem) {
    const bool ok = std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.';
    out += ok ? ch : '_';
    if (out.size() == 64) break;
  }
  return out.empty() ? "custom" : out;
}

// path: where the text came from (errors name it); stem: the model's file
// name without extension (the scale letter, a custom graph's name).
Result<ModelYaml> ReadModelYamlText(const std::string& text, const std::string& path,
                                    const std::string& stem) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("not valid YAML: " + e.msg,
                                   {path, e.mark.line >= 0 ? e.mark.line + 1 : 0});
  }
  Reader r(path);
  if (!root.IsMap()) return r.Bad(root, "", "a model yaml is a mapping with nc, scales, backbone and head");
  int64_t nc = 80;
  if (root["nc"] && !Reader::Int(root["nc"], &nc)) return r.Bad(root["nc"], "nc", "nc must be an integer");
  if (nc < 1 || nc > 10000)
    return r.Bad(root["nc"], "nc", "nc " + std::to_string(nc) + " is outside [1, 10000]");

  // The rows, normalized.
  J rows = J::array();
  for (const char* part : {"backbone", "head"}) {
    const YAML::Node list = root[part];
    if (!list || !list.IsSequence() || list.size() == 0)
      return r.Bad(list ? list : root, part, std::string("'") + part + "' must be a non-empty list of rows");
    for (size_t k = 0; k < list.size(); ++k) {
      const YAML::Node row = list[k];
      const int i = static_cast<int>(rows.size());
      const std::string field = std::string(part) + "[" + std::to_string(k) + "]";
      if (!row.IsSequence() || row.size() != 4)
        return r.Bad(row, field, "a row is [from, repeats, module, args]");
      J from;
      auto check_from = [&](const YAML::Node& n) -> Status {
        int64_t f = 0;
        if (!Reader::Int(n, &f))
          return r.Bad(n, field + ".from", "from must be an integer or a list of them");
        const int64_t abs = f < 0 ? i + f : f;
        if (i == 0 && f == -1) return Status();  // the input image
        if (abs < 0 || abs >= i) {
          return r.Bad(n, field + ".from",
                       "from " + std::to_string(f) + " is not an earlier layer of layer " +
                           std::to_string(i) + " (0.." + std::to_string(i - 1) +
                           ", or -1 for the previous one)");
        }
        return Status();
      };
      if (row[0].IsSequence()) {
        from = J::array();
        for (const auto& f : row[0]) {
          KESTREL_RETURN_IF_ERROR(check_from(f));
          from.push_back(f.as<int64_t>());
        }
      } else {
        KESTREL_RETURN_IF_ERROR(check_from(row[0]));
        from = row[0].as<int64_t>();
      }
      int64_t n = 0;
      if (!Reader::Int(row[1], &n) || n < 1 || n > 100)
        return r.Bad(row[1], field + ".repeats", "repeats must be an integer in [1, 100]");
      if (!row[2].IsScalar()) return r.Bad(row[2], field + ".module", "module must be a name");
      const std::string module = RegistryName(row[2].Scalar());
      if (module.empty()) {
        return r.Bad(
            row[2], field + ".module",
            "module '" + EscapeInvalidUtf8(row[2].Scalar()) +
                "' is not in Kestrel's module registry (Conv, C2f, C3, C3k2, SPPF, C2PSA, nn.Upsample, "
                "Concat, Detect)");
      }
      KESTREL_ASSIGN_OR_RETURN(J args, r.Args(module, row[3], static_cast<int>(nc), field));
      rows.push_back(J::array({from, n, module, args}));
    }
  }

  // Which built-in graph the rows are; a custom one otherwise.
  std::string diff;
  std::optional<Family> found;
  for (const Family f : AllFamilies()) {
    const J ref = ReferenceModelYaml(f, static_cast<int>(nc));
    J want = ref["backbone"];
    for (const auto& h : ref["head"]) want.push_back(h);
    bool same = want.size() == rows.size();
    for (size_t i = 0; same && i < rows.size(); ++i) {
      J a = rows[i], b = want[i];
      same = AbsoluteFrom(a[0], static_cast<int>(i)) == AbsoluteFrom(b[0], static_cast<int>(i)) &&
             a[1] == b[1] && a[2] == b[2] && a[3] == b[3];
      if (!same && diff.empty() && want.size() == rows.size()) {
        diff = "layer " + std::to_string(i) + " is " + RowText(a) + " where " + FamilyName(f) + " has " +
               RowText(b);
      }
    }
    if (same) {
      found = f;
      break;
    }
  }
  const bool same_size = !diff.empty();  // diff names the first row that differs

  // The scale, as the reference picks it.
  ModelYaml out;
  const std::string letter = ScaleLetter(stem);
  ModelScale scale;
  std::string why;
  if (const YAML::Node scales = root["scales"]; scales) {
    if (!scales.IsMap() || scales.size() == 0)
      return r.Bad(scales, "scales", "scales must map a letter to [depth, width, max_channels]");
    YAML::Node picked;
    std::string name;
    bool have = false;
    for (const auto& kv : scales) {
      const std::string key = kv.first.Scalar();
      if ((!have && letter.empty()) || key == letter) {
        name = key;
        picked = kv.second;
        have = true;
      }
    }
    if (!have) {
      return r.Bad(scales, "scales",
                   "the file name says scale '" + letter + "' but the scales table has no '" + letter + "'");
    }
    double d = 0, w = 0, c = 0;
    if (!picked.IsSequence() || picked.size() != 3 || !Reader::Number(picked[0], &d) ||
        !Reader::Number(picked[1], &w) || !Reader::Number(picked[2], &c)) {
      return r.Bad(picked, "scales." + name, "a scale is [depth, width, max_channels]");
    }
    scale = {name, d, w, static_cast<int>(c)};
    why = letter.empty() ? "scale '" + name + "' (the table's first; the file name names none)"
                         : "scale '" + name + "' (from the file name)";
  } else {
    double d = 1, w = 1;
    if (root["depth_multiple"] && !Reader::Number(root["depth_multiple"], &d))
      return r.Bad(root["depth_multiple"], "depth_multiple", "depth_multiple must be a number");
    if (root["width_multiple"] && !Reader::Number(root["width_multiple"], &w))
      return r.Bad(root["width_multiple"], "width_multiple", "width_multiple must be a number");
    scale = {"", d, w, 1024};
    why = "depth_multiple " + std::to_string(d).substr(0, 4) + ", width_multiple " +
          std::to_string(w).substr(0, 4);
  }
  if (!(scale.depth > 0 && scale.depth <= 10 && scale.width > 0 && scale.width <= 10 &&
        scale.max_channels >= 8 && scale.max_channels <= 65536)) {
    std::ostringstream s;
    s << "depth " << scale.depth << ", width " << scale.width << ", max_channels " << scale.max_channels
      << ": depth and width must be in (0, 10], max_channels in [8, 65536] (" << path << ")";
    return Status::InvalidArgument(s.str(), {path, 0, root["scales"] ? "scales" : "width_multiple"});
  }
  // A built-in graph at one of its family's scales is that model (weights
  // then record the family and scale by name).
  const ModelScale* known = nullptr;
  std::vector<ModelScale> family_scales;
  if (found) family_scales = KnownScales(*found);
  for (const ModelScale& k : family_scales) {
    // Old-style files have no cap: any of the family's caps matches.
    const bool cap_ok = !root["scales"] || k.max_channels == scale.max_channels;
    if (!known && std::abs(k.depth - scale.depth) < 1e-9 && std::abs(k.width - scale.width) < 1e-9 && cap_ok)
      known = &k;
  }
  if (known) {
    out.spec = ModelSpec{*known, static_cast<int>(nc), *found};
    out.why = std::string(FamilyName(*found)) + " graph, " + why + " = " + out.spec.Name() + ", nc " +
              std::to_string(nc) + " from " + path;
    return out;
  }
  // Any other graph: carried as data (the weights hold it, GraphYaml).
  ModelGraph graph;
  graph.name = GraphName(stem);
  for (size_t i = 0; i < rows.size(); ++i) graph.rows.push_back(ToGraphRow(rows[i], static_cast<int>(i)));
  graph.head_start = root["backbone"].size();
  out.spec = ModelSpec{scale, static_cast<int>(nc), Family::kYolov8, std::move(graph)};
  if (Status st = CheckGraph(out.spec); !st.IsOk()) {
    return Status::InvalidArgument(st.Message() + " (" + path + ")", {path, 0, st.Where().field});
  }
  std::ostringstream s;
  s << "custom graph '" << out.spec.Name() << "' (" << rows.size() << " layers; "
    << (found       ? std::string(FamilyName(*found)) + "'s rows at a scale it lacks"
        : same_size ? diff
                    : "no built-in graph has as many")
    << "), " << why << " = depth " << scale.depth << ", width " << scale.width << ", max_channels "
    << scale.max_channels << ", nc " << nc << " from " << path;
  out.why = s.str();
  return out;
}

}  // namespace

Result<ModelYaml> ReadModelYaml(const std::string& path) {
  KESTREL_ASSIGN_OR_RETURN(std::string text, Env::Default().ReadFile(path, 1 << 20));
  return ReadModelYamlText(text, path, std::filesystem::path(path).stem().string());
}

Result<ModelSpec> SpecFromGraphYaml(const std::string& text, int nc, const std::string& origin) {
  // The stem (scale letter, name) is the yaml_file GraphYaml recorded.
  std::string stem = "custom";
  try {
    const auto j = nlohmann::json::parse(text);
    if (j.is_object() && j.contains("yaml_file") && j["yaml_file"].is_string())
      stem = std::filesystem::path(j["yaml_file"].get<std::string>()).stem().string();
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption(std::string("the graph metadata is not JSON: ") + e.what(),
                              {origin, 0, "graph"});
  }
  if (nc < 1 || nc > 10000)
    return Status::Corruption("class count " + std::to_string(nc) + " out of range [1, 10000]",
                              {origin, 0, "nc"});
  KESTREL_ASSIGN_OR_RETURN(ModelYaml y, ReadModelYamlText(text, origin, stem));
  y.spec.nc = nc;
  return y.spec;
}

std::string ModelYamlText(Family family, int nc) {
  const J y = ReferenceModelYaml(family, nc);
  std::string out = "# " + std::string(FamilyName(family)) + " as a model yaml (Kestrel's built-in table)\n";
  out += "nc: " + std::to_string(nc) + "\nscales:\n";
  for (auto it = y["scales"].begin(); it != y["scales"].end(); ++it)
    out += "  " + it.key() + ": " + Flow(it.value()) + "\n";
  auto rows = [&](const char* part) {
    out += std::string(part) + ":\n";
    for (const auto& row : y[part]) {
      std::string args = "[";
      for (size_t i = 0; i < row[3].size(); ++i) {
        const J& a = row[3][i];
        std::string v = a.is_boolean()  ? (a.get<bool>() ? "True" : "False")
                        : a.is_string() ? a.get<std::string>()
                                        : a.dump();
        if (a.is_string() && v == "nearest") v = "\"nearest\"";
        args += (i ? ", " : "") + v;
      }
      args += "]";
      out += "  - [" + Flow(row[0]) + ", " + row[1].dump() + ", " + row[2].get<std::string>() + ", " + args +
             "]\n";
    }
  };
  rows("backbone");
  rows("head");
  return out;
}

}  // namespace kestrel::model
