// Test support for webhooks: a loopback HTTP server that records what it
// receives, and a scratch store per test (SQLite in a temp folder, or a
// fresh schema in the PostgreSQL database named by KESTREL_TEST_PG). Shared
// by webhook_test.cc (the dispatcher alone) and webhook_worker_test.cc (a
// worker running jobs end to end).
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "store/postgres_store.h"

namespace kestrel::testing {

using Clock = std::chrono::steady_clock;

// A one-request-per-connection HTTP/1.1 server on 127.0.0.1. Answers with
// the scripted statuses in order, then 200. With `answer = false` it
// listens but never accepts: connections complete in the kernel backlog and
// requests hang until the client times out (a black hole).
class LoopbackServer {
 public:
  struct Request {
    std::map<std::string, std::string> headers;  // lowercase names
    std::string body;
    Clock::time_point at;
  };

  explicit LoopbackServer(bool answer = true) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    ok_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 && ::listen(fd_, 64) == 0;
    socklen_t len = sizeof(addr);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    if (answer) thread_ = std::thread([this] { Serve(); });
  }
  ~LoopbackServer() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
  }
  bool ok() const { return ok_; }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/hook"; }
  void Script(std::vector<int> statuses) {
    std::lock_guard<std::mutex> l(mu_);
    statuses_.assign(statuses.begin(), statuses.end());
  }
  std::vector<Request> Requests() {
    std::lock_guard<std::mutex> l(mu_);
    return requests_;
  }
  size_t Count() {
    std::lock_guard<std::mutex> l(mu_);
    return requests_.size();
  }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      Handle(c);
      ::close(c);
    }
  }
  void Handle(int c) {
    std::string data;
    char buf[4096];
    size_t header_end = std::string::npos;
    size_t need = 0;
    while (true) {
      if (header_end == std::string::npos) {
        header_end = data.find("\r\n\r\n");
        if (header_end != std::string::npos) {
          Request r = ParseHeaders(data.substr(0, header_end));
          need = header_end + 4 + std::strtoull(r.headers["content-length"].c_str(), nullptr, 10);
        }
      }
      if (header_end != std::string::npos && data.size() >= need) break;
      pollfd p{c, POLLIN, 0};
      if (::poll(&p, 1, 5000) <= 0) return;
      ssize_t n = ::recv(c, buf, sizeof(buf), 0);
      if (n <= 0) return;
      data.append(buf, static_cast<size_t>(n));
    }
    Request r = ParseHeaders(data.substr(0, header_end));
    r.body = data.substr(header_end + 4, need - header_end - 4);
    r.at = Clock::now();
    int status = 200;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!statuses_.empty()) {
        status = statuses_.front();
        statuses_.pop_front();
      }
      requests_.push_back(r);
    }
    std::string resp =
        "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
    (void)!::send(c, resp.data(), resp.size(), MSG_NOSIGNAL);
  }
  static Request ParseHeaders(const std::string& head) {
    Request r;
    size_t pos = head.find("\r\n");  // skip the request line
    while (pos != std::string::npos && pos + 2 < head.size()) {
      size_t next = head.find("\r\n", pos + 2);
      std::string line = head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
      size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        size_t v = line.find_first_not_of(' ', colon + 1);
        r.headers[name] = v == std::string::npos ? "" : line.substr(v);
      }
      pos = next;
    }
    return r;
  }

  int fd_ = -1;
  int port_ = 0;
  bool ok_ = false;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::deque<int> statuses_;
  std::vector<Request> requests_;
};

// A store URL and a temp folder of its own for one test: "sqlite" (a file in
// the folder) or "postgres" (a new schema in KESTREL_TEST_PG's database,
// selected through search_path). The destructor removes the folder and
// drops the schema.
class ScratchStore {
 public:
  // "" when ready; otherwise why not (PostgreSQL without KESTREL_TEST_PG is
  // a skip, see Skipped()).
  std::string Init(const std::string& backend, const std::string& prefix) {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : name) {
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    }
    dir_ = (std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()) + "_" + name))
               .string();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    if (backend == "sqlite") {
      url_ = "sqlite:" + dir_ + "/kestrel.db";
      return "";
    }
    const char* pg = std::getenv("KESTREL_TEST_PG");
    if (pg == nullptr || *pg == '\0') {
      skipped_ = true;
      return "PostgreSQL tests need KESTREL_TEST_PG=postgresql://...";
    }
    admin_url_ = pg;
    std::random_device rd;
    std::string schema = "w" + std::to_string(::getpid()) + "_" + std::to_string(rd() % 1000000);
    Status s = store::ExecPostgres(admin_url_, "CREATE SCHEMA " + schema);
    if (!s.IsOk()) return s.ToString();
    schema_ = schema;
    url_ = admin_url_ + (admin_url_.find('?') == std::string::npos ? "?" : "&") + "options=-csearch_path%3D" +
           schema_;
    return "";
  }
  ~ScratchStore() {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
    if (!schema_.empty()) {
      EXPECT_TRUE(store::ExecPostgres(admin_url_, "DROP SCHEMA " + schema_ + " CASCADE").IsOk());
    }
  }
  bool Skipped() const { return skipped_; }
  const std::string& Url() const { return url_; }
  const std::string& Dir() const {
    return dir_;
  }  // an empty temp folder of the test's own (SQLite's file too)

 private:
  std::string dir_, url_, admin_url_, schema_;
  bool skipped_ = false;
};

}  // namespace kestrel::testing
