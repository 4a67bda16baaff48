// A small S3 REST client (libcurl + SigV4, path-style addressing): the object
// and multipart calls an artifact store needs, nothing more.
//
// Errors are values naming the endpoint, the bucket/key and the access key id
// (never the secret). Transport failures and 5xx answers are retried with
// backoff up to ClientOptions::max_attempts; a 403 RequestTimeTooSkewed
// resynchronises the clock from the server's Date header and retries once.
//
// Thread-safety: one Client may be used from several threads (each call opens
// its own curl handle; the clock offset is atomic).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "s3/sigv4.h"

namespace kestrel::s3 {

struct ClientOptions {
  // scheme://host[:port] of the S3 API, no trailing slash. Empty: AWS's
  // https://s3.<region>.amazonaws.com.
  std::string endpoint;
  std::string region = "us-east-1";
  Credentials credentials;
  int connect_timeout_ms = 5000;
  // A whole request (one part of a multipart upload at most).
  int request_timeout_ms = 300000;
  // Tries per request on a transport error or a 5xx answer (>= 1).
  int max_attempts = 4;
  // First retry's wait; doubles per try.
  int backoff_ms = 200;
};

// Where the options came from, for messages ("AWS_ENDPOINT_URL", "profile
// default in ~/.aws/credentials").
struct ResolvedOptions {
  ClientOptions options;
  std::string credentials_source;
};

// Endpoint, region and credentials from AWS_ENDPOINT_URL (or
// AWS_ENDPOINT_URL_S3), AWS_REGION / AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID /
// AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, else the AWS_PROFILE (default
// "default") section of AWS_SHARED_CREDENTIALS_FILE (~/.aws/credentials) and
// AWS_CONFIG_FILE (~/.aws/config, "[profile NAME]"; region, endpoint_url).
// `getenv` is injectable for tests. kInvalidArgument naming the variable or
// file when no credentials are found or a value is malformed.
Result<ResolvedOptions> OptionsFromEnvironment(const std::function<const char*(const char*)>& getenv);

struct ObjectInfo {
  std::string key;
  uint64_t size = 0;
  int64_t last_modified_s = 0;  // Unix seconds
  std::string etag;             // without quotes
};
struct UploadInfo {
  std::string key;
  std::string upload_id;
  int64_t initiated_s = 0;
};
struct PartInfo {
  int number = 0;
  std::string etag;  // without quotes
  uint64_t size = 0;
};

class Client {
 public:
  explicit Client(ClientOptions options, Env& env = Env::Default());

  Status CreateBucket(const std::string& bucket);
  // Single-request upload; Content-MD5 and the signed payload hash let the
  // server reject a body damaged on the way.
  Status PutObject(const std::string& bucket, const std::string& key, std::string_view body);
  // kNotFound when absent.
  Result<std::string> GetObject(const std::string& bucket, const std::string& key);
  Result<ObjectInfo> HeadObject(const std::string& bucket, const std::string& key);
  // Absent keys are not an error (S3 semantics).
  Status DeleteObject(const std::string& bucket, const std::string& key);
  // Server-side copy of a key onto itself with its metadata replaced: the
  // object's LastModified becomes now (the collector's grace period).
  Status Touch(const std::string& bucket, const std::string& key);
  // Every object under `prefix` (all pages).
  Result<std::vector<ObjectInfo>> List(const std::string& bucket, const std::string& prefix);

  Result<std::string> CreateMultipartUpload(const std::string& bucket, const std::string& key);
  // Returns the part's ETag. `part_number` 1..10000.
  Result<std::string> UploadPart(const std::string& bucket, const std::string& key,
                                 const std::string& upload_id, int part_number, std::string_view body);
  Status CompleteMultipartUpload(const std::string& bucket, const std::string& key,
                                 const std::string& upload_id, const std::vector<PartInfo>& parts);
  // An upload already gone (completed or aborted) is not an error.
  Status AbortMultipartUpload(const std::string& bucket, const std::string& key,
                              const std::string& upload_id);
  Result<std::vector<UploadInfo>> ListMultipartUploads(const std::string& bucket, const std::string& prefix);
  Result<std::vector<PartInfo>> ListParts(const std::string& bucket, const std::string& key,
                                          const std::string& upload_id);

  const std::string& Endpoint() const { return endpoint_; }
  // Seconds added to the local clock when signing (learnt from a
  // RequestTimeTooSkewed answer).
  int64_t ClockOffsetSeconds() const { return clock_offset_s_.load(); }

  struct Response {
    long status = 0;
    std::string body;
    std::map<std::string, std::string> headers;  // lowercase names
  };

 private:
  using Query = std::vector<std::pair<std::string, std::string>>;
  using Headers = std::vector<std::pair<std::string, std::string>>;
  // One signed request with retries; non-2xx answers come back as a Status
  // naming the operation, endpoint, bucket/key and key id.
  Result<Response> Call(const char* op, const std::string& method, const std::string& bucket,
                        const std::string& key, const Query& query, std::string_view body,
                        const Headers& extra, bool not_found_ok = false);
  Result<Response> SendOnce(const std::string& method, const std::string& bucket, const std::string& key,
                            const Query& query, std::string_view body, const Headers& extra);

  ClientOptions options_;
  std::string endpoint_;
  std::string host_;  // the Host header: host[:port] of the endpoint
  Env& env_;
  std::atomic<int64_t> clock_offset_s_{0};
};

// "s3://bucket/some/prefix" -> bucket, prefix without surrounding slashes.
struct S3Url {
  std::string bucket;
  std::string prefix;
};
Result<S3Url> ParseS3Url(std::string_view url);

}  // namespace kestrel::s3
