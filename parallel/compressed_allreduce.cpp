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
  Tensor words = Tensor::empty({n / kBits}, DType::I32);
  auto* w = static_cast<uint32_t*>(words.raw_data());
  for (int64_t word = 0; word < n / kBits; ++word) {  // 32 elements at a time: branch-free, vectorisable
    const float* in = x + word * kBits;
    float* err = error + word * kBits;
    uint32_t bits = 0;
    for (int k = 0; k < kBits; ++k) {
      const bool positive = in[k] >= 0.0f;
      bits |= static_cast<uint32_t>(positive) << k;
      err[k] = in[k] - (positive ? scale : -scale);
    }
    w[word] = bits;
  }
  return words;
}
// Every rank's scales, [rank][buffer].
Tensor gather_scales(Communicator& comm, const std::vector<float>& scales) {
  Tensor all = Tensor::empty({comm.size() * static_cast<int64_t>(scales.size())});
  comm.all_gather(Tensor::from_vector(scales, {static_cast<int64_t>(scales.size())}), all);
  return all;
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
  const int64_t whole = count / kBits;
  for (int64_t word = 0; word < whole; ++word)
    for (int k = 0; k < kBits; ++k) out[word * kBits + k] = (w[word] >> k) & 1u ? scale : -scale;
  for (int64_t i = whole * kBits; i < count; ++i) out[i] = (w[i / kBits] >> (i % kBits)) & 1u ? scale : -scale;
}

void compressed_all_reduce(Communicator& comm, const Tensor& buffer, CompressionErrors& errors) {
  std::vector<CompressionErrors*> one{&errors};
  compressed_all_reduce(comm, {buffer}, one);
}

void compressed_all_reduce(Communicator& comm, const std::vector<Tensor>& buffers,
                           const std::vector<CompressionErrors*>& errors) {
  const int n = comm.size();
  const size_t count = buffers.size();
  FATHOM_CHECK(errors.size() == count, "compressed all-reduce: ", count, " buffers but ", errors.size(),
               " error pairs");
  // Per buffer: its padded length, its chunk per rank, and where its words sit in a rank's block
  // of the exchanged messages (block r = every buffer's chunk r, in buffer order).
  std::vector<int64_t> length(count), chunk(count), word_offset(count);
  int64_t block_words = 0;
  for (size_t t = 0; t < count; ++t) {
    const Tensor& b = buffers[t];
    FATHOM_CHECK(b.dtype() == DType::F32 && b.is_contiguous(), "compressed all-reduce: the buffer must be "
                 "contiguous f32, got ", b.str());
    length[t] = compressed_length(b.numel(), n);
    chunk[t] = length[t] / n;
    FATHOM_CHECK(errors[t]->worker.numel() == length[t] && errors[t]->server.numel() == chunk[t],
                 "compressed all-reduce: error buffers of ", errors[t]->worker.numel(), " and ",
                 errors[t]->server.numel(), " elements for a buffer of ", b.numel(), " over ", n, " ranks (need ",
                 length[t], " and ", chunk[t], "); make them with CompressionErrors::zeros");
    word_offset[t] = block_words;
    block_words += chunk[t] / kBits;
  }

  // Worker: compensate, compress, keep the error; the signs laid out block by block.
  Tensor signs = Tensor::empty({block_words * n}, DType::I32);
  std::vector<float> worker_scale(count);
  for (size_t t = 0; t < count; ++t) {
    std::vector<float> x(static_cast<size_t>(length[t]), 0.0f);
    const Tensor host = buffers[t].to(kCPU);
    std::memcpy(x.data(), host.raw_data(), static_cast<size_t>(buffers[t].numel()) * sizeof(float));
    float* worker_error = static_cast<float*>(errors[t]->worker.raw_data());
    for (int64_t i = 0; i < length[t]; ++i) x[i] += worker_error[i];
    worker_scale[t] = scale_of(x.data(), length[t]);
    const Tensor words = compress(x.data(), length[t], worker_scale[t], worker_error);
    for (int r = 0; r < n; ++r)
      std::memcpy(static_cast<uint32_t*>(signs.raw_data()) + r * block_words + word_offset[t],
                  static_cast<const uint32_t*>(words.raw_data()) + r * chunk[t] / kBits,
                  static_cast<size_t>(chunk[t] / kBits) * sizeof(uint32_t));
  }

  // Phase 1: my block of every rank's signs, and every rank's scales.
  Tensor received = Tensor::empty({block_words * n}, DType::I32);
  comm.all_to_all(signs, received);
  const Tensor scales = gather_scales(comm, worker_scale);  // [rank][buffer]

  // Server: average my chunk of each buffer, compensate, compress again.
  Tensor server_signs = Tensor::empty({block_words}, DType::I32);
  std::vector<float> server_scale(count);
  const auto* rank_scales = static_cast<const float*>(scales.raw_data());
  for (size_t t = 0; t < count; ++t) {
    std::vector<float> y(static_cast<size_t>(chunk[t]), 0.0f), decoded(static_cast<size_t>(chunk[t]));
    for (int r = 0; r < n; ++r) {
      unpack_signs(received.narrow(0, r * block_words + word_offset[t], chunk[t] / kBits),
                   rank_scales[r * count + t] / static_cast<float>(n), decoded.data(), chunk[t]);
      for (int64_t i = 0; i < chunk[t]; ++i) y[i] += decoded[i];
    }
    float* server_error = static_cast<float*>(errors[t]->server.raw_data());
    for (int64_t i = 0; i < chunk[t]; ++i) y[i] += server_error[i];
    server_scale[t] = scale_of(y.data(), chunk[t]);
    const Tensor words = compress(y.data(), chunk[t], server_scale[t], server_error);
    std::memcpy(static_cast<uint32_t*>(server_signs.raw_data()) + word_offset[t], words.raw_data(),
                static_cast<size_t>(chunk[t] / kBits) * sizeof(uint32_t));
  }

  // Phase 2: every rank's served chunks and their scales to everyone; each buffer reassembled.
  Tensor all_signs = Tensor::empty({block_words * n}, DType::I32);
  comm.all_gather(server_signs, all_signs);
  const Tensor chunk_scales = gather_scales(comm, server_scale);
  const auto* served = static_cast<const float*>(chunk_scales.raw_data());
  for (size_t t = 0; t < count; ++t) {
    Tensor result = Tensor::empty({length[t]});
    auto* out = static_cast<float*>(result.raw_data());
    for (int r = 0; r < n; ++r)
      unpack_signs(all_signs.narrow(0, r * block_words + word_offset[t], chunk[t] / kBits), served[r * count + t],
                   out + r * chunk[t], chunk[t]);
    buffers[t].copy_(result.narrow(0, 0, buffers[t].numel()).reshape(buffers[t].sizes()).to(buffers[t].device()));
  }
}

}  // namespace fathom::parallel
