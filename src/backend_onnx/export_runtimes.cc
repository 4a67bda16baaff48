#include "backend_onnx/export_runtimes.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/dnn.hpp>
#include <sstream>
#include <thread>

extern char** environ;

namespace kestrel::backend_onnx {

namespace {

namespace fs = std::filesystem;

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "[" + s + "]";
}

class OpenCvDnnRuntime final : public OnnxRuntime {
 public:
  std::string Name() const override { return "opencv-dnn " CV_VERSION; }

  Result<std::vector<FloatTensor>> Run(const std::string& onnx_path,
                                       const std::vector<FloatTensor>& inputs) override {
    std::vector<FloatTensor> outs;
    try {
      cv::dnn::Net net = cv::dnn::readNetFromONNX(onnx_path);
      net.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
      net.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
      for (const FloatTensor& in : inputs) {
        std::vector<int> sizes(in.shape.begin(), in.shape.end());
        // cv::Mat wraps without copying and the net never writes its input.
        cv::Mat blob(static_cast<int>(sizes.size()), sizes.data(), CV_32F,
                     const_cast<float*>(in.data.data()));
        net.setInput(blob, "images");
        cv::Mat out = net.forward("output0");
        FloatTensor t;
        for (int d = 0; d < out.dims; ++d) t.shape.push_back(out.size[d]);
        const auto* p = reinterpret_cast<const float*>(out.data);
        t.data.assign(p, p + out.total());
        outs.push_back(std::move(t));
      }
    } catch (const cv::Exception& e) {
      return Status::FailedPrecondition(std::string("OpenCV DNN could not run the export: ") + e.what(),
                                        {onnx_path, 0, ""});
    }
    return outs;
  }
};

class OpenCvDnnSession final : public OnnxSession {
 public:
  OpenCvDnnSession(std::string path, std::string input_name, std::string output_name)
      : path_(std::move(path)), input_name_(std::move(input_name)), output_name_(std::move(output_name)) {}
  std::string Name() const override { return "opencv-dnn " CV_VERSION; }
  double LastRunMs() const override { return last_ms_; }

  Status Load() {
    try {
      net_ = cv::dnn::readNetFromONNX(path_);
      net_.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
      net_.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
    } catch (const cv::Exception& e) {
      return Status::FailedPrecondition(std::string("OpenCV DNN cannot load the file: ") + e.what(),
                                        {path_, 0, ""});
    }
    return {};
  }

  Result<FloatTensor> Run(const float* data, const std::vector<int64_t>& shape) override {
    FloatTensor t;
    try {
      std::vector<int> sizes(shape.begin(), shape.end());
      // Wraps without copying; the net never writes its input.
      const cv::Mat blob(static_cast<int>(sizes.size()), sizes.data(), CV_32F, const_cast<float*>(data));
      const auto t0 = std::chrono::steady_clock::now();
      net_.setInput(blob, input_name_);
      const cv::Mat out = net_.forward(output_name_);
      last_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      for (int d = 0; d < out.dims; ++d) t.shape.push_back(out.size[d]);
      const auto* p = reinterpret_cast<const float*>(out.data);
      t.data.assign(p, p + out.total());
    } catch (const cv::Exception& e) {
      return Status::FailedPrecondition(std::string("OpenCV DNN could not run the export: ") + e.what(),
                                        {path_, 0, ""});
    }
    return t;
  }

 private:
  std::string path_, input_name_, output_name_;
  cv::dnn::Net net_;
  double last_ms_ = 0;
};

bool IsExecutable(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path == nullptr ? "/usr/local/bin:/usr/bin:/bin" : path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + name;
    if (IsExecutable(candidate)) return candidate;
  }
  return "";
}

std::string ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// The last `max` characters of `text`, trimmed of trailing newlines.
std::string Tail(std::string text, size_t max = 600) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text.size() <= max ? text : "..." + text.substr(text.size() - max);
}

// Runs argv[0] (an absolute path) with stdout/stderr to the given files and
// waits up to `timeout`; the exit code, or an error (spawn failure, signal,
// timeout: the child is killed and reaped).
Result<int> RunProcess(const std::vector<std::string>& argv, const std::string& out_file,
                       const std::string& err_file, std::chrono::seconds timeout) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv.at(0).c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return Status::FailedPrecondition("cannot start " + argv[0] + ": " + std::strerror(rc));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (true) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) return Status::Internal("waitpid failed for " + argv[0]);
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return Status::FailedPrecondition(argv[0] + " ran past " + std::to_string(timeout.count()) + " s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFSIGNALED(status))
    return Status::FailedPrecondition(argv[0] + " ended by signal " + std::to_string(WTERMSIG(status)));
  return WEXITSTATUS(status);
}

// A private folder under the system temp dir, removed when this goes.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "kestrel-ort-XXXXXX").string();
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& Path() const { return path_; }

 private:
  std::string path_;
};

// Writes each input as TMP/in<i>.f32 and appends its run.js RUN argument.
Status WriteInputs(const std::string& tmp, const std::vector<FloatTensor>& inputs,
                   std::vector<std::string>* argv) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string file = tmp + "/in" + std::to_string(i) + ".f32";
    std::ofstream f(file, std::ios::binary);
    f.write(reinterpret_cast<const char*>(inputs[i].data.data()),
            static_cast<std::streamsize>(inputs[i].data.size() * sizeof(float)));
    if (!f.good()) return Status::IoError("cannot write the ONNX Runtime input", {file, 0, ""});
    std::string dims;
    for (int64_t d : inputs[i].shape) dims += (dims.empty() ? "" : ",") + std::to_string(d);
    argv->push_back("images=" + dims + "=" + file);
  }
  return Status();
}

constexpr std::chrono::seconds kProbeTimeout{60};
constexpr std::chrono::seconds kRunTimeout{600};

class OnnxRuntimeNode final : public OnnxRuntime {
 public:
  explicit OnnxRuntimeNode(OnnxRuntimeLocation where) : where_(std::move(where)) {}
  std::string Name() const override { return "onnxruntime " + where_.version; }

  Result<std::vector<FloatTensor>> Run(const std::string& onnx_path,
                                       const std::vector<FloatTensor>& inputs) override {
    TempDir tmp;
    if (tmp.Path().empty()) return Status::IoError("cannot create a temporary folder for ONNX Runtime");
    std::vector<std::string> argv{where_.node, where_.dir + "/run.js", fs::absolute(onnx_path).string(),
                                  tmp.Path()};
    KESTREL_RETURN_IF_ERROR(WriteInputs(tmp.Path(), inputs, &argv));
    const std::string out = tmp.Path() + "/stdout.txt", err = tmp.Path() + "/stderr.txt";
    KESTREL_ASSIGN_OR_RETURN(int code, RunProcess(argv, out, err, kRunTimeout));
    if (code != 0) {
      return Status::FailedPrecondition("ONNX Runtime could not run the export (run.js exit " +
                                            std::to_string(code) + "): " + Tail(ReadText(err)),
                                        {onnx_path, 0, ""});
    }
    std::vector<FloatTensor> outs;
    try {
      const nlohmann::json manifest = nlohmann::json::parse(ReadText(tmp.Path() + "/manifest.json"));
      const auto& runs = manifest.at("runs");
      if (runs.size() != inputs.size()) return Status::Internal("run.js returned another number of runs");
      for (const auto& run : runs) {
        const nlohmann::json* output0 = nullptr;
        for (const auto& o : run.at("outputs")) {
          if (o.at("name") == "output0") output0 = &o;
        }
        if (output0 == nullptr)
          return Status::FailedPrecondition("ONNX Runtime returned no output0", {onnx_path, 0, "output0"});
        FloatTensor t;
        t.shape = output0->at("shape").get<std::vector<int64_t>>();
        const std::string bytes = ReadText(output0->at("file").get<std::string>());
        int64_t count = 1;
        for (int64_t d : t.shape) count *= d;
        if (static_cast<int64_t>(bytes.size()) != count * 4) {
          return Status::Internal("ONNX Runtime output of " + std::to_string(bytes.size()) +
                                  " bytes for shape " + ShapeText(t.shape));
        }
        t.data.resize(static_cast<size_t>(count));
        std::memcpy(t.data.data(), bytes.data(), bytes.size());
        outs.push_back(std::move(t));
      }
    } catch (const nlohmann::json::exception& e) {
      return Status::Internal(std::string("run.js wrote an unreadable manifest: ") + e.what());
    }
    return outs;
  }

 private:
  OnnxRuntimeLocation where_;
};

// The ONNX Runtime session: `node run.js --serve MODEL DIR`, its stdin and
// stdout socket pairs (so a dead helper is an error, never a SIGPIPE), one
// JSON request line per run (tools/onnxruntime/run.js).
class OnnxRuntimeNodeSession final : public OnnxSession {
 public:
  OnnxRuntimeNodeSession(OnnxRuntimeLocation where, std::string onnx_path, std::string input_name,
                         std::string output_name)
      : where_(std::move(where)),
        path_(std::move(onnx_path)),
        input_name_(std::move(input_name)),
        output_name_(std::move(output_name)) {}
  ~OnnxRuntimeNodeSession() override { Stop(); }
  OnnxRuntimeNodeSession(const OnnxRuntimeNodeSession&) = delete;
  OnnxRuntimeNodeSession& operator=(const OnnxRuntimeNodeSession&) = delete;

  std::string Name() const override { return "onnxruntime " + where_.version; }
  double LastRunMs() const override { return last_ms_; }

  // Starts the helper and waits for its "ready" line.
  Status Start() {
    if (tmp_.Path().empty()) return Status::IoError("cannot create a temporary folder for ONNX Runtime");
    int in[2] = {-1, -1}, out[2] = {-1, -1};
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0 ||
        ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, out) != 0) {
      const std::string why = std::strerror(errno);
      for (int fd : {in[0], in[1], out[0], out[1]}) {
        if (fd >= 0) ::close(fd);
      }
      return Status::IoError("cannot create a socket pair for ONNX Runtime: " + why);
    }
    err_file_ = tmp_.Path() + "/stderr.txt";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[1], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0600);
    const std::vector<std::string> argv{where_.node, where_.dir + "/run.js", "--serve",
                                        fs::absolute(path_).string(), tmp_.Path()};
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const int rc = posix_spawn(&pid_, argv[0].c_str(), &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(in[1]);
    ::close(out[1]);
    to_child_ = in[0];
    from_child_ = out[0];
    if (rc != 0) {
      pid_ = -1;
      return Status::FailedPrecondition("cannot start " + argv[0] + ": " + std::strerror(rc));
    }
    Result<nlohmann::json> ready = ReadReply(kProbeTimeout);
    if (!ready.IsOk()) {
      return Status::FailedPrecondition(
          "ONNX Runtime could not load the export: " + ready.GetStatus().Message(), {path_, 0, ""});
    }
    if (!ready->value("ready", false)) {
      return Status::Internal("run.js --serve answered " + ready->dump() + " instead of ready");
    }
    return {};
  }

  Result<FloatTensor> Run(const float* data, const std::vector<int64_t>& shape) override {
    if (pid_ < 0) return Status::FailedPrecondition("the ONNX Runtime helper is not running", {path_, 0, ""});
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    const std::string in_file = tmp_.Path() + "/in.f32";
    {
      std::ofstream f(in_file, std::ios::binary | std::ios::trunc);
      f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(count * sizeof(float)));
      if (!f.good()) return Status::IoError("cannot write the ONNX Runtime input", {in_file, 0, ""});
    }
    const int64_t id = next_id_++;
    const nlohmann::json request = {
        {"id", id}, {"inputs", {{{"name", input_name_}, {"shape", shape}, {"file", in_file}}}}};
    KESTREL_RETURN_IF_ERROR(Send(request.dump() + "\n"));
    KESTREL_ASSIGN_OR_RETURN(nlohmann::json reply, ReadReply(kRunTimeout));
    try {
      if (reply.contains("error")) {
        return Status::FailedPrecondition(
            "ONNX Runtime could not run the export: " + reply.at("error").get<std::string>(), {path_, 0, ""});
      }
      if (reply.at("id").get<int64_t>() != id) return Status::Internal("run.js answered another request");
      last_ms_ = reply.value("ms", 0.0);
      for (const auto& o : reply.at("outputs")) {
        if (o.at("name") != output_name_) continue;
        FloatTensor t;
        t.shape = o.at("shape").get<std::vector<int64_t>>();
        const std::string file = o.at("file").get<std::string>();
        const std::string bytes = ReadText(file);
        std::error_code ec;
        fs::remove(file, ec);
        int64_t values = 1;
        for (int64_t d : t.shape) values *= d;
        if (static_cast<int64_t>(bytes.size()) != values * 4) {
          return Status::Internal("ONNX Runtime output of " + std::to_string(bytes.size()) +
                                  " bytes for shape " + ShapeText(t.shape));
        }
        t.data.resize(static_cast<size_t>(values));
        std::memcpy(t.data.data(), bytes.data(), bytes.size());
        return t;
      }
    } catch (const nlohmann::json::exception& e) {
      return Status::Internal(std::string("run.js --serve answered an unreadable line: ") + e.what());
    }
    return Status::FailedPrecondition("ONNX Runtime returned no " + output_name_, {path_, 0, output_name_});
  }

 private:
  Status Send(const std::string& line) {
    size_t sent = 0;
    while (sent < line.size()) {
      const ssize_t n = ::send(to_child_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        Stop();
        return Status::FailedPrecondition("the ONNX Runtime helper went away: " + Tail(ReadText(err_file_)),
                                          {path_, 0, ""});
      }
      sent += static_cast<size_t>(n);
    }
    return {};
  }

  // The next line the helper prints, parsed; an error (and the helper
  // stopped) when it ends, prints something else, or takes longer than
  // `timeout`.
  Result<nlohmann::json> ReadReply(std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    size_t eol = std::string::npos;
    while ((eol = buffer_.find('\n')) == std::string::npos) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        Stop();
        return Status::FailedPrecondition("ONNX Runtime ran past " + std::to_string(timeout.count()) + " s",
                                          {path_, 0, ""});
      }
      pollfd p{from_child_, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
      if (ready < 0 && errno != EINTR) return Status::Internal("poll failed on the ONNX Runtime helper");
      if (ready <= 0) continue;
      char chunk[4096];
      const ssize_t n = ::recv(from_child_, chunk, sizeof(chunk), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        Stop();
        return Status::FailedPrecondition("the ONNX Runtime helper ended: " + Tail(ReadText(err_file_)),
                                          {path_, 0, ""});
      }
      buffer_.append(chunk, static_cast<size_t>(n));
    }
    const std::string line = buffer_.substr(0, eol);
    buffer_.erase(0, eol + 1);
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object()) return Status::Internal("run.js --serve printed '" + Tail(line, 200) + "'");
    return j;
  }

  // Ends the helper: EOF on its stdin, then up to 5 s to exit, then SIGKILL.
  void Stop() {
    for (int* fd : {&to_child_, &from_child_}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
    if (pid_ < 0) return;
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = -1;
  }

  OnnxRuntimeLocation where_;
  std::string path_, input_name_, output_name_;
  TempDir tmp_;
  std::string err_file_;
  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
  std::string buffer_;  // read from the helper, not yet a whole line
  int64_t next_id_ = 0;
  double last_ms_ = 0;  // session.run of the last request, as the helper timed it
};

}  // namespace

std::unique_ptr<OnnxRuntime> MakeOpenCvDnnRuntime() { return std::make_unique<OpenCvDnnRuntime>(); }

OnnxRuntimeLocation LocateOnnxRuntime() {
  OnnxRuntimeLocation loc;
  const char* node_env = std::getenv("KESTREL_NODE");
  loc.node = node_env != nullptr && *node_env != '\0' ? node_env : FindOnPath("node");
  const char* dir_env = std::getenv("KESTREL_ONNXRUNTIME_DIR");
  loc.dir = dir_env != nullptr && *dir_env != '\0' ? dir_env : KESTREL_ONNXRUNTIME_DIR;
  if (loc.node.empty() || !IsExecutable(loc.node)) {
    loc.unavailable = node_env != nullptr && *node_env != '\0'
                          ? "KESTREL_NODE=" + loc.node + " is not an executable"
                          : "node is not on PATH";
    return loc;
  }
  if (!fs::exists(loc.dir + "/run.js")) {
    loc.unavailable = "no run.js in " + loc.dir + " (KESTREL_ONNXRUNTIME_DIR)";
    return loc;
  }
  if (!fs::exists(loc.dir + "/node_modules/onnxruntime-node/package.json")) {
    loc.unavailable = "onnxruntime-node is not installed in " + loc.dir + " (scripts/install-node-deps.sh)";
    return loc;
  }
  TempDir tmp;
  if (tmp.Path().empty()) {
    loc.unavailable = "cannot create a temporary folder";
    return loc;
  }
  const std::string out = tmp.Path() + "/stdout.txt", err = tmp.Path() + "/stderr.txt";
  Result<int> code = RunProcess({loc.node, loc.dir + "/run.js", "--version"}, out, err, kProbeTimeout);
  if (!code.IsOk() || *code != 0) {
    loc.unavailable =
        "node run.js --version failed: " + (code.IsOk() ? Tail(ReadText(err)) : code.GetStatus().Message());
    return loc;
  }
  try {
    loc.version = nlohmann::json::parse(ReadText(out)).at("onnxruntime").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    loc.unavailable = std::string("node run.js --version printed no version: ") + e.what();
  }
  return loc;
}

std::unique_ptr<OnnxRuntime> MakeOnnxRuntimeNode(const OnnxRuntimeLocation& where) {
  return std::make_unique<OnnxRuntimeNode>(where);
}

Result<std::map<std::string, exporter::TensorStats>> OnnxRuntimeOutputStats(
    const OnnxRuntimeLocation& where, const std::string& onnx_path, const std::vector<FloatTensor>& inputs,
    int bins, const std::map<std::string, std::pair<double, double>>& ranges) {
  TempDir tmp;
  if (tmp.Path().empty()) return Status::IoError("cannot create a temporary folder for ONNX Runtime");
  nlohmann::json spec = {{"bins", bins}, {"ranges", nlohmann::json::object()}};
  for (const auto& [name, r] : ranges) spec["ranges"][name] = {r.first, r.second};
  const std::string spec_file = tmp.Path() + "/spec.json";
  {
    std::ofstream f(spec_file, std::ios::binary);
    f << spec.dump();
    if (!f.good()) return Status::IoError("cannot write the ONNX Runtime stats spec", {spec_file, 0, ""});
  }
  std::vector<std::string> argv{where.node, where.dir + "/stats.js", spec_file,
                                fs::absolute(onnx_path).string(), tmp.Path()};
  KESTREL_RETURN_IF_ERROR(WriteInputs(tmp.Path(), inputs, &argv));
  const std::string out = tmp.Path() + "/stdout.txt", err = tmp.Path() + "/stderr.txt";
  KESTREL_ASSIGN_OR_RETURN(int code, RunProcess(argv, out, err, kRunTimeout));
  if (code != 0) {
    return Status::FailedPrecondition("ONNX Runtime could not run the calibration model (run.js exit " +
                                          std::to_string(code) + "): " + Tail(ReadText(err)),
                                      {onnx_path, 0, ""});
  }
  std::map<std::string, exporter::TensorStats> stats;
  try {
    const nlohmann::json doc = nlohmann::json::parse(ReadText(tmp.Path() + "/stats.json"));
    for (const auto& [name, o] : doc.at("outputs").items()) {
      exporter::TensorStats s;
      s.count = o.at("count").get<int64_t>();
      // JSON has no infinities: an output with no values has null min/max.
      s.min = o.at("min").is_number() ? o.at("min").get<double>() : NAN;
      s.max = o.at("max").is_number() ? o.at("max").get<double>() : NAN;
      if (o.contains("hist")) s.hist = o.at("hist").get<std::vector<double>>();
      stats[name] = std::move(s);
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::Internal(std::string("run.js wrote unreadable statistics: ") + e.what());
  }
  return stats;
}

Result<std::unique_ptr<OnnxSession>> OpenOpenCvDnnSession(const std::string& onnx_path,
                                                          const std::string& input_name,
                                                          const std::string& output_name) {
  auto session = std::make_unique<OpenCvDnnSession>(onnx_path, input_name, output_name);
  KESTREL_RETURN_IF_ERROR(session->Load());
  return std::unique_ptr<OnnxSession>(std::move(session));
}

Result<std::unique_ptr<OnnxSession>> OpenOnnxRuntimeSession(const OnnxRuntimeLocation& where,
                                                            const std::string& onnx_path,
                                                            const std::string& input_name,
                                                            const std::string& output_name) {
  auto session = std::make_unique<OnnxRuntimeNodeSession>(where, onnx_path, input_name, output_name);
  KESTREL_RETURN_IF_ERROR(session->Start());
  return std::unique_ptr<OnnxSession>(std::move(session));
}

}  // namespace kestrel::backend_onnx
