// PUT, GET (verified) and DELETE of 10 B .. 2 MiB values with the C++ API's synchronous calls (they drive
// progress themselves in the default caller-thread mode). Usage: put_get_delete_cpp GATEWAY_ADDR [PORT]
// A gateway that requires authentication (the shipped config does): set RDMAGATE_PRINCIPAL and
// RDMAGATE_SECRETS_FILE (the gateway's secrets file format, mode 0600).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <rdmagate/client.hpp>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  namespace rg = rdmagate::client;
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s GATEWAY_ADDR [PORT]\n", argv[0]);
    return 2;
  }
  rg::ClientConfig config;
  config.gateways.push_back({argv[1], static_cast<std::uint16_t>(argc > 2 ? std::atoi(argv[2]) : 7471)});
  if (const char* principal = std::getenv("RDMAGATE_PRINCIPAL")) {
    config.principal = principal;
    if (const char* file = std::getenv("RDMAGATE_SECRETS_FILE")) config.secrets_file = file;
  }
  std::string error;
  auto client = rg::Client::create(config, &error);
  if (!client) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  std::vector<unsigned char> value, back(2 << 20);
  for (const std::size_t n : {10u, 4096u, 65537u, 1u << 20, 2u << 20}) {
    const std::string key = "example-cpp-" + std::to_string(n);
    value.resize(n);
    for (std::size_t j = 0; j < n; ++j) value[j] = static_cast<unsigned char>(j * 31 + n);
    rg::Result r = client->put(key, value.data(), n);
    if (r.status == rg::Status::kOk) r = client->get(key, back.data(), back.size());
    if (r.status != rg::Status::kOk) {
      std::fprintf(stderr, "%s: %s\n", key.c_str(), rg::status_name(r.status));
      return 1;
    }
    if (r.size != n || std::memcmp(value.data(), back.data(), n) != 0) {
      std::fprintf(stderr, "%s: GET differs from PUT\n", key.c_str());
      return 1;
    }
    if (client->del(key).status != rg::Status::kOk ||
        client->get(key, back.data(), back.size()).status != rg::Status::kNotFound) {
      std::fprintf(stderr, "%s: DELETE failed\n", key.c_str());
      return 1;
    }
    std::printf("%s: %zu bytes put, read back equal, deleted\n", key.c_str(), n);
  }
  // Memory used in chunked requests stays registered until released; release it before it is freed.
  client->release_buffer(value.data());
  client->release_buffer(back.data());
  return 0;
}
