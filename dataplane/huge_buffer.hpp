// Memory the engine registers once: EAL heap (rte_malloc) or a memzone, on a given NUMA socket; or, without
// EAL, anonymous mmap memory.
//
// With hugepages this is hugepage-backed and, in IOVA-as-VA mode, one virtually contiguous region, so one
// ibv_reg_mr covers it. Without hugepages (--no-huge) it still works, on 4 KiB pages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

struct rte_memzone;

namespace rdmagate::dataplane {

enum class HugeBufferKind : uint8_t {
  kMalloc = 1,   // rte_zmalloc_socket: EAL heap
  kMemzone = 2,  // rte_memzone_reserve_aligned: a named zone, visible in memzone dumps
  kHeap = 3,     // the C++ heap, no EAL: host tests of the core loop (never registered with a real device)
  kAnonymous = 4,  // mmap, no EAL: 2 MiB hugepages when the system has some free (MAP_HUGETLB), else 4 KiB
                   // pages (the client's no-EAL modes; registered with ibv_reg_mr like any memory)
};

class HugeBuffer {
 public:
  HugeBuffer() = default;
  ~HugeBuffer() { reset(); }
  HugeBuffer(HugeBuffer&& other) noexcept;
  HugeBuffer& operator=(HugeBuffer&& other) noexcept;
  HugeBuffer(const HugeBuffer&) = delete;
  HugeBuffer& operator=(const HugeBuffer&) = delete;

  // Allocates `bytes` zeroed bytes aligned to `align` (a power of two; 0 means the cache line) on
  // `socket` (-1: any). EAL must be initialised, except for kHeap and kAnonymous (page-aligned; `align` up to
  // the page size). On failure returns an empty buffer and fills *error.
  // `name` is the memzone name (unique per process; empty: generated); unused for kMalloc.
  static HugeBuffer allocate(size_t bytes, int socket, size_t align, std::string* error,
                             HugeBufferKind kind = HugeBufferKind::kMalloc, const std::string& name = {});

  void reset();  // frees; safe on an empty buffer and more than once

  explicit operator bool() const { return data_ != nullptr; }
  void* data() const { return data_; }
  uint8_t* bytes() const { return static_cast<uint8_t*>(data_); }
  size_t size() const { return size_; }
  int socket() const { return socket_; }
  HugeBufferKind kind() const { return kind_; }
  uint64_t page_size() const { return page_size_; }           // of the memseg list the buffer lives in
  bool hugepage_backed() const { return page_size_ > 4096; }  // false under --no-huge
  uint64_t iova() const { return iova_; }                     // of the first byte

 private:
  void* data_{nullptr};
  size_t size_{0};
  int socket_{-1};
  HugeBufferKind kind_{HugeBufferKind::kMalloc};
  const rte_memzone* zone_{nullptr};
  uint64_t page_size_{0};
  uint64_t iova_{0};
  size_t align_{0};  // kHeap: what the aligned delete needs
};

}  // namespace rdmagate::dataplane
