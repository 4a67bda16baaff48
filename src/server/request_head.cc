#include "server/request_head.h"

#include <arpa/inet.h>

#include <algorithm>

#include "server/router.h"

namespace kestrel::server {
namespace {

constexpr std::string_view kLoopbackNames[] = {"localhost", "127.0.0.1", "[::1]"};

bool IsDigit(unsigned char c) { return c >= '0' && c <= '9'; }
bool IsAlnum(unsigned char c) { return IsDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// token = 1*tchar (RFC 9110 §5.6.2): method names and field names.
bool IsTchar(unsigned char c) {
  return IsAlnum(c) ||
         (c != 0 && std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos);
}

bool IsToken(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return IsTchar(static_cast<unsigned char>(c)); });
}

// reg-name = *( unreserved / pct-encoded / sub-delims ) (RFC 3986 §3.2.2), lowercase.
bool IsRegNameChar(unsigned char c) {
  return IsDigit(c) || (c >= 'a' && c <= 'z') ||
         (c != 0 &&
          std::string_view("-._~%!$&'()*+,;=").find(static_cast<char>(c)) != std::string_view::npos);
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The client's bytes in a message: quoted, at most 200 of them (the error
// document escapes what is not UTF-8).
std::string Quote(std::string_view s) {
  constexpr size_t kMax = 200;
  return "'" + std::string(s.substr(0, kMax)) + (s.size() > kMax ? "...'" : "'");
}

bool IsIpLiteral(const std::string& canonical) {
  if (!canonical.empty() && canonical.front() == '[') return true;
  in_addr a4{};
  return inet_pton(AF_INET, canonical.c_str(), &a4) == 1;
}

// Splits "host[:port]" (a Host value, an absolute-form target's authority):
// false when what follows the host is not ":" and at most 5 digits.
bool SplitAuthority(std::string_view a, std::string_view* host) {
  size_t host_end = 0;
  if (!a.empty() && a.front() == '[') {
    const size_t close = a.find(']');
    if (close == std::string_view::npos) return false;
    host_end = close + 1;
  } else {
    host_end = std::min(a.find(':'), a.size());
  }
  std::string_view rest = a.substr(host_end);
  if (!rest.empty()) {
    if (rest.front() != ':') return false;
    rest.remove_prefix(1);
    if (rest.size() > 5 || !std::all_of(rest.begin(), rest.end(), [](char c) { return IsDigit(c); }))
      return false;
  }
  *host = a.substr(0, host_end);
  return true;
}

HeadParse Fail(int status, std::string code, std::string message, std::string field = "") {
  HeadParse r;
  r.state = HeadParse::State::kError;
  r.error = {status, std::move(code), std::move(message), std::move(field)};
  return r;
}

HeadParse BadRequest(std::string message, std::string field = "") {
  return Fail(400, "bad_request", std::move(message), std::move(field));
}

// The end of the head in `in` from `from`: just past the first LF that is
// followed by LF or CRLF (the blank line), or npos. A bare-LF blank line
// ends the head too, so a head with bare LFs is refused at once rather
// than waited for.
size_t FindHeadEnd(std::string_view in, size_t from) {
  for (size_t i = in.find('\n', from); i != std::string_view::npos; i = in.find('\n', i + 1)) {
    if (i + 1 < in.size() && in[i + 1] == '\n') return i + 2;
    if (i + 2 < in.size() && in[i + 1] == '\r' && in[i + 2] == '\n') return i + 3;
  }
  return std::string_view::npos;
}

// The authority of an absolute-form target "http://AUTHORITY/path?query"
// and its origin-form rest ("/path?query"; "/" when it has no path). false
// when the target is not absolute-form with an http(s) scheme.
bool SplitAbsoluteForm(std::string_view target, std::string_view* authority, std::string* origin) {
  std::string_view rest;
  for (std::string_view scheme : {"http://", "https://"}) {
    if (target.size() >= scheme.size() && Lower(target.substr(0, scheme.size())) == scheme) {
      rest = target.substr(scheme.size());
      break;
    }
  }
  if (rest.data() == nullptr) return false;
  const size_t end = std::min(rest.find_first_of("/?#"), rest.size());
  *authority = rest.substr(0, end);
  *origin = std::string(rest.substr(end));
  if (origin->empty() || origin->front() != '/') *origin = "/" + *origin;
  return true;
}

}  // namespace

bool AllowedHosts::Allows(const std::string& host) const {
  if (any) return true;
  if (host.empty()) return false;
  if (any_ip_literal && IsIpLiteral(host)) return true;
  return std::find(names.begin(), names.end(), host) != names.end();
}

std::string CanonicalHost(std::string_view host) {
  if (host.empty()) return "";
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return "";
    const std::string inner(host.substr(1, host.size() - 2));
    in6_addr a6{};
    if (inet_pton(AF_INET6, inner.c_str(), &a6) != 1) return "";  // IPvFuture: no such host here
    char text[INET6_ADDRSTRLEN] = {};
    if (inet_ntop(AF_INET6, &a6, text, sizeof text) == nullptr) return "";
    return "[" + std::string(text) + "]";
  }
  std::string h = Lower(host);
  if (h.back() == '.') h.pop_back();  // "localhost." is "localhost"
  if (h.empty() || !std::all_of(h.begin(), h.end(), [](char c) { return IsRegNameChar(c); })) return "";
  return h;
}

Result<AllowedHosts> MakeAllowedHosts(const std::vector<std::string>& entries,
                                      const std::vector<std::string>& bind_names, bool wildcard,
                                      const std::string& machine_name) {
  AllowedHosts out;
  auto add = [&out](std::string_view raw) -> Status {
    const ErrorLocation where{"command line", 0, "allowed-hosts"};
    const std::string_view e = TrimOws(raw);
    if (e == "*") {
      out.any = true;
      return {};
    }
    if (e.empty()) return Status::InvalidArgument("an allowed host is empty", where);
    std::string entry(e);
    in6_addr a6{};
    if (inet_pton(AF_INET6, entry.c_str(), &a6) == 1) entry = "[" + entry + "]";  // "::1" -> "[::1]"
    std::string_view host;
    const bool split = SplitAuthority(entry, &host);
    if (split && host.size() != entry.size())
      return Status::InvalidArgument("allowed host " + Quote(e) + " has a port: give the host alone", where);
    const std::string canonical = split ? CanonicalHost(host) : "";
    if (canonical.empty())
      return Status::InvalidArgument("allowed host " + Quote(e) + " is not a host name or address", where);
    if (std::find(out.names.begin(), out.names.end(), canonical) == out.names.end())
      out.names.push_back(canonical);
    return {};
  };
  if (!entries.empty()) {
    for (const auto& e : entries) {
      Status s = add(e);
      if (!s.IsOk()) return s;
    }
    return out;
  }
  // The defaults are ours, not the user's: one that is no host (the bind
  // address "" or a name with odd characters) is left out, not an error.
  for (std::string_view n : kLoopbackNames) (void)add(n);
  for (const auto& n : bind_names) (void)add(n);
  if (wildcard) {
    out.any_ip_literal = true;
    if (!machine_name.empty()) (void)add(machine_name);
  }
  return out;
}

HeadParse ParseRequestHead(std::string_view in, const AllowedHosts& hosts, size_t limit) {
  size_t skipped = 0;
  while (skipped + 1 < in.size() && in[skipped] == '\r' && in[skipped + 1] == '\n') skipped += 2;
  const size_t end = FindHeadEnd(in, skipped);
  if ((end == std::string_view::npos && in.size() > limit) || (end != std::string_view::npos && end > limit))
    return Fail(431, "header_too_large", "request headers exceed " + std::to_string(limit) + " bytes");
  if (end == std::string_view::npos) return {};

  // The lines, each without its CRLF; the last one (the blank line) dropped.
  const std::string_view text = in.substr(skipped, end - skipped);
  std::vector<std::string_view> lines;
  for (size_t pos = 0; pos < text.size();) {
    const size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl - pos);
    if (line.empty() || line.back() != '\r')
      return BadRequest("line " + std::to_string(lines.size() + 1) +
                        " of the request head ends in a bare LF (lines end in CRLF)");
    line.remove_suffix(1);
    if (line.find('\r') != std::string_view::npos)
      return BadRequest("line " + std::to_string(lines.size() + 1) + " of the request head has a bare CR");
    lines.push_back(line);
    pos = nl + 1;
  }
  lines.pop_back();
  if (lines.empty()) return BadRequest("the request has no request line");

  HeadParse r;
  RequestHead& h = r.head;
  h.skipped = skipped;
  h.size = end;

  // request-line = method SP request-target SP HTTP-version (RFC 9112 §3)
  const std::string_view line = lines[0];
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return BadRequest("malformed request line " + Quote(line) + ": expected METHOD SP TARGET SP HTTP/1.1");
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(method)) return BadRequest("malformed method " + Quote(method));
  if (target.empty() || !std::all_of(target.begin(), target.end(), [](char c) {
        return static_cast<unsigned char>(c) > 0x20 && static_cast<unsigned char>(c) < 0x7f;
      }))
    return BadRequest("malformed request target " + Quote(target));
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || !IsDigit(version[5]) || version[6] != '.' ||
      !IsDigit(version[7]))
    return BadRequest("malformed HTTP version " + Quote(version));
  if (version[5] != '1' || version[7] > '1')
    return Fail(505, "http_version_not_supported",
                "HTTP version " + Quote(version) + " is not supported (HTTP/1.1 and HTTP/1.0 are)");
  h.method = std::string(method);
  h.target = std::string(target);
  h.version_minor = version[7] - '0';

  // field-line = field-name ":" OWS field-value OWS (RFC 9112 §5)
  std::vector<std::string_view> host_values, length_values, coding_values;
  std::string_view last_name;  // the field a folded line would continue
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string_view f = lines[i];
    if (f.front() == ' ' || f.front() == '\t')
      return BadRequest("header line " + std::to_string(i) +
                            " starts with whitespace (obsolete line folding, refused: RFC 9112 §5.2)",
                        std::string(last_name));
    const size_t colon = f.find(':');
    const std::string_view name = f.substr(0, colon);
    if (colon == std::string_view::npos || !IsToken(name))
      return BadRequest("malformed header field name " + Quote(name) + " on header line " +
                        std::to_string(i) + " (no colon, or a space or other character no field name has)");
    const std::string_view value = TrimOws(f.substr(colon + 1));
    for (char c : value) {
      const auto u = static_cast<unsigned char>(c);
      if ((u < 0x20 && c != '\t') || u == 0x7f)
        return BadRequest("header " + std::string(name) + " has a control character", std::string(name));
    }
    last_name = name;
    std::string lname = Lower(name);
    if (lname == "host") host_values.push_back(value);
    if (lname == "content-length") length_values.push_back(value);
    if (lname == "transfer-encoding") coding_values.push_back(value);
    h.fields.emplace_back(std::move(lname), std::string(value));
  }

  // The body's framing (RFC 9112 §6): never two ways of saying where it ends.
  if (length_values.size() > 1) return BadRequest("more than one Content-Length header", "Content-Length");
  if (length_values.size() == 1) {
    const std::string_view v = length_values[0];
    if (v.empty() || v.size() > 19 || !std::all_of(v.begin(), v.end(), [](char c) { return IsDigit(c); }))
      return BadRequest("Content-Length " + Quote(v) + " is not one decimal number", "Content-Length");
    h.content_length = std::stoull(std::string(v));
  }
  if (!coding_values.empty()) {
    if (h.content_length)
      return BadRequest("a request with both Content-Length and Transfer-Encoding (RFC 9112 §6.1)",
                        "Transfer-Encoding");
    if (h.version_minor == 0)
      return BadRequest("Transfer-Encoding in an HTTP/1.0 request (RFC 9112 §6.1)", "Transfer-Encoding");
    std::vector<std::string> codings;
    for (std::string_view v : coding_values) {
      for (size_t pos = 0; pos <= v.size();) {
        const size_t comma = std::min(v.find(',', pos), v.size());
        const std::string_view c = TrimOws(v.substr(pos, comma - pos));
        if (!c.empty()) codings.push_back(Lower(c));
        pos = comma + 1;
      }
    }
    if (codings.empty() || codings.back() != "chunked")
      return BadRequest("Transfer-Encoding " + Quote(coding_values.back()) +
                            ": chunked is not the last coding, so where the body ends cannot be known "
                            "(RFC 9112 §6.3)",
                        "Transfer-Encoding");
    if (std::find(codings.begin(), codings.end() - 1, "chunked") != codings.end() - 1)
      return BadRequest("Transfer-Encoding applies chunked more than once (RFC 9112 §7)",
                        "Transfer-Encoding");
    if (codings.size() > 1) {
      const std::string& other = codings.front();
      return Fail(501, "not_implemented",
                  "transfer coding " + Quote(other) + " is not implemented (only chunked alone is)",
                  "Transfer-Encoding");
    }
    h.chunked = true;
  }

  // The target: origin-form, or absolute-form whose authority stands for
  // the Host (RFC 9112 §3.2.2). Others (OPTIONS *, CONNECT's) are not served.
  std::string origin = h.target;
  std::string_view absolute_authority;
  bool absolute = false;
  if (target.front() != '/') {
    absolute = SplitAbsoluteForm(target, &absolute_authority, &origin);
    if (!absolute) return BadRequest("malformed request target " + Quote(target));
    std::string_view host;
    if (absolute_authority.find('@') != std::string_view::npos)
      return BadRequest("request target " + Quote(target) + " has user information (RFC 9110 §4.2.4)");
    if (!SplitAuthority(absolute_authority, &host) || CanonicalHost(host).empty())
      return BadRequest("request target " + Quote(target) + " has no valid host");
  }
  if (!ParseTarget(origin, &h.path, &h.query)) return BadRequest("malformed request target " + Quote(target));

  // Host (RFC 9112 §3.2): exactly one for HTTP/1.1, a valid one, and one
  // this server answers.
  if (host_values.size() > 1) return BadRequest("more than one Host header", "Host");
  if (host_values.empty() && h.version_minor == 1)
    return BadRequest("no Host header (an HTTP/1.1 request must have one)", "Host");
  if (!host_values.empty()) {
    std::string_view host;
    if (!SplitAuthority(host_values[0], &host) || (!host.empty() && CanonicalHost(host).empty()))
      return BadRequest("Host " + Quote(host_values[0]) + " is not a host[:port]", "Host");
  }
  if (absolute) {
    h.authority = std::string(absolute_authority);
  } else if (!host_values.empty()) {
    h.authority = std::string(host_values[0]);
  } else {
    r.state =
        HeadParse::State::kHead;  // HTTP/1.0 without a Host: no name to check, and browsers always send one
    return r;
  }
  std::string_view host;
  SplitAuthority(h.authority, &host);  // checked above
  h.host = CanonicalHost(host);
  if (!hosts.Allows(h.host))
    return Fail(421, "misdirected_request",
                "host " + Quote(host) + " is not one this server answers (kestrel serve --allowed-hosts)",
                absolute ? "" : "Host");
  r.state = HeadParse::State::kHead;
  return r;
}

}  // namespace kestrel::server
