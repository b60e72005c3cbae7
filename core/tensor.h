#pragma once
// Tensor: a cheap handle to (a view of) a Storage — sizes, strides, offset, dtype, device.
//
// Copying a Tensor copies the handle, never the data. View operations (view, transpose,
// permute, narrow, select, expand, squeeze, unsqueeze) return tensors that share storage;
// reshape and contiguous copy only when the layout demands it. Tensors carry no autograd
// state: that lives in autograd::Variable, one layer up.

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/memory_stats.h"
#include "core/shape.h"
#include "core/storage.h"

namespace fathom {

class Tensor {
 public:
  Tensor() = default;  // undefined tensor; defined() is false

  // --- factories (memory is charged to MemoryTagScope::current()) ---
  static Tensor empty(const Shape& sizes, DType dtype = DType::F32, Device device = kCPU);
  static Tensor zeros(const Shape& sizes, DType dtype = DType::F32, Device device = kCPU);
  static Tensor ones(const Shape& sizes, DType dtype = DType::F32, Device device = kCPU);
  static Tensor full(const Shape& sizes, double value, DType dtype = DType::F32, Device device = kCPU);
  // 0, 1, ..., n-1
  static Tensor arange(int64_t n, DType dtype = DType::F32, Device device = kCPU);
  // A CPU tensor holding `values` (converted to `dtype` when given), shaped `sizes`
  // (default: 1-D).
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, Shape sizes = {});
  static Tensor scalar(double value, DType dtype = DType::F32, Device device = kCPU);
  // A tensor over existing storage.
  Tensor(std::shared_ptr<Storage> storage, Shape sizes, Strides strides, int64_t offset, DType dtype);

  // --- metadata ---
  bool defined() const { return storage_ != nullptr; }
  int64_t dim() const { return static_cast<int64_t>(sizes_.size()); }
  const Shape& sizes() const { return sizes_; }
  const Strides& strides() const { return strides_; }
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t offset() const { return offset_; }  // in elements
  int64_t numel() const { return shape_numel(sizes_); }
  DType dtype() const { return dtype_; }
  Device device() const;
  size_t element_size() const { return fathom::element_size(dtype_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  bool shares_storage(const Tensor& other) const { return storage_ && storage_ == other.storage_; }
  std::string str() const;  // "Tensor[f32, cpu, [2, 3]]"

  // --- data access (CPU or device pointer; checks the dtype) ---
  void* raw_data() const;
  template <typename T>
  T* data() const {
    FATHOM_CHECK(dtype_ == dtype_of<T>, "data<", dtype_name(dtype_of<T>), ">() called on a ", dtype_name(dtype_),
                 " tensor");
    return static_cast<T*>(raw_data());
  }
  // The single element of a one-element tensor, converted to double (copied from the device).
  double item() const;
  // All elements in logical (row-major) order, converted to T (copied from the device).
  template <typename T>
  std::vector<T> to_vector() const;

  // --- views: share storage ---
  Tensor view(const Shape& sizes) const;  // -1 infers one dim; needs a compatible layout
  Tensor reshape(const Shape& sizes) const;  // a view when possible, else a contiguous copy
  Tensor flatten() const { return reshape({-1}); }
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;  // transpose of a 2-D tensor
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;  // python-style bounds
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(const Shape& sizes) const;  // -1 keeps a dim; size-1 dims become stride 0
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  // Same data, viewed with new metadata (no checks beyond bounds): for layers that manage layouts.
  Tensor as_strided(const Shape& sizes, const Strides& strides, int64_t offset) const;

  // --- copies ---
  Tensor contiguous() const;  // *this when already contiguous
  Tensor clone() const;       // always a fresh contiguous copy
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  // Writes `src` (broadcast to this shape, converted to this dtype) into this tensor.
  // (const: they change the data, not the handle — like writing through a pointer.)
  const Tensor& copy_(const Tensor& src) const;
  const Tensor& fill_(double value) const;
  const Tensor& zero_() const { return fill_(0.0); }

  // --- in-place write tracking (see Storage) ---
  uint64_t version() const;
  void bump_version() const;

 private:
  std::shared_ptr<Storage> storage_;
  Shape sizes_;
  Strides strides_;
  int64_t offset_ = 0;
  DType dtype_ = DType::F32;
};

std::ostream& operator<<(std::ostream& out, const Tensor& tensor);

// Throws naming `op` and both devices when the tensors are on different devices.
void check_same_device(const Tensor& a, const Tensor& b, const char* op);
// Throws naming `op` and both dtypes.
void check_same_dtype(const Tensor& a, const Tensor& b, const char* op);

}  // namespace fathom
