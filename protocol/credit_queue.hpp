#pragma once
// The three transmit queues of one connection, as index-linked FIFOs over storage the engine owns.
//
// The engine keeps its tx descriptors in a fixed array and names them by index. A descriptor sits
// on at most one queue at a time, so one `next` link per descriptor serves all three queues: the
// links live in a caller-provided span (typically next to the descriptor array), and nothing here
// ever allocates. Every operation is O(1).

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace rdmagate::protocol {

// Which queue a message waits on; also the credit class the credit machine applies to it.
enum class CreditClass : std::uint8_t {
  kRequest = 0,   // "needs-credit": requests; may only use credits above the response reserve
  kReserved = 1,  // "reserved": responses and completions; may dip into the reserve
  kNoop = 2,      // "noop": NOOPs; cost a credit under the reserved rules, but wait behind all data
                  // and go only when credits must go back or for keepalive
};
inline constexpr std::size_t kCreditClassCount = 3;

constexpr std::size_t index_of(CreditClass c) {
  return static_cast<std::size_t>(c);
}

class TxQueues {
 public:
  // Link values. Any other value is the index of the next descriptor on the same queue.
  static constexpr std::uint16_t kEnd = 0xffff;   // queued, and last on its queue
  static constexpr std::uint16_t kIdle = 0xfffe;  // on no queue
  // Descriptor indices must stay clear of the two sentinels.
  static constexpr std::size_t kMaxDescriptors = kIdle;

  // `links` has one entry per tx descriptor (at most kMaxDescriptors); it is overwritten here and
  // must outlive the queues.
  explicit TxQueues(std::span<std::uint16_t> links) noexcept : links_(links.first(clamp_size(links.size()))) {
    for (std::uint16_t& l : links_) l = kIdle;
  }

  TxQueues(const TxQueues&) = delete;
  TxQueues& operator=(const TxQueues&) = delete;

  std::size_t capacity() const { return links_.size(); }
  bool empty(CreditClass q) const { return lists_[index_of(q)].size == 0; }
  std::uint32_t size(CreditClass q) const { return lists_[index_of(q)].size; }
  std::uint32_t total() const { return lists_[0].size + lists_[1].size + lists_[2].size; }
  // Both false for an index out of range, so a corrupt index never reads past the links.
  bool queued(std::uint16_t tx) const { return tx < links_.size() && links_[tx] != kIdle; }
  bool idle(std::uint16_t tx) const { return tx < links_.size() && links_[tx] == kIdle; }

  // Appends `tx` to `q`. Refuses (returns false) an index out of range or already on a queue: both
  // are engine bugs that would otherwise corrupt the lists silently.
  bool push(CreditClass q, std::uint16_t tx) noexcept {
    if (tx >= links_.size() || links_[tx] != kIdle) return false;
    List& l = lists_[index_of(q)];
    links_[tx] = kEnd;
    if (l.size == 0) {
      l.head = tx;
    } else {
      links_[l.tail] = tx;
    }
    l.tail = tx;
    ++l.size;
    return true;
  }

  // Head of `q`, or kEnd when empty.
  std::uint16_t front(CreditClass q) const {
    const List& l = lists_[index_of(q)];
    return l.size == 0 ? kEnd : l.head;
  }

  // Removes and returns the head of `q`, or kEnd when empty.
  std::uint16_t pop(CreditClass q) noexcept {
    List& l = lists_[index_of(q)];
    if (l.size == 0) return kEnd;
    const std::uint16_t tx = l.head;
    l.head = links_[tx];
    links_[tx] = kIdle;
    if (--l.size == 0) l.tail = kEnd;
    return tx;
  }

 private:
  struct List {
    std::uint16_t head = kEnd;
    std::uint16_t tail = kEnd;
    std::uint32_t size = 0;
  };

  static constexpr std::size_t clamp_size(std::size_t n) { return n < kMaxDescriptors ? n : kMaxDescriptors; }

  std::span<std::uint16_t> links_;
  std::array<List, kCreditClassCount> lists_{};
};

}  // namespace rdmagate::protocol
