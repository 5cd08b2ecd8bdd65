#pragma once
// Hostile HTTP clients for the telemetry listener (issue 15): idle connections, slow-loris requests and a
// /metrics flood against 127.0.0.1. Shared by the host test (tests/telemetry/http_test.cpp) and the guest
// test against the daemon (tests/rdma/telemetry_flood_test.cpp). Header-only, sockets only.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace rdmagate::testfix::http {

// A TCP connection to 127.0.0.1:port, or -1. Connect, send and receive give up after 5 s, so a starved
// request fails its test instead of hanging it.
inline int connect_loopback(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  const timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// The status of GET path (HTTP/1.0), or 0 when there was no answer within connect_loopback's 5 s.
inline int get_status(std::uint16_t port, const std::string& path) {
  const int fd = connect_loopback(port);
  if (fd < 0) return 0;
  const std::string req = "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
  std::string all;
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
    std::array<char, 4096> buf{};
    for (ssize_t n; (n = ::recv(fd, buf.data(), buf.size(), 0)) > 0;)
      all.append(buf.data(), static_cast<std::size_t>(n));
  }
  ::close(fd);
  return all.rfind("HTTP/1.", 0) == 0 && all.size() >= 12 ? std::atoi(all.c_str() + 9) : 0;
}

// True once the server has closed fd (EOF or reset), waiting at most `within`.
inline bool closed_by_server(int fd, std::chrono::milliseconds within) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  std::array<char, 512> buf{};
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return true;
    // n > 0: an error answer (400 for a request cut short by the timeout) before the close.
  }
}

// What hostile clients do to the main listener until stop: `idle` connections that send nothing (each
// replaced as soon as the server closes it), `lorises` connections trickling a header byte every 50 ms and
// never ending it (replaced likewise), and `flooders` threads GETting /metrics back to back.
class Attack {
 public:
  Attack(std::uint16_t port, unsigned idle, unsigned lorises, unsigned flooders) : port_(port) {
    threads_.emplace_back([this, idle] { hold(idle, false); });
    threads_.emplace_back([this, lorises] { hold(lorises, true); });
    for (unsigned i = 0; i < flooders; ++i)
      threads_.emplace_back([this] {
        while (!stop_.load()) {
          if (get_status(port_, "/metrics") == 200) scrapes_.fetch_add(1);
        }
      });
  }
  ~Attack() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }
  Attack(const Attack&) = delete;
  Attack& operator=(const Attack&) = delete;

  unsigned long long closed_by_server() const { return closed_.load(); }
  unsigned long long connections() const { return opened_.load(); }
  unsigned long long scrapes() const { return scrapes_.load(); }

 private:
  void hold(unsigned n, bool loris) {
    static constexpr char kHeader[] =
        "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    std::vector<std::pair<int, std::size_t>> fds;  // fd, bytes of kHeader sent
    while (!stop_.load()) {
      while (fds.size() < n) {
        const int fd = connect_loopback(port_);
        if (fd < 0) break;  // the backlog is full: try again on the next round
        opened_.fetch_add(1);
        fds.emplace_back(fd, 0);
      }
      for (auto it = fds.begin(); it != fds.end();) {
        std::array<char, 512> buf{};
        const ssize_t got = ::recv(it->first, buf.data(), buf.size(), MSG_DONTWAIT);
        const bool gone = got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK) ||
                          (loris && it->second < sizeof kHeader - 1 &&
                           ::send(it->first, kHeader + it->second, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1);
        if (gone) {
          ::close(it->first);
          closed_.fetch_add(1);
          it = fds.erase(it);
        } else {
          if (loris) ++it->second;
          ++it;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    for (const auto& [fd, sent] : fds) ::close(fd);
  }

  const std::uint16_t port_;
  std::atomic<bool> stop_{false};
  std::atomic<unsigned long long> opened_{0}, closed_{0}, scrapes_{0};
  std::vector<std::thread> threads_;
};

}  // namespace rdmagate::testfix::http
