#include "core/tensor.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <sstream>

#include "core/copy.h"

namespace fathom {

namespace {
Shape infer_size(const Shape& sizes, int64_t numel, const char* op) {
  Shape out = sizes;
  int64_t known = 1;
  int infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      FATHOM_CHECK(infer_at < 0, op, ": only one dimension can be -1, got ", shape_str(sizes));
      infer_at = static_cast<int>(i);
    } else {
      FATHOM_CHECK(out[i] >= 0, op, ": invalid size ", out[i], " in ", shape_str(sizes));
      known *= out[i];
    }
  }
  if (infer_at >= 0) {
    FATHOM_CHECK(known != 0 && numel % known == 0, op, ": shape ", shape_str(sizes), " is invalid for ", numel,
                 " elements");
    out[infer_at] = numel / known;
  }
  FATHOM_CHECK(shape_numel(out) == numel, op, ": shape ", shape_str(sizes), " is invalid for ", numel, " elements");
  return out;
}

// Strides for viewing (sizes, strides) as `target` without a copy, or empty when impossible.
// Dimensions are matched in groups whose element counts agree; each old group must be
// contiguous within itself for the view to exist.
std::optional<Strides> view_strides(const Shape& sizes, const Strides& strides, const Shape& target) {
  Strides out(target.size());
  if (shape_numel(sizes) == 0 || sizes.empty()) return contiguous_strides(target);
  int64_t view_d = static_cast<int64_t>(target.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    // A group ends where the next outer dim is not laid out right after this one.
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || target[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= target[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}
}  // namespace

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape sizes, Strides strides, int64_t offset, DType dtype)
    : storage_(std::move(storage)), sizes_(std::move(sizes)), strides_(std::move(strides)), offset_(offset),
      dtype_(dtype) {
  FATHOM_CHECK(sizes_.size() == strides_.size(), "tensor: ", sizes_.size(), " sizes but ", strides_.size(),
               " strides");
}

Tensor Tensor::empty(const Shape& sizes, DType dtype, Device device) {
  for (int64_t s : sizes) FATHOM_CHECK(s >= 0, "empty: negative size in shape ", shape_str(sizes));
  const size_t bytes = static_cast<size_t>(shape_numel(sizes)) * fathom::element_size(dtype);
  auto storage = std::make_shared<Storage>(bytes, device, MemoryTagScope::current());
  return Tensor(std::move(storage), sizes, contiguous_strides(sizes), 0, dtype);
}

Tensor Tensor::full(const Shape& sizes, double value, DType dtype, Device device) {
  Tensor out = empty(sizes, dtype, device);
  fill(out, value);
  return out;
}

Tensor Tensor::zeros(const Shape& sizes, DType dtype, Device device) { return full(sizes, 0.0, dtype, device); }
Tensor Tensor::ones(const Shape& sizes, DType dtype, Device device) { return full(sizes, 1.0, dtype, device); }

Tensor Tensor::scalar(double value, DType dtype, Device device) {
  Tensor host = empty({}, DType::F64, kCPU);
  *host.data<double>() = value;
  if (dtype == DType::F64 && device.is_cpu()) return host;
  return host.to(dtype).to(device);
}

Tensor Tensor::arange(int64_t n, DType dtype, Device device) {
  FATHOM_CHECK(n >= 0, "arange: negative length ", n);
  Tensor host = empty({n}, DType::I64, kCPU);
  std::iota(host.data<int64_t>(), host.data<int64_t>() + n, int64_t{0});
  return host.to(dtype).to(device);
}

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, Shape sizes) {
  if (sizes.empty() && values.size() != 1) sizes = {static_cast<int64_t>(values.size())};
  FATHOM_CHECK(shape_numel(sizes) == static_cast<int64_t>(values.size()), "from_vector: ", values.size(),
               " values do not fill shape ", shape_str(sizes));
  Tensor out = empty(sizes, dtype_of<T>, kCPU);
  std::copy(values.begin(), values.end(), out.data<T>());
  return out;
}
template Tensor Tensor::from_vector(const std::vector<float>&, Shape);
template Tensor Tensor::from_vector(const std::vector<double>&, Shape);
template Tensor Tensor::from_vector(const std::vector<Half>&, Shape);
template Tensor Tensor::from_vector(const std::vector<BFloat16>&, Shape);
template Tensor Tensor::from_vector(const std::vector<int32_t>&, Shape);
template Tensor Tensor::from_vector(const std::vector<int64_t>&, Shape);

int64_t Tensor::size(int64_t dim) const { return sizes_[normalize_dim(dim, this->dim(), "size")]; }
int64_t Tensor::stride(int64_t dim) const { return strides_[normalize_dim(dim, this->dim(), "stride")]; }

Device Tensor::device() const {
  FATHOM_CHECK(defined(), "device() of an undefined tensor");
  return storage_->device();
}

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (sizes_[d] == 1) continue;
    if (strides_[d] != expected) return false;
    expected *= sizes_[d];
  }
  return true;
}

std::string Tensor::str() const {
  if (!defined()) return "Tensor[undefined]";
  return "Tensor[" + std::string(dtype_name(dtype_)) + ", " + device().str() + ", " + shape_str(sizes_) + "]";
}

void* Tensor::raw_data() const {
  FATHOM_CHECK(defined(), "data access on an undefined tensor");
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(element_size());
}

double Tensor::item() const {
  FATHOM_CHECK(numel() == 1, "item(): tensor of shape ", shape_str(sizes_), " has ", numel(),
               " elements, expected exactly one");
  return to_vector<double>()[0];
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  const Tensor host = to(kCPU).to(dtype_of<T>).contiguous();
  const T* begin = host.data<T>();
  return std::vector<T>(begin, begin + host.numel());
}
template std::vector<float> Tensor::to_vector() const;
template std::vector<double> Tensor::to_vector() const;
template std::vector<Half> Tensor::to_vector() const;
template std::vector<BFloat16> Tensor::to_vector() const;
template std::vector<int32_t> Tensor::to_vector() const;
template std::vector<int64_t> Tensor::to_vector() const;

// ----------------------------------------------------------------------------- views

Tensor Tensor::as_strided(const Shape& sizes, const Strides& strides, int64_t offset) const {
  FATHOM_CHECK(defined(), "as_strided on an undefined tensor");
  FATHOM_CHECK(sizes.size() == strides.size(), "as_strided: ", sizes.size(), " sizes but ", strides.size(),
               " strides");
  int64_t lowest = offset, highest = offset;  // element range the view can touch
  for (size_t d = 0; d < sizes.size(); ++d) {
    FATHOM_CHECK(sizes[d] >= 0, "as_strided: negative size in ", shape_str(sizes));
    const int64_t reach = sizes[d] > 0 ? (sizes[d] - 1) * strides[d] : 0;
    (reach < 0 ? lowest : highest) += reach;
  }
  const int64_t capacity = static_cast<int64_t>(storage_->nbytes() / element_size());
  FATHOM_CHECK(shape_numel(sizes) == 0 || (lowest >= 0 && highest < capacity), "as_strided: view ",
               shape_str(sizes), " with strides ", shape_str(strides), " at offset ", offset,
               " reaches outside its storage of ", capacity, " elements");
  return Tensor(storage_, sizes, strides, offset, dtype_);
}

Tensor Tensor::view(const Shape& sizes) const {
  const Shape target = infer_size(sizes, numel(), "view");
  auto strides = view_strides(sizes_, strides_, target);
  FATHOM_CHECK(strides.has_value(), "view: cannot view a tensor of shape ", shape_str(sizes_), " and strides ",
               shape_str(strides_), " as ", shape_str(target),
               " without copying; use reshape() (copies when needed) or contiguous() first");
  return Tensor(storage_, target, *strides, offset_, dtype_);
}

Tensor Tensor::reshape(const Shape& sizes) const {
  const Shape target = infer_size(sizes, numel(), "reshape");
  if (auto strides = view_strides(sizes_, strides_, target)) return Tensor(storage_, target, *strides, offset_, dtype_);
  return contiguous().view(target);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  dim0 = normalize_dim(dim0, dim(), "transpose");
  dim1 = normalize_dim(dim1, dim(), "transpose");
  Tensor out = *this;
  if (dim() == 0) return out;
  std::swap(out.sizes_[dim0], out.sizes_[dim1]);
  std::swap(out.strides_[dim0], out.strides_[dim1]);
  return out;
}

Tensor Tensor::t() const {
  FATHOM_CHECK(dim() == 2, "t(): expected a 2-D tensor, got shape ", shape_str(sizes_));
  return transpose(0, 1);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  FATHOM_CHECK(static_cast<int64_t>(dims.size()) == dim(), "permute: got ", dims.size(), " dims for a tensor of shape ",
               shape_str(sizes_));
  Tensor out = *this;
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = normalize_dim(dims[i], dim(), "permute");
    FATHOM_CHECK(!seen[d], "permute: dim ", dims[i], " appears twice in ", shape_str(dims));
    seen[d] = true;
    out.sizes_[i] = sizes_[d];
    out.strides_[i] = strides_[d];
  }
  return out;
}

Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  dim = normalize_dim(dim, this->dim(), "narrow");
  FATHOM_CHECK(this->dim() > 0, "narrow: cannot narrow a 0-d tensor");
  FATHOM_CHECK(start >= 0 && length >= 0 && start + length <= sizes_[dim], "narrow: range [", start, ", ",
               start + length, ") out of bounds for dim ", dim, " of size ", sizes_[dim]);
  Tensor out = *this;
  out.sizes_[dim] = length;
  out.offset_ += start * strides_[dim];
  return out;
}

Tensor Tensor::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  dim = normalize_dim(dim, this->dim(), "slice");
  FATHOM_CHECK(this->dim() > 0, "slice: cannot slice a 0-d tensor");
  FATHOM_CHECK(step > 0, "slice: step must be positive, got ", step);
  const int64_t size = sizes_[dim];
  auto clamp_index = [size](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size); };
  start = clamp_index(start);
  end = std::max(clamp_index(end), start);
  Tensor out = *this;
  out.sizes_[dim] = (end - start + step - 1) / step;
  out.strides_[dim] *= step;
  out.offset_ += start * strides_[dim];
  return out;
}

Tensor Tensor::select(int64_t dim, int64_t index) const {
  dim = normalize_dim(dim, this->dim(), "select");
  FATHOM_CHECK(this->dim() > 0, "select: cannot select from a 0-d tensor");
  const int64_t size = sizes_[dim];
  FATHOM_CHECK(index >= -size && index < size, "select: index ", index, " out of range for dim ", dim, " of size ",
               size);
  if (index < 0) index += size;
  Tensor out = *this;
  out.offset_ += index * strides_[dim];
  out.sizes_.erase(out.sizes_.begin() + dim);
  out.strides_.erase(out.strides_.begin() + dim);
  return out;
}

Tensor Tensor::expand(const Shape& sizes) const {
  FATHOM_CHECK(sizes.size() >= sizes_.size(), "expand: cannot expand shape ", shape_str(sizes_), " to ",
               shape_str(sizes), " (fewer dims)");
  const size_t lead = sizes.size() - sizes_.size();
  Shape target = sizes;
  for (size_t i = 0; i < sizes_.size(); ++i)
    if (target[lead + i] == -1) target[lead + i] = sizes_[i];
  for (size_t i = 0; i < lead; ++i)
    FATHOM_CHECK(target[i] >= 0, "expand: -1 is not allowed for new leading dims in ", shape_str(sizes));
  Tensor out = *this;
  out.strides_ = broadcast_strides(sizes_, strides_, target);
  out.sizes_ = target;
  return out;
}

Tensor Tensor::squeeze() const {
  Tensor out = *this;
  out.sizes_.clear();
  out.strides_.clear();
  for (int64_t d = 0; d < dim(); ++d) {
    if (sizes_[d] == 1) continue;
    out.sizes_.push_back(sizes_[d]);
    out.strides_.push_back(strides_[d]);
  }
  return out;
}

Tensor Tensor::squeeze(int64_t dim) const {
  if (this->dim() == 0) return *this;
  dim = normalize_dim(dim, this->dim(), "squeeze");
  if (sizes_[dim] != 1) return *this;
  Tensor out = *this;
  out.sizes_.erase(out.sizes_.begin() + dim);
  out.strides_.erase(out.strides_.begin() + dim);
  return out;
}

Tensor Tensor::unsqueeze(int64_t dim) const {
  dim = normalize_dim(dim, this->dim() + 1, "unsqueeze");
  Tensor out = *this;
  const int64_t stride = dim < this->dim() ? strides_[dim] * sizes_[dim] : 1;
  out.sizes_.insert(out.sizes_.begin() + dim, 1);
  out.strides_.insert(out.strides_.begin() + dim, stride);
  return out;
}

// ----------------------------------------------------------------------------- copies

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(sizes_, dtype_, device());
  copy_into(out, *this);
  return out;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return *this;
  Tensor out = empty(sizes_, dtype, device());
  copy_into(out, *this);
  return out;
}

Tensor Tensor::to(Device device) const {
  if (device == this->device()) return *this;
  const Tensor source = this->device().is_cpu() ? contiguous() : *this;
  Tensor out = empty(sizes_, dtype_, device);
  copy_into(out, source);
  return out;
}

const Tensor& Tensor::copy_(const Tensor& src) const {
  copy_into(*this, src);
  bump_version();
  return *this;
}

const Tensor& Tensor::fill_(double value) const {
  fill(*this, value);
  bump_version();
  return *this;
}

uint64_t Tensor::version() const {
  FATHOM_CHECK(defined(), "version() of an undefined tensor");
  return storage_->version();
}

void Tensor::bump_version() const {
  if (storage_) storage_->bump_version();
}

void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  FATHOM_CHECK(a.device() == b.device(), op, ": expected tensors on the same device, got ", a.device().str(),
               " and ", b.device().str());
}

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  FATHOM_CHECK(a.dtype() == b.dtype(), op, ": expected tensors of the same dtype, got ", dtype_name(a.dtype()),
               " and ", dtype_name(b.dtype()), " (convert one with .to(dtype))");
}

}  // namespace fathom
