#pragma once
// Kernel entry points of the fused neural-network ops (softmax, layernorm, rmsnorm, embedding,
// cross-entropy, dropout, causal attention). CPU twins here; CUDA twins are declared beside
// them when they arrive, so this header stays free of heavy includes (.cu files include it).
//
// Conventions shared by every kernel:
// - Raw pointers to contiguous row-major buffers; shape names follow llm.c: N rows of C
//   features, B batch, T time, NH heads, HS head size, V vocabulary.
// - `dtype` is the storage type of the activations (f32, f64, f16, bf16). 16-bit inputs are
//   computed in f32. Saved statistics (mean, rstd, logsumexp) and losses are stored in the
//   compute type: f64 for f64 inputs, f32 otherwise.
// - `accumulate` makes a backward kernel add into its gradient outputs instead of overwriting
//   them, so it can write straight into gradient buckets.
// - Rows are processed in parallel, reductions inside a row sequentially in a fixed order, and
//   sums over rows (dweight, dbias) in fixed row blocks combined in order: results are
//   bit-identical for every thread count.
// - Optional pointers (nullptr = absent) are marked "optional".

#include <cstdint>

#include "core/dtype.h"
#include "core/half.h"  // FATHOM_HOST_DEVICE

namespace fathom::kernels {

// --- softmax / log_softmax over the last dim of (N, C) ---
// Attention's scaled and causally masked form (causal_softmax): the values are multiplied by
// `scale` first, and with causal_rows = Tq > 0 row r is query r % Tq of a (Tq, C) score matrix
// that sees keys 0 .. r % Tq + C - Tq; the others get probability 0 (log_softmax: -Inf), and
// their gradient 0. The defaults are the plain softmax (x * 1 is exact: no change in bits).
struct SoftmaxScaling {
  double scale = 1.0;
  int64_t causal_rows = 0;  // 0: no mask
  // Keys row r sees (C without a mask).
  FATHOM_HOST_DEVICE int64_t visible(int64_t row, int64_t C) const {
    return causal_rows == 0 ? C : row % causal_rows + C - causal_rows + 1;
  }
};
void softmax_forward_cpu(DType dtype, void* out, const void* inp, int64_t N, int64_t C, bool log,
                         const SoftmaxScaling& scaling = {});
// dinp (+)= softmax: scale * out * (dout - sum(dout * out)); log_softmax: scale * (dout - exp(out) * sum(dout)).
void softmax_backward_cpu(DType dtype, void* dinp, const void* dout, const void* out, int64_t N, int64_t C, bool log,
                          bool accumulate, const SoftmaxScaling& scaling = {});
void softmax_forward_cuda(DType dtype, void* out, const void* inp, int64_t N, int64_t C, bool log,
                          const SoftmaxScaling& scaling, void* stream);
void softmax_backward_cuda(DType dtype, void* dinp, const void* dout, const void* out, int64_t N, int64_t C, bool log,
                           bool accumulate, const SoftmaxScaling& scaling, void* stream);

// --- layernorm over the last dim of (N, C); weight, bias optional (C) ---
void layernorm_forward_cpu(DType dtype, void* out, void* mean, void* rstd, const void* inp, const void* weight,
                           const void* bias, int64_t N, int64_t C, double eps);
// Any of dinp, dweight, dbias may be null (not wanted). dmean, drstd (optional) are gradients
// flowing into the saved statistics, for callers that use them as outputs.
void layernorm_backward_cpu(DType dtype, void* dinp, void* dweight, void* dbias, const void* dout, const void* inp,
                            const void* weight, const void* mean, const void* rstd, const void* dmean,
                            const void* drstd, int64_t N, int64_t C, bool accumulate);
void layernorm_forward_cuda(DType dtype, void* out, void* mean, void* rstd, const void* inp, const void* weight,
                            const void* bias, int64_t N, int64_t C, double eps, void* stream);
// dweight_partials / dbias_partials: device workspaces of launch::plan_column_sums(N, C).row_blocks
// * C compute-type values, one for each of dweight, dbias that is wanted (else null).
void layernorm_backward_cuda(DType dtype, void* dinp, void* dweight, void* dbias, const void* dout, const void* inp,
                             const void* weight, const void* mean, const void* rstd, const void* dmean,
                             const void* drstd, int64_t N, int64_t C, bool accumulate, void* dweight_partials,
                             void* dbias_partials, void* stream);

// --- rmsnorm over the last dim of (N, C): out = inp * rstd * weight; weight optional ---
void rmsnorm_forward_cpu(DType dtype, void* out, void* rstd, const void* inp, const void* weight, int64_t N, int64_t C,
                         double eps);
void rmsnorm_backward_cpu(DType dtype, void* dinp, void* dweight, const void* dout, const void* inp, const void* weight,
                          const void* rstd, const void* drstd, int64_t N, int64_t C, bool accumulate);
void rmsnorm_forward_cuda(DType dtype, void* out, void* rstd, const void* inp, const void* weight, int64_t N, int64_t C,
                          double eps, void* stream);
// dweight_partials: as for layernorm_backward_cuda.
void rmsnorm_backward_cuda(DType dtype, void* dinp, void* dweight, const void* dout, const void* inp,
                           const void* weight, const void* rstd, const void* drstd, int64_t N, int64_t C,
                           bool accumulate, void* dweight_partials, void* stream);

// --- embedding: out[n, :] = weight[indices[n], :], weight (V, C); indices i32 or i64, valid ---
void embedding_forward_cpu(DType dtype, DType index_dtype, void* out, const void* indices, const void* weight,
                           int64_t N, int64_t V, int64_t C);
// dweight[v, :] (+)= sum of dout[n, :] over n with indices[n] == v, summed in order of n.
void embedding_backward_cpu(DType dtype, DType index_dtype, void* dweight, const void* dout, const void* indices,
                            int64_t N, int64_t V, int64_t C, bool accumulate);
// CUDA twins (kernels/cuda/embedding_cuda.cu); N and V below 2^31. Indices are range-checked on
// the device: `bad_position` (one device int64) ends up holding the first flat position whose
// index is out of range, or -1, for the caller to read and report. The backward then leaves
// dweight untouched. workspace: embedding_backward_workspace_bytes_cuda(N, V) bytes of device
// memory (bucket starts, sort keys and positions, the stable sort's temporary storage).
void embedding_forward_cuda(DType dtype, DType index_dtype, void* out, const void* indices, const void* weight,
                            int64_t N, int64_t V, int64_t C, int64_t* bad_position, void* stream);
int64_t embedding_backward_workspace_bytes_cuda(int64_t N, int64_t V);
void embedding_backward_cuda(DType dtype, DType index_dtype, void* dweight, const void* dout, const void* indices,
                             int64_t N, int64_t V, int64_t C, bool accumulate, int64_t* bad_position,
                             void* workspace, void* stream);

// --- cross-entropy over logits (N, V), targets i64 (N), valid or == ignore_index ---
// loss = sum over non-ignored rows of (lse - logits[target]) / normaliser; lse (N) is saved.
void cross_entropy_forward_cpu(DType dtype, void* loss, void* lse, const void* logits, const int64_t* targets,
                               int64_t N, int64_t V, int64_t ignore_index, double normaliser);
// dlogits (+)= (softmax - onehot(target)) * dloss / normaliser (zero on ignored rows)
//             + dlse[n] * softmax (dlse optional). dloss points at one compute-type value.
void cross_entropy_backward_cpu(DType dtype, void* dlogits, const void* dloss, const void* logits,
                                const int64_t* targets, const void* lse, const void* dlse, int64_t N, int64_t V,
                                int64_t ignore_index, double normaliser, bool accumulate);
// CUDA twins (kernels/cuda/cross_entropy_cuda.cu); targets already checked by the caller.
// row_losses: N doubles of device workspace (each row's loss, added in a fixed order). dloss is
// a device pointer, read by the kernel.
void cross_entropy_forward_cuda(DType dtype, void* loss, void* lse, const void* logits, const int64_t* targets,
                                int64_t N, int64_t V, int64_t ignore_index, double normaliser, double* row_losses,
                                void* stream);
void cross_entropy_backward_cuda(DType dtype, void* dlogits, const void* dloss, const void* logits,
                                 const int64_t* targets, const void* lse, const void* dlse, int64_t N, int64_t V,
                                 int64_t ignore_index, double normaliser, bool accumulate, void* stream);

// --- dropout over rows x width, keep decision a pure function of the unsharded position ---
// Element (r, c) is kept when philox_word(seed, offset, sample_index[r] * full_width +
// column_offset + c) < ceil((1 - p) * 2^32), and then scaled by 1 / (1 - p). Being linear in
// inp, the same kernel is its own backward (pass dout as inp).
void dropout_forward_cpu(DType dtype, void* out, const void* inp, const int64_t* sample_index, int64_t rows,
                         int64_t width, double p, uint64_t seed, uint64_t offset, int64_t column_offset,
                         int64_t full_width, bool accumulate);
// CUDA twin (kernels/cuda/dropout_cuda.cu): the same Philox words, so the same mask bit for bit.
void dropout_forward_cuda(DType dtype, void* out, const void* inp, const int64_t* sample_index, int64_t rows,
                          int64_t width, double p, uint64_t seed, uint64_t offset, int64_t column_offset,
                          int64_t full_width, bool accumulate, void* stream);

// --- causal scaled-dot-product attention (kernels/attention.h) ---
// q (B, NH, Tq, HS); k, v (B, NKV, Tk, HS), NH a multiple of NKV, Tq <= Tk; query i sits at key
// position i + Tk - Tq and sees the keys j <= that position, j > it - window when window > 0,
// and keep[b * Tk + j] when keep is given. out = softmax(scale * q k^T over those keys) v; lse
// (B, NH, Tq) is the row logsumexp of the scaled scores (-inf for a query that sees no key).
struct AttentionShape {
  int64_t B, NH, NKV, Tq, Tk, HS;
  double scale;
  int64_t window = 0;           // 0: no sliding window
  const bool* keep = nullptr;   // optional (B, Tk) on the kernel's device: false marks a padding key
};
void attention_forward_cpu(DType dtype, void* out, void* lse, const void* q, const void* k, const void* v,
                           const AttentionShape& shape);
// Any of dq, dk, dv may be null. dlse (optional) is the gradient flowing into lse.
void attention_backward_cpu(DType dtype, void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k,
                            const void* v, const void* out, const void* lse, const void* dlse,
                            const AttentionShape& shape, bool accumulate);
// CUDA twins (kernels/cuda/attention_cuda.cu), HS <= 128. workspace: B * NH * Tq compute-type
// values of device memory (the backward's row terms).
void attention_forward_cuda(DType dtype, void* out, void* lse, const void* q, const void* k, const void* v,
                            const AttentionShape& shape, void* stream);
void attention_backward_cuda(DType dtype, void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k,
                             const void* v, const void* out, const void* lse, const void* dlse,
                             const AttentionShape& shape, bool accumulate, void* workspace, void* stream);

// --- rotary position embedding (kernels/rotary.h) on contiguous (B, H, T, D) ---
struct RotaryShape {
  int64_t B, H, T, D;
  int64_t R;                // rotated dims (even, <= D); D - R pass through
  bool positions_batched;   // positions (B, T) rather than (T)
  bool inverse;             // turn by -angle (the backward)
};
// positions: i64, (B, T) or (T); inv_freq: R / 2 f32 values.
void rotary_embedding_cpu(DType dtype, void* out, const void* x, const int64_t* positions, const float* inv_freq,
                          const RotaryShape& shape);
void rotary_embedding_cuda(DType dtype, void* out, const void* x, const int64_t* positions, const float* inv_freq,
                           const RotaryShape& shape, void* stream);

}  // namespace fathom::kernels
