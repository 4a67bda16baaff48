// SHA-256 content hashing (OpenSSL EVP). Hex digests are lowercase, 64 chars.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace kestrel {

// Incremental hasher. Not thread-safe; one per thread.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(std::string_view data);
  void Update(const void* data, size_t size);
  // Finishes and returns the lowercase hex digest; the hasher is reset.
  std::string HexDigest();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string Sha256Hex(std::string_view data);
// Streams the file; errors name the path.
Result<std::string> Sha256File(const std::string& path);
// HMAC-SHA256 of `data` keyed by `key`, lowercase hex.
std::string HmacSha256Hex(std::string_view key, std::string_view data);
// `bytes` random bytes from OpenSSL's CSPRNG as lowercase hex (secrets,
// tokens, ids); "" when the generator fails (callers treat that as an error).
std::string RandomHex(int bytes);
// True for a 64-char lowercase hex string.
bool IsSha256Hex(std::string_view s);

}  // namespace kestrel
