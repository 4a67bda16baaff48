// Status and Result<T>: expected failures as values.
//
// A Status carries a code, a human message and, where the failure is tied to
// input, the location that caused it (file, 1-based line, field). ToString()
// renders "file:line: field 'x': message" so errors point users at the
// offending byte. Exceptions from third-party libraries are caught at the
// adapter that calls them and turned into a Status.
//
// A failure may also carry a FailureReason subcode (core/failure.h), set where
// the error starts (WithReason), so callers that must classify it (the job
// runner's exit code, the store's conflict retries) read a type, never the
// message text. WithContext and WithLocation keep it.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

#include "core/failure.h"

namespace kestrel {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // bad user input: config, CLI, file contents
  kNotFound,            // a named thing does not exist
  kAlreadyExists,       // create of something that exists
  kIoError,             // the OS refused a read/write
  kCorruption,          // stored data failed its checksum or format check
  kFailedPrecondition,  // the system is not in a state that allows this
  kResourceExhausted,   // disk full, limit exceeded
  kAborted,             // conflict, try again (e.g. lost a race)
  kUnavailable,         // transient: a service is not reachable
  kInternal,            // a bug
};

const char* StatusCodeName(StatusCode code);

// Where an input error sits. Empty file / line 0 / empty field mean unknown.
struct ErrorLocation {
  std::string file;
  int line = 0;
  std::string field;
};

// [[nodiscard]]: a dropped Status is a lost error; `(void)` says it is meant.
class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message, ErrorLocation where = {})
      : code_(code), message_(std::move(message)), where_(std::move(where)) {}

  static Status InvalidArgument(std::string msg, ErrorLocation where = {}) {
    return {StatusCode::kInvalidArgument, std::move(msg), std::move(where)};
  }
  static Status NotFound(std::string msg, ErrorLocation where = {}) {
    return {StatusCode::kNotFound, std::move(msg), std::move(where)};
  }
  static Status AlreadyExists(std::string msg, ErrorLocation where = {}) {
    return {StatusCode::kAlreadyExists, std::move(msg), std::move(where)};
  }
  static Status IoError(std::string msg, ErrorLocation where = {}) {
    return {StatusCode::kIoError, std::move(msg), std::move(where)};
  }
  static Status Corruption(std::string msg, ErrorLocation where = {}) {
    return {StatusCode::kCorruption, std::move(msg), std::move(where)};
  }
  static Status FailedPrecondition(std::string msg, ErrorLocation where = {}) {
    return {StatusCode::kFailedPrecondition, std::move(msg), std::move(where)};
  }
  static Status ResourceExhausted(std::string msg, ErrorLocation where = {}) {
    return {StatusCode::kResourceExhausted, std::move(msg), std::move(where)};
  }
  static Status Aborted(std::string msg, ErrorLocation where = {}) {
    return {StatusCode::kAborted, std::move(msg), std::move(where)};
  }
  static Status Unavailable(std::string msg, ErrorLocation where = {}) {
    return {StatusCode::kUnavailable, std::move(msg), std::move(where)};
  }
  static Status Internal(std::string msg, ErrorLocation where = {}) {
    return {StatusCode::kInternal, std::move(msg), std::move(where)};
  }

  bool IsOk() const { return code_ == StatusCode::kOk; }
  StatusCode Code() const { return code_; }
  const std::string& Message() const { return message_; }
  const ErrorLocation& Where() const { return where_; }
  // The subcode set where the error started; kNone when nobody set one.
  FailureReason Reason() const { return reason_; }

  // "file:line: field 'f': message" (parts omitted when unknown), or "OK".
  std::string ToString() const;
  // Same status with "context: " prepended to the message.
  Status WithContext(const std::string& context) const;
  // Same status with the location filled in where it was unknown.
  Status WithLocation(const ErrorLocation& where) const;
  // Same status with `reason` as its subcode (an OK status stays OK).
  Status WithReason(FailureReason reason) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  ErrorLocation where_;
  FailureReason reason_ = FailureReason::kNone;
};

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).IsOk() && "Result from an OK status");
  }

  bool IsOk() const { return std::holds_alternative<T>(v_); }
  // REQUIRES: IsOk().
  T& Value() & { return std::get<T>(v_); }
  const T& Value() const& { return std::get<T>(v_); }
  T&& Value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &std::get<T>(v_); }
  const T* operator->() const { return &std::get<T>(v_); }
  T& operator*() & { return std::get<T>(v_); }
  const T& operator*() const& { return std::get<T>(v_); }
  // OK when a value is held. The reference lives as long as the Result.
  const Status& GetStatus() const {
    static const Status kOkStatus;
    return IsOk() ? kOkStatus : std::get<Status>(v_);
  }

 private:
  std::variant<T, Status> v_;
};

}  // namespace kestrel

#define KESTREL_CONCAT_INNER(a, b) a##b
#define KESTREL_CONCAT(a, b) KESTREL_CONCAT_INNER(a, b)

// `lhs` is a declaration or an lvalue and `tmp` a name, so neither can be
// parenthesized: bugprone-macro-parentheses is off for these macros.
// NOLINTBEGIN(bugprone-macro-parentheses)
// Returns the Status from the enclosing function when `expr` is not OK.
#define KESTREL_RETURN_IF_ERROR(expr)                    \
  do {                                                   \
    ::kestrel::Status kestrel_status_ = (expr);          \
    if (!kestrel_status_.IsOk()) return kestrel_status_; \
  } while (0)

// `lhs` = value of the Result `rexpr`, or return its Status.
#define KESTREL_ASSIGN_OR_RETURN(lhs, rexpr) \
  KESTREL_ASSIGN_OR_RETURN_IMPL(KESTREL_CONCAT(kestrel_result_, __LINE__), lhs, rexpr)
#define KESTREL_ASSIGN_OR_RETURN_IMPL(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                  \
  if (!tmp.IsOk()) return tmp.GetStatus();             \
  lhs = std::move(tmp).Value()
// NOLINTEND(bugprone-macro-parentheses)
