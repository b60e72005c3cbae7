#pragma once
// nccl-tests' bandwidth definitions (https://github.com/NVIDIA/nccl-tests, doc/PERFORMANCE.md):
//   algbw = S / t, S being the collective's size in bytes:
//     all_reduce, broadcast: the buffer (every rank's in-place tensor);
//     reduce_scatter: the whole input array, recvcount * sizeof(type) * n;
//     all_gather: the whole output array, sendcount * sizeof(type) * n.
//   busbw = algbw * factor, the factor turning algbw into the per-rank link speed a perfect
//   algorithm would need, comparable across rank counts:
//     all_reduce 2(n-1)/n, reduce_scatter and all_gather (n-1)/n, broadcast 1.

namespace fathom::bench {

enum class CollectiveOp { AllReduce, ReduceScatter, AllGather, Broadcast };

inline double bus_factor(CollectiveOp op, int ranks) {
  const double n = ranks;
  switch (op) {
    case CollectiveOp::AllReduce: return 2.0 * (n - 1) / n;
    case CollectiveOp::ReduceScatter:
    case CollectiveOp::AllGather: return (n - 1) / n;
    case CollectiveOp::Broadcast: return 1.0;
  }
  return 1.0;
}

// GB/s (1e9 bytes per second), as nccl-tests prints them.
inline double algbw_gbps(double bytes, double seconds) { return bytes / seconds / 1e9; }
inline double busbw_gbps(CollectiveOp op, int ranks, double bytes, double seconds) {
  return algbw_gbps(bytes, seconds) * bus_factor(op, ranks);
}

}  // namespace fathom::bench
