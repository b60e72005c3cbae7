#include "parallel/collective_signature.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace fathom::parallel {

bool comm_debug_enabled() {
  const char* value = std::getenv("FATHOM_COMM_DEBUG");
  return value && *value && std::strcmp(value, "0") != 0;
}

CollectiveSignature signature_of(const Collective& c) {
  CollectiveSignature s;
  s.sequence = c.sequence;
  s.kind = static_cast<int32_t>(c.kind);
  s.op = static_cast<int32_t>(c.op);
  s.root = c.root;
  const Tensor& payload = c.input.defined() ? c.input : c.output;
  s.dtype = payload.defined() ? static_cast<int32_t>(payload.dtype()) : -1;
  switch (c.kind) {
    case CollectiveKind::AllGatherV:
    case CollectiveKind::ReduceScatterV: {
      uint64_t hash = 1469598103934665603ull;  // FNV-1a over the counts
      for (int64_t count : c.counts) {
        s.elements += count;
        hash = (hash ^ static_cast<uint64_t>(count)) * 1099511628211ull;
      }
      s.counts_hash = hash;
      break;
    }
    case CollectiveKind::Barrier: break;
    default: s.elements = payload.numel();
  }
  return s;
}

namespace {
std::string describe(const CollectiveSignature& s) {
  const auto kind = static_cast<CollectiveKind>(s.kind);
  std::string out = detail::concat(collective_name(kind), " #", s.sequence);
  if (kind == CollectiveKind::Barrier) return out;
  out += " (";
  if (kind == CollectiveKind::AllReduce || kind == CollectiveKind::ReduceScatter ||
      kind == CollectiveKind::ReduceScatterV)
    out += detail::concat(reduce_op_name(static_cast<ReduceOp>(s.op)), ", ");
  out += detail::concat(dtype_name(static_cast<DType>(s.dtype)), ", ", s.elements, " elements");
  if (kind == CollectiveKind::AllGatherV || kind == CollectiveKind::ReduceScatterV)
    out += detail::concat(", counts hash ", s.counts_hash);
  if (kind == CollectiveKind::Broadcast) out += detail::concat(", root ", s.root);
  return out + ")";
}

bool same(const CollectiveSignature& a, const CollectiveSignature& b) {
  return a.sequence == b.sequence && a.elements == b.elements && a.counts_hash == b.counts_hash &&
         a.kind == b.kind && a.op == b.op && a.dtype == b.dtype && a.root == b.root;
}
}  // namespace

std::string find_mismatch(const std::vector<CollectiveSignature>& by_rank, const std::string& communicator) {
  for (size_t r = 1; r < by_rank.size(); ++r) {
    if (same(by_rank[0], by_rank[r])) continue;
    return detail::concat("collective mismatch on communicator ", communicator, ": rank 0 issued ",
                          describe(by_rank[0]), " but rank ", r, " issued ", describe(by_rank[r]),
                          "; every rank must issue the same collectives in the same order");
  }
  return "";
}

}  // namespace fathom::parallel
