// `kestrel serve` as a process: --port 0 prints the bound address as the
// first line, /healthz answers, SIGTERM (with an event stream open) ends it
// with exit 0; SIGINT too.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "http_client.h"

namespace kestrel::server {
namespace {

namespace fs = std::filesystem;

struct Served {
  pid_t pid = -1;
  int out = -1;  // the child's stdout
  int port = 0;
  std::string first_line;
};

// `kestrel serve --port 0` (with --public-read when `public_read`, then `extra`).
Served StartServe(const std::string& home, bool public_read = true,
                  const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {KESTREL_CLI, "--home", home, "serve", "--port", "0"};
  if (public_read) args.push_back("--public-read");
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  Served s;
  int fds[2];
  if (::pipe(fds) != 0) return s;
  s.pid = ::fork();
  if (s.pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execv(KESTREL_CLI, argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  s.out = fds[0];
  char c = 0;
  while (::read(s.out, &c, 1) == 1 && c != '\n') s.first_line += c;
  const size_t colon = s.first_line.rfind(':');
  if (s.first_line.find("http://127.0.0.1:") != std::string::npos && colon != std::string::npos)
    s.port = std::stoi(s.first_line.substr(colon + 1));
  return s;
}

// The exit status after `sig`, or -1 when it did not exit within 5 s.
int StopWith(Served& s, int sig) {
  ::kill(s.pid, sig);
  for (int i = 0; i < 500; ++i) {
    int status = 0;
    if (::waitpid(s.pid, &status, WNOHANG) == s.pid) {
      ::close(s.out);
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(s.pid, SIGKILL);
  ::waitpid(s.pid, nullptr, 0);
  return -1;
}

class ServeCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    home_ = fs::temp_directory_path() / ("kestrel_serve_cli_" + std::to_string(::getpid()) + "_" + name);
    fs::remove_all(home_);
    fs::create_directories(home_);
  }
  void TearDown() override { fs::remove_all(home_); }
  fs::path home_;
};

TEST_F(ServeCliTest, PrintsTheBoundAddressServesAndExitsZeroOnSigterm) {
  Served s = StartServe(home_.string());
  ASSERT_GT(s.pid, 0);
  ASSERT_GT(s.port, 0) << "first line: " << s.first_line;
  testing::HttpReply r = testing::Get(s.port, "/healthz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "{\n  \"ok\": true\n}\n");
  testing::SseClient stream(s.port, "/api/events");
  ASSERT_EQ(stream.Status(), 200);
  EXPECT_EQ(StopWith(s, SIGTERM), 0);
  EXPECT_TRUE(stream.ReadUntilClosed(2000)) << "the open stream ended with the server";
}

// Without --public-read a read needs a token from `kestrel token create`;
// a write needs a read-write one.
TEST_F(ServeCliTest, ReadsNeedATokenFromTokenCreateWithoutPublicRead) {
  auto create = [&](const std::string& args) {
    std::string out;
    FILE* p = ::popen(
        (std::string(KESTREL_CLI) + " --home '" + home_.string() + "' --json token create " + args).c_str(),
        "r");
    if (p == nullptr) return out;
    char buf[512];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    ::pclose(p);
    const size_t at = out.find("kst_");
    return at == std::string::npos ? std::string() : out.substr(at, 4 + 12 + 1 + 64);
  };
  const std::string reader = create("--name reader --read-only");
  ASSERT_FALSE(reader.empty());
  Served s = StartServe(home_.string(), false);
  ASSERT_GT(s.port, 0) << "first line: " << s.first_line;
  EXPECT_EQ(testing::Get(s.port, "/healthz").status, 200);
  EXPECT_EQ(testing::Get(s.port, "/api/jobs").status, 401);
  EXPECT_EQ(testing::Get(s.port, "/api/jobs", {"Authorization: Bearer " + reader}).status, 200);
  EXPECT_EQ(testing::Get(s.port, "/api/jobs/1/cancel",
                         {"Authorization: Bearer " + reader, "Content-Length: 0"}, "POST")
                .status,
            403);
  EXPECT_EQ(StopWith(s, SIGTERM), 0);
}

// --allowed-hosts replaces the hosts a request may name (docs/server.md
// "Request heads"); one with a port is refused before the server listens.
TEST_F(ServeCliTest, AllowedHostsFlagDecidesWhichHostsAreAnswered) {
  Served s = StartServe(home_.string(), true, {"--allowed-hosts", "kestrel.test,10.1.2.3"});
  ASSERT_GT(s.port, 0) << "first line: " << s.first_line;
  auto status = [&s](const std::string& host) {
    return testing::SendRaw(s.port,
                            "GET /api/jobs HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n")
        .status;
  };
  EXPECT_EQ(status("Kestrel.Test:8080"), 200);
  EXPECT_EQ(status("10.1.2.3"), 200);
  EXPECT_EQ(status("127.0.0.1"), 421) << "the list replaces the default";
  EXPECT_EQ(status("attacker.example"), 421);
  EXPECT_EQ(StopWith(s, SIGTERM), 0);

  Served bad = StartServe(home_.string(), true, {"--allowed-hosts", "kestrel.test:8080"});
  EXPECT_EQ(bad.port, 0) << "first line: " << bad.first_line;
  const int code = StopWith(bad, SIGTERM);
  EXPECT_GT(code, 0);
  EXPECT_LT(code, 128) << "an error exit, not the signal";
}

TEST_F(ServeCliTest, SigintStopsItToo) {
  Served s = StartServe(home_.string());
  ASSERT_GT(s.port, 0) << "first line: " << s.first_line;
  EXPECT_EQ(testing::Get(s.port, "/readyz").status, 200);
  EXPECT_EQ(StopWith(s, SIGINT), 0);
}

}  // namespace
}  // namespace kestrel::server
