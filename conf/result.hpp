#pragma once

#include <cstdio>
#include <cstdlib>
#include <utility>
#include <variant>
#include <vector>

#include "conf/error.hpp"

namespace rdmagate::conf {

// C++20 has no std::expected. This is the subset the loader needs: a value, or every error found. The
// error side is a list because the loader reports all problems in one pass instead of stopping at the
// first, so an operator fixes a file in one edit.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(std::vector<ConfigError> errors)                                // NOLINT: implicit by design
      : state_(std::in_place_index<1>, std::move(errors)) {
    // A failure without a reason would print nothing and exit non-zero: never useful.
    if (std::get<1>(state_).empty()) misuse("Result constructed from an empty error list");
  }

  bool ok() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  // Preconditions: ok() for value(), !ok() for errors(). Breaking them is a programming error, so it
  // aborts with a message rather than throwing out of the library.
  T& value() & {
    if (!ok()) misuse("value() called on a failed Result");
    return *std::get_if<0>(&state_);
  }
  const T& value() const& {
    if (!ok()) misuse("value() called on a failed Result");
    return *std::get_if<0>(&state_);
  }
  T&& value() && {
    if (!ok()) misuse("value() called on a failed Result");
    return std::move(*std::get_if<0>(&state_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const std::vector<ConfigError>& errors() const& {
    if (ok()) misuse("errors() called on a successful Result");
    return *std::get_if<1>(&state_);
  }

 private:
  [[noreturn]] static void misuse(const char* what) noexcept {
    std::fprintf(stderr, "rdmagate::conf::Result: %s\n", what);
    std::abort();
  }

  std::variant<T, std::vector<ConfigError>> state_;
};

}  // namespace rdmagate::conf
