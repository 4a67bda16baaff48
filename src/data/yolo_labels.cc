// YOLO label files: one "class x_center y_center width height" line per box
// (normalized cxcywh; polygons become their bounding box), each problem a
// Finding naming file, line and field (formats.h, ParseYoloLabels). The
// dataset readers (data.yaml, bare trees) are yolo_format.cc's.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>
#include <type_traits>
#include <utility>

#include "data/formats.h"
#include "data/text.h"

namespace kestrel::data {
namespace {

constexpr const char* kFieldNames[5] = {"class", "x_center", "y_center", "width", "height"};

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// One UTF-8 code point at s[i] (U+FFFD and length 1 when malformed).
uint32_t DecodeUtf8(std::string_view s, size_t i, size_t* len) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  int n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  *len = 1;
  if (n == 1 || i + n > s.size()) return c < 0x80 ? c : 0xFFFD;
  uint32_t cp = c & (0x7F >> n);
  for (int k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0xFFFD;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  *len = static_cast<size_t>(n);
  return cp;
}

// Locale-independent: "1,5" is never a number here, whatever LC_NUMERIC says.
bool ParseNumber(std::string_view tok, double* v, bool* out_of_range) {
  if (tok.size() > 1 && tok[0] == '+' && tok[1] != '-' && tok[1] != '+') tok.remove_prefix(1);
  auto [ptr, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), *v);
  *out_of_range = ec == std::errc::result_out_of_range;
  return ptr == tok.data() + tok.size() && (ec == std::errc() || *out_of_range);
}

}  // namespace

std::vector<Box> ParseYoloLabels(std::string_view text, const std::string& file, int num_classes,
                                 std::vector<Finding>* findings) {
  FindingList list;
  std::vector<Box> boxes = ParseYoloLabels(text, file, num_classes, &list);
  findings->insert(findings->end(), list.begin(), list.end());
  return boxes;
}

std::vector<Box> ParseYoloLabels(std::string_view text, const std::string& file, int num_classes,
                                 FindingList* findings, size_t max_boxes) {
  std::vector<Box> boxes;
  std::map<std::tuple<int, double, double, double, double>, int> seen;  // box -> line
  // `msg` is a string or a callable making one: a file of millions of bad
  // lines only counts most of them, so their messages are never built.
  auto add = [&](Severity sev, const char* check, int line, std::string field, auto&& msg,
                 const char* action) {
    if (!findings->WouldKeep(check, file)) {
      findings->CountOnly(sev, check, file);
      return;
    }
    if constexpr (std::is_invocable_v<decltype(msg)>) {
      findings->Add(MakeFinding(sev, check, file, line, std::move(field), msg(), action));
    } else {
      findings->Add(MakeFinding(sev, check, file, line, std::move(field), std::string(msg), action));
    }
  };
  if (const char* enc = WideEncodingOf(text)) {
    // Notepad's "Unicode": every line would be a syntax error; say why once.
    add(Severity::kError, "label.encoding", 0, "",
        std::string("label file is ") + enc + " encoded; save it as UTF-8 or ASCII", "file not read");
    return boxes;
  }
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  bool any_content = false;
  int line = 0;
  std::vector<std::string_view> tok;
  std::vector<double> val;
  for (size_t start = 0; start <= text.size();) {
    size_t end = std::min(text.find('\n', start), text.size());
    std::string_view l = text.substr(start, end - start);
    start = end + 1;
    ++line;
    while (!l.empty() && IsSpace(l.back())) l.remove_suffix(1);
    while (!l.empty() && IsSpace(l.front())) l.remove_prefix(1);
    if (l.empty()) continue;
    any_content = true;
    // Characters that are never part of a label line: name them, since a
    // full-width comma or a decimal comma is invisible in most editors.
    size_t bad = std::string_view::npos;
    for (size_t i = 0; i < l.size(); ++i) {
      unsigned char c = static_cast<unsigned char>(l[i]);
      if (c >= 0x80 || c == ',' || c == ';' || (c < 0x20 && c != '\t')) {
        bad = i;
        break;
      }
    }
    tok.clear();
    for (size_t i = 0; i < l.size();) {
      while (i < l.size() && IsSpace(l[i])) ++i;
      size_t j = i;
      while (j < l.size() && !IsSpace(l[j])) ++j;
      if (j > i) tok.push_back(l.substr(i, j - i));
      i = j;
    }
    if (bad != std::string_view::npos) {
      size_t len = 1;
      uint32_t cp = DecodeUtf8(l, bad, &len);
      size_t field = 0;  // whitespace-separated field the character is in
      for (const auto& t : tok) {
        if (t.data() + t.size() > l.data() + bad) break;
        ++field;
      }
      add(
          Severity::kError, "label.syntax", line, field < 5 ? kFieldNames[field] : "",
          [&] {
            char code[40];
            std::snprintf(code, sizeof(code), "U+%04X", cp);
            size_t column = 1;
            for (size_t i = 0; i < bad; ++i) column += (static_cast<unsigned char>(l[i]) & 0xC0) != 0x80;
            std::string shown = cp < 0x20 ? std::string(code) : std::string(l.substr(bad, len));
            if (!IsValidUtf8(l.substr(bad, len))) {
              // A stray byte (Latin-1 text, a binary file): show it, never copy it.
              shown = EscapeInvalidUtf8(l.substr(bad, 1));
              std::snprintf(code, sizeof(code), "byte 0x%02X, not valid UTF-8",
                            static_cast<unsigned char>(l[bad]));
            }
            return "unexpected character '" + shown + "' (" + code + ") at column " + std::to_string(column) +
                   ": fields must be ASCII numbers with '.' as the decimal point, separated by spaces";
          },
          "line dropped");
      continue;
    }
    size_t n = tok.size();
    bool polygon = n >= 7 && (n - 1) % 2 == 0;
    if (n != 5 && !polygon) {
      add(
          Severity::kError, "label.syntax", line, "",
          [&] {
            std::string msg =
                "expected 5 fields (class x_center y_center width height), got " + std::to_string(n);
            if (n == 6) msg += "; a 6th column looks like a confidence score from a prediction file";
            return msg;
          },
          "line dropped");
      continue;
    }
    val.assign(n, 0.0);
    bool ok = true;
    for (size_t i = 0; i < n && ok; ++i) {
      const char* fname = i < 5 && !polygon ? kFieldNames[i] : i == 0 ? "class" : i % 2 ? "x" : "y";
      bool range = false;
      if (!ParseNumber(tok[i], &val[i], &range)) {
        add(
            Severity::kError, "label.syntax", line, fname,
            [&] { return "'" + std::string(tok[i]) + "' is not a number"; }, "line dropped");
        ok = false;
      } else if (range || !std::isfinite(val[i])) {
        add(
            Severity::kError, "label.nonfinite", line, fname,
            [&] { return "'" + std::string(tok[i]) + "' is not a finite number"; }, "line dropped");
        ok = false;
      }
    }
    if (!ok) continue;
    double c = val[0];
    if (c != std::floor(c)) {
      add(
          Severity::kError, "label.class_range", line, "class",
          [&] { return "class id '" + std::string(tok[0]) + "' is not an integer"; }, "line dropped");
      continue;
    }
    if (c < 0 || c > 1e9 || (num_classes >= 0 && c >= num_classes)) {
      add(
          Severity::kError, "label.class_range", line, "class",
          [&] {
            return "class id " + FormatNumber(c) + " is out of range [0, " +
                   (num_classes >= 0 ? std::to_string(num_classes) : std::string("inf")) + ")";
          },
          "line dropped");
      continue;
    }
    double cx = val[1], cy = val[2], w = val[3], h = val[4];
    if (polygon) {
      double x1 = val[1], x2 = val[1], y1 = val[2], y2 = val[2];
      for (size_t i = 1; i + 1 < n; i += 2) {
        x1 = std::min(x1, val[i]);
        x2 = std::max(x2, val[i]);
        y1 = std::min(y1, val[i + 1]);
        y2 = std::max(y2, val[i + 1]);
      }
      cx = (x1 + x2) / 2, cy = (y1 + y2) / 2, w = x2 - x1, h = y2 - y1;
      add(
          Severity::kInfo, "label.polygon", line, "",
          [&] { return "polygon with " + std::to_string((n - 1) / 2) + " points"; },
          "converted to its bounding box");
    }
    double x1 = cx - w / 2, x2 = cx + w / 2, y1 = cy - h / 2, y2 = cy + h / 2;
    constexpr double kEps = 1e-6;  // float noise from exporters is not worth a warning
    const char* oob = nullptr;
    if (cx < 0 || cx > 1) {
      oob = "x_center";
    } else if (cy < 0 || cy > 1) {
      oob = "y_center";
    } else if (x1 < -kEps || x2 > 1 + kEps || w > 1) {
      oob = "width";
    } else if (y1 < -kEps || y2 > 1 + kEps || h > 1) {
      oob = "height";
    }
    if (oob != nullptr) {
      add(
          Severity::kWarning, "label.out_of_bounds", line, oob,
          [&] {
            return "box xyxy [" + FormatNumber(x1) + ", " + FormatNumber(y1) + ", " + FormatNumber(x2) +
                   ", " + FormatNumber(y2) + "] extends outside [0, 1]";
          },
          "clipped");
    }
    // Values that need no clipping are kept bit-for-bit (a cxcywh -> xyxy ->
    // cxcywh round trip would change the last digit and the manifest hash).
    // Overshoot within kEps is kept too: clipping 6-decimal labels creates
    // half-way values whose rounding would differ between formats.
    if (x1 < -kEps || x2 > 1 + kEps) {
      x1 = std::clamp(x1, 0.0, 1.0), x2 = std::clamp(x2, 0.0, 1.0);
      cx = (x1 + x2) / 2, w = x2 - x1;
    }
    if (y1 < -kEps || y2 > 1 + kEps) {
      y1 = std::clamp(y1, 0.0, 1.0), y2 = std::clamp(y2, 0.0, 1.0);
      cy = (y1 + y2) / 2, h = y2 - y1;
    }
    if (w <= 0 || h <= 0) {
      add(
          Severity::kWarning, "label.degenerate", line, w <= 0 ? "width" : "height",
          [&] {
            return "box has zero or negative size (w=" + FormatNumber(w) + ", h=" + FormatNumber(h) +
                   ") after clipping";
          },
          "box dropped");
      continue;
    }
    Box b{static_cast<int>(c), cx, cy, w, h};
    auto [it, fresh] = seen.emplace(std::make_tuple(b.cls, b.cx, b.cy, b.w, b.h), line);
    if (!fresh) {
      // clang 14 (the fuzz build) cannot capture a structured binding.
      const int first_line = it->second;
      add(
          Severity::kWarning, "label.duplicate", line, "",
          [&] { return "duplicate of line " + std::to_string(first_line); }, "duplicate dropped");
      continue;
    }
    if (boxes.size() >= max_boxes) {
      // Millions of boxes for one image are a generator bug, and each costs
      // memory all the way to the manifest: stop here.
      add(
          Severity::kError, "label.too_many_boxes", line, "",
          [&] {
            return "more than " + std::to_string(max_boxes) +
                   " boxes for one image (max_boxes_per_image); lines from here on are not read";
          },
          "sample excluded");
      break;
    }
    boxes.push_back(b);
  }
  if (!any_content) {
    add(Severity::kInfo, "label.empty", 0, "", "empty label file (no objects)", "kept as background");
  }
  return boxes;
}

}  // namespace kestrel::data
