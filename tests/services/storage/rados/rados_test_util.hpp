// A gateway's storage as the RADOS tests drive it: a cache store over heap memory, a RadosStore in front of
// the fixture cluster (tools/ceph-cluster, its directory in RDMAGATE_CEPH_DIR), and the test thread playing
// a data-plane core that submits ops and pops their completions.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "services/storage/completion_queue.hpp"
#include "services/storage/memory/store.hpp"
#include "services/storage/rados/rados_store.hpp"

namespace rdmagate::storage::rados::test {

// The fixture's DIR/env: KEY=VALUE lines.
inline std::string fixture_value(const std::string& dir, const std::string& key) {
  std::ifstream in(dir + "/env");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("export ", 0) == 0) line = line.substr(7);
    if (line.rfind(key + "=", 0) == 0) {
      std::string v = line.substr(key.size() + 1);
      if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'')) v = v.substr(1, v.size() - 2);
      return v;
    }
  }
  return {};
}

inline std::string fixture_dir() {
  const char* d = std::getenv("RDMAGATE_CEPH_DIR");
  return d != nullptr ? d : "";
}

// Settings for the fixture cluster's restricted client, one pool.
inline RadosSettings fixture_settings(const std::string& dir, std::string ns = {}) {
  RadosSettings s;
  s.conf_file = dir + "/ceph.conf";
  s.client = "client.rdmagate";
  s.keyring = dir + "/client.rdmagate.keyring";
  s.pool = "rdmagate";
  s.ns = std::move(ns);
  s.op_timeout_ms = 5000;
  s.notify_timeout_ms = 1000;
  s.cache_lease_ms = 2000;
  s.cores = 1;
  s.max_requests = 256;
  s.max_value = std::uint64_t{4} << 20;
  return s;
}

struct Gateway {
  std::unique_ptr<std::byte[]> region;
  std::unique_ptr<store::Store> cache;
  std::unique_ptr<RadosStore> rados;

  CoreStorage& core(std::uint32_t i = 0) { return rados->core(i); }
};

inline std::unique_ptr<Gateway> make_gateway(RadosSettings s, std::uint64_t cache_bytes = 64u << 20) {
  auto g = std::make_unique<Gateway>();
  store::StoreConfig sc;
  sc.max_value = s.max_value;
  sc.max_objects = 4096;
  sc.max_cores = s.cores + 1;
  sc.evict = true;
  const std::uint64_t region = cache_bytes + store::Store::metadata_bytes(sc, cache_bytes) + (1u << 20);
  g->region.reset(new std::byte[region]);
  std::string error;
  g->cache = store::Store::create(sc, {g->region.get(), region}, &error);
  if (!g->cache) {
    ADD_FAILURE() << error;
    return nullptr;
  }
  s.cache_core = s.cores;
  g->rados = RadosStore::create(s, *g->cache, &error);
  if (!g->rados) {
    ADD_FAILURE() << error;
    return nullptr;
  }
  return g;
}

// Waits until the backend is ready (connected, watch registered, a probe write committed).
inline bool wait_ready(RadosStore& r, std::chrono::seconds limit = std::chrono::seconds(30)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (r.health() == Health::kReady) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// The completion of the one op pending with `tag`, popped as the owning core would.
inline Completion wait_completion(CoreStorage& s, std::uint64_t tag,
                                  std::chrono::seconds limit = std::chrono::seconds(60)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  Completion c[8];
  while (std::chrono::steady_clock::now() < end) {
    const std::uint32_t n = s.completions()->pop_burst_st({c, 8});
    if (n > 1) ADD_FAILURE() << "more than one completion pending";
    if (n >= 1) {
      EXPECT_EQ(c[0].tag, tag);
      return c[0];
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  ADD_FAILURE() << "no completion for tag " << tag;
  return Completion{tag, {}, Status::kPending};
}

// Synchronous views of the asynchronous ops. get() returns the status and fills *value on kOk.
inline Status put(CoreStorage& s, std::string_view key, const std::vector<std::byte>& v, std::uint64_t tag) {
  const Status st = s.put(key, v, tag);
  return st == Status::kPending ? wait_completion(s, tag).status : st;
}

// A PUT the way a chunked request makes it: reserve, fill (the NIC's READ), commit.
inline Status put_reserved(CoreStorage& s, std::string_view key, const std::vector<std::byte>& v,
                           std::uint64_t tag) {
  Lease l;
  const Status st = s.reserve(key, v.size(), tag, &l);
  if (st != Status::kOk) return st;
  EXPECT_EQ(l.size, v.size());
  if (!v.empty()) std::memcpy(l.data, v.data(), v.size());
  const Status c = s.commit(&l, tag);
  return c == Status::kPending ? wait_completion(s, tag).status : c;
}

inline Status get(CoreStorage& s, const Namespace& ns, std::string_view key, std::vector<std::byte>* value,
                  std::uint64_t tag) {
  Lease l;
  Status st = s.get(ns, key, tag, &l);
  if (st == Status::kPending) {
    const Completion c = wait_completion(s, tag);
    st = c.status;
    l = c.lease;
  }
  if (st == Status::kOk) {
    value->assign(l.data, l.data + l.size);
    s.release(&l);
  } else {
    value->clear();
    EXPECT_EQ(l.token, Lease::kNoToken) << "a lease came with status " << status_name(st);
  }
  return st;
}
inline Status get(CoreStorage& s, std::string_view key, std::vector<std::byte>* value, std::uint64_t tag) {
  return get(s, Namespace{}, key, value, tag);
}

inline Status remove(CoreStorage& s, std::string_view key, std::uint64_t tag) {
  const Status st = s.remove(key, tag);
  return st == Status::kPending ? wait_completion(s, tag).status : st;
}

}  // namespace rdmagate::storage::rados::test
