#include "kernels/indexing.h"

#include "kernels/embedding.h"
#include "kernels/nn_op_checks.h"
#include "kernels/reduction.h"

namespace fathom {
namespace {
using namespace nn_checks;

// x as (outer, n, inner) around `dim`, moved to (n, outer * inner) rows: the embedding table layout.
struct Rows {
  int64_t outer = 1, n = 0, inner = 1;
  Rows(const Tensor& x, int64_t dim) : n(x.size(dim)) {
    for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
    for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  }
  Tensor table(const Tensor& x) const {
    return x.reshape({outer, n, inner}).transpose(0, 1).contiguous().reshape({n, outer * inner});
  }
  // (m, outer * inner) rows back to x's layout with m entries along dim.
  Tensor untable(const Tensor& rows, const Tensor& like, int64_t dim) const {
    const int64_t m = rows.size(0);
    Shape shape = like.sizes();
    shape[dim] = m;
    return rows.reshape({m, outer, inner}).transpose(0, 1).contiguous().reshape(shape);
  }
};

void check_indices(const Tensor& x, int64_t dim, const Tensor& indices, const char* op) {
  require_defined(indices, op, "indices");
  FATHOM_CHECK(indices.dim() == 1 && (indices.dtype() == DType::I64 || indices.dtype() == DType::I32), op,
               ": indices must be a 1-D i64 or i32 tensor, got ", indices.str());
  check_same_device(indices, x, op);
  if (!indices.device().is_cpu()) return;  // device indices are range-checked by the embedding kernel
  const std::vector<int64_t> values = indices.to_vector<int64_t>();
  for (size_t j = 0; j < values.size(); ++j)
    FATHOM_CHECK(values[j] >= 0 && values[j] < x.size(dim), op, ": index ", values[j], " at position ", j,
                 " is out of range for dim ", dim, " of size ", x.size(dim), " (shape ", shape_str(x.sizes()), ")");
}

int64_t checked_dim(const Tensor& x, int64_t dim, const char* op) {
  require_floating(x, op, "x");
  FATHOM_CHECK(x.dim() > 0, op, ": needs a tensor of at least one dim, got a 0-d tensor");
  return normalize_dim(dim, x.dim(), op);
}

}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& indices) {
  const char* op = "index_select";
  dim = checked_dim(x, dim, op);
  check_indices(x, dim, indices, op);
  const Rows rows(x, dim);
  return rows.untable(embedding(indices, rows.table(x)), x, dim);
}

Tensor index_add(const Tensor& base, int64_t dim, const Tensor& indices, const Tensor& source) {
  const char* op = "index_add";
  dim = checked_dim(base, dim, op);
  check_indices(base, dim, indices, op);
  require_dtype(source, base.dtype(), op, "source", base);
  check_same_device(source, base, op);
  Shape expected = base.sizes();
  expected[dim] = indices.numel();
  FATHOM_CHECK(source.sizes() == expected, op, ": source must have shape ", shape_str(expected),
               " (base's, with dim ", dim, " the number of indices), got ", shape_str(source.sizes()));
  const Rows rows(base, dim);
  const Tensor table = rows.table(base).clone();  // a fresh contiguous (n, outer * inner) accumulator
  embedding_backward_into(table, Rows(source, dim).table(source), indices, /*accumulate=*/true);
  return rows.untable(table, base, dim);
}

Tensor repeat_interleave(const Tensor& x, int64_t repeats, int64_t dim) {
  const char* op = "repeat_interleave";
  dim = checked_dim(x, dim, op);
  FATHOM_CHECK(repeats >= 1, op, ": repeats must be >= 1, got ", repeats);
  Shape expanded = x.sizes(), merged = x.sizes();
  expanded.insert(expanded.begin() + dim + 1, repeats);
  merged[dim] *= repeats;
  return x.unsqueeze(dim + 1).expand(expanded).reshape(merged);
}

}  // namespace fathom
