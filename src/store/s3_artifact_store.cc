#include "store/s3_artifact_store.h"

#include <openssl/evp.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "core/hash.h"

namespace kestrel::store {
namespace {

std::string Md5Hex(std::string_view bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &len, EVP_md5(), nullptr);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

}  // namespace

S3ArtifactStore::S3ArtifactStore(s3::Client& client, s3::S3Url where, S3StoreOptions options, Env& env)
    : client_(client), where_(std::move(where)), options_(std::move(options)), env_(env) {}

S3ArtifactStore::S3ArtifactStore(std::unique_ptr<s3::Client> client, s3::S3Url where, S3StoreOptions options,
                                 Env& env)
    : owned_(std::move(client)),
      client_(*owned_),
      where_(std::move(where)),
      options_(std::move(options)),
      env_(env) {}

std::string S3ArtifactStore::ObjectsPrefix() const {
  return where_.prefix.empty() ? "objects/" : where_.prefix + "/objects/";
}

std::string S3ArtifactStore::KeyFor(const std::string& sha) const {
  return ObjectsPrefix() + sha.substr(0, 2) + "/" + sha;
}

std::string S3ArtifactStore::PathFor(const std::string& sha) const {
  return "s3://" + where_.bucket + "/" + KeyFor(sha);
}

std::string S3ArtifactStore::Describe() const {
  return "s3://" + where_.bucket + (where_.prefix.empty() ? "" : "/" + where_.prefix) + " at " +
         client_.Endpoint();
}

Result<std::string> S3ArtifactStore::PutWithHash(std::string_view bytes, const std::string& sha,
                                                 Durability durability) {
  (void)durability;  // every S3 write is durable when it returns
  if (!IsSha256Hex(sha)) return Status::InvalidArgument("not a sha256: '" + sha + "'");
  PutStats stats;
  const std::string key = KeyFor(sha);
  auto head = client_.HeadObject(where_.bucket, key);
  if (head.IsOk() && head->size == bytes.size()) {
    // Deduplicated: refresh LastModified for the collector's grace period. A
    // collector that deleted it meanwhile makes the copy fail: upload anew.
    Status touched = client_.Touch(where_.bucket, key);
    if (touched.IsOk()) {
      MutexLock l(mu_);
      last_ = stats;
      return sha;
    }
    if (touched.Code() != StatusCode::kNotFound) return touched;
  } else if (!head.IsOk() && head.GetStatus().Code() != StatusCode::kNotFound) {
    return head.GetStatus();
  }
  KESTREL_RETURN_IF_ERROR(Upload(bytes, key, stats));
  MutexLock l(mu_);
  last_ = stats;
  return sha;
}

Status S3ArtifactStore::Upload(std::string_view bytes, const std::string& key, PutStats& stats) {
  if (bytes.size() < options_.multipart_threshold) return client_.PutObject(where_.bucket, key, bytes);
  return UploadMultipart(bytes, key, stats);
}

std::string S3ArtifactStore::JobsRoot() const {
  return (where_.prefix.empty() ? "" : where_.prefix + "/") + "jobs/";
}

std::string S3ArtifactStore::JobPrefix(int64_t job_id, int64_t attempt) const {
  std::string p = JobsRoot() + std::to_string(job_id) + "/";
  if (attempt > 0) p += "attempt-" + std::to_string(attempt) + "/";
  return p;
}

Result<std::string> S3ArtifactStore::PutJobFile(int64_t job_id, int64_t attempt, const std::string& name,
                                                std::string_view bytes, const std::string& sha) {
  if (!IsSha256Hex(sha)) return Status::InvalidArgument("not a sha256: '" + sha + "'");
  if (job_id <= 0 || attempt <= 0)
    return Status::InvalidArgument("job file of job " + std::to_string(job_id) + " attempt " +
                                   std::to_string(attempt));
  if (name.empty() || name.find('/') != std::string::npos)
    return Status::InvalidArgument("job file name '" + name + "' must be one path segment");
  // Named by content: an object is never overwritten, so what a record
  // names stays what it named (docs/disk.md "Job checkpoints on S3").
  const std::string key = JobPrefix(job_id, attempt) + sha + "." + name;
  auto head = client_.HeadObject(where_.bucket, key);
  if (head.IsOk() && head->size == bytes.size()) return key;
  PutStats stats;
  KESTREL_RETURN_IF_ERROR(Upload(bytes, key, stats));
  return key;
}

Result<std::string> S3ArtifactStore::GetJobFile(const std::string& key, const std::string& sha) {
  if (!IsSha256Hex(sha)) return Status::InvalidArgument("not a sha256: '" + sha + "'");
  const std::string url = "s3://" + where_.bucket + "/" + key;
  auto bytes = client_.GetObject(where_.bucket, key);
  if (!bytes.IsOk()) {
    if (bytes.GetStatus().Code() == StatusCode::kNotFound)
      return Status::NotFound("job file " + url + " is missing from " + Describe(), {url});
    return bytes.GetStatus();
  }
  const std::string actual = Sha256Hex(*bytes);
  if (actual != sha) {
    return Status::Corruption(
        "job file " + url + " is corrupted (content hashes to " + actual + ", recorded " + sha + ")", {url});
  }
  return std::move(bytes).Value();
}

Result<int> S3ArtifactStore::RemoveJobFiles(int64_t job_id, int64_t only_attempt,
                                            const std::vector<std::string>& keep) {
  const std::string prefix = JobPrefix(job_id, only_attempt);
  KESTREL_ASSIGN_OR_RETURN(auto objects, client_.List(where_.bucket, prefix));
  int removed = 0;
  for (const auto& o : objects) {
    if (std::find(keep.begin(), keep.end(), o.key) != keep.end()) continue;
    Status d = client_.DeleteObject(where_.bucket, o.key);
    if (!d.IsOk() && d.Code() != StatusCode::kNotFound) return d;
    if (d.IsOk()) ++removed;
  }
  // Interrupted uploads of the job's files (a host lost mid-upload).
  KESTREL_ASSIGN_OR_RETURN(auto uploads, client_.ListMultipartUploads(where_.bucket, prefix));
  for (const auto& u : uploads) {
    if (std::find(keep.begin(), keep.end(), u.key) != keep.end()) continue;
    (void)client_.AbortMultipartUpload(where_.bucket, u.key, u.upload_id);  // gc's sweep retries what is left
  }
  return removed;
}

Result<std::vector<ArtifactStore::JobFileInfo>> S3ArtifactStore::ListJobFiles() {
  const std::string root = JobsRoot();
  KESTREL_ASSIGN_OR_RETURN(auto objects, client_.List(where_.bucket, root));
  std::vector<JobFileInfo> out;
  for (const auto& o : objects) {
    JobFileInfo f;
    f.key = o.key;
    f.bytes = o.size;
    f.mtime_s = o.last_modified_s;
    // <root><job>/attempt-<n>/<file>; anything else keeps job 0.
    const std::string rest = o.key.substr(root.size());
    const size_t slash = rest.find('/');
    const std::string attempt_dir = "attempt-";
    if (slash != std::string::npos && slash > 0 && slash <= 18 &&
        rest.find_first_not_of("0123456789") == slash &&
        rest.compare(slash + 1, attempt_dir.size(), attempt_dir) == 0) {
      const size_t a0 = slash + 1 + attempt_dir.size();
      const size_t a1 = rest.find('/', a0);
      if (a1 != std::string::npos && a1 > a0 && a1 - a0 <= 18 &&
          rest.find_first_not_of("0123456789", a0) == a1 && a1 + 1 < rest.size()) {
        f.job_id = std::stoll(rest.substr(0, slash));
        f.attempt = std::stoll(rest.substr(a0, a1 - a0));
      }
    }
    out.push_back(std::move(f));
  }
  std::sort(out.begin(), out.end(), [](const JobFileInfo& a, const JobFileInfo& b) { return a.key < b.key; });
  return out;
}

Result<bool> S3ArtifactStore::RemoveJobFile(const std::string& key) {
  const std::string root = JobsRoot();
  if (key.size() <= root.size() || key.compare(0, root.size(), root) != 0) {
    return Status::InvalidArgument("'" + key + "' is not a job file of " + Describe() + " (keys start " +
                                   root + ")");
  }
  // S3's DELETE of an absent key succeeds; HEAD first tells "already gone".
  auto head = client_.HeadObject(where_.bucket, key);
  if (!head.IsOk()) {
    if (head.GetStatus().Code() == StatusCode::kNotFound) return false;
    return head.GetStatus();
  }
  Status d = client_.DeleteObject(where_.bucket, key);
  if (!d.IsOk() && d.Code() != StatusCode::kNotFound) return d;
  return d.IsOk();
}

Status S3ArtifactStore::UploadMultipart(std::string_view bytes, const std::string& key, PutStats& stats) {
  const uint64_t part_size = std::max<uint64_t>(options_.part_size, 1);
  const int parts = static_cast<int>((bytes.size() + part_size - 1) / part_size);
  auto chunk = [&](int n) { return bytes.substr(static_cast<size_t>(n - 1) * part_size, part_size); };

  // Resume: the newest unfinished upload of this key (content-addressed, so
  // any upload of it carries these bytes) and the parts that match ours.
  std::string upload_id;
  std::map<int, std::string> done;  // part number -> ETag
  KESTREL_ASSIGN_OR_RETURN(auto uploads, client_.ListMultipartUploads(where_.bucket, key));
  std::vector<s3::UploadInfo> mine;
  for (const auto& u : uploads) {
    if (u.key == key) mine.push_back(u);
  }
  std::sort(mine.begin(), mine.end(),
            [](const s3::UploadInfo& a, const s3::UploadInfo& b) { return a.initiated_s > b.initiated_s; });
  if (!mine.empty()) {
    auto listed = client_.ListParts(where_.bucket, key, mine.front().upload_id);
    if (listed.IsOk()) {
      upload_id = mine.front().upload_id;
      for (const auto& p : *listed) {
        if (p.number < 1 || p.number > parts) continue;
        std::string_view c = chunk(p.number);
        if (p.size == c.size() && p.etag == Md5Hex(c)) done[p.number] = p.etag;
      }
    }
  }
  if (upload_id.empty()) {
    KESTREL_ASSIGN_OR_RETURN(upload_id, client_.CreateMultipartUpload(where_.bucket, key));
  }
  std::vector<s3::PartInfo> list;
  for (int n = 1; n <= parts; ++n) {
    std::string_view c = chunk(n);
    if (auto it = done.find(n); it != done.end()) {
      ++stats.parts_reused;
      list.push_back({n, it->second, c.size()});
      continue;
    }
    if (options_.before_part) KESTREL_RETURN_IF_ERROR(options_.before_part(n));
    KESTREL_ASSIGN_OR_RETURN(std::string etag, client_.UploadPart(where_.bucket, key, upload_id, n, c));
    ++stats.parts_uploaded;
    list.push_back({n, etag, c.size()});
  }
  KESTREL_RETURN_IF_ERROR(client_.CompleteMultipartUpload(where_.bucket, key, upload_id, list));
  // Older interrupted uploads of the same key are garbage now.
  for (size_t i = 1; i < mine.size(); ++i) {
    (void)client_.AbortMultipartUpload(where_.bucket, key, mine[i].upload_id);  // the sweep retries any left
  }
  KESTREL_ASSIGN_OR_RETURN(s3::ObjectInfo info, client_.HeadObject(where_.bucket, key));
  if (info.size != bytes.size()) {
    return Status::Corruption("S3 multipart upload of " + PathFor(key) + " at " + client_.Endpoint() +
                              " holds " + std::to_string(info.size) + " bytes, expected " +
                              std::to_string(bytes.size()));
  }
  return {};
}

Result<std::string> S3ArtifactStore::Get(const std::string& sha) {
  if (!IsSha256Hex(sha)) return Status::InvalidArgument("not a sha256: '" + sha + "'");
  auto bytes = client_.GetObject(where_.bucket, KeyFor(sha));
  if (!bytes.IsOk()) {
    if (bytes.GetStatus().Code() == StatusCode::kNotFound) {
      return Status::NotFound("blob " + sha + " is missing from the artifact store " + Describe(),
                              {PathFor(sha)});
    }
    return bytes.GetStatus();
  }
  const std::string actual = Sha256Hex(*bytes);
  if (actual != sha) {
    return Status::Corruption("blob " + sha + " is corrupted (content hashes to " + actual + ")",
                              {PathFor(sha)});
  }
  return std::move(bytes).Value();
}

bool S3ArtifactStore::Has(const std::string& sha) {
  return IsSha256Hex(sha) && client_.HeadObject(where_.bucket, KeyFor(sha)).IsOk();
}

Result<uint64_t> S3ArtifactStore::Size(const std::string& sha) {
  if (!IsSha256Hex(sha)) return Status::InvalidArgument("not a sha256: '" + sha + "'");
  KESTREL_ASSIGN_OR_RETURN(s3::ObjectInfo info, client_.HeadObject(where_.bucket, KeyFor(sha)));
  return info.size;
}

Result<std::string> S3ArtifactStore::LocalPath(const std::string& sha) {
  if (!IsSha256Hex(sha)) return Status::InvalidArgument("not a sha256: '" + sha + "'");
  if (options_.home.empty())
    return Status::FailedPrecondition("the S3 artifact store has no home for its cache");
  const std::string dir =
      JoinPath(JoinPath(JoinPath(options_.home, "cache"), "s3-objects"), sha.substr(0, 2));
  const std::string path = JoinPath(dir, sha);
  if (env_.Stat(path).exists) {
    auto cached = Sha256File(path);
    if (cached.IsOk() && *cached == sha) {
      // Recently used: the trim's LRU order reads mtime.
      std::error_code ec;
      std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now(), ec);
      return path;
    }
  }
  KESTREL_ASSIGN_OR_RETURN(std::string bytes, Get(sha));
  KESTREL_RETURN_IF_ERROR(env_.CreateDirs(dir));
  KESTREL_RETURN_IF_ERROR(env_.WriteFileAtomic(path, bytes));
  if (options_.cache_max_bytes > 0) {
    // A cache that cannot be trimmed still serves: the blob is here.
    (void)TrimCache(options_.cache_max_bytes, path);
  }
  return path;
}

Result<int> S3ArtifactStore::TrimCache(uint64_t max_bytes, const std::string& keep) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(options_.home) / "cache" / "s3-objects";
  struct Entry {
    fs::file_time_type used;
    uint64_t bytes;
    fs::path path;
  };
  std::vector<Entry> files;
  uint64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code fe;
    if (!it->is_regular_file(fe) || fe) continue;
    const uint64_t bytes = it->file_size(fe);
    if (fe) continue;
    const auto used = it->last_write_time(fe);
    if (fe) continue;
    total += bytes;
    files.push_back({used, bytes, it->path()});
  }
  if (ec && ec != std::errc::no_such_file_or_directory)
    return Status::IoError("cannot list the S3 download cache " + root.string() + ": " + ec.message());
  if (total <= max_bytes) return 0;
  std::sort(files.begin(), files.end(), [](const Entry& a, const Entry& b) { return a.used < b.used; });
  int removed = 0;
  for (const auto& f : files) {
    if (total <= max_bytes) break;
    if (f.path == fs::path(keep)) continue;
    std::error_code re;
    if (fs::remove(f.path, re) && !re) ++removed;
    total -= f.bytes;  // gone either way (another process may have trimmed it)
  }
  return removed;
}

Result<std::vector<ArtifactStore::BlobInfo>> S3ArtifactStore::List() {
  KESTREL_ASSIGN_OR_RETURN(auto objects, client_.List(where_.bucket, ObjectsPrefix()));
  std::vector<BlobInfo> out;
  const std::string prefix = ObjectsPrefix();
  for (const auto& o : objects) {
    // <prefix>/objects/<aa>/<sha>, nothing else.
    if (o.key.size() != prefix.size() + 3 + 64) continue;
    const std::string sha = o.key.substr(prefix.size() + 3);
    if (!IsSha256Hex(sha) || o.key.compare(prefix.size(), 3, sha.substr(0, 2) + "/") != 0) continue;
    out.push_back({sha, o.size, o.last_modified_s});
  }
  std::sort(out.begin(), out.end(), [](const BlobInfo& a, const BlobInfo& b) { return a.sha < b.sha; });
  return out;
}

Result<bool> S3ArtifactStore::RemoveIfUntouchedSince(const std::string& sha, int64_t keep_since_s) {
  if (!IsSha256Hex(sha)) return Status::InvalidArgument("not a sha256: '" + sha + "'");
  auto head = client_.HeadObject(where_.bucket, KeyFor(sha));
  if (!head.IsOk()) {
    if (head.GetStatus().Code() == StatusCode::kNotFound) return false;
    return head.GetStatus();
  }
  if (head->last_modified_s >= keep_since_s) return false;
  KESTREL_RETURN_IF_ERROR(client_.DeleteObject(where_.bucket, KeyFor(sha)));
  return true;
}

Result<int> S3ArtifactStore::SweepIncompleteWrites(int64_t started_before_s) {
  // Blobs and job files (a host lost mid-upload of a checkpoint).
  KESTREL_ASSIGN_OR_RETURN(auto uploads, client_.ListMultipartUploads(where_.bucket, ObjectsPrefix()));
  KESTREL_ASSIGN_OR_RETURN(auto job_uploads, client_.ListMultipartUploads(where_.bucket, JobsRoot()));
  uploads.insert(uploads.end(), job_uploads.begin(), job_uploads.end());
  int aborted = 0;
  for (const auto& u : uploads) {
    if (u.initiated_s >= started_before_s) continue;
    KESTREL_RETURN_IF_ERROR(client_.AbortMultipartUpload(where_.bucket, u.key, u.upload_id));
    ++aborted;
  }
  return aborted;
}

}  // namespace kestrel::store
