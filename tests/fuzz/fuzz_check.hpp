#pragma once
// The fuzz targets' invariant check: a violation aborts, so libFuzzer records the input as a crash.

#include <cstdio>
#include <cstdlib>

#define RDMAGATE_FUZZ_CHECK(cond)                                                               \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      std::fprintf(stderr, "fuzz invariant violated: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                             \
    }                                                                                           \
  } while (0)
