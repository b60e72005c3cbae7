#include "parallel/compressed_allreduce.h"

#include <cmath>
#include <cstring>

#include "core/error.h"

namespace fathom::parallel {
namespace {
constexpr int64_t kBits = 32;

// |x|₂ / √n in f64, rounded to f32 once (every rank must agree on the rounding of its own scale
// only, which it then sends).
float scale_of(const float* x, int64_t n) {
  double squares = 0;
  for (int64_t i = 0; i < n; ++i) squares += static_cast<double>(x[i]) * x[i];
  return static_cast<float>(std::sqrt(squares / static_cast<double>(n)));
}

// error = x - scale·sign(x), in place of x's copy; returns the packed signs of x.
Tensor compress(const float* x, int64_t n, float scale, float* error) {
  Tensor words = Tensor::zeros({n / kBits}, DType::I32);
  auto* w = static_cast<uint32_t*>(words.raw_data());
  for (int64_t i = 0; i < n; ++i) {
    const bool positive = x[i] >= 0.0f;
    if (positive) w[i / kBits] |= uint32_t{1} << (i % kBits);
    error[i] = x[i] - (positive ? scale : -scale);
  }
  return words;
}
// Every rank's scale, in rank order.
Tensor gather_scales(Communicator& comm, float scale) {
  Tensor scales = Tensor::empty({comm.size()});
  comm.all_gather(Tensor::full({1}, scale), scales);
  return scales;
}
}  // namespace

int64_t compressed_length(int64_t numel, int world) {
  FATHOM_CHECK(numel >= 0 && world >= 1, "compressed all-reduce: bad size ", numel, " over ", world, " ranks");
  const int64_t unit = kBits * world;
  return std::max<int64_t>(unit, (numel + unit - 1) / unit * unit);
}

CompressionErrors CompressionErrors::zeros(int64_t numel, int world) {
  const int64_t length = compressed_length(numel, world);
  return {Tensor::zeros({length}), Tensor::zeros({length / world})};
}

Tensor pack_signs(const Tensor& x) {
  FATHOM_CHECK(x.dtype() == DType::F32 && x.is_contiguous() && x.numel() % kBits == 0,
               "pack_signs: expected contiguous f32 of a multiple of 32 elements, got ", x.str());
  const Tensor host = x.to(kCPU);
  std::vector<float> scratch(static_cast<size_t>(x.numel()));
  return compress(static_cast<const float*>(host.raw_data()), x.numel(), 0.0f, scratch.data());
}

void unpack_signs(const Tensor& words, float scale, float* out, int64_t count) {
  FATHOM_CHECK(words.dtype() == DType::I32 && words.numel() * kBits >= count, "unpack_signs: ", words.str(),
               " holds fewer than ", count, " signs");
  const auto* w = static_cast<const uint32_t*>(words.raw_data());
  for (int64_t i = 0; i < count; ++i) out[i] = (w[i / kBits] >> (i % kBits)) & 1u ? scale : -scale;
}

void compressed_all_reduce(Communicator& comm, const Tensor& buffer, CompressionErrors& errors) {
  FATHOM_CHECK(buffer.dtype() == DType::F32 && buffer.is_contiguous(),
               "compressed all-reduce: the buffer must be contiguous f32, got ", buffer.str());
  const int n = comm.size();
  const int64_t length = compressed_length(buffer.numel(), n), chunk = length / n;
  FATHOM_CHECK(errors.worker.numel() == length && errors.server.numel() == chunk,
               "compressed all-reduce: error buffers of ", errors.worker.numel(), " and ", errors.server.numel(),
               " elements for a buffer of ", buffer.numel(), " over ", n, " ranks (need ", length, " and ", chunk,
               "); make them with CompressionErrors::zeros");
  float* worker_error = static_cast<float*>(errors.worker.raw_data());
  float* server_error = static_cast<float*>(errors.server.raw_data());

  // Worker: compensate, compress, keep the error.
  std::vector<float> x(static_cast<size_t>(length), 0.0f);
  const Tensor host = buffer.to(kCPU);
  std::memcpy(x.data(), host.raw_data(), static_cast<size_t>(buffer.numel()) * sizeof(float));
  for (int64_t i = 0; i < length; ++i) x[i] += worker_error[i];
  const float worker_scale = scale_of(x.data(), length);
  const Tensor signs = compress(x.data(), length, worker_scale, worker_error);

  // Phase 1: my chunk of every rank's signs, and every rank's scale.
  Tensor received = Tensor::empty({length / kBits}, DType::I32);
  comm.all_to_all(signs, received);
  const Tensor scales = gather_scales(comm, worker_scale);

  // Server: average my chunk, compensate, compress again.
  std::vector<float> y(static_cast<size_t>(chunk), 0.0f), decoded(static_cast<size_t>(chunk));
  const auto* rank_scales = static_cast<const float*>(scales.raw_data());
  for (int r = 0; r < n; ++r) {
    unpack_signs(received.narrow(0, r * chunk / kBits, chunk / kBits), rank_scales[r] / static_cast<float>(n),
                 decoded.data(), chunk);
    for (int64_t i = 0; i < chunk; ++i) y[i] += decoded[i];
  }
  for (int64_t i = 0; i < chunk; ++i) y[i] += server_error[i];
  const float server_scale = scale_of(y.data(), chunk);
  const Tensor server_signs = compress(y.data(), chunk, server_scale, server_error);

  // Phase 2: every chunk's signs and scale to everyone.
  Tensor all_signs = Tensor::empty({length / kBits}, DType::I32);
  comm.all_gather(server_signs, all_signs);
  const Tensor server_scales = gather_scales(comm, server_scale);
  const auto* chunk_scales = static_cast<const float*>(server_scales.raw_data());
  Tensor result = Tensor::empty({length});
  auto* out = static_cast<float*>(result.raw_data());
  for (int r = 0; r < n; ++r)
    unpack_signs(all_signs.narrow(0, r * chunk / kBits, chunk / kBits), chunk_scales[r], out + r * chunk, chunk);
  buffer.copy_(result.narrow(0, 0, buffer.numel()).reshape(buffer.sizes()).to(buffer.device()));
}

}  // namespace fathom::parallel
