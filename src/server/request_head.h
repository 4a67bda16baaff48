// A request's head (request line and header fields, RFC 9112 §2-§7) read
// from bytes and checked before the transport's parser reads the body: the
// body's framing (Content-Length, Transfer-Encoding), obsolete line folding,
// the request target's form (origin or absolute) and the Host against the
// hosts the server answers (docs/server.md "Request heads"). A head this
// lets through is one Beast frames the same way; one it refuses ends the
// connection, so bytes after it never run as a request of their own.
//
// Pure: no sockets, no clock (tests/fuzz/http_request_fuzz.cc feeds it
// bytes). Thread-safety: the functions are; an AllowedHosts is read-only
// after MakeAllowedHosts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace kestrel::server {

// The hosts a server answers: a request naming another one (Host, or the
// authority of an absolute-form target) is refused with 421, so a page on
// attacker.example whose name was rebound to 127.0.0.1 reads nothing.
struct AllowedHosts {
  bool any = false;                // "*": every host (a proxy in front checks it)
  bool any_ip_literal = false;     // any IPv4 or [IPv6] literal: no DNS name, so nothing to rebind
  std::vector<std::string> names;  // canonical (CanonicalHost): lowercase, no trailing dot, IPv6 bracketed

  // Whether `host` (canonical, without the port) is answered.
  bool Allows(const std::string& host) const;
};

// ServerOptions::allowed_hosts made usable. `entries` empty: the defaults,
// "localhost", "127.0.0.1", "[::1]", each of `bind_names` (the --host value
// and the bound address) and, when the server listens on every interface
// (`wildcard`: 0.0.0.0 or ::), `machine_name` and any IP literal. Else
// exactly `entries` (names or addresses without a port; "*" alone: any).
// kInvalidArgument (field `allowed-hosts`) naming an entry that is empty,
// has a port or a character no host name has.
Result<AllowedHosts> MakeAllowedHosts(const std::vector<std::string>& entries,
                                      const std::vector<std::string>& bind_names, bool wildcard,
                                      const std::string& machine_name);

// `host` (a Host value's host, without the port) compared as the check
// compares it: lowercase, one trailing dot dropped, an IP literal in its
// canonical text, IPv6 in brackets ("::1", "[0::1]" -> "[::1]"). "" when it
// is not a host (empty brackets, a character a host cannot have).
std::string CanonicalHost(std::string_view host);

// A request head that passed every check.
struct RequestHead {
  std::string method;                        // as sent ("GET")
  std::string target;                        // as sent: origin-form "/p?q" or absolute-form "http://a/p?q"
  std::string path;                          // percent-decoded (ParseTarget), from either form
  std::map<std::string, std::string> query;  // percent-decoded; a repeated key keeps its last value
  int version_minor = 1;                     // HTTP/1.0 or HTTP/1.1
  // The authority the request names, as sent ("127.0.0.1:8080"): an
  // absolute-form target's (RFC 9112 §3.2.2: it replaces Host), else the
  // Host header's; "" for an HTTP/1.0 request without either.
  std::string authority;
  std::string host;  // CanonicalHost of the authority's host ("" when authority is "")
  std::vector<std::pair<std::string, std::string>> fields;  // in order; names lowercased, values trimmed
  std::optional<uint64_t> content_length;                   // the Content-Length, when sent
  bool chunked = false;                                     // Transfer-Encoding: chunked
  size_t skipped = 0;  // empty lines (CRLF) before the request line, ignored (RFC 9112 §2.2)
  size_t size = 0;     // bytes of the head in the input: skipped + request line + fields + blank line
};

// Why a head was refused: the error document's status, code, message and
// field (the header's name; "" for the request line).
struct HeadError {
  int status = 400;  // 400, 421, 431, 501 or 505
  std::string code;  // "bad_request", "misdirected_request", "header_too_large", "not_implemented", ...
  std::string message;
  std::string field;
};

struct HeadParse {
  enum class State {
    kIncomplete,  // no blank line yet within `limit` bytes: read more
    kHead,        // `head` is set
    kError,       // `error` says why; the connection must close after answering
  };
  State state = State::kIncomplete;
  RequestHead head;
  HeadError error;
};

// Reads the head at the start of `buffered` (bytes received so far; what
// follows the head, a body or a next request, is not looked at) and checks
// it: request line `METHOD SP TARGET SP HTTP/1.x` with CRLF line ends;
// field lines `name: value` (no obs-fold, no space before the colon, no
// control bytes); a Host for HTTP/1.1, never two, allowed by `hosts`; at
// most one Content-Length, one decimal number; Transfer-Encoding only
// `chunked` (chunked not last: 400, RFC 9112 §6.3; other codings before it:
// 501), never with Content-Length nor in HTTP/1.0. `limit`: the most bytes
// a head may take (more: 431).
HeadParse ParseRequestHead(std::string_view buffered, const AllowedHosts& hosts, size_t limit);

}  // namespace kestrel::server
