// The installed C++ API, loaded and called without a gateway: rdmagate::client::Client::create refuses a
// configuration without a gateway and says so; status_name binds to the library's versioned symbol.
#include <cstdio>
#include <rdmagate/client.hpp>
#include <string>
#include <string_view>

int main() {
  namespace rc = rdmagate::client;
  const std::string_view name = rc::status_name(rc::Status::kNotFound);
  if (name != "not_found") {
    std::fprintf(stderr, "status_name(kNotFound) = \"%.*s\", want \"not_found\"\n",
                 static_cast<int>(name.size()), name.data());
    return 1;
  }
  rc::ClientConfig config;
  std::string error;
  auto client = rc::Client::create(config, &error);
  if (client != nullptr || error.find("gateway") == std::string::npos) {
    std::fprintf(stderr,
                 "Client::create without a gateway: %s, \"%s\"; want nullptr and an error naming it\n",
                 client ? "a client" : "nullptr", error.c_str());
    return 1;
  }
  std::printf("smoke_cpp: %.*s; %s\n", static_cast<int>(name.size()), name.data(), error.c_str());
  return 0;
}
