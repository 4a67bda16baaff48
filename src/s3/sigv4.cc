#include "s3/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <ctime>
#include <map>

#include "core/hash.h"

namespace kestrel::s3 {
namespace {

std::string HmacRaw(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Leading/trailing whitespace dropped, inner runs collapsed to one space.
std::string TrimCollapse(std::string_view v) {
  std::string out;
  bool space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

// Sorted lowercase name -> values joined with ',' (repeated headers).
std::map<std::string, std::string> CanonicalHeaderMap(const SignRequest& req) {
  std::map<std::string, std::string> m;
  for (const auto& [name, value] : req.headers) {
    std::string& slot = m[Lower(name)];
    if (!slot.empty()) slot += ',';
    slot += TrimCollapse(value);
  }
  return m;
}

}  // namespace

std::string UriEncode(std::string_view s, bool encode_slash) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size() * 3);
  for (unsigned char c : s) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
        c == '.' || c == '~' || (c == '/' && !encode_slash)) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string AmzDate(int64_t unix_s) {
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

std::string SignedHeaders(const SignRequest& req) {
  std::string out;
  for (const auto& [name, value] : CanonicalHeaderMap(req)) {
    if (!out.empty()) out += ';';
    out += name;
  }
  return out;
}

std::string CanonicalRequest(const SignRequest& req) {
  std::vector<std::pair<std::string, std::string>> query;
  query.reserve(req.query.size());
  for (const auto& [k, v] : req.query) query.emplace_back(UriEncode(k, true), UriEncode(v, true));
  std::sort(query.begin(), query.end());
  std::string q;
  for (const auto& [k, v] : query) {
    if (!q.empty()) q += '&';
    q += k + "=" + v;
  }
  std::string headers;
  for (const auto& [name, value] : CanonicalHeaderMap(req)) headers += name + ":" + value + "\n";
  return req.method + "\n" + UriEncode(req.path.empty() ? "/" : req.path, false) + "\n" + q + "\n" + headers +
         "\n" + SignedHeaders(req) + "\n" + req.payload_sha256;
}

std::string Authorization(const SignRequest& req, const Credentials& creds, const std::string& region,
                          const std::string& service, const std::string& amz_date) {
  const std::string day = amz_date.substr(0, 8);
  const std::string scope = day + "/" + region + "/" + service + "/aws4_request";
  const std::string to_sign =
      "AWS4-HMAC-SHA256\n" + amz_date + "\n" + scope + "\n" + Sha256Hex(CanonicalRequest(req));
  std::string key = HmacRaw("AWS4" + creds.secret_access_key, day);
  key = HmacRaw(key, region);
  key = HmacRaw(key, service);
  key = HmacRaw(key, "aws4_request");
  const std::string signature = HmacSha256Hex(key, to_sign);
  return "AWS4-HMAC-SHA256 Credential=" + creds.access_key_id + "/" + scope +
         ", SignedHeaders=" + SignedHeaders(req) + ", Signature=" + signature;
}

}  // namespace kestrel::s3
