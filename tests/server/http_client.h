// A minimal blocking HTTP/1.1 client on POSIX sockets for the server tests:
// one request per connection (Connection: close), and an event-stream
// reader. Deliberately not Beast, so the tests do not share the server's
// parser.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace kestrel::server::testing {

struct HttpReply {
  int status = 0;                              // 0: no reply (connect or read failed)
  std::map<std::string, std::string> headers;  // names lowercased
  std::string body;
};

// Sends `raw` as is (a whole request) and reads until the server closes.
HttpReply SendRaw(int port, const std::string& raw, int timeout_ms = 5000);
// GET target with Connection: close and the extra "Name: value" lines.
HttpReply Get(int port, const std::string& target, const std::vector<std::string>& headers = {},
              const std::string& method = "GET");

// `method target` with Connection: close, a bearer `token` ("" = none) and
// `body` as JSON: Content-Type and Content-Length go with a body, and with
// every method but GET even when it is empty.
HttpReply Call(int port, const std::string& method, const std::string& target, const std::string& token = "",
               const std::string& body = "");

struct SseEvent {
  std::string id, event, data;
};

// An open event stream.
class SseClient {
 public:
  // Connects and sends the request; Status() reads the response head.
  SseClient(int port, const std::string& target, const std::vector<std::string>& headers = {});
  ~SseClient();
  SseClient(const SseClient&) = delete;
  SseClient& operator=(const SseClient&) = delete;

  // The response status (reads the head once); 0 on failure.
  int Status();
  // Reads until `n` events arrived or `timeout_ms` passed; returns those read.
  std::vector<SseEvent> ReadEvents(size_t n, int timeout_ms);
  // Reads until the server closes the connection (true) or the timeout.
  bool ReadUntilClosed(int timeout_ms);
  // Comments (": ...") seen so far.
  int Comments() const { return comments_; }
  void Close();

 private:
  // Reads more bytes into buf_; false on EOF/error/timeout.
  bool Fill(int timeout_ms);
  int fd_ = -1;
  int status_ = -1;
  bool closed_ = false;
  int comments_ = 0;
  std::string buf_;
};

}  // namespace kestrel::server::testing
