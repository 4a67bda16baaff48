// The request-head reader of `kestrel serve` (server/request_head.h: every
// request's head is read and checked there before Beast parses it) on
// arbitrary bytes, as a connection's first bytes. Checks: a head it lets
// through is framed one way only (chunked or a Content-Length, never both),
// has an origin path, a method that is a token, lowercase field names and a
// host the server answers; an error has a status of the documented set, a
// code, a message, and its error document is JSON; the answer depends only
// on the head's own bytes (what follows it changes nothing) and a head cut
// short is always "read more".
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "server/request_head.h"
#include "server/router.h"

namespace {

using kestrel::server::AllowedHosts;
using kestrel::server::HeadParse;

constexpr size_t kLimit = 4096;

const AllowedHosts& Hosts() {
  static const AllowedHosts hosts = [] {
    auto h = kestrel::server::MakeAllowedHosts({}, {"127.0.0.1", "kestrel.test"}, false, "box");
    if (!h.IsOk()) __builtin_trap();
    return std::move(h).Value();
  }();
  return hosts;
}

bool IsTokenChar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c != 0 && std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const HeadParse p = kestrel::server::ParseRequestHead(in, Hosts(), kLimit);
  switch (p.state) {
    case HeadParse::State::kIncomplete:
      if (in.size() > kLimit) __builtin_trap();
      return 0;
    case HeadParse::State::kError: {
      const auto& e = p.error;
      if (e.status != 400 && e.status != 421 && e.status != 431 && e.status != 501 && e.status != 505)
        __builtin_trap();
      if (e.code.empty() || e.message.empty()) __builtin_trap();
      const auto doc = kestrel::server::ErrorResponse(e.status, e.code, e.message, e.field);
      if (doc.status != e.status || nlohmann::json::parse(doc.body, nullptr, false).is_discarded())
        __builtin_trap();
      return 0;
    }
    case HeadParse::State::kHead:
      break;
  }
  const auto& h = p.head;
  if (h.size > in.size() || h.size > kLimit || h.skipped >= h.size) __builtin_trap();
  if (h.method.empty() || in.substr(h.skipped, h.method.size()) != h.method) __builtin_trap();
  for (char c : h.method)
    if (!IsTokenChar(c)) __builtin_trap();
  if (h.path.empty() || h.path.front() != '/') __builtin_trap();
  if (h.version_minor != 0 && h.version_minor != 1) __builtin_trap();
  if (h.chunked && h.content_length) __builtin_trap();
  if (h.chunked && h.version_minor == 0) __builtin_trap();
  if (h.authority.empty() ? h.version_minor != 0 : !Hosts().Allows(h.host)) __builtin_trap();
  for (const auto& [name, value] : h.fields) {
    if (name.empty()) __builtin_trap();
    for (char c : name)
      if (!IsTokenChar(c) || (c >= 'A' && c <= 'Z')) __builtin_trap();
    for (char c : value)
      if (c == '\r' || c == '\n' || c == '\0') __builtin_trap();
  }
  // The answer is the head's alone: the same bytes without what followed
  // give the same head, and one byte fewer is a head not yet complete.
  const HeadParse alone = kestrel::server::ParseRequestHead(in.substr(0, h.size), Hosts(), kLimit);
  if (alone.state != HeadParse::State::kHead || alone.head.size != h.size || alone.head.path != h.path ||
      alone.head.fields != h.fields)
    __builtin_trap();
  if (kestrel::server::ParseRequestHead(in.substr(0, h.size - 1), Hosts(), kLimit).state !=
      HeadParse::State::kIncomplete)
    __builtin_trap();
  return 0;
}
