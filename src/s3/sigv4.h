// AWS Signature Version 4 (the "AWS4-HMAC-SHA256" Authorization header), as
// S3 and S3-compatible stores check it. Pure functions: no clock, no I/O;
// verified against the AWS SigV4 test-suite vectors (tests/s3/data).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kestrel::s3 {

// One access key. `session_token` is empty for long-lived keys; when set it
// travels as x-amz-security-token (a signed header).
struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
};

// What the signature covers. Values are raw (not percent-encoded): the signer
// encodes them as SigV4 requires.
struct SignRequest {
  std::string method;                                      // "GET", "PUT", ...
  std::string path;                                        // "/bucket/key", raw UTF-8, starting with '/'
  std::vector<std::pair<std::string, std::string>> query;  // raw name, value
  std::vector<std::pair<std::string, std::string>>
      headers;                 // every header is signed; must hold host, x-amz-date
  std::string payload_sha256;  // lowercase hex of the body (or "UNSIGNED-PAYLOAD")
};

// RFC 3986 percent-encoding as SigV4 wants it: A-Z a-z 0-9 - _ . ~ kept,
// everything else %XX (uppercase); '/' kept unless `encode_slash`.
std::string UriEncode(std::string_view s, bool encode_slash);
// "20150830T123600Z" for Unix seconds (UTC).
std::string AmzDate(int64_t unix_s);
// The canonical request (method, encoded path, sorted query, lowercased and
// trimmed headers, signed header list, payload hash), '\n'-joined.
std::string CanonicalRequest(const SignRequest& req);
// "host;x-amz-date;..." — lowercase header names, sorted.
std::string SignedHeaders(const SignRequest& req);
// The full Authorization header value for `req` signed at `amz_date` (the
// request's x-amz-date) in `region` for `service` ("s3").
std::string Authorization(const SignRequest& req, const Credentials& creds, const std::string& region,
                          const std::string& service, const std::string& amz_date);

}  // namespace kestrel::s3
