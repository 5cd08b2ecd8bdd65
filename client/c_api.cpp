// The C API (include/rdmagate/client.h) over client::Client. Every entry point catches at the boundary: no
// C++ exception reaches a C caller (std::bad_alloc becomes RDMAGATE_NO_MEMORY, anything else
// RDMAGATE_INTERNAL). The data path (put/get/delete and their callbacks) allocates nothing: async
// callbacks go through records from a fixed pool sized like the C++ client's descriptor pool.
#include <arpa/inet.h>

#include <atomic>
#include <charconv>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "client.hpp"
#include "include/rdmagate/client.h"

namespace {

namespace cl = rdmagate::client;

// The C codes are the C++ ones, number for number (the header promises it).
static_assert(RDMAGATE_OK == static_cast<int>(cl::Status::kOk));
static_assert(RDMAGATE_NOT_FOUND == static_cast<int>(cl::Status::kNotFound));
static_assert(RDMAGATE_TOO_LARGE == static_cast<int>(cl::Status::kTooLarge));
static_assert(RDMAGATE_NO_SPACE == static_cast<int>(cl::Status::kNoSpace));
static_assert(RDMAGATE_BAD_REQUEST == static_cast<int>(cl::Status::kBadRequest));
static_assert(RDMAGATE_TOO_SMALL == static_cast<int>(cl::Status::kTooSmall));
static_assert(RDMAGATE_NO_RESOURCES == static_cast<int>(cl::Status::kNoResources));
static_assert(RDMAGATE_BULK_FAILED == static_cast<int>(cl::Status::kBulkFailed));
static_assert(RDMAGATE_CONNECTION_LOST == static_cast<int>(cl::Status::kConnectionLost));
static_assert(RDMAGATE_UNAVAILABLE == static_cast<int>(cl::Status::kUnavailable));
static_assert(RDMAGATE_TIMEOUT == static_cast<int>(cl::Status::kTimeout));
static_assert(RDMAGATE_BUSY == static_cast<int>(cl::Status::kBusy));
static_assert(RDMAGATE_REGISTRATION == static_cast<int>(cl::Status::kRegistration));
static_assert(RDMAGATE_SHUTDOWN == static_cast<int>(cl::Status::kShutdown));
static_assert(RDMAGATE_PROTOCOL == static_cast<int>(cl::Status::kProtocol));
static_assert(RDMAGATE_STORE_UNAVAILABLE == static_cast<int>(cl::Status::kStoreUnavailable));
static_assert(RDMAGATE_CORRUPT == static_cast<int>(cl::Status::kCorrupt));
static_assert(RDMAGATE_AUTH_REQUIRED == static_cast<int>(cl::Status::kAuthRequired));
static_assert(RDMAGATE_AUTH_DENIED == static_cast<int>(cl::Status::kAuthDenied));
static_assert(RDMAGATE_AUTH_CONNECTION_LIMIT == static_cast<int>(cl::Status::kAuthConnectionLimit));
static_assert(RDMAGATE_AUTH_GATEWAY_UNPROVEN == static_cast<int>(cl::Status::kAuthGatewayUnproven));
static_assert(RDMAGATE_FORBIDDEN == static_cast<int>(cl::Status::kForbidden));
static_assert(RDMAGATE_QUOTA_EXCEEDED == static_cast<int>(cl::Status::kQuotaExceeded));
static_assert(RDMAGATE_PROGRESS_CALLER == static_cast<int>(cl::Progress::kCaller));
static_assert(RDMAGATE_PROGRESS_THREAD == static_cast<int>(cl::Progress::kThread));
static_assert(RDMAGATE_PROGRESS_EAL_LCORES == static_cast<int>(cl::Progress::kEalLcores));

constexpr int kLastClientStatus = RDMAGATE_QUOTA_EXCEEDED;

int to_c(cl::Status s) {
  return static_cast<int>(s);
}

// Runs f() and turns an escaping exception into a status.
template <typename F>
int guarded(F&& f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return RDMAGATE_NO_MEMORY;
  } catch (...) {
    return RDMAGATE_INTERNAL;
  }
}

void copy_error(char* buf, std::size_t len, std::string_view msg) {
  if (buf == nullptr || len == 0) return;
  const std::size_t n = std::min(len - 1, msg.size());
  std::memcpy(buf, msg.data(), n);
  buf[n] = '\0';
}

bool parse_uint(std::string_view text, std::uint64_t max, std::uint64_t* out) {
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty() || v > max) return false;
  *out = v;
  return true;
}

// "hex:" and 32..128 hex digits (the secrets file's notation) -> bytes.
bool parse_hex_secret(std::string_view v, std::vector<std::uint8_t>* out) {
  if (v.substr(0, 4) != "hex:") return false;
  v.remove_prefix(4);
  if (v.size() < 32 || v.size() > 128 || v.size() % 2 != 0) return false;
  out->clear();
  for (std::size_t i = 0; i < v.size(); i += 2) {
    std::uint8_t b = 0;
    const auto [end, ec] = std::from_chars(v.data() + i, v.data() + i + 2, b, 16);
    if (ec != std::errc() || end != v.data() + i + 2) return false;
    out->push_back(b);
  }
  return true;
}

bool valid_ip_literal(const std::string& address) {
  unsigned char scratch[sizeof(in6_addr)];
  return inet_pton(AF_INET, address.c_str(), scratch) == 1 ||
         inet_pton(AF_INET6, address.c_str(), scratch) == 1;
}

// Completion records: the C++ callback carries one pointer, the C one a function and an argument. A record
// is taken at submission and given back before the C callback runs (so the callback may submit again). The
// free list is a spinlock-guarded stack: callbacks run on a progress thread or lcore, which must not sleep.
struct Completion {
  rdmagate_callback cb = nullptr;
  void* arg = nullptr;
  struct CompletionPool* pool = nullptr;
};

struct CompletionPool {
  std::vector<Completion> records;
  std::vector<Completion*> free;
  std::atomic_flag lock = ATOMIC_FLAG_INIT;

  explicit CompletionPool(std::size_t n) : records(n) {
    free.reserve(n);
    for (auto& r : records) {
      r.pool = this;
      free.push_back(&r);
    }
  }
  Completion* take(rdmagate_callback cb, void* arg) {
    while (lock.test_and_set(std::memory_order_acquire)) {
    }
    Completion* r = nullptr;
    if (!free.empty()) {
      r = free.back();
      free.pop_back();
    }
    lock.clear(std::memory_order_release);
    if (r != nullptr) {
      r->cb = cb;
      r->arg = arg;
    }
    return r;
  }
  void give(Completion* r) {
    while (lock.test_and_set(std::memory_order_acquire)) {
    }
    free.push_back(r);  // never reallocates: reserved for every record
    lock.clear(std::memory_order_release);
  }
};

void on_complete(void* arg, const cl::Result& result) {
  auto* r = static_cast<Completion*>(arg);
  const rdmagate_callback cb = r->cb;
  void* const user = r->arg;
  r->pool->give(r);
  cb(user, to_c(result.status), result.size);
}

}  // namespace

struct rdmagate_config {
  cl::ClientConfig config;
  std::string error;

  int fail(std::string msg) {
    error = std::move(msg);
    return RDMAGATE_INVALID_ARGUMENT;
  }
};

struct rdmagate_client {
  // Declared first, destroyed last: the client's destructor completes what is in flight (kShutdown) through
  // records of this pool.
  std::unique_ptr<CompletionPool> completions;
  std::unique_ptr<cl::Client> client;
};

namespace {

// Takes a record, submits, and gives the record back when the submission was refused (callback never runs).
template <typename Submit>
int submit_async(rdmagate_client* client, rdmagate_callback callback, void* arg, Submit&& submit) {
  if (client == nullptr || callback == nullptr) return RDMAGATE_INVALID_ARGUMENT;
  return guarded([&]() -> int {
    Completion* r = client->completions->take(callback, arg);
    if (r == nullptr) return RDMAGATE_BUSY;
    const cl::Status s = submit(r);
    if (s != cl::Status::kOk) client->completions->give(r);
    return to_c(s);
  });
}

}  // namespace

extern "C" {

const char* rdmagate_strerror(int status) {
  switch (status) {
    case RDMAGATE_OK:
      return "success";
    case RDMAGATE_NOT_FOUND:
      return "no such key";
    case RDMAGATE_TOO_LARGE:
      return "value larger than the gateway's maximum value size";
    case RDMAGATE_NO_SPACE:
      return "the gateway's store is full";
    case RDMAGATE_BAD_REQUEST:
      return "request refused as malformed (key length must be 1..250 bytes)";
    case RDMAGATE_TOO_SMALL:
      return "buffer too small for the value";
    case RDMAGATE_NO_RESOURCES:
      return "the gateway did not start the request (draining or busy); retry";
    case RDMAGATE_BULK_FAILED:
      return "the gateway could not RDMA READ/WRITE the buffer";
    case RDMAGATE_CONNECTION_LOST:
      return "connection lost before the answer; outcome unknown";
    case RDMAGATE_UNAVAILABLE:
      return "no connection to the key's gateway";
    case RDMAGATE_TIMEOUT:
      return "no answer within the request timeout";
    case RDMAGATE_BUSY:
      return "busy: too many requests in flight, or work pending (progress first)";
    case RDMAGATE_REGISTRATION:
      return "the buffer could not be registered with the RDMA device";
    case RDMAGATE_SHUTDOWN:
      return "the client is shutting down";
    case RDMAGATE_PROTOCOL:
      return "the gateway's answer does not follow the protocol";
    case RDMAGATE_STORE_UNAVAILABLE:
      return "the gateway's backing store did not answer in time; retry";
    case RDMAGATE_CORRUPT:
      return "the stored value is damaged (checksum mismatch)";
    case RDMAGATE_AUTH_REQUIRED:
      return "the gateway requires authentication and no credentials are configured";
    case RDMAGATE_AUTH_DENIED:
      return "the gateway denied authentication (unknown principal or wrong secret)";
    case RDMAGATE_AUTH_CONNECTION_LIMIT:
      return "the principal holds its maximum number of connections; retry later";
    case RDMAGATE_AUTH_GATEWAY_UNPROVEN:
      return "the gateway failed to prove the shared secret";
    case RDMAGATE_FORBIDDEN:
      return "the principal lacks the permission for this operation";
    case RDMAGATE_QUOTA_EXCEEDED:
      return "the tenant's quota would be exceeded";
    case RDMAGATE_INVALID_ARGUMENT:
      return "invalid argument";
    case RDMAGATE_SETUP_FAILED:
      return "client setup failed";
    case RDMAGATE_NO_MEMORY:
      return "out of memory";
    case RDMAGATE_INTERNAL:
      return "internal error in the rdmagate client library";
    default:
      return "unknown rdmagate status";
  }
}

const char* rdmagate_status_name(int status) {
  switch (status) {
    case RDMAGATE_INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case RDMAGATE_SETUP_FAILED:
      return "SETUP_FAILED";
    case RDMAGATE_NO_MEMORY:
      return "NO_MEMORY";
    case RDMAGATE_INTERNAL:
      return "INTERNAL";
    default:
      break;
  }
  static constexpr const char* kNames[] = {"OK",
                                           "NOT_FOUND",
                                           "TOO_LARGE",
                                           "NO_SPACE",
                                           "BAD_REQUEST",
                                           "TOO_SMALL",
                                           "NO_RESOURCES",
                                           "BULK_FAILED",
                                           "CONNECTION_LOST",
                                           "UNAVAILABLE",
                                           "TIMEOUT",
                                           "BUSY",
                                           "REGISTRATION",
                                           "SHUTDOWN",
                                           "PROTOCOL",
                                           "STORE_UNAVAILABLE",
                                           "CORRUPT",
                                           "AUTH_REQUIRED",
                                           "AUTH_DENIED",
                                           "AUTH_CONNECTION_LIMIT",
                                           "AUTH_GATEWAY_UNPROVEN",
                                           "FORBIDDEN",
                                           "QUOTA_EXCEEDED"};
  static_assert(std::size(kNames) == kLastClientStatus + 1);
  return status >= 0 && status <= kLastClientStatus ? kNames[status] : "UNKNOWN";
}

rdmagate_config* rdmagate_config_new(void) {
  return new (std::nothrow) rdmagate_config();
}

void rdmagate_config_free(rdmagate_config* config) {
  delete config;
}

int rdmagate_config_add_gateway(rdmagate_config* config, const char* address, uint16_t port) {
  if (config == nullptr) return RDMAGATE_INVALID_ARGUMENT;
  return guarded([&]() -> int {
    if (address == nullptr) return config->fail("rdmagate_config_add_gateway: address is NULL");
    cl::Endpoint e;
    e.address = address;
    if (!valid_ip_literal(e.address)) {
      return config->fail("rdmagate_config_add_gateway: \"" + e.address +
                          "\" is not an IPv4 or IPv6 literal");
    }
    if (port != 0) e.port = port;
    config->config.gateways.push_back(std::move(e));
    return RDMAGATE_OK;
  });
}

int rdmagate_config_set_progress(rdmagate_config* config, int mode) {
  if (config == nullptr) return RDMAGATE_INVALID_ARGUMENT;
  return guarded([&]() -> int {
    if (mode < RDMAGATE_PROGRESS_CALLER || mode > RDMAGATE_PROGRESS_EAL_LCORES) {
      return config->fail("rdmagate_config_set_progress: mode " + std::to_string(mode) + " is not 1..3");
    }
    config->config.progress = static_cast<cl::Progress>(mode);
    return RDMAGATE_OK;
  });
}

int rdmagate_config_set_device(rdmagate_config* config, const char* device) {
  if (config == nullptr) return RDMAGATE_INVALID_ARGUMENT;
  return guarded([&]() -> int {
    if (device == nullptr) return config->fail("rdmagate_config_set_device: device is NULL");
    config->config.device = device;
    return RDMAGATE_OK;
  });
}

int rdmagate_config_set_request_timeout_ms(rdmagate_config* config, uint32_t ms) {
  if (config == nullptr) return RDMAGATE_INVALID_ARGUMENT;
  config->config.request_timeout = std::chrono::milliseconds(ms);
  return RDMAGATE_OK;
}

int rdmagate_config_set(rdmagate_config* config, const char* name, const char* value) {
  if (config == nullptr) return RDMAGATE_INVALID_ARGUMENT;
  return guarded([&]() -> int {
    if (name == nullptr || value == nullptr)
      return config->fail("rdmagate_config_set: name or value is NULL");
    const std::string_view n = name;
    const std::string_view v = value;
    auto c = &config->config;
    const auto bad = [&](std::string_view want) -> int {
      return config->fail("rdmagate_config_set: " + std::string(n) + " = \"" + std::string(v) + "\": want " +
                          std::string(want));
    };
    std::uint64_t u = 0;
    const auto set_uint = [&](auto& field) -> int {
      using T = std::remove_reference_t<decltype(field)>;
      if (!parse_uint(v, std::numeric_limits<T>::max(), &u)) {
        return bad("an unsigned integer up to " + std::to_string(std::numeric_limits<T>::max()));
      }
      field = static_cast<T>(u);
      return RDMAGATE_OK;
    };
    const auto set_ms = [&](std::chrono::milliseconds& field) -> int {
      if (!parse_uint(v, std::numeric_limits<std::uint32_t>::max(), &u))
        return bad("milliseconds, an unsigned integer");
      field = std::chrono::milliseconds(u);
      return RDMAGATE_OK;
    };
    if (n == "gateway") {
      // ADDR, ADDR:PORT or [V6ADDR]:PORT (a bare IPv6 literal has several colons and no port).
      std::string addr(v);
      std::string port_text;
      if (!v.empty() && v.front() == '[') {
        const auto close = v.find(']');
        if (close == std::string_view::npos) return bad("[IPv6]:PORT");
        addr = std::string(v.substr(1, close - 1));
        if (close + 1 < v.size()) {
          if (v[close + 1] != ':') return bad("[IPv6]:PORT");
          port_text = std::string(v.substr(close + 2));
        }
      } else if (v.find(':') != std::string_view::npos && v.find(':') == v.rfind(':')) {
        addr = std::string(v.substr(0, v.find(':')));
        port_text = std::string(v.substr(v.find(':') + 1));
      }
      std::uint64_t port = 0;
      if (!port_text.empty() && (!parse_uint(port_text, 65535, &port) || port == 0))
        return bad("a port 1..65535");
      if (!valid_ip_literal(addr)) return bad("an IPv4 or IPv6 literal, optionally with :PORT");
      return rdmagate_config_add_gateway(config, addr.c_str(), static_cast<std::uint16_t>(port));
    }
    if (n == "progress") {
      if (v == "caller")
        c->progress = cl::Progress::kCaller;
      else if (v == "thread")
        c->progress = cl::Progress::kThread;
      else if (v == "eal_lcores")
        c->progress = cl::Progress::kEalLcores;
      else
        return bad("caller, thread or eal_lcores");
      return RDMAGATE_OK;
    }
    if (n == "device") {
      c->device = v;
      return RDMAGATE_OK;
    }
    if (n == "cores") return set_uint(c->cores);
    if (n == "connections_per_gateway") return set_uint(c->connections_per_gateway);
    if (n == "queue_depth") return set_uint(c->queue_depth);
    if (n == "max_message") return set_uint(c->max_message);
    if (n == "max_inflight_per_conn") return set_uint(c->max_inflight_per_conn);
    if (n == "pool_bytes") return set_uint(c->pool_bytes);
    if (n == "request_timeout_ms") return set_ms(c->request_timeout);
    if (n == "connect_timeout_ms") return set_ms(c->connect_timeout);
    const auto set_bool = [&](bool& field) -> int {
      if (v == "1" || v == "true")
        field = true;
      else if (v == "0" || v == "false")
        field = false;
      else
        return bad("0, 1, false or true");
      return RDMAGATE_OK;
    };
    if (n == "yield_when_idle") return set_bool(c->yield_when_idle);
    if (n == "memory_windows") return set_bool(c->memory_windows);
    if (n == "lcores") {
      std::vector<unsigned> ids;
      std::string_view rest = v;
      while (!rest.empty()) {
        const auto comma = rest.find(',');
        if (!parse_uint(rest.substr(0, comma), std::numeric_limits<unsigned>::max(), &u)) {
          return bad("comma-separated lcore ids");
        }
        ids.push_back(static_cast<unsigned>(u));
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      }
      c->lcores = std::move(ids);
      return RDMAGATE_OK;
    }
    if (n == "eal_arg") {
      c->eal_args.emplace_back(v);
      return RDMAGATE_OK;
    }
    if (n == "principal") {
      c->principal = v;
      return RDMAGATE_OK;
    }
    if (n == "secret") {
      if (!parse_hex_secret(v, &c->secret)) {
        return config->fail("rdmagate_config_set: secret: want \"hex:\" and 32..128 hex digits");
      }
      return RDMAGATE_OK;
    }
    if (n == "secrets_file") {
      c->secrets_file = v;
      return RDMAGATE_OK;
    }
    return config->fail("rdmagate_config_set: unknown option \"" + std::string(n) + "\"");
  });
}

int rdmagate_config_set_credentials(rdmagate_config* config, const char* principal, const void* secret,
                                    size_t secret_len) {
  if (config == nullptr) return RDMAGATE_INVALID_ARGUMENT;
  return guarded([&]() -> int {
    if (principal == nullptr) return config->fail("rdmagate_config_set_credentials: principal is NULL");
    if (secret == nullptr && secret_len != 0)
      return config->fail("rdmagate_config_set_credentials: secret is NULL with a nonzero length");
    config->config.principal = principal;
    const auto* b = static_cast<const std::uint8_t*>(secret);
    config->config.secret.assign(b, b + secret_len);
    return RDMAGATE_OK;
  });
}

const char* rdmagate_config_error(const rdmagate_config* config) {
  return config == nullptr ? "rdmagate_config_error: config is NULL" : config->error.c_str();
}

int rdmagate_client_create(const rdmagate_config* config, rdmagate_client** client, char* errbuf,
                           size_t errlen) {
  copy_error(errbuf, errlen, "");
  if (client == nullptr) {
    copy_error(errbuf, errlen, "rdmagate_client_create: client (the out pointer) is NULL");
    return RDMAGATE_INVALID_ARGUMENT;
  }
  *client = nullptr;
  if (config == nullptr) {
    copy_error(errbuf, errlen, "rdmagate_client_create: config is NULL");
    return RDMAGATE_INVALID_ARGUMENT;
  }
  const int rc = guarded([&]() -> int {
    const cl::ClientConfig& c = config->config;
    if (c.gateways.empty()) {
      copy_error(errbuf, errlen,
                 "rdmagate_client_create: no gateway configured (rdmagate_config_add_gateway)");
      return RDMAGATE_INVALID_ARGUMENT;
    }
    auto out = std::make_unique<rdmagate_client>();
    // As many records as the C++ client has request descriptors: it refuses more with kBusy anyway.
    const std::size_t conns = c.gateways.size() * std::max<std::size_t>(c.connections_per_gateway, c.cores);
    out->completions =
        std::make_unique<CompletionPool>(std::max<std::size_t>(1024, 2 * conns * c.max_inflight_per_conn));
    std::string error;
    out->client = cl::Client::create(c, &error);
    if (!out->client) {
      copy_error(errbuf, errlen, error.empty() ? "rdmagate_client_create: client setup failed" : error);
      return RDMAGATE_SETUP_FAILED;
    }
    *client = out.release();
    return RDMAGATE_OK;
  });
  if (rc == RDMAGATE_NO_MEMORY) copy_error(errbuf, errlen, "rdmagate_client_create: out of memory");
  if (rc == RDMAGATE_INTERNAL) copy_error(errbuf, errlen, "rdmagate_client_create: internal error");
  return rc;
}

void rdmagate_client_destroy(rdmagate_client* client) {
  // The C++ destructor runs the callbacks still pending (kShutdown) and does not throw.
  delete client;
}

int rdmagate_client_wait_connected(rdmagate_client* client, uint32_t timeout_ms) {
  if (client == nullptr) return RDMAGATE_INVALID_ARGUMENT;
  return guarded([&]() -> int {
    if (client->client->wait_connected(std::chrono::milliseconds(timeout_ms))) return RDMAGATE_OK;
    cl::Status why = cl::Status::kOk;
    client->client->auth_error(&why);
    return why != cl::Status::kOk ? to_c(why) : RDMAGATE_UNAVAILABLE;
  });
}

int rdmagate_client_auth_error(const rdmagate_client* client, char* buf, size_t len) {
  if (client == nullptr) return RDMAGATE_INVALID_ARGUMENT;
  return guarded([&]() -> int {
    cl::Status why = cl::Status::kOk;
    copy_error(buf, len, client->client->auth_error(&why));
    return to_c(why);
  });
}

int rdmagate_put(rdmagate_client* client, const void* key, size_t key_len, const void* value, size_t size) {
  if (client == nullptr || (key == nullptr && key_len > 0)) return RDMAGATE_INVALID_ARGUMENT;
  return guarded([&]() -> int {
    return to_c(client->client->put({static_cast<const char*>(key), key_len}, value, size).status);
  });
}

int rdmagate_get(rdmagate_client* client, const void* key, size_t key_len, void* buffer, size_t capacity,
                 uint64_t* size) {
  if (client == nullptr || (key == nullptr && key_len > 0)) return RDMAGATE_INVALID_ARGUMENT;
  return guarded([&]() -> int {
    const cl::Result r = client->client->get({static_cast<const char*>(key), key_len}, buffer, capacity);
    if (size != nullptr) *size = r.size;
    return to_c(r.status);
  });
}

int rdmagate_delete(rdmagate_client* client, const void* key, size_t key_len) {
  if (client == nullptr || (key == nullptr && key_len > 0)) return RDMAGATE_INVALID_ARGUMENT;
  return guarded([&]() -> int {
    return to_c(client->client->del({static_cast<const char*>(key), key_len}).status);
  });
}

int rdmagate_put_async(rdmagate_client* client, const void* key, size_t key_len, const void* value,
                       size_t size, rdmagate_callback callback, void* arg) {
  if (key == nullptr && key_len > 0) return RDMAGATE_INVALID_ARGUMENT;
  return submit_async(client, callback, arg, [&](Completion* r) {
    return client->client->put_async({static_cast<const char*>(key), key_len}, value, size, on_complete, r);
  });
}

int rdmagate_get_async(rdmagate_client* client, const void* key, size_t key_len, void* buffer,
                       size_t capacity, rdmagate_callback callback, void* arg) {
  if (key == nullptr && key_len > 0) return RDMAGATE_INVALID_ARGUMENT;
  return submit_async(client, callback, arg, [&](Completion* r) {
    return client->client->get_async({static_cast<const char*>(key), key_len}, buffer, capacity, on_complete,
                                     r);
  });
}

int rdmagate_delete_async(rdmagate_client* client, const void* key, size_t key_len,
                          rdmagate_callback callback, void* arg) {
  if (key == nullptr && key_len > 0) return RDMAGATE_INVALID_ARGUMENT;
  return submit_async(client, callback, arg, [&](Completion* r) {
    return client->client->del_async({static_cast<const char*>(key), key_len}, on_complete, r);
  });
}

void* rdmagate_buffer_alloc(rdmagate_client* client, size_t bytes) {
  if (client == nullptr) return nullptr;
  try {
    const std::span<std::byte> b = client->client->alloc_buffer(bytes);
    return b.empty() ? nullptr : b.data();
  } catch (...) {
    return nullptr;
  }
}

void rdmagate_buffer_free(rdmagate_client* client, void* buffer, size_t bytes) {
  if (client == nullptr || buffer == nullptr) return;
  try {
    client->client->free_buffer({static_cast<std::byte*>(buffer), bytes});
  } catch (...) {
    // free_buffer only returns memory to the pool; nothing a C caller could act on.
  }
}

void rdmagate_buffer_release(rdmagate_client* client, const void* data) {
  if (client == nullptr || data == nullptr) return;
  try {
    client->client->release_buffer(data);
  } catch (...) {
    // Deregistration failing leaves the range registered until the client's end: still correct.
  }
}

unsigned rdmagate_progress(rdmagate_client* client) {
  if (client == nullptr) return 0;
  try {
    return client->client->progress();
  } catch (...) {
    return 0;
  }
}

int rdmagate_event_fd(const rdmagate_client* client) {
  if (client == nullptr) return -1;
  try {
    return client->client->event_fd();
  } catch (...) {
    return -1;
  }
}

int rdmagate_arm(rdmagate_client* client) {
  if (client == nullptr) return RDMAGATE_INVALID_ARGUMENT;
  return guarded([&]() -> int { return to_c(client->client->arm()); });
}

int rdmagate_client_stats(const rdmagate_client* client, rdmagate_stats* stats) {
  if (client == nullptr || stats == nullptr || stats->struct_size < sizeof(stats->struct_size)) {
    return RDMAGATE_INVALID_ARGUMENT;
  }
  return guarded([&]() -> int {
    const cl::ClientStats s = client->client->stats();
    rdmagate_stats full{};
    full.submitted = s.submitted;
    full.completed = s.completed;
    full.timeouts = s.timeouts;
    full.connection_lost = s.connection_lost;
    full.busy = s.busy;
    full.reconnects = s.reconnects;
    full.registrations = s.registrations;
    full.connections_up = s.connections_up;
    full.auth_ok = s.auth_ok;
    full.auth_failures = s.auth_failures;
    full.window_requests = s.window_requests;
    full.unscoped_requests = s.unscoped_requests;
    // An older caller's smaller struct gets the prefix it knows; a newer caller's larger one keeps its tail.
    const std::size_t n = std::min(stats->struct_size, sizeof(full));
    full.struct_size = n;
    std::memcpy(stats, &full, n);
    return RDMAGATE_OK;
  });
}

}  // extern "C"
