#include "core/status.h"

namespace kestrel {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid_argument";
    case StatusCode::kNotFound:
      return "not_found";
    case StatusCode::kAlreadyExists:
      return "already_exists";
    case StatusCode::kIoError:
      return "io_error";
    case StatusCode::kCorruption:
      return "corruption";
    case StatusCode::kFailedPrecondition:
      return "failed_precondition";
    case StatusCode::kResourceExhausted:
      return "resource_exhausted";
    case StatusCode::kAborted:
      return "aborted";
    case StatusCode::kUnavailable:
      return "unavailable";
    case StatusCode::kInternal:
      return "internal";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (IsOk()) return "OK";
  std::string out;
  if (!where_.file.empty()) {
    out += where_.file;
    if (where_.line > 0) out += ":" + std::to_string(where_.line);
    out += ": ";
  } else if (where_.line > 0) {
    out += "line " + std::to_string(where_.line) + ": ";
  }
  if (!where_.field.empty()) out += "field '" + where_.field + "': ";
  out += message_;
  return out;
}

Status Status::WithContext(const std::string& context) const {
  if (IsOk()) return *this;
  Status out(code_, context + ": " + message_, where_);
  out.reason_ = reason_;
  return out;
}

Status Status::WithLocation(const ErrorLocation& where) const {
  if (IsOk()) return *this;
  ErrorLocation w = where_;
  if (w.file.empty()) w.file = where.file;
  if (w.line == 0) w.line = where.line;
  if (w.field.empty()) w.field = where.field;
  Status out(code_, message_, w);
  out.reason_ = reason_;
  return out;
}

Status Status::WithReason(FailureReason reason) const {
  if (IsOk()) return *this;
  Status out = *this;
  out.reason_ = reason;
  return out;
}

}  // namespace kestrel
