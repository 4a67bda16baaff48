#include "http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>

namespace kestrel::server::testing {
namespace {

int Connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Reads what is available within timeout_ms: >0 bytes, 0 EOF, -1 error/timeout.
ssize_t ReadSome(int fd, std::string* out, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return -1;
  char buf[4096];
  ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  if (n > 0) out->append(buf, static_cast<size_t>(n));
  return n;
}

// Parses "HTTP/1.1 200 OK\r\nA: b\r\n..." up to the blank line.
int ParseHead(const std::string& head, std::map<std::string, std::string>* headers) {
  if (head.rfind("HTTP/1.", 0) != 0 || head.size() < 12) return 0;
  const int status = std::atoi(head.substr(9, 3).c_str());
  size_t i = head.find("\r\n");
  while (i != std::string::npos && i + 2 < head.size()) {
    size_t j = head.find("\r\n", i + 2);
    if (j == std::string::npos) j = head.size();
    const std::string line = head.substr(i + 2, j - i - 2);
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      size_t v = colon + 1;
      while (v < line.size() && line[v] == ' ') ++v;
      (*headers)[name] = line.substr(v);
    }
    i = j;
  }
  return status;
}

}  // namespace

HttpReply SendRaw(int port, const std::string& raw, int timeout_ms) {
  HttpReply r;
  int fd = Connect(port);
  if (fd < 0) return r;
  std::string in;
  if (SendAll(fd, raw)) {
    while (ReadSome(fd, &in, timeout_ms) > 0) {
    }
  }
  ::close(fd);
  const size_t end = in.find("\r\n\r\n");
  if (end == std::string::npos) return r;
  r.status = ParseHead(in.substr(0, end), &r.headers);
  r.body = in.substr(end + 4);
  return r;
}

HttpReply Get(int port, const std::string& target, const std::vector<std::string>& headers,
              const std::string& method) {
  std::string raw = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  for (const auto& h : headers) raw += h + "\r\n";
  return SendRaw(port, raw + "\r\n");
}

HttpReply Call(int port, const std::string& method, const std::string& target, const std::string& token,
               const std::string& body) {
  std::string raw = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!token.empty()) raw += "Authorization: Bearer " + token + "\r\n";
  if (!body.empty() || method != "GET")
    raw += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  return SendRaw(port, raw + "\r\n" + body);
}

SseClient::SseClient(int port, const std::string& target, const std::vector<std::string>& headers) {
  fd_ = Connect(port);
  if (fd_ < 0) return;
  std::string raw = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n";
  for (const auto& h : headers) raw += h + "\r\n";
  if (!SendAll(fd_, raw + "\r\n")) Close();
}

SseClient::~SseClient() { Close(); }

void SseClient::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool SseClient::Fill(int timeout_ms) {
  if (fd_ < 0 || closed_) return false;
  ssize_t n = ReadSome(fd_, &buf_, timeout_ms);
  if (n == 0) closed_ = true;
  return n > 0;
}

int SseClient::Status() {
  if (status_ >= 0) return status_;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (buf_.find("\r\n\r\n") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    if (!Fill(1000) && closed_) break;
  }
  const size_t end = buf_.find("\r\n\r\n");
  if (end == std::string::npos) return status_ = 0;
  std::map<std::string, std::string> headers;
  status_ = ParseHead(buf_.substr(0, end), &headers);
  buf_.erase(0, end + 4);
  return status_;
}

std::vector<SseEvent> SseClient::ReadEvents(size_t n, int timeout_ms) {
  std::vector<SseEvent> out;
  if (Status() != 200) return out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (out.size() < n) {
    const size_t end = buf_.find("\n\n");
    if (end == std::string::npos) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now())
              .count();
      if (left <= 0 || !Fill(static_cast<int>(left))) break;
      continue;
    }
    const std::string block = buf_.substr(0, end + 1);
    buf_.erase(0, end + 2);
    SseEvent ev;
    bool any = false;
    size_t i = 0;
    while (i < block.size()) {
      size_t j = block.find('\n', i);
      const std::string line = block.substr(i, j - i);
      i = j + 1;
      if (line.empty()) continue;
      if (line[0] == ':') {
        ++comments_;
        continue;
      }
      const size_t colon = line.find(':');
      const std::string field = line.substr(0, colon);
      std::string value = colon == std::string::npos ? "" : line.substr(colon + 1);
      if (!value.empty() && value[0] == ' ') value.erase(0, 1);
      if (field == "id") ev.id = value, any = true;
      if (field == "event") ev.event = value;
      if (field == "data") ev.data += (ev.data.empty() ? "" : "\n") + value, any = true;
    }
    if (any) out.push_back(ev);
  }
  return out;
}

bool SseClient::ReadUntilClosed(int timeout_ms) {
  Status();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!closed_ && std::chrono::steady_clock::now() < deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now())
            .count();
    if (!Fill(static_cast<int>(std::max<int64_t>(left, 1))) && !closed_ && fd_ < 0) break;
  }
  return closed_;
}

}  // namespace kestrel::server::testing
