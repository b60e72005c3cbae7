#include "core/shape_ops.h"

#include "core/copy.h"

namespace fathom {

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  FATHOM_CHECK(!tensors.empty(), "cat: expected at least one tensor");
  const Tensor& first = tensors.front();
  dim = normalize_dim(dim, first.dim(), "cat");
  FATHOM_CHECK(first.dim() > 0, "cat: cannot concatenate 0-d tensors; use stack()");
  Shape out_shape = first.sizes();
  out_shape[dim] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    check_same_device(first, t, "cat");
    check_same_dtype(first, t, "cat");
    bool compatible = t.dim() == first.dim();
    for (int64_t d = 0; compatible && d < t.dim(); ++d) compatible = d == dim || t.size(d) == first.size(d);
    FATHOM_CHECK(compatible, "cat: tensor ", i, " has shape ", shape_str(t.sizes()), " but tensor 0 has shape ",
                 shape_str(first.sizes()), "; all dims except dim ", dim, " must match");
    out_shape[dim] += t.size(dim);
  }
  Tensor out = Tensor::empty(out_shape, first.dtype(), first.device());
  int64_t at = 0;
  for (const Tensor& t : tensors) {
    copy_into(out.narrow(dim, at, t.size(dim)), t);
    at += t.size(dim);
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  FATHOM_CHECK(!tensors.empty(), "stack: expected at least one tensor");
  dim = normalize_dim(dim, tensors.front().dim() + 1, "stack");
  std::vector<Tensor> expanded;
  expanded.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    FATHOM_CHECK(tensors[i].sizes() == tensors.front().sizes(), "stack: tensor ", i, " has shape ",
                 shape_str(tensors[i].sizes()), " but tensor 0 has shape ", shape_str(tensors.front().sizes()));
    expanded.push_back(tensors[i].unsqueeze(dim));
  }
  return cat(expanded, dim);
}

std::vector<Tensor> split_with_sizes(const Tensor& tensor, const std::vector<int64_t>& sizes, int64_t dim) {
  dim = normalize_dim(dim, tensor.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    FATHOM_CHECK(s >= 0, "split: negative size in ", shape_str(sizes));
    total += s;
  }
  FATHOM_CHECK(total == tensor.size(dim), "split: sizes ", shape_str(sizes), " add up to ", total, " but dim ", dim,
               " of ", shape_str(tensor.sizes()), " has size ", tensor.size(dim));
  std::vector<Tensor> parts;
  int64_t at = 0;
  for (int64_t s : sizes) {
    parts.push_back(tensor.narrow(dim, at, s));
    at += s;
  }
  return parts;
}

std::vector<Tensor> split(const Tensor& tensor, int64_t split_size, int64_t dim) {
  FATHOM_CHECK(split_size > 0, "split: split_size must be positive, got ", split_size);
  dim = normalize_dim(dim, tensor.dim(), "split");
  std::vector<int64_t> sizes;
  for (int64_t at = 0; at < tensor.size(dim); at += split_size) sizes.push_back(std::min(split_size, tensor.size(dim) - at));
  if (sizes.empty()) sizes.push_back(0);
  return split_with_sizes(tensor, sizes, dim);
}

std::vector<Tensor> chunk(const Tensor& tensor, int64_t chunks, int64_t dim) {
  FATHOM_CHECK(chunks > 0, "chunk: number of chunks must be positive, got ", chunks);
  dim = normalize_dim(dim, tensor.dim(), "chunk");
  const int64_t size = tensor.size(dim);
  return split(tensor, std::max<int64_t>(1, (size + chunks - 1) / chunks), dim);
}

}  // namespace fathom
