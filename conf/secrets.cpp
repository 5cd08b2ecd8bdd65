#include "conf/secrets.hpp"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace rdmagate::conf {
namespace {

constexpr std::string_view kHexPrefix = "hex:";

int hexValue(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "hex:" and an even number of hex digits for kMinSecretBytes..kMaxSecretBytes bytes.
bool decodeSecret(std::string_view text, std::vector<std::uint8_t>* out) {
  if (text.substr(0, kHexPrefix.size()) != kHexPrefix) return false;
  const std::string_view digits = text.substr(kHexPrefix.size());
  if (digits.size() % 2 != 0 || digits.size() < 2 * kMinSecretBytes || digits.size() > 2 * kMaxSecretBytes) {
    return false;
  }
  std::vector<std::uint8_t> bytes(digits.size() / 2);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const int hi = hexValue(digits[2 * i]);
    const int lo = hexValue(digits[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      OPENSSL_cleanse(bytes.data(), bytes.size());
      return false;
    }
    bytes[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  *out = std::move(bytes);
  return true;
}

std::string at(std::string_view source, const YAML::Mark& m) {
  std::string s(source);
  if (m.line >= 0) s += ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
  return s;
}

// Wipes a text buffer that held the file before it is freed.
struct WipedText {
  std::string text;
  ~WipedText() { OPENSSL_cleanse(text.data(), text.size()); }
};

}  // namespace

bool validAuthName(std::string_view name) noexcept {
  if (name.empty() || name.size() > kMaxAuthNameBytes) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '@' || c == '-';
  });
}

Secrets::Secrets(std::vector<PrincipalSecret> entries) : entries_(std::move(entries)) {
  std::sort(entries_.begin(), entries_.end(),
            [](const PrincipalSecret& a, const PrincipalSecret& b) { return a.principal < b.principal; });
}

Secrets& Secrets::operator=(Secrets&& other) noexcept {
  if (this != &other) {
    wipe();
    entries_ = std::move(other.entries_);
  }
  return *this;
}

Secrets::~Secrets() {
  wipe();
}

void Secrets::wipe() noexcept {
  for (PrincipalSecret& e : entries_) OPENSSL_cleanse(e.secret.data(), e.secret.size());
}

const PrincipalSecret* Secrets::find(std::string_view principal) const noexcept {
  const auto it = std::lower_bound(
      entries_.begin(), entries_.end(), principal,
      [](const PrincipalSecret& e, std::string_view n) { return std::string_view(e.principal) < n; });
  if (it == entries_.end() || it->principal != principal) return nullptr;
  return &*it;
}

std::optional<Secrets> parseSecrets(std::string_view text, std::string_view source, std::string* error) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    // yaml-cpp's messages name the construct, never the text around it.
    *error = at(source, e.mark) + ": invalid YAML: " + e.msg;
    return std::nullopt;
  }
  if (!root.IsMap() || root.size() != 1 || !root["secrets"]) {
    *error = std::string(source) + ": expected one mapping, secrets: {principal: \"hex:...\"}";
    return std::nullopt;
  }
  const YAML::Node map = root["secrets"];
  if (map.IsNull()) return Secrets{};
  if (!map.IsMap()) {
    *error =
        at(source, map.Mark()) + ": secrets: expected a mapping of principal names to \"hex:...\" secrets";
    return std::nullopt;
  }
  std::vector<PrincipalSecret> entries;
  for (auto it = map.begin(); it != map.end(); ++it) {
    const YAML::Mark mark = it->first.Mark();
    if (!it->first.IsScalar() || !validAuthName(it->first.Scalar())) {
      *error = at(source, mark) + ": secrets: a principal name is 1 to 64 characters of A-Z a-z 0-9 . _ @ -";
      return std::nullopt;
    }
    const std::string name = it->first.Scalar();
    const bool repeated = std::any_of(entries.begin(), entries.end(),
                                      [&](const PrincipalSecret& e) { return e.principal == name; });
    if (repeated) {
      *error = at(source, mark) + ": secrets." + name + ": listed twice";
      return std::nullopt;
    }
    PrincipalSecret e{name, {}};
    if (!it->second.IsScalar() || !decodeSecret(it->second.Scalar(), &e.secret)) {
      *error = at(source, mark) + ": secrets." + name +
               ": expected \"hex:\" and 32 to 128 hex digits (16 to " +
               "64 bytes), e.g. the output of openssl rand -hex 32";
      return std::nullopt;
    }
    entries.push_back(std::move(e));
  }
  return Secrets(std::move(entries));
}

bool secretsOwnerAllowed(unsigned owner, unsigned reader) noexcept {
  return owner == reader || owner == 0;
}

std::optional<Secrets> loadSecretsFile(const std::string& path, std::string* error) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; a FIFO is then refused as not a regular file.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    *error = "security.secrets_file: cannot open " + path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    *error = "security.secrets_file: cannot stat " + path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) {
    *error = "security.secrets_file: " + path + " is not a regular file";
    return std::nullopt;
  }
  const uid_t me = ::geteuid();
  if (!secretsOwnerAllowed(st.st_uid, me)) {
    *error = "security.secrets_file: " + path + " is owned by uid " + std::to_string(st.st_uid) +
             ", neither this process's user (uid " + std::to_string(me) +
             ") nor root, and its owner could rewrite the secrets; run chown " + std::to_string(me) + " " +
             path;
    return std::nullopt;
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    *error = "security.secrets_file: " + path + " has mode " + mode +
             ", which grants the group or others access to the secrets; run chmod 600 " + path;
    return std::nullopt;
  }
  if (st.st_size > static_cast<off_t>(kMaxSecretsFileBytes)) {
    *error = "security.secrets_file: " + path + " is " + std::to_string(st.st_size) + " bytes; at most " +
             std::to_string(kMaxSecretsFileBytes);
    return std::nullopt;
  }
  WipedText buf;
  buf.text.resize(kMaxSecretsFileBytes + 1);
  std::size_t have = 0;
  while (have < buf.text.size()) {
    const ssize_t n = ::read(fd, buf.text.data() + have, buf.text.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = "security.secrets_file: cannot read " + path + ": " + std::strerror(errno);
      return std::nullopt;
    }
    if (n == 0) break;
    have += static_cast<std::size_t>(n);
  }
  if (have > kMaxSecretsFileBytes) {
    *error = "security.secrets_file: " + path + " is larger than " + std::to_string(kMaxSecretsFileBytes) +
             " bytes";
    return std::nullopt;
  }
  std::string parse_error;
  std::optional<Secrets> s = parseSecrets(std::string_view(buf.text.data(), have), path, &parse_error);
  if (!s) *error = "security.secrets_file: " + parse_error;
  return s;
}

}  // namespace rdmagate::conf
