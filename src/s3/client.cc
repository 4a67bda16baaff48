#include "s3/client.h"

#include <curl/curl.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <pugixml.hpp>

#include "core/hash.h"

namespace kestrel::s3 {
namespace {

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string Base64Md5(std::string_view body) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(body.data(), body.size(), md, &len, EVP_md5(), nullptr);
  unsigned char out[64];
  const int n = EVP_EncodeBlock(out, md, static_cast<int>(len));
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

std::string Unquote(std::string s) {
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  return s;
}

// "Sat, 05 Dec 2026 00:10:53 GMT" -> Unix seconds; -1 when unparsable.
int64_t ParseHttpDate(const std::string& s) {
  std::tm tm{};
  if (strptime(s.c_str(), "%a, %d %b %Y %H:%M:%S", &tm) == nullptr) return -1;
  return static_cast<int64_t>(timegm(&tm));
}

// "2026-12-05T00:10:53.000Z" -> Unix seconds; -1 when unparsable.
int64_t ParseIsoDate(const std::string& s) {
  std::tm tm{};
  if (strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr) return -1;
  return static_cast<int64_t>(timegm(&tm));
}

size_t WriteBody(char* ptr, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(ptr, size * n);
  return size * n;
}

size_t WriteHeader(char* ptr, size_t size, size_t n, void* user) {
  auto* headers = static_cast<std::map<std::string, std::string>*>(user);
  std::string line(ptr, size * n);
  const auto colon = line.find(':');
  if (colon == std::string::npos) return size * n;
  std::string name = line.substr(0, colon);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string value = line.substr(colon + 1);
  const auto b = value.find_first_not_of(" \t");
  const auto e = value.find_last_not_of(" \t\r\n");
  (*headers)[name] = b == std::string::npos ? "" : value.substr(b, e - b + 1);
  return size * n;
}

struct CurlFree {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

// The S3 error document's Code and Message ("" when the body is not one).
std::pair<std::string, std::string> ErrorCode(const std::string& body) {
  pugi::xml_document doc;
  if (!doc.load_buffer(body.data(), body.size())) return {};
  const pugi::xml_node err = doc.child("Error");
  if (!err) return {};
  return {err.child_value("Code"), err.child_value("Message")};
}

std::string Trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

}  // namespace

Result<S3Url> ParseS3Url(std::string_view url) {
  constexpr std::string_view kScheme = "s3://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    return Status::InvalidArgument("KESTREL_ARTIFACTS: expected s3://bucket/prefix, got '" +
                                   std::string(url) + "'");
  }
  std::string rest(url.substr(kScheme.size()));
  const auto slash = rest.find('/');
  S3Url out;
  out.bucket = rest.substr(0, slash);
  if (slash != std::string::npos) out.prefix = rest.substr(slash + 1);
  while (!out.prefix.empty() && out.prefix.back() == '/') out.prefix.pop_back();
  if (out.bucket.size() < 3 || out.bucket.size() > 63 ||
      out.bucket.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789.-") != std::string::npos) {
    return Status::InvalidArgument("KESTREL_ARTIFACTS: bucket '" + out.bucket +
                                   "' is not a valid S3 bucket name (3-63 of a-z 0-9 . -)");
  }
  return out;
}

namespace {

// [section] -> key -> value of an INI-style AWS file; empty when unreadable.
std::map<std::string, std::map<std::string, std::string>> ReadIni(const std::string& path) {
  std::map<std::string, std::map<std::string, std::string>> out;
  auto text = Env::Default().ReadFile(path, 1 << 20);
  if (!text.IsOk()) return out;
  std::string section;
  size_t pos = 0;
  const std::string& t = *text;
  while (pos < t.size()) {
    size_t end = t.find('\n', pos);
    if (end == std::string::npos) end = t.size();
    std::string line = Trim(t.substr(pos, end - pos));
    pos = end + 1;
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      section = Trim(line.substr(1, line.size() - 2));
      continue;
    }
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    out[section][Trim(line.substr(0, eq))] = Trim(line.substr(eq + 1));
  }
  return out;
}

}  // namespace

Result<ResolvedOptions> OptionsFromEnvironment(const std::function<const char*(const char*)>& getenv) {
  auto var = [&](const char* name) -> std::string {
    const char* v = getenv(name);
    return v == nullptr ? std::string() : std::string(v);
  };
  ResolvedOptions out;
  ClientOptions& o = out.options;
  const std::string home = var("HOME");
  const std::string profile = var("AWS_PROFILE").empty() ? "default" : var("AWS_PROFILE");
  std::string cred_file = var("AWS_SHARED_CREDENTIALS_FILE");
  if (cred_file.empty() && !home.empty()) cred_file = home + "/.aws/credentials";
  std::string config_file = var("AWS_CONFIG_FILE");
  if (config_file.empty() && !home.empty()) config_file = home + "/.aws/config";
  auto config = config_file.empty() ? decltype(ReadIni("")){} : ReadIni(config_file);
  const auto& prof_cfg = config[profile == "default" ? "default" : "profile " + profile];
  auto cfg = [&](const char* key) -> std::string {
    auto it = prof_cfg.find(key);
    return it == prof_cfg.end() ? std::string() : it->second;
  };

  o.endpoint = !var("AWS_ENDPOINT_URL_S3").empty() ? var("AWS_ENDPOINT_URL_S3")
               : !var("AWS_ENDPOINT_URL").empty()  ? var("AWS_ENDPOINT_URL")
                                                   : cfg("endpoint_url");
  o.region = !var("AWS_REGION").empty()           ? var("AWS_REGION")
             : !var("AWS_DEFAULT_REGION").empty() ? var("AWS_DEFAULT_REGION")
             : !cfg("region").empty()             ? cfg("region")
                                                  : "us-east-1";
  while (!o.endpoint.empty() && o.endpoint.back() == '/') o.endpoint.pop_back();
  if (o.endpoint.empty()) o.endpoint = "https://s3." + o.region + ".amazonaws.com";
  if (o.endpoint.rfind("http://", 0) != 0 && o.endpoint.rfind("https://", 0) != 0) {
    return Status::InvalidArgument("AWS_ENDPOINT_URL: expected http://host[:port] or https://..., got '" +
                                   o.endpoint + "'");
  }
  if (!var("AWS_ACCESS_KEY_ID").empty() || !var("AWS_SECRET_ACCESS_KEY").empty()) {
    o.credentials = {var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY"), var("AWS_SESSION_TOKEN")};
    out.credentials_source = "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY";
    if (o.credentials.access_key_id.empty() || o.credentials.secret_access_key.empty()) {
      return Status::InvalidArgument("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together");
    }
    return out;
  }
  auto creds = cred_file.empty() ? decltype(ReadIni("")){} : ReadIni(cred_file);
  using Section = std::map<std::string, std::string>;
  for (const Section* src : {static_cast<const Section*>(&creds[profile]), &prof_cfg}) {
    auto id = src->find("aws_access_key_id");
    auto secret = src->find("aws_secret_access_key");
    if (id == src->end() || secret == src->end()) continue;
    auto token = src->find("aws_session_token");
    o.credentials = {id->second, secret->second, token == src->end() ? std::string() : token->second};
    out.credentials_source = "profile " + profile + " in " + (src == &prof_cfg ? config_file : cred_file);
    return out;
  }
  return Status::InvalidArgument(
      "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or profile '" + profile + "' in " +
      (cred_file.empty() ? "~/.aws/credentials" : cred_file));
}

Client::Client(ClientOptions options, Env& env) : options_(std::move(options)), env_(env) {
  GlobalInit();
  endpoint_ = options_.endpoint;
  const auto scheme = endpoint_.find("://");
  host_ = scheme == std::string::npos ? endpoint_ : endpoint_.substr(scheme + 3);
  if (const auto slash = host_.find('/'); slash != std::string::npos) host_ = host_.substr(0, slash);
  if (options_.max_attempts < 1) options_.max_attempts = 1;
}

Result<Client::Response> Client::SendOnce(const std::string& method, const std::string& bucket,
                                          const std::string& key, const Query& query, std::string_view body,
                                          const Headers& extra) {
  SignRequest req;
  req.method = method;
  req.path = "/" + bucket + (key.empty() ? "" : "/" + key);
  req.query = query;
  req.payload_sha256 = Sha256Hex(body);
  const std::string amz_date = AmzDate(env_.UnixSeconds() + clock_offset_s_.load());
  req.headers = {{"host", host_}, {"x-amz-date", amz_date}, {"x-amz-content-sha256", req.payload_sha256}};
  if (!options_.credentials.session_token.empty()) {
    req.headers.emplace_back("x-amz-security-token", options_.credentials.session_token);
  }
  for (const auto& h : extra) req.headers.push_back(h);
  const std::string auth = Authorization(req, options_.credentials, options_.region, "s3", amz_date);

  std::string url = endpoint_ + UriEncode(req.path, false);
  auto sorted = query;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    url += (i == 0 ? "?" : "&") + UriEncode(sorted[i].first, true);
    if (!sorted[i].second.empty()) url += "=" + UriEncode(sorted[i].second, true);
  }

  std::unique_ptr<CURL, CurlFree> curl(curl_easy_init());
  if (!curl) return Status::Internal("curl_easy_init failed");
  curl_slist* raw = nullptr;
  for (const auto& [name, value] : req.headers) {
    if (name == "host") continue;  // curl sends it from the URL
    raw = curl_slist_append(raw, (name + ": " + value).c_str());
  }
  raw = curl_slist_append(raw, ("Authorization: " + auth).c_str());
  raw = curl_slist_append(raw, "Expect:");
  raw = curl_slist_append(raw, "Content-Type:");
  std::unique_ptr<curl_slist, CurlFree> header_list(raw);
  Response resp;
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, header_list.get());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.connect_timeout_ms));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.request_timeout_ms));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, WriteBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &resp.body);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, WriteHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &resp.headers);
  if (method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (method == "PUT" || method == "POST") {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
  } else if (method != "GET") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
  }
  const CURLcode rc = curl_easy_perform(c);
  if (rc != CURLE_OK) return Status::Unavailable(curl_easy_strerror(rc));
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp.status);
  return resp;
}

Result<Client::Response> Client::Call(const char* op, const std::string& method, const std::string& bucket,
                                      const std::string& key, const Query& query, std::string_view body,
                                      const Headers& extra, bool not_found_ok) {
  auto where = [&] {
    return std::string("S3 ") + op + " s3://" + bucket + (key.empty() ? "" : "/" + key) + " at " + endpoint_ +
           " (access key id " + options_.credentials.access_key_id + ")";
  };
  bool resynced = false;
  std::string last;
  for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
    if (attempt > 1) env_.SleepMicros(int64_t{options_.backoff_ms} * 1000 << std::min(attempt - 2, 6));
    auto r = SendOnce(method, bucket, key, query, body, extra);
    if (!r.IsOk()) {
      last = r.GetStatus().Message();
      continue;
    }
    Response& resp = *r;
    if (resp.status >= 200 && resp.status < 300) {
      // CompleteMultipartUpload may answer 200 and report its failure in the body.
      if (method == "POST") {
        auto [code, msg] = ErrorCode(resp.body);
        if (!code.empty()) {
          last = "HTTP 200 with error " + code + ": " + msg;
          if (code == "InternalError" || code == "SlowDown") continue;
          return Status::IoError(where() + ": " + last);
        }
      }
      return std::move(resp);
    }
    auto [code, msg] = ErrorCode(resp.body);
    last = "HTTP " + std::to_string(resp.status) + (code.empty() ? "" : " " + code) +
           (msg.empty() ? "" : ": " + msg);
    if (resp.status == 404 && not_found_ok) return std::move(resp);
    if (code == "RequestTimeTooSkewed" && !resynced) {
      // Sign with the server's clock from now on, and try once more.
      const int64_t server = ParseHttpDate(resp.headers["date"]);
      if (server > 0) {
        clock_offset_s_.store(server - env_.UnixSeconds());
        resynced = true;
        --attempt;
        continue;
      }
    }
    if (resp.status >= 500) continue;
    if (resp.status == 404) return Status::NotFound(where() + ": " + last);
    if (resp.status == 403 || resp.status == 401) return Status::FailedPrecondition(where() + ": " + last);
    return Status::IoError(where() + ": " + last);
  }
  return Status::Unavailable(where() + ": " + last + " (after " + std::to_string(options_.max_attempts) +
                             " tries)");
}

Status Client::CreateBucket(const std::string& bucket) {
  auto r = Call("CreateBucket", "PUT", bucket, "", {}, "", {});
  if (!r.IsOk() && r.GetStatus().Message().find("BucketAlreadyOwnedByYou") != std::string::npos) return {};
  return r.GetStatus();
}

Status Client::PutObject(const std::string& bucket, const std::string& key, std::string_view body) {
  return Call("PutObject", "PUT", bucket, key, {}, body, {{"content-md5", Base64Md5(body)}}).GetStatus();
}

Result<std::string> Client::GetObject(const std::string& bucket, const std::string& key) {
  KESTREL_ASSIGN_OR_RETURN(Response r, Call("GetObject", "GET", bucket, key, {}, "", {}));
  if (auto len = r.headers.find("content-length");
      len != r.headers.end() && len->second != std::to_string(r.body.size())) {
    return Status::Unavailable("S3 GetObject s3://" + bucket + "/" + key + " at " + endpoint_ + ": got " +
                               std::to_string(r.body.size()) + " of " + len->second + " bytes");
  }
  return std::move(r.body);
}

Result<ObjectInfo> Client::HeadObject(const std::string& bucket, const std::string& key) {
  KESTREL_ASSIGN_OR_RETURN(Response r, Call("HeadObject", "HEAD", bucket, key, {}, "", {}, true));
  if (r.status == 404)
    return Status::NotFound("s3://" + bucket + "/" + key + " does not exist at " + endpoint_);
  ObjectInfo info;
  info.key = key;
  info.size = std::strtoull(r.headers["content-length"].c_str(), nullptr, 10);
  info.last_modified_s = ParseHttpDate(r.headers["last-modified"]);
  info.etag = Unquote(r.headers["etag"]);
  return info;
}

Status Client::DeleteObject(const std::string& bucket, const std::string& key) {
  return Call("DeleteObject", "DELETE", bucket, key, {}, "", {}, true).GetStatus();
}

Status Client::Touch(const std::string& bucket, const std::string& key) {
  return Call("CopyObject", "PUT", bucket, key, {}, "",
              {{"x-amz-copy-source", "/" + bucket + "/" + UriEncode(key, false)},
               {"x-amz-metadata-directive", "REPLACE"},
               {"x-amz-meta-kestrel-touched", std::to_string(env_.UnixSeconds())}})
      .GetStatus();
}

Result<std::vector<ObjectInfo>> Client::List(const std::string& bucket, const std::string& prefix) {
  std::vector<ObjectInfo> out;
  std::string marker;
  for (;;) {
    Query q = {{"prefix", prefix}};
    if (!marker.empty()) q.emplace_back("marker", marker);
    KESTREL_ASSIGN_OR_RETURN(Response r, Call("ListObjects", "GET", bucket, "", q, "", {}));
    pugi::xml_document doc;
    if (!doc.load_buffer(r.body.data(), r.body.size())) {
      return Status::Corruption("S3 ListObjects at " + endpoint_ + ": the answer is not XML");
    }
    const pugi::xml_node root = doc.child("ListBucketResult");
    size_t n = 0;
    for (pugi::xml_node c : root.children("Contents")) {
      ObjectInfo o;
      o.key = c.child_value("Key");
      o.size = std::strtoull(c.child_value("Size"), nullptr, 10);
      o.last_modified_s = ParseIsoDate(c.child_value("LastModified"));
      o.etag = Unquote(c.child_value("ETag"));
      out.push_back(std::move(o));
      ++n;
    }
    if (std::string(root.child_value("IsTruncated")) != "true" || n == 0) break;
    marker = root.child("NextMarker") ? root.child_value("NextMarker") : out.back().key;
  }
  return out;
}

Result<std::string> Client::CreateMultipartUpload(const std::string& bucket, const std::string& key) {
  KESTREL_ASSIGN_OR_RETURN(Response r,
                           Call("CreateMultipartUpload", "POST", bucket, key, {{"uploads", ""}}, "", {}));
  pugi::xml_document doc;
  doc.load_buffer(r.body.data(), r.body.size());
  std::string id = doc.child("InitiateMultipartUploadResult").child_value("UploadId");
  if (id.empty())
    return Status::Corruption("S3 CreateMultipartUpload at " + endpoint_ + ": no UploadId in the answer");
  return id;
}

Result<std::string> Client::UploadPart(const std::string& bucket, const std::string& key,
                                       const std::string& upload_id, int part_number, std::string_view body) {
  KESTREL_ASSIGN_OR_RETURN(Response r,
                           Call("UploadPart", "PUT", bucket, key,
                                {{"partNumber", std::to_string(part_number)}, {"uploadId", upload_id}}, body,
                                {{"content-md5", Base64Md5(body)}}));
  return Unquote(r.headers["etag"]);
}

Status Client::CompleteMultipartUpload(const std::string& bucket, const std::string& key,
                                       const std::string& upload_id, const std::vector<PartInfo>& parts) {
  std::string xml = "<CompleteMultipartUpload>";
  for (const auto& p : parts) {
    xml += "<Part><PartNumber>" + std::to_string(p.number) + "</PartNumber><ETag>\"" + p.etag +
           "\"</ETag></Part>";
  }
  xml += "</CompleteMultipartUpload>";
  return Call("CompleteMultipartUpload", "POST", bucket, key, {{"uploadId", upload_id}}, xml, {}).GetStatus();
}

Status Client::AbortMultipartUpload(const std::string& bucket, const std::string& key,
                                    const std::string& upload_id) {
  return Call("AbortMultipartUpload", "DELETE", bucket, key, {{"uploadId", upload_id}}, "", {}, true)
      .GetStatus();
}

Result<std::vector<UploadInfo>> Client::ListMultipartUploads(const std::string& bucket,
                                                             const std::string& prefix) {
  std::vector<UploadInfo> out;
  std::string key_marker, id_marker;
  for (;;) {
    Query q = {{"uploads", ""}, {"prefix", prefix}};
    if (!key_marker.empty()) q.emplace_back("key-marker", key_marker);
    if (!id_marker.empty()) q.emplace_back("upload-id-marker", id_marker);
    KESTREL_ASSIGN_OR_RETURN(Response r, Call("ListMultipartUploads", "GET", bucket, "", q, "", {}));
    pugi::xml_document doc;
    doc.load_buffer(r.body.data(), r.body.size());
    const pugi::xml_node root = doc.child("ListMultipartUploadsResult");
    for (pugi::xml_node u : root.children("Upload")) {
      out.push_back(
          {u.child_value("Key"), u.child_value("UploadId"), ParseIsoDate(u.child_value("Initiated"))});
    }
    if (std::string(root.child_value("IsTruncated")) != "true") break;
    key_marker = root.child_value("NextKeyMarker");
    id_marker = root.child_value("NextUploadIdMarker");
    if (key_marker.empty()) break;
  }
  return out;
}

Result<std::vector<PartInfo>> Client::ListParts(const std::string& bucket, const std::string& key,
                                                const std::string& upload_id) {
  std::vector<PartInfo> out;
  std::string marker;
  for (;;) {
    Query q = {{"uploadId", upload_id}};
    if (!marker.empty()) q.emplace_back("part-number-marker", marker);
    KESTREL_ASSIGN_OR_RETURN(Response r, Call("ListParts", "GET", bucket, key, q, "", {}));
    pugi::xml_document doc;
    doc.load_buffer(r.body.data(), r.body.size());
    const pugi::xml_node root = doc.child("ListPartsResult");
    for (pugi::xml_node p : root.children("Part")) {
      out.push_back({std::atoi(p.child_value("PartNumber")), Unquote(p.child_value("ETag")),
                     std::strtoull(p.child_value("Size"), nullptr, 10)});
    }
    if (std::string(root.child_value("IsTruncated")) != "true") break;
    marker = root.child_value("NextPartNumberMarker");
    if (marker.empty()) break;
  }
  return out;
}

}  // namespace kestrel::s3
