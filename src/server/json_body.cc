#include "server/json_body.h"

#include <cmath>
#include <exception>
#include <unordered_set>
#include <utility>

#include "core/utf8.h"

namespace kestrel::server {
namespace {

using nlohmann::json;

Status BodyError(const std::string& message, const std::string& field) {
  return Status::InvalidArgument(message, {"request", 0, field});
}

// A key as a field name: the empty key as "" (a field must name something).
std::string KeyName(const std::string& key) { return key.empty() ? "\"\"" : key; }

// A number literal's mantissa has a digit other than 0 ("1e-400", "0.0001").
bool HasNonZeroDigit(const std::string& literal) {
  for (char c : literal) {
    if (c == 'e' || c == 'E') return false;
    if (c >= '1' && c <= '9') return true;
  }
  return false;
}

// The checks nlohmann's DOM parser does not make (depth, duplicate keys,
// integers past 64 bits, underflow), as a SAX pass before the DOM is built:
// it stops at the first problem, so nothing deep or ambiguous is ever
// allocated. The parse itself is nlohmann's (iterative, strict).
class BodyChecker final : public nlohmann::json_sax<json> {
 public:
  Status Error() const { return error_; }

  bool null() override { return Value(); }
  bool boolean(bool) override { return Value(); }
  bool number_integer(number_integer_t) override { return Value(); }
  bool number_unsigned(number_unsigned_t) override { return Value(); }
  bool number_float(number_float_t val, const string_t& literal) override {
    if (!Value()) return false;
    if (literal.find_first_of(".eE") == std::string::npos) {
      return Fail("number " + EscapeForDisplayCut(literal) + " at " + Path() +
                  " does not fit in a 64-bit integer (-9223372036854775808 to 18446744073709551615)");
    }
    if (val == 0 && HasNonZeroDigit(literal)) {
      return Fail("number " + EscapeForDisplayCut(literal) + " at " + Path() +
                  " is too small to represent: it would be read as 0");
    }
    return true;
  }
  bool string(string_t&) override { return Value(); }
  bool binary(binary_t&) override { return Value(); }
  bool start_object(std::size_t) override { return Open(true); }
  bool key(string_t& k) override {
    Frame& f = frames_.back();
    f.key = k;
    if (!f.keys.insert(k).second) {
      return Fail("key '" + EscapeForDisplayCut(k) + "' appears twice in " +
                  (frames_.size() == 1 ? std::string("the request body") : Path(frames_.size() - 1)) +
                  " (which value would count is ambiguous)");
    }
    return true;
  }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(false); }
  bool end_array() override { return Close(); }
  bool parse_error(std::size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& ex) override {
    if (ex.id == 406) {  // out_of_range: a number past what a double holds (1e400, -1e400)
      Value();
      return Fail("number " + EscapeForDisplayCut(last_token) + " at " + Path() +
                  " is out of range (beyond +-1.8e308, the largest a double holds)");
    }
    // "[json.exception.parse_error.101] parse error at line 1, column 4: syntax error ..."
    std::string what = ex.what();
    const size_t colon = what.find(": ");
    if (colon != std::string::npos) what = what.substr(colon + 2);
    return Fail("the request body is not valid JSON (at byte " + std::to_string(position) +
                    "): " + EscapeForDisplayCut(what, 160),
                "body");
  }

 private:
  struct Frame {
    bool object = false;
    std::string key;       // an object's current key
    int64_t index = -1;    // an array's current element
    int64_t elements = 0;  // an array's elements so far
    std::unordered_set<std::string> keys;
  };

  // A value begins in the innermost container (or at the top).
  bool Value() {
    if (!frames_.empty() && !frames_.back().object) frames_.back().index = frames_.back().elements++;
    return true;
  }
  bool Open(bool object) {
    Value();
    if (static_cast<int>(frames_.size()) + 1 > kMaxJsonBodyDepth) {
      return Fail("the request body is nested deeper than " + std::to_string(kMaxJsonBodyDepth) +
                      " levels of arrays and objects",
                  "body");
    }
    frames_.push_back(Frame{object, {}, -1, 0, {}});
    return true;
  }
  bool Close() {
    frames_.pop_back();
    return true;
  }
  // The dotted path of the current value in the first `n` frames
  // ("keys.epochs", "a[3].b"); "body" at the top.
  std::string Path(size_t n = std::string::npos) const {
    std::string out;
    for (size_t i = 0; i < frames_.size() && i < n; ++i) {
      const Frame& f = frames_[i];
      if (f.object) {
        out += (out.empty() ? "" : ".") + KeyName(f.key);
      } else {
        out += "[" + std::to_string(f.index) + "]";
      }
    }
    return out.empty() ? "body" : EscapeForDisplayCut(out, 120);
  }
  // Records the first error (field: the current value's path unless given).
  bool Fail(const std::string& message, const std::string& field = "") {
    if (error_.IsOk()) error_ = BodyError(message, field.empty() ? Path() : field);
    return false;
  }

  std::vector<Frame> frames_;
  Status error_;
};

bool Blank(std::string_view body) { return body.find_first_not_of(" \t\r\n") == std::string_view::npos; }

}  // namespace

Result<json> ParseJsonBody(std::string_view body) {
  if (Blank(body)) return BodyError("the request body is empty; it must be JSON", "body");
  try {
    BodyChecker checker;
    if (!json::sax_parse(body.begin(), body.end(), &checker)) {
      Status s = checker.Error();
      return s.IsOk() ? BodyError("the request body is not valid JSON", "body") : s;
    }
    // Checked above: valid, shallow, every number representable.
    json doc = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return BodyError("the request body is not valid JSON", "body");
    return doc;
  } catch (const std::exception& e) {  // bad_alloc; nlohmann's own are off or caught by the checker
    return BodyError(std::string("the request body could not be read: ") + e.what(), "body");
  }
}

Result<json> ReadJsonObjectBody(std::string_view body, const std::vector<std::string>& allowed,
                                bool required) {
  if (Blank(body)) {
    if (required) return BodyError("the request body must be a JSON object; it is empty", "body");
    return json::object();
  }
  KESTREL_ASSIGN_OR_RETURN(json doc, ParseJsonBody(body));
  if (!doc.is_object())
    return BodyError("the request body must be a JSON object, not " + std::string(doc.type_name()), "body");
  for (const auto& [key, value] : doc.items()) {
    bool known = false;
    for (const auto& k : allowed) known = known || k == key;
    if (known) continue;
    std::string expected;
    for (const auto& k : allowed) expected += (expected.empty() ? "" : ", ") + k;
    return BodyError("unknown key '" + EscapeForDisplayCut(key) + "' in the request body (" +
                         (expected.empty() ? std::string("it takes none") : "keys: " + expected) + ")",
                     EscapeForDisplayCut(KeyName(key)));
  }
  return doc;
}

}  // namespace kestrel::server
