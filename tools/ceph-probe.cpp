// rdmagate-ceph-probe: the few cluster operations tools/ceph-cluster needs, through the librados C API only,
// so the script also runs where the Python `ceph` CLI does not (the minimal qemu guest):
//
//   rdmagate-ceph-probe --conf F --name client.admin [--keyring K] [--timeout S] create-pool P
//   rdmagate-ceph-probe --conf F --name N [--keyring K] [--timeout S] wait-write P
//   rdmagate-ceph-probe --conf F --name client.admin [--keyring K] [--timeout S] mon-command JSON [INFILE]
//
// create-pool creates a replicated pool (an existing one is fine) and tags it with the "rados" application.
// wait-write retries connect + write_full + read + compare + remove of a probe object until it succeeds or
// the deadline passes: the readiness check of a cluster (`ceph -s` says nothing about whether I/O works).
// mon-command sends one JSON command (INFILE, if given, is its input buffer), prints the output buffer on
// stdout and the status string on stderr. Every call has a deadline (--timeout, default 30 s): librados's
// own timeouts are set from it, and an alarm ends the process if librados still blocks past it.
// Exit status: 0 success, 1 failure or deadline, 2 bad usage.
#include <rados/librados.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr const char* kUsage =
    "usage: rdmagate-ceph-probe --conf FILE --name client.X [--keyring FILE] [--timeout S] COMMAND\n"
    "  create-pool POOL [--pg-num N]   create a replicated pool (exists: fine), application \"rados\"\n"
    "  wait-write POOL                 retry connect+write+read+remove of a probe object until it works\n"
    "  mon-command JSON [INFILE]       send one mon command, print its output\n"
    "--timeout S (default 30) bounds the whole call; --verbose reports every try on stderr.\n"
    "Exit 0 ok, 1 failure/deadline, 2 usage.\n";

struct Options {
  std::string conf;
  std::string name = "client.admin";
  std::string keyring;
  double timeout_s = 30;
  int pg_num = 8;
  bool verbose = false;
  std::vector<std::string> args;  // command and its operands
};

double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::string err_str(int rc) {
  return std::to_string(rc) + " (" + std::strerror(rc < 0 ? -rc : rc) + ")";
}

// JSON string literal of s (pool names are plain, but quote them correctly anyway).
std::string json_str(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// One connected cluster handle; every failure is reported in `error`.
class Cluster {
 public:
  Cluster() = default;
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;
  ~Cluster() {
    if (cluster_ != nullptr) rados_shutdown(cluster_);
  }

  // Connects with librados timeouts of at most `budget_s` seconds (at least 1).
  bool connect(const Options& o, double budget_s) {
    int rc = rados_create2(&cluster_, "ceph", o.name.c_str(), 0);
    if (rc < 0) {
      cluster_ = nullptr;
      return fail("rados_create2", rc);
    }
    rc = rados_conf_read_file(cluster_, o.conf.c_str());
    if (rc < 0) return fail("rados_conf_read_file " + o.conf, rc);
    if (!o.keyring.empty()) {
      rc = rados_conf_set(cluster_, "keyring", o.keyring.c_str());
      if (rc < 0) return fail("rados_conf_set keyring", rc);
    }
    const std::string t = std::to_string(std::max(1, static_cast<int>(budget_s)));
    for (const char* opt : {"client_mount_timeout", "rados_mon_op_timeout", "rados_osd_op_timeout"}) {
      rc = rados_conf_set(cluster_, opt, t.c_str());
      if (rc < 0) return fail(std::string("rados_conf_set ") + opt, rc);
    }
    // An op to a PG whose OSD is not up yet waits for a newer osdmap; the Objecter asks for one again only on
    // its tick (objecter_tick_interval, default every 5 s), which would make every start 5 s slower than it
    // is. And an op sent to an OSD that was killed (its restarted successor may even sit on the same port)
    // waits until the tick finds it older than objecter_timeout (default 10 s) before the client asks for a
    // new map.
    for (const auto& [opt, val] :
         {std::pair{"objecter_tick_interval", "0.1"}, std::pair{"objecter_timeout", "0.5"}}) {
      rc = rados_conf_set(cluster_, opt, val);
      if (rc < 0) return fail(std::string("rados_conf_set ") + opt, rc);
    }
    // This process's own log goes nowhere; its errors are returned and printed by the caller.
    rados_conf_set(cluster_, "log_to_stderr", "false");
    rados_conf_set(cluster_, "err_to_stderr", "false");
    rados_conf_set(cluster_, "log_file", "");
    rc = rados_connect(cluster_);
    if (rc < 0) return fail("rados_connect", rc);
    return true;
  }

  // Sends one mon command; `out` gets its output buffer, `status` its status string.
  int mon_command(const std::string& json, const std::string& inbuf, std::string& out, std::string& status) {
    const char* cmd[] = {json.c_str()};
    char* outbuf = nullptr;
    size_t outlen = 0;
    char* outs = nullptr;
    size_t outslen = 0;
    const int rc =
        rados_mon_command(cluster_, cmd, 1, inbuf.data(), inbuf.size(), &outbuf, &outlen, &outs, &outslen);
    out.assign(outbuf != nullptr ? outbuf : "", outlen);
    status.assign(outs != nullptr ? outs : "", outslen);
    rados_buffer_free(outbuf);
    rados_buffer_free(outs);
    return rc;
  }

  bool write_read(const std::string& pool) {
    rados_ioctx_t io = nullptr;
    int rc = rados_ioctx_create(cluster_, pool.c_str(), &io);
    if (rc < 0) return fail("rados_ioctx_create " + pool, rc);
    const std::string oid = "rdmagate-ceph-probe." + std::to_string(getpid());
    const std::string data = "rdmagate-ceph-probe " + std::to_string(now_s());
    bool ok = false;
    if ((rc = rados_write_full(io, oid.c_str(), data.data(), data.size())) < 0) {
      fail("rados_write_full " + pool + "/" + oid, rc);
    } else {
      std::string back(data.size() + 16, '\0');
      rc = rados_read(io, oid.c_str(), back.data(), back.size(), 0);
      if (rc < 0) {
        fail("rados_read " + pool + "/" + oid, rc);
      } else if (back.substr(0, static_cast<size_t>(rc)) != data) {
        error = "read of " + pool + "/" + oid + " returned other bytes than written";
      } else if ((rc = rados_remove(io, oid.c_str())) < 0) {
        fail("rados_remove " + pool + "/" + oid, rc);
      } else {
        ok = true;
      }
    }
    rados_ioctx_destroy(io);
    return ok;
  }

  std::string error;

 private:
  bool fail(const std::string& what, int rc) {
    error = what + ": " + err_str(rc);
    return false;
  }

  rados_t cluster_ = nullptr;
};

// Retries `attempt(cluster)` (which sets cluster.error when it fails) on a fresh connection until it returns
// true or the deadline passes. A failed connect counts as a failed attempt.
template <typename F>
int retry_until(const Options& o, double deadline, const std::string& what, F attempt) {
  std::string last = "no attempt made";
  int tries = 0;
  for (double left = deadline - now_s(); left > 0; left = deadline - now_s()) {
    ++tries;
    {
      Cluster c;
      const double t0 = now_s();
      if (c.connect(o, left) && attempt(c)) {
        if (o.verbose)
          std::fprintf(stderr, "rdmagate-ceph-probe: %s: try %d ok in %.2f s\n", what.c_str(), tries,
                       now_s() - t0);
        return 0;
      }
      last = c.error;
      if (o.verbose)
        std::fprintf(stderr, "rdmagate-ceph-probe: %s: try %d failed after %.2f s: %s\n", what.c_str(), tries,
                     now_s() - t0, last.c_str());
    }
    if (deadline - now_s() <= 0.2) break;
    usleep(200 * 1000);
  }
  std::fprintf(stderr, "rdmagate-ceph-probe: %s: gave up after %d tries in %.1f s: %s\n", what.c_str(), tries,
               o.timeout_s, last.c_str());
  return 1;
}

int create_pool(const Options& o, double deadline, const std::string& pool) {
  const std::string create = "{\"prefix\":\"osd pool create\",\"pool\":" + json_str(pool) +
                             ",\"pg_num\":" + std::to_string(o.pg_num) +
                             ",\"pgp_num\":" + std::to_string(o.pg_num) + ",\"pool_type\":\"replicated\"}";
  const std::string app = "{\"prefix\":\"osd pool application enable\",\"pool\":" + json_str(pool) +
                          ",\"app\":\"rados\",\"yes_i_really_mean_it\":true}";
  return retry_until(o, deadline, "create-pool " + pool, [&](Cluster& c) {
    for (const std::string* cmd : {&create, &app}) {
      std::string out, status;
      const int rc = c.mon_command(*cmd, "", out, status);
      if (rc < 0 && rc != -EEXIST) {
        c.error = *cmd + ": " + err_str(rc) + " " + status;
        return false;
      }
    }
    return true;
  });
}

int wait_write(const Options& o, double deadline, const std::string& pool) {
  return retry_until(o, deadline, "wait-write " + pool, [&](Cluster& c) { return c.write_read(pool); });
}

int mon_command(const Options& o, double deadline, const std::string& json, const std::string& infile) {
  std::string inbuf;
  if (!infile.empty()) {
    std::ifstream in(infile, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "rdmagate-ceph-probe: cannot read %s\n", infile.c_str());
      return 1;
    }
    inbuf.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // Only a failed connect is retried: a command the mon answered with an error is the answer.
  int rc = 0;
  std::string out, status;
  if (retry_until(o, deadline, "mon-command", [&](Cluster& c) {
        rc = c.mon_command(json, inbuf, out, status);
        return true;
      }) != 0)
    return 1;
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (!out.empty() && out.back() != '\n') std::fputc('\n', stdout);
  if (!status.empty()) std::fprintf(stderr, "%s\n", status.c_str());
  if (rc < 0) {
    std::fprintf(stderr, "rdmagate-ceph-probe: mon-command %s: %s\n", json.c_str(), err_str(rc).c_str());
    return 1;
  }
  return 0;
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--conf" && has_value) {
      o.conf = argv[++i];
    } else if ((a == "--name" || a == "-n") && has_value) {
      o.name = argv[++i];
    } else if (a == "--id" && has_value) {
      o.name = std::string("client.") + argv[++i];
    } else if (a == "--keyring" && has_value) {
      o.keyring = argv[++i];
    } else if (a == "--timeout" && has_value) {
      char* end = nullptr;
      o.timeout_s = std::strtod(argv[++i], &end);
      if (*end != '\0' || !(o.timeout_s > 0)) return false;
    } else if (a == "--pg-num" && has_value) {
      o.pg_num = std::atoi(argv[++i]);
      if (o.pg_num <= 0) return false;
    } else if (a == "-v" || a == "--verbose") {
      o.verbose = true;
    } else if (a == "-h" || a == "--help") {
      return false;
    } else if (a.starts_with("--")) {
      return false;
    } else {
      o.args.push_back(a);
    }
  }
  return !o.conf.empty() && !o.args.empty();
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  // The last resort against a librados call that ignores its own timeouts: SIGALRM's default action ends
  // the process, so a caller waiting on it never hangs.
  alarm(static_cast<unsigned>(o.timeout_s) + 15);
  const double deadline = now_s() + o.timeout_s;
  const std::string& cmd = o.args[0];
  if (cmd == "create-pool" && o.args.size() == 2) return create_pool(o, deadline, o.args[1]);
  if (cmd == "wait-write" && o.args.size() == 2) return wait_write(o, deadline, o.args[1]);
  if (cmd == "mon-command" && (o.args.size() == 2 || o.args.size() == 3))
    return mon_command(o, deadline, o.args[1], o.args.size() == 3 ? o.args[2] : "");
  std::fputs(kUsage, stderr);
  return 2;
}
