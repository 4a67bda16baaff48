#include "server/data_roots.h"

#include <cctype>
#include <filesystem>
#include <set>
#include <system_error>
#include <utility>

namespace kestrel::server {
namespace {

namespace fs = std::filesystem;

Status PathError(const std::string& message) {
  return Status::InvalidArgument(message, {"request", 0, "path"});
}

bool Under(const fs::path& p, const fs::path& base) { return PathIsUnder(p.string(), base.string()); }

bool IsHex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

// Step 1: the request text itself.
Status CheckText(const std::string& text) {
  if (text.empty()) return PathError("path is empty: name a folder or file under a data root");
  if (text.find('\0') != std::string::npos) return PathError("path contains a NUL character");
  for (size_t i = 0; i + 2 < text.size(); ++i) {
    if (text[i] == '%' && IsHex(text[i + 1]) && IsHex(text[i + 2]))
      return PathError("path contains the percent escape '" + text.substr(i, 3) +
                       "': a body path is taken literally, never URL-decoded");
  }
  for (const auto& seg : fs::path(text)) {
    if (seg == "..") return PathError("path may not contain '..' segments");
  }
  return {};
}

}  // namespace

bool PathIsUnder(const std::string& path, const std::string& base) {
  const fs::path p(path), b(base);
  auto pi = p.begin();
  for (auto bi = b.begin(); bi != b.end(); ++bi, ++pi) {
    if (bi->empty()) continue;  // a trailing separator
    if (pi == p.end() || *pi != *bi) return false;
  }
  return true;
}

Result<DataRoots> DataRoots::Open(const std::vector<std::string>& dirs) {
  DataRoots out;
  for (const auto& d : dirs) {
    std::error_code ec;
    const fs::path canon = fs::canonical(d, ec);
    if (ec || !fs::is_directory(canon, ec))
      return Status::InvalidArgument("data root '" + d + "' is not an existing folder",
                                     {"command line", 0, "data-root"});
    Root r{canon.filename().string(), canon.string()};
    if (r.name.empty())
      return Status::InvalidArgument("'/' cannot be a data root", {"command line", 0, "data-root"});
    for (const auto& o : out.roots_) {
      if (o.name == r.name)
        return Status::InvalidArgument("data roots '" + o.path + "' and '" + r.path + "' share the name '" +
                                           r.name + "' a request uses to choose one",
                                       {"command line", 0, "data-root"});
    }
    out.roots_.push_back(std::move(r));
  }
  return out;
}

bool DataRoots::Inside(const std::string& canonical_path) const {
  for (const auto& r : roots_) {
    if (Under(canonical_path, r.path)) return true;
  }
  return false;
}

Result<std::string> DataRoots::Resolve(const std::string& request_path) const {
  KESTREL_RETURN_IF_ERROR(CheckText(request_path));
  std::string names;
  for (const auto& r : roots_) names += (names.empty() ? "" : ", ") + r.name;
  // Step 2: which root, and the lexical path under it.
  const Root* root = nullptr;
  fs::path joined;
  const fs::path req(request_path);
  if (req.is_absolute()) {
    const fs::path norm = req.lexically_normal();
    for (const auto& r : roots_) {
      if (Under(norm, r.path)) {
        root = &r;
        joined = norm;
        break;
      }
    }
    if (root == nullptr)
      return PathError("absolute path '" + request_path + "' is not inside a data root (" + names + ")");
  } else {
    const std::string first = req.begin()->string();
    for (const auto& r : roots_) {
      if (r.name == first) {
        root = &r;
        joined = fs::path(r.path) / req.lexically_relative(first);
        break;
      }
    }
    if (root == nullptr && roots_.size() == 1) {
      root = &roots_[0];
      joined = fs::path(root->path) / req;
    }
    if (root == nullptr)
      return PathError("path '" + request_path + "' must start with a data root's name (" + names + ")");
  }
  // Step 3: symlinks resolved, still inside that root.
  std::error_code ec;
  const fs::path canon = fs::weakly_canonical(joined, ec);
  if (ec) return PathError("path '" + request_path + "' cannot be resolved: " + ec.message());
  if (!Under(canon, root->path))
    return PathError("path '" + request_path + "' leads outside the data root '" + root->name +
                     "' (through a symlink)");
  // Step 4: the tree the readers will open.
  // (A missing path is the importer's to report.)
  if (fs::is_directory(canon, ec)) {
    KESTREL_RETURN_IF_ERROR(CheckTree(canon.string()));
  } else if (fs::exists(canon, ec)) {
    KESTREL_RETURN_IF_ERROR(CheckTree(canon.parent_path().string()));
  }
  return canon.string();
}

Status DataRoots::CheckTree(const std::string& dir) const {
  std::set<std::string> walked;
  std::vector<fs::path> todo{dir};
  while (!todo.empty()) {
    const fs::path d = todo.back();
    todo.pop_back();
    if (!walked.insert(d.string()).second) continue;
    std::error_code ec;
    fs::directory_iterator it(d, ec), end;
    if (ec) continue;  // unreadable: the importer reports it
    for (; it != end; it.increment(ec)) {
      if (ec) break;
      const fs::path p = it->path();
      std::error_code lec;
      if (it->is_symlink(lec)) {
        std::error_code cec;
        const fs::path target = fs::weakly_canonical(p, cec);
        if (cec || !Inside(target.string())) {
          std::error_code rec;
          const fs::path rel = p.lexically_relative(dir);
          return PathError("'" + rel.string() + "' is a symlink to '" + fs::read_symlink(p, rec).string() +
                           "', outside the data roots");
        }
        if (fs::is_directory(target, cec)) todo.push_back(target);
      } else if (it->is_directory(lec)) {
        todo.push_back(p);
      }
    }
  }
  return {};
}

ConfinedEnv::ConfinedEnv(Env& target, const DataRoots& roots, const std::string& home)
    : EnvWrapper(target), roots_(roots) {
  std::error_code ec;
  home_ = fs::weakly_canonical(home, ec).string();
  if (ec) home_ = home;
}

Result<std::string> ConfinedEnv::ReadFile(const std::string& path, uint64_t max_bytes) {
  std::error_code ec;
  const fs::path canon = fs::weakly_canonical(path, ec);
  if (ec || !(roots_.Inside(canon.string()) || Under(canon, home_)))
    return PathError("the importer was to read '" + path + "', which is outside the data roots");
  return EnvWrapper::ReadFile(path, max_bytes);
}

}  // namespace kestrel::server
