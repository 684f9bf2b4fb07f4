// Contract: test helper that sends one HTTP/1.1 request byte for byte over a plain socket (so a test decides
// every header, down to sending no Content-Type at all, which httplib's client never does) and reads the
// whole answer (Connection: close), decoding a chunked body. Header-only; each call owns its socket; any
// thread.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>

namespace kvtrie::test {

struct RawReply {
  int status = 0;  // 0: no parsable answer
  std::string headers;
  std::string body;  // de-chunked
};

inline std::string dechunk(const std::string& raw) {
  std::string out;
  size_t at = 0;
  while (at < raw.size()) {
    const size_t eol = raw.find("\r\n", at);
    if (eol == std::string::npos) break;
    const size_t n = std::strtoul(raw.substr(at, eol - at).c_str(), nullptr, 16);
    if (n == 0) break;
    out += raw.substr(eol + 2, n);
    at = eol + 2 + n + 2;
  }
  return out;
}

// Sends `request` (request line, headers, blank line and body, exactly as given) and reads the answer.
inline RawReply raw_request(int port, const std::string& request) {
  RawReply reply;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  std::string raw;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    size_t sent = 0;
    while (sent < request.size()) {
      const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    char buf[65536];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) raw.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  const size_t head_end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.1 ", 0) != 0 || head_end == std::string::npos) return reply;
  reply.status = std::atoi(raw.c_str() + 9);
  reply.headers = raw.substr(0, head_end);
  reply.body = raw.substr(head_end + 4);
  if (reply.headers.find("Transfer-Encoding: chunked") != std::string::npos) reply.body = dechunk(reply.body);
  return reply;
}

// POSTs `body` to `path` with a Content-Length; `content_type` nullopt sends no Content-Type header.
inline RawReply raw_post(int port, const std::string& path, const std::string& body,
                         std::optional<std::string> content_type) {
  std::string request = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (content_type) request += "Content-Type: " + *content_type + "\r\n";
  return raw_request(port, request + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
}

}  // namespace kvtrie::test
