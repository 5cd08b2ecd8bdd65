#include "dataplane/huge_buffer.hpp"

#include <rte_errno.h>
#include <rte_malloc.h>
#include <rte_memory.h>
#include <rte_memzone.h>

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <utility>

namespace rdmagate::dataplane {
namespace {
std::atomic<unsigned> g_zone_seq{0};

bool is_pow2(size_t v) { return v != 0 && (v & (v - 1)) == 0; }
}  // namespace

HugeBuffer::HugeBuffer(HugeBuffer&& other) noexcept { *this = std::move(other); }

HugeBuffer& HugeBuffer::operator=(HugeBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    socket_ = std::exchange(other.socket_, -1);
    kind_ = other.kind_;
    zone_ = std::exchange(other.zone_, nullptr);
    page_size_ = std::exchange(other.page_size_, 0);
    iova_ = std::exchange(other.iova_, 0);
    align_ = std::exchange(other.align_, 0);
  }
  return *this;
}

HugeBuffer HugeBuffer::allocate(size_t bytes, int socket, size_t align, std::string* error, HugeBufferKind kind,
                                const std::string& name) {
  HugeBuffer b;
  auto fail = [&](const std::string& what) {
    if (error) *error = what;
    return HugeBuffer{};
  };
  if (bytes == 0) return fail("huge buffer: zero size requested");
  if (align == 0) align = RTE_CACHE_LINE_SIZE;
  if (!is_pow2(align)) return fail("huge buffer: alignment " + std::to_string(align) + " is not a power of two");
  if (align > UINT32_MAX) return fail("huge buffer: alignment too large");

  b.kind_ = kind;
  if (kind == HugeBufferKind::kHeap) {
    b.data_ = ::operator new(bytes, std::align_val_t{align}, std::nothrow);
    if (b.data_ == nullptr) return fail("huge buffer: heap allocation of " + std::to_string(bytes) + " bytes failed");
    std::memset(b.data_, 0, bytes);
    b.size_ = bytes;
    b.socket_ = socket;
    b.align_ = align;
    return b;
  }
  if (kind == HugeBufferKind::kAnonymous) {
    const long pg = sysconf(_SC_PAGESIZE);
    const size_t page = pg > 0 ? static_cast<size_t>(pg) : 4096;
    if (align > page) return fail("huge buffer: anonymous memory is aligned to the page, not " + std::to_string(align));
    // Hugepages only for whole 2 MiB pages (the mapping's length must be a multiple); MAP_HUGETLB fails at
    // once when none are reserved, and the 4 KiB mapping is the fallback. Both come zeroed.
    constexpr size_t kHuge = 2u << 20;
    if (bytes % kHuge == 0) {
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
      if (p != MAP_FAILED) {
        b.data_ = p;
        b.page_size_ = kHuge;
      }
    }
    if (b.data_ == nullptr) {
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) {
        return fail("huge buffer: mmap of " + std::to_string(bytes) + " bytes failed: " + std::strerror(errno));
      }
      b.data_ = p;
      b.page_size_ = page;
    }
    b.size_ = bytes;
    b.socket_ = socket;
    return b;
  }
  if (kind == HugeBufferKind::kMalloc) {
    rte_errno = 0;
    b.data_ = rte_zmalloc_socket("rdmagate_buf", bytes, static_cast<unsigned>(align), socket);
    if (b.data_ == nullptr) {
      char msg[200];
      std::snprintf(msg, sizeof(msg), "huge buffer: rte_zmalloc_socket(%zu bytes, align %zu, socket %d) failed: %s",
                    bytes, align, socket, rte_errno ? rte_strerror(rte_errno) : "out of eal heap memory");
      return fail(msg);
    }
  } else {
    std::string zname = name;
    if (zname.empty()) zname = "rg_buf_" + std::to_string(g_zone_seq.fetch_add(1));
    if (zname.size() >= RTE_MEMZONE_NAMESIZE) return fail("huge buffer: memzone name '" + zname + "' is too long");
    rte_errno = 0;
    b.zone_ = rte_memzone_reserve_aligned(zname.c_str(), bytes, socket, 0, static_cast<unsigned>(align));
    if (b.zone_ == nullptr) {
      char msg[220];
      std::snprintf(msg, sizeof(msg), "huge buffer: rte_memzone_reserve_aligned(%s, %zu bytes, socket %d) failed: %s",
                    zname.c_str(), bytes, socket, rte_strerror(rte_errno));
      return fail(msg);
    }
    b.data_ = b.zone_->addr;
    std::memset(b.data_, 0, bytes);
  }
  b.size_ = bytes;
  const rte_memseg_list* msl = rte_mem_virt2memseg_list(b.data_);
  b.page_size_ = msl ? msl->page_sz : 0;
  b.socket_ = msl ? msl->socket_id : socket;
  b.iova_ = kind == HugeBufferKind::kMemzone ? b.zone_->iova : rte_malloc_virt2iova(b.data_);
  return b;
}

void HugeBuffer::reset() {
  if (zone_ != nullptr) {
    const int ret = rte_memzone_free(zone_);
    if (ret != 0) std::fprintf(stderr, "rdmagate: memzone free failed: %s\n", rte_strerror(-ret));
    zone_ = nullptr;
  } else if (data_ != nullptr && kind_ == HugeBufferKind::kHeap) {
    ::operator delete(data_, std::align_val_t{align_});
  } else if (data_ != nullptr && kind_ == HugeBufferKind::kAnonymous) {
    if (munmap(data_, size_) != 0) std::fprintf(stderr, "rdmagate: munmap: %s\n", std::strerror(errno));
  } else if (data_ != nullptr) {
    rte_free(data_);
  }
  data_ = nullptr;
  size_ = 0;
  page_size_ = 0;
  iova_ = 0;
}

}  // namespace rdmagate::dataplane
