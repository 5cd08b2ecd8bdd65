// rdmagate-scrape: a Prometheus-like scraper for benchmarks (tools/scrape-overhead). It GETs one URL at a
// fixed rate, one HTTP/1.0 connection per scrape read to EOF, from a single process that never forks, so
// what it adds to a machine is the scrape itself. On exit it prints one summary line:
//
//   rdmagate-scrape: scrapes N failures F bytes_per_scrape B wall_us min A median M p99 P cpu_us_per_scrape C
//
// wall_us is each scrape's connect-to-EOF time; cpu_us_per_scrape is this process's user+system time over
// the run divided by the scrapes (the client's share of a scrape's cost; the server's is not in it).
#include <netdb.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr const char* kUsage =
    "usage: rdmagate-scrape [--url HOST:PORT/PATH | --host HOST --port PORT --path /PATH]\n"
    "                       [--interval-ms N] [--duration-s S]\n"
    "GETs the URL every N ms (default 1000) until S seconds passed (default: until SIGTERM or SIGINT),\n"
    "then prints one summary line. Exits 1 if any scrape did not get a 200, 2 on bad usage.\n"
    "Defaults: --host 127.0.0.1 --port 9464 --path /metrics.\n";
constexpr int kMaxReportedFailures = 5;
constexpr int kIoTimeoutS = 10;  // a hung server ends one scrape as a failure, not the run

volatile sig_atomic_t g_stop = 0;

struct Options {
  std::string host = "127.0.0.1";
  std::string port = "9464";
  std::string path = "/metrics";
  long interval_ms = 1000;
  double duration_s = 0;  // 0: until a signal
};

// HOST:PORT/PATH, optionally with http:// in front and the host in brackets (IPv6).
bool parse_url(std::string_view url, Options& o) {
  if (url.starts_with("http://")) url.remove_prefix(7);
  const auto slash = url.find('/');
  o.path = slash == std::string_view::npos ? "/" : std::string(url.substr(slash));
  std::string_view hp = url.substr(0, slash);
  std::string_view host = hp;
  std::string_view port = "80";
  if (hp.starts_with('[')) {
    const auto close = hp.find(']');
    if (close == std::string_view::npos) return false;
    host = hp.substr(1, close - 1);
    if (close + 1 < hp.size()) {
      if (hp[close + 1] != ':') return false;
      port = hp.substr(close + 2);
    }
  } else if (const auto colon = hp.rfind(':'); colon != std::string_view::npos) {
    host = hp.substr(0, colon);
    port = hp.substr(colon + 1);
  }
  if (host.empty() || port.empty()) return false;
  o.host = host;
  o.port = port;
  return true;
}

bool parse_args(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") return false;
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    char* end = nullptr;
    if (a == "--url") {
      if (!parse_url(v, o)) return false;
    } else if (a == "--host") {
      o.host = v;
    } else if (a == "--port") {
      o.port = v;
    } else if (a == "--path") {
      o.path = v;
    } else if (a == "--interval-ms") {
      o.interval_ms = std::strtol(v, &end, 10);
      if (*end != '\0' || o.interval_ms <= 0) return false;
    } else if (a == "--duration-s") {
      o.duration_s = std::strtod(v, &end);
      if (*end != '\0' || o.duration_s <= 0) return false;
    } else {
      return false;
    }
  }
  return !o.path.empty() && o.path[0] == '/';
}

std::int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

std::int64_t cpu_us() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const auto us = [](const timeval& t) { return std::int64_t{t.tv_sec} * 1'000'000 + t.tv_usec; };
  return us(ru.ru_utime) + us(ru.ru_stime);
}

enum class Outcome { kOk, kFailed, kInterrupted };

// One scrape. On kFailed, why says what went wrong; bytes counts the whole response, headers included.
Outcome scrape(const addrinfo& ai, const std::string& request, std::size_t& bytes, std::string& why) {
  bytes = 0;
  const int fd = ::socket(ai.ai_family, ai.ai_socktype | SOCK_CLOEXEC, ai.ai_protocol);
  if (fd < 0) {
    why = std::string("socket: ") + std::strerror(errno);
    return Outcome::kFailed;
  }
  const timeval tmo{kIoTimeoutS, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tmo, sizeof tmo);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tmo, sizeof tmo);
  auto fail = [&](const char* what) {
    const int e = errno;
    ::close(fd);
    if (e == EINTR && g_stop) return Outcome::kInterrupted;
    why = std::string(what) + ": " + std::strerror(e);
    return Outcome::kFailed;
  };
  if (::connect(fd, ai.ai_addr, ai.ai_addrlen) != 0) return fail("connect");
  for (std::size_t sent = 0; sent < request.size();) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0) return fail("send");
    sent += static_cast<std::size_t>(n);
  }
  std::array<char, 65536> buf;
  std::array<char, 13> head{};  // "HTTP/1.x NNN " is all the status check needs
  for (;;) {
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n < 0) return fail("recv");
    if (n == 0) break;
    const std::size_t got = static_cast<std::size_t>(n);
    if (bytes < head.size()) std::memcpy(head.data() + bytes, buf.data(), std::min(head.size() - bytes, got));
    bytes += got;
  }
  ::close(fd);
  const std::string_view status(head.data(), std::min(bytes, head.size()));
  if (status.size() < 12 || !status.starts_with("HTTP/1.") || status.substr(9, 3) != "200") {
    why = status.empty() ? std::string("empty response") : "status line \"" + std::string(status) + "...\"";
    return Outcome::kFailed;
  }
  return Outcome::kOk;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse_args(argc, argv, o)) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* ai = nullptr;
  if (const int rc = ::getaddrinfo(o.host.c_str(), o.port.c_str(), &hints, &ai); rc != 0) {
    std::fprintf(stderr, "rdmagate-scrape: %s:%s: %s\n", o.host.c_str(), o.port.c_str(), gai_strerror(rc));
    return 2;
  }
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_stop = 1; };  // no SA_RESTART: a blocked sleep or recv returns at once
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  const std::string request =
      "GET " + o.path + " HTTP/1.0\r\nHost: " + o.host + "\r\nAccept: text/plain\r\n\r\n";
  const std::int64_t interval_ns = o.interval_ms * 1'000'000;
  const std::int64_t start = now_ns();
  const std::int64_t end =
      o.duration_s > 0 ? start + static_cast<std::int64_t>(o.duration_s * 1e9) : INT64_MAX;
  const std::int64_t cpu_start = cpu_us();
  std::vector<std::int64_t> wall_us;
  std::uint64_t failures = 0;
  std::uint64_t ok_bytes = 0;
  std::int64_t next = start;
  while (!g_stop && next < end) {
    std::size_t bytes = 0;
    std::string why;
    const std::int64_t t0 = now_ns();
    const Outcome r = scrape(*ai, request, bytes, why);
    if (r == Outcome::kInterrupted) break;
    wall_us.push_back((now_ns() - t0) / 1000);
    if (r == Outcome::kOk) {
      ok_bytes += bytes;
    } else if (++failures <= kMaxReportedFailures) {
      std::fprintf(stderr, "rdmagate-scrape: scrape %zu of http://%s:%s%s failed: %s\n", wall_us.size(),
                   o.host.c_str(), o.port.c_str(), o.path.c_str(), why.c_str());
    }
    // Fixed rate like Prometheus: slots a slow scrape overran are skipped, keeping the phase, so scrapes
    // never overlap and never come in a catch-up burst.
    next += interval_ns;
    if (const std::int64_t t = now_ns(); next <= t) next += ((t - next) / interval_ns + 1) * interval_ns;
    const timespec until{static_cast<time_t>(next / 1'000'000'000), static_cast<long>(next % 1'000'000'000)};
    while (!g_stop && next < end) {
      if (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nullptr) != EINTR) break;
    }
  }
  const std::int64_t cpu = cpu_us() - cpu_start;
  ::freeaddrinfo(ai);

  const std::size_t n = wall_us.size();
  std::sort(wall_us.begin(), wall_us.end());
  const auto rank = [&](double q) {
    return n == 0 ? 0 : wall_us[static_cast<std::size_t>(q * (n - 1) + 0.5)];
  };
  const std::uint64_t ok = n - failures;
  std::printf(
      "rdmagate-scrape: scrapes %zu failures %llu bytes_per_scrape %llu wall_us min %lld median %lld p99 "
      "%lld "
      "cpu_us_per_scrape %lld\n",
      n, static_cast<unsigned long long>(failures),
      static_cast<unsigned long long>(ok == 0 ? 0 : ok_bytes / ok),
      static_cast<long long>(n == 0 ? 0 : wall_us.front()), static_cast<long long>(rank(0.5)),
      static_cast<long long>(rank(0.99)),
      static_cast<long long>(n == 0 ? 0 : cpu / static_cast<std::int64_t>(n)));
  if (n == 0) {
    std::fputs("rdmagate-scrape: no scrape completed\n", stderr);
    return 1;
  }
  return failures == 0 ? 0 : 1;
}
