#pragma once
// The four orderings a polled mlx5 data path needs between the CPU and the NIC, with the instructions
// rdma-core's providers use for them (util/udma_barrier.h: not an installed header, so named again here).
//
//   to_device()     WQEs and their doorbell record are in memory before anything that lets the NIC read them
//                   (the doorbell record update, the doorbell write).           x86: compiler  arm64: dmb
//                   oshst
//   from_device()   a CQE's contents are read only after its owner bit said the NIC wrote it.
//                                                                               x86: lfence    arm64: dmb
//                                                                               oshld
//   wc_start()      the doorbell record store (write-back memory) is ordered before the doorbell store to the
//                   write-combining UAR page, which x86 may otherwise let pass it. x86: sfence  arm64: dsb st
//   flush_writes()  the doorbell leaves the CPU's write-combining buffer now, and is not merged with the next
//                   one (a later doorbell must not overtake it).               x86: sfence    arm64: dsb st

namespace rdmagate::dataplane::mlx5 {

#if defined(__x86_64__)
inline void to_device() noexcept {
  asm volatile("" ::: "memory");
}
inline void from_device() noexcept {
  asm volatile("lfence" ::: "memory");
}
inline void flush_writes() noexcept {
  asm volatile("sfence" ::: "memory");
}
#elif defined(__aarch64__)
inline void to_device() noexcept {
  asm volatile("dmb oshst" ::: "memory");
}
inline void from_device() noexcept {
  asm volatile("dmb oshld" ::: "memory");
}
inline void flush_writes() noexcept {
  asm volatile("dsb st" ::: "memory");
}
#else
#error "mlx5 backend: no DMA barriers for this architecture (add them from rdma-core's util/udma_barrier.h)"
#endif
inline void wc_start() noexcept {
  flush_writes();
}

}  // namespace rdmagate::dataplane::mlx5
