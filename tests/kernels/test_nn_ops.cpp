// What the generic registry test (test_op_registry.cpp) cannot express for the fused NN ops:
// dropout's layout equivalence (shards and permuted rows reproduce the unsharded mask),
// cross-entropy's ignore_index and external normaliser arithmetic, attention against a naive
// T x T forward and backward at T that are not multiples of the 64-row tile, bit-identical
// backward results (dweight, dbias, dk, dv) for any thread count, accumulate flags, optional
// affine parameters and the exact error messages.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "core/generator.h"
#include "core/threads.h"
#include "kernels/attention.h"
#include "kernels/elementwise_math.h"
#include "kernels/cross_entropy.h"
#include "kernels/dropout.h"
#include "kernels/embedding.h"
#include "kernels/nn_kernels.h"
#include "kernels/normalization.h"
#include "kernels/reduction.h"
#include "kernels/softmax.h"
#include "test_util.h"

using namespace fathom;
using fathom::testing::mismatch;

using fathom::testing::error_of;

namespace {

struct ThreadCount {
  int saved = num_threads();
  ~ThreadCount() { set_num_threads(saved); }
};

bool same_bits(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.nbytes() == 0 || std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()) == 0;
}

// Runs fn at 1, 2 and 3 threads and checks every returned tensor has the same bits.
template <typename Fn>
void check_same_bits_for_any_thread_count(Fn&& fn) {
  ThreadCount restore;
  set_num_threads(1);
  const std::vector<Tensor> single = fn();
  for (int threads : {2, 3}) {
    set_num_threads(threads);
    const std::vector<Tensor> multi = fn();
    REQUIRE(multi.size() == single.size());
    for (size_t k = 0; k < single.size(); ++k) {
      INFO("threads " << threads << ", result " << k);
      CHECK(same_bits(single[k], multi[k]));
    }
  }
}

// The message of the fathom::Error fn throws, without its file:line prefix.
Tensor arange_i64(int64_t n, int64_t start = 0) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = start + i;
  return Tensor::from_vector(v);
}

// --- naive causal attention in f64: the full Tq x Tk probabilities of each head ---
struct NaiveAttention {
  Tensor out, dq, dk, dv;
};

// Grouped-query heads, a cache's offset, a sliding window and a padding-key mask (kernels/attention.h).
NaiveAttention naive_attention(const Tensor& q_t, const Tensor& k_t, const Tensor& v_t, const Tensor& dout_t,
                               double scale, int64_t window = 0, const std::vector<int64_t>& keep = {}) {
  const int64_t B = q_t.size(0), NH = q_t.size(1), Tq = q_t.size(2), HS = q_t.size(3);
  const int64_t NKV = k_t.size(1), Tk = k_t.size(2), offset = Tk - Tq;
  const auto q = q_t.to_vector<double>(), k = k_t.to_vector<double>(), v = v_t.to_vector<double>();
  const auto g = dout_t.to_vector<double>();
  std::vector<double> out(q.size(), 0), dq(q.size(), 0), dk(k.size(), 0), dv(k.size(), 0);
  std::vector<double> P(Tq * Tk), dP(Tq * Tk);
  const auto sees = [&](int64_t b, int64_t i, int64_t j) {
    return j <= i + offset && (window == 0 || j > i + offset - window) && (keep.empty() || keep[b * Tk + j] != 0);
  };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h) {
      const int64_t qh = (b * NH + h) * Tq, kh = (b * NKV + h / (NH / NKV)) * Tk;
      auto qa = [&](const std::vector<double>& x, int64_t i, int64_t d) { return x[(qh + i) * HS + d]; };
      auto ka = [&](const std::vector<double>& x, int64_t j, int64_t d) { return x[(kh + j) * HS + d]; };
      std::fill(P.begin(), P.end(), 0.0);
      for (int64_t i = 0; i < Tq; ++i) {
        double m = -INFINITY;
        for (int64_t j = 0; j < Tk; ++j) {
          if (!sees(b, i, j)) continue;
          double s = 0;
          for (int64_t d = 0; d < HS; ++d) s += qa(q, i, d) * ka(k, j, d);
          P[i * Tk + j] = s * scale;
          m = std::max(m, s * scale);
        }
        double sum = 0;
        for (int64_t j = 0; j < Tk; ++j)
          if (sees(b, i, j)) sum += P[i * Tk + j] = std::exp(P[i * Tk + j] - m);
        for (int64_t j = 0; j < Tk; ++j)
          if (sees(b, i, j)) P[i * Tk + j] /= sum;
      }
      for (int64_t i = 0; i < Tq; ++i) {
        double row = 0;
        for (int64_t j = 0; j < Tk; ++j) {
          if (!sees(b, i, j)) continue;
          double s = 0;
          for (int64_t d = 0; d < HS; ++d) {
            out[(qh + i) * HS + d] += P[i * Tk + j] * ka(v, j, d);
            dv[(kh + j) * HS + d] += P[i * Tk + j] * qa(g, i, d);
            s += qa(g, i, d) * ka(v, j, d);
          }
          dP[i * Tk + j] = s;
          row += s * P[i * Tk + j];
        }
        for (int64_t j = 0; j < Tk; ++j) {
          if (!sees(b, i, j)) continue;
          const double ds = P[i * Tk + j] * (dP[i * Tk + j] - row) * scale;
          for (int64_t d = 0; d < HS; ++d) {
            dq[(qh + i) * HS + d] += ds * ka(k, j, d);
            dk[(kh + j) * HS + d] += ds * qa(q, i, d);
          }
        }
      }
    }
  auto make = [&](const std::vector<double>& x, const Tensor& like) {
    return Tensor::from_vector(x, {static_cast<int64_t>(x.size())}).reshape(like.sizes());
  };
  return {make(out, q_t), make(dq, q_t), make(dk, k_t), make(dv, k_t)};
}

}  // namespace

// ---------------------------------------------------------------- dropout

TEST_CASE("dropout: a tensor-parallel shard reproduces its slice of the unsharded mask bit for bit", "[kernels]") {
  Generator gen(5);
  const int64_t rows = 6, width = 96;
  const Tensor x = uniform({rows, width}, gen, -1, 1);
  const Tensor sample_index = arange_i64(rows, 1000);
  const uint64_t seed = 1234, offset = 77;
  const Tensor full = dropout(x, 0.4, seed, offset, sample_index);
  // Uneven shards, at offsets that are not multiples of the 4-word Philox block.
  for (const auto& [begin, end] : {std::pair{0, 33}, std::pair{33, 35}, std::pair{35, 96}, std::pair{1, 95}}) {
    const Tensor shard = dropout(x.narrow(1, begin, end - begin), 0.4, seed, offset, sample_index, begin, width);
    INFO("shard [" << begin << ", " << end << ")");
    CHECK(same_bits(shard, full.narrow(1, begin, end - begin)));
  }
  // The backward recomputes the same mask: dropout is linear, so dx = dropout(dy).
  const Tensor dy = uniform({rows, width}, gen, -1, 1);
  const Tensor dx = dropout_backward(dy.narrow(1, 10, 20), 0.4, seed, offset, sample_index, 10, width);
  CHECK(same_bits(dx, dropout(dy, 0.4, seed, offset, sample_index).narrow(1, 10, 20)));
}

TEST_CASE("dropout: rows permuted with their sample indices give permuted results", "[kernels]") {
  Generator gen(6);
  const Tensor x = uniform({8, 21}, gen, -1, 1, DType::BF16);
  const std::vector<int64_t> global = {40, 41, 42, 43, 44, 45, 46, 47};
  const std::vector<int64_t> order = {5, 2, 7, 0, 3, 1, 6, 4};
  std::vector<int64_t> permuted_index;
  for (int64_t r : order) permuted_index.push_back(global[r]);
  const Tensor full = dropout(x, 0.5, 9, 3, Tensor::from_vector(global));
  // A data-parallel layout: another micro-batch composition of the same global samples.
  for (size_t i = 0; i < order.size(); ++i) {
    const Tensor row =
        dropout(x.narrow(0, order[i], 1), 0.5, 9, 3, Tensor::from_vector<int64_t>({permuted_index[i]}, {1}));
    CHECK(same_bits(row, full.narrow(0, order[i], 1)));
  }
}

TEST_CASE("dropout keeps about 1 - p of the elements, scaled by 1 / (1 - p)", "[kernels]") {
  const Tensor x = Tensor::ones({64, 1000});
  for (double p : {0.1, 0.5, 0.9}) {
    const std::vector<float> y = dropout(x, p, 42, 0, arange_i64(64)).to_vector<float>();
    int64_t kept = 0;
    for (float v : y) {
      if (v != 0) {
        ++kept;
        CHECK(v == static_cast<float>(1.0 / (1.0 - p)));
      }
    }
    const double rate = static_cast<double>(kept) / y.size();
    INFO("p " << p << ", keep rate " << rate);
    CHECK(std::fabs(rate - (1 - p)) < 0.01);  // 64000 draws: a few standard deviations
  }
  // A different stream offset (another call or step) draws another mask.
  CHECK(!same_bits(dropout(x, 0.5, 42, 0, arange_i64(64)), dropout(x, 0.5, 42, 1, arange_i64(64))));
}

TEST_CASE("dropout backward accumulates into a gradient buffer", "[kernels]") {
  Generator gen(8);
  const Tensor dy = uniform({4, 10}, gen, -1, 1, DType::F64);
  const Tensor rows = arange_i64(4);
  Tensor dx = Tensor::ones({4, 10}, DType::F64);
  dropout_backward_into(dx, dy, 0.3, 1, 2, rows, 0, 10, /*accumulate=*/true);
  const auto expected = dropout(dy, 0.3, 1, 2, rows).to_vector<double>();
  const auto got = dx.to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == expected[i] + 1.0);
}

// ---------------------------------------------------------------- cross-entropy

TEST_CASE("cross_entropy: ignore_index and an external normaliser give the global token mean", "[kernels]") {
  Generator gen(9);
  const int64_t N = 10, V = 13;
  const Tensor logits = uniform({N, V}, gen, -3, 3, DType::F64);
  std::vector<int64_t> t = randint({N}, gen, 0, V).to_vector<int64_t>();
  t[1] = t[4] = t[8] = -100;  // 7 targets count
  const Tensor targets = Tensor::from_vector(t);
  const double mean = cross_entropy(logits, targets).loss.item();

  // Two "ranks" with 6 and 4 rows, each normalised by the global count, sum to the mean.
  const double part_a = cross_entropy(logits.narrow(0, 0, 6), targets.narrow(0, 0, 6), 7.0).loss.item();
  const double part_b = cross_entropy(logits.narrow(0, 6, 4), targets.narrow(0, 6, 4), 7.0).loss.item();
  CHECK(std::fabs(part_a + part_b - mean) < 1e-12);

  // The per-rank default (mean over its own 4 and 3 targets) would not.
  const double local_a = cross_entropy(logits.narrow(0, 0, 6), targets.narrow(0, 0, 6)).loss.item();
  CHECK(std::fabs(local_a - part_a * 7.0 / 4.0) < 1e-12);

  // Gradient: zero rows for ignored targets; rows sum to zero elsewhere; scaled by dloss / normaliser.
  const CrossEntropyOutputs fwd = cross_entropy(logits, targets, 7.0);
  const Tensor dlogits = cross_entropy_backward(Tensor::scalar(2.0, DType::F64), logits, targets, fwd.lse, 7.0);
  const auto g = dlogits.to_vector<double>();
  const auto x = logits.to_vector<double>();
  for (int64_t r = 0; r < N; ++r) {
    double row_sum = 0;
    for (int64_t v = 0; v < V; ++v) row_sum += g[r * V + v];
    if (t[r] == -100) {
      for (int64_t v = 0; v < V; ++v) CHECK(g[r * V + v] == 0.0);
    } else {
      CHECK(std::fabs(row_sum) < 1e-14);
      const double p = std::exp(x[r * V + t[r]] - fwd.lse.to_vector<double>()[r]);
      CHECK(std::fabs(g[r * V + t[r]] - (p - 1) * 2.0 / 7.0) < 1e-14);
    }
  }
}

TEST_CASE("cross_entropy backward accumulates, and bf16 logits give an f32 loss", "[kernels]") {
  Generator gen(10);
  const Tensor logits = uniform({5, 300}, gen, -4, 4, DType::BF16);
  const Tensor targets = randint({5}, gen, 0, 300);
  const CrossEntropyOutputs fwd = cross_entropy(logits, targets);
  CHECK(fwd.loss.dtype() == DType::F32);
  CHECK(fwd.lse.dtype() == DType::F32);
  const CrossEntropyOutputs f64 = cross_entropy(logits.to(DType::F64), targets);
  CHECK(std::fabs(fwd.loss.item() - f64.loss.item()) < 1e-5);

  const Tensor dloss = Tensor::scalar(1.0);
  const Tensor once = cross_entropy_backward(dloss, logits, targets, fwd.lse);
  Tensor buffer = once.clone();
  cross_entropy_backward_into(buffer, dloss, logits, targets, fwd.lse, std::nullopt, -100, Tensor(), true);
  const auto a = once.to_vector<float>(), b = buffer.to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i) CHECK(b[i] == static_cast<float>(BFloat16(a[i] + a[i])));
}

TEST_CASE("cross_entropy errors name the row, the value and V", "[kernels]") {
  const Tensor logits = Tensor::zeros({4, 11});
  CHECK(error_of([&] {
          cross_entropy(logits, Tensor::from_vector<int64_t>({0, 3, -100, 11}));
        }) ==
        "cross_entropy: target 11 in row 3 is out of range for V = 11 classes (valid: 0 to 10, or "
        "ignore_index = -100)");
  CHECK(error_of([&] {
          cross_entropy(logits, Tensor::from_vector<int64_t>({0, -5, 1, 2}), std::nullopt, -1);
        }) ==
        "cross_entropy: target -5 in row 1 is out of range for V = 11 classes (valid: 0 to 10, or "
        "ignore_index = -1)");
  CHECK_THROWS_WITH(cross_entropy(logits, Tensor::from_vector<int64_t>({0, 1, 2, 3}), -2.0),
                    Catch::Contains("cross_entropy: normaliser must be a positive number, got -2"));
  const CrossEntropyOutputs fwd = cross_entropy(logits, Tensor::from_vector<int64_t>({0, 1, 2, 3}));
  CHECK(error_of([&] {
          cross_entropy_backward(Tensor::scalar(1.0, DType::F64), logits, Tensor::from_vector<int64_t>({0, 1, 2, 3}),
                                 fwd.lse);
        }) ==
        "cross_entropy_backward: dloss must be a single f32 value (the loss's gradient), got "
        "Tensor[f64, cpu, []]");
}

// ---------------------------------------------------------------- attention

TEST_CASE("causal_attention matches a naive T x T reference at T across tile boundaries", "[kernels]") {
  Generator gen(12);
  for (const int64_t T : {1, 63, 64, 65, 67, 130}) {
    for (DType dtype : {DType::F64, DType::F32}) {
      const int64_t B = 2, NH = 2, HS = 12;
      const Tensor q = uniform({B, NH, T, HS}, gen, -1.5, 1.5, dtype);
      const Tensor k = uniform({B, NH, T, HS}, gen, -1.5, 1.5, dtype);
      const Tensor v = uniform({B, NH, T, HS}, gen, -1.5, 1.5, dtype);
      const Tensor dout = uniform({B, NH, T, HS}, gen, -1, 1, dtype);
      const double scale = 1 / std::sqrt(static_cast<double>(HS));
      const NaiveAttention expected = naive_attention(q, k, v, dout, scale);
      const AttentionOutputs fwd = causal_attention(q, k, v);
      const AttentionGrads grads = causal_attention_backward(dout, q, k, v, fwd.out, fwd.lse);
      const double tol = dtype == DType::F64 ? 1e-12 : 2e-5;
      INFO("T " << T << ", " << dtype_name(dtype));
      CHECK(mismatch(fwd.out, expected.out, tol, tol) == "");
      CHECK(mismatch(grads.dq, expected.dq, tol, tol) == "");
      CHECK(mismatch(grads.dk, expected.dk, tol, tol) == "");
      CHECK(mismatch(grads.dv, expected.dv, tol, tol) == "");
    }
  }
}

TEST_CASE("causal_attention: grouped-query heads, a cache's offset, sliding windows and padding masks", "[kernels]") {
  Generator gen(15);
  struct Case {
    const char* name;
    int64_t B, NH, NKV, Tq, Tk, HS, window;
    std::vector<int64_t> keep;  // (B, Tk) or empty
  };
  std::vector<int64_t> left_padded(2 * 70, 1), right_padded(2 * 67, 1);
  for (int64_t j = 0; j < 9; ++j) left_padded[70 + j] = 0;  // row 1 starts with 9 padding tokens
  for (int64_t j = 60; j < 67; ++j) right_padded[j] = 0;    // row 0 ends with 7
  const Case cases[] = {
      {"GQA 4:2 across tiles", 2, 4, 2, 67, 67, 8, 0, {}},
      {"MQA 3:1", 1, 3, 1, 130, 130, 4, 0, {}},
      {"a cache: 5 queries after 65 keys", 2, 4, 2, 5, 70, 8, 0, {}},
      {"one query after 129 keys (decoding)", 1, 2, 1, 1, 130, 8, 0, {}},
      {"sliding window 16 over tiles", 1, 2, 2, 130, 130, 4, 16, {}},
      {"window 3 with a cache", 1, 4, 2, 9, 75, 4, 3, {}},
      {"right padding", 2, 2, 1, 67, 67, 4, 0, right_padded},
      {"left padding and GQA", 2, 4, 2, 70, 70, 4, 0, left_padded},
      {"left padding, window 5", 2, 2, 2, 70, 70, 4, 5, left_padded},
  };
  for (const Case& c : cases) {
    for (DType dtype : {DType::F64, DType::F32}) {
      INFO(c.name << ", " << dtype_name(dtype));
      const Tensor q = uniform({c.B, c.NH, c.Tq, c.HS}, gen, -1.5, 1.5, dtype);
      const Tensor k = uniform({c.B, c.NKV, c.Tk, c.HS}, gen, -1.5, 1.5, dtype);
      const Tensor v = uniform({c.B, c.NKV, c.Tk, c.HS}, gen, -1.5, 1.5, dtype);
      const Tensor dout = uniform(q.sizes(), gen, -1, 1, dtype);
      AttentionOptions options;
      options.window = c.window;
      if (!c.keep.empty()) options.key_padding_mask = Tensor::from_vector(c.keep, {c.B * c.Tk}).reshape({c.B, c.Tk});
      const double scale = 1 / std::sqrt(static_cast<double>(c.HS));
      const NaiveAttention expected = naive_attention(q, k, v, dout, scale, c.window, c.keep);
      const AttentionOutputs fwd = causal_attention(q, k, v, options);
      const AttentionGrads grads = causal_attention_backward(dout, q, k, v, fwd.out, fwd.lse, options);
      const double tol = dtype == DType::F64 ? 1e-12 : 2e-5;
      CHECK(mismatch(fwd.out, expected.out, tol, tol) == "");
      CHECK(mismatch(grads.dq, expected.dq, tol, tol) == "");
      CHECK(mismatch(grads.dk, expected.dk, tol, tol) == "");
      CHECK(mismatch(grads.dv, expected.dv, tol, tol) == "");
      if (c.keep == left_padded) {  // row 1's padding queries see no key: lse -inf, zero output
        const auto lse = fwd.lse.select(0, 1).select(0, 0).to_vector<double>();
        for (int64_t i = 0; i < 9; ++i) CHECK(lse[i] == -INFINITY);
        CHECK(std::isfinite(lse[9]));
      }
    }
  }
}

TEST_CASE("causal_attention: grouped-query heads compute what repeated kv heads compute", "[kernels]") {
  Generator gen(16);
  const Tensor q = uniform({2, 6, 20, 8}, gen, -1, 1), k = uniform({2, 2, 20, 8}, gen, -1, 1);
  const Tensor v = uniform({2, 2, 20, 8}, gen, -1, 1), dout = uniform({2, 6, 20, 8}, gen, -1, 1);
  // Each kv head repeated for its 3 query heads, as transformers' repeat_kv does.
  const auto repeat = [](const Tensor& t) { return t.unsqueeze(2).expand({2, 2, 3, 20, 8}).reshape({2, 6, 20, 8}); };
  const AttentionOutputs grouped = causal_attention(q, k, v), repeated = causal_attention(q, repeat(k), repeat(v));
  CHECK(mismatch(grouped.out, repeated.out, 0, 0) == "");
  const AttentionGrads g = causal_attention_backward(dout, q, k, v, grouped.out, grouped.lse);
  const AttentionGrads r = causal_attention_backward(dout, q, repeat(k), repeat(v), repeated.out, repeated.lse);
  CHECK(mismatch(g.dq, r.dq, 0, 0) == "");
  // The repeated heads' gradients summed over each group: the grouped dk, dv.
  CHECK(mismatch(g.dk, sum(r.dk.reshape({2, 2, 3, 20, 8}), {2}), 1e-6, 1e-6) == "");
  CHECK(mismatch(g.dv, sum(r.dv.reshape({2, 2, 3, 20, 8}), {2}), 1e-6, 1e-6) == "");
}

TEST_CASE("causal_attention in bf16 computes in f32 and rounds once", "[kernels]") {
  Generator gen(13);
  const Shape shape{1, 3, 70, 16};
  const Tensor q = uniform(shape, gen, -1, 1, DType::BF16), k = uniform(shape, gen, -1, 1, DType::BF16);
  const Tensor v = uniform(shape, gen, -1, 1, DType::BF16), dout = uniform(shape, gen, -1, 1, DType::BF16);
  const AttentionOutputs fwd = causal_attention(q, k, v);
  CHECK(fwd.out.dtype() == DType::BF16);
  CHECK(fwd.lse.dtype() == DType::F32);
  const AttentionGrads grads = causal_attention_backward(dout, q, k, v, fwd.out, fwd.lse);
  const NaiveAttention expected = naive_attention(q, k, v, dout, 0.25);
  CHECK(mismatch(fwd.out, expected.out, 1e-2, 1e-2) == "");
  CHECK(mismatch(grads.dq, expected.dq, 2e-2, 2e-2) == "");
  CHECK(mismatch(grads.dk, expected.dk, 2e-2, 2e-2) == "");
  CHECK(mismatch(grads.dv, expected.dv, 2e-2, 2e-2) == "");
}

TEST_CASE("causal_attention backward kernel accumulates and honours dlse", "[kernels]") {
  Generator gen(14);
  const Shape shape{1, 1, 9, 4};
  const Tensor q = uniform(shape, gen, -1, 1, DType::F64), k = uniform(shape, gen, -1, 1, DType::F64);
  const Tensor v = uniform(shape, gen, -1, 1, DType::F64), dout = uniform(shape, gen, -1, 1, DType::F64);
  const AttentionOutputs fwd = causal_attention(q, k, v);
  const AttentionGrads once = causal_attention_backward(dout, q, k, v, fwd.out, fwd.lse);
  Tensor dq = once.dq.clone(), dk = once.dk.clone(), dv = once.dv.clone();
  kernels::attention_backward_cpu(DType::F64, dq.raw_data(), dk.raw_data(), dv.raw_data(), dout.raw_data(),
                                  q.raw_data(), k.raw_data(), v.raw_data(), fwd.out.raw_data(), fwd.lse.raw_data(),
                                  nullptr, kernels::AttentionShape{1, 1, 1, 9, 9, 4, 0.5}, /*accumulate=*/true);
  for (const auto& [got, base] : {std::pair{dq, once.dq}, std::pair{dk, once.dk}, std::pair{dv, once.dv}}) {
    const auto a = got.to_vector<double>(), e = base.to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == 2 * e[i]);
  }

  // d(sum(g * lse))/dq by finite differences against the dlse path.
  const Tensor g = uniform({1, 1, 9}, gen, -1, 1, DType::F64);
  const Tensor zero = Tensor::zeros(shape, DType::F64);
  const AttentionGrads via_lse = causal_attention_backward(zero, q, k, v, fwd.out, fwd.lse, {}, g);
  Tensor qp = q.clone();
  double* x = qp.data<double>();
  const auto grad = via_lse.dq.to_vector<double>(), gv = g.to_vector<double>();
  for (int64_t i = 0; i < q.numel(); i += 5) {
    auto loss = [&] {
      const auto lse = causal_attention(qp, k, v).lse.to_vector<double>();
      double s = 0;
      for (size_t j = 0; j < lse.size(); ++j) s += lse[j] * gv[j];
      return s;
    };
    const double saved = x[i];
    x[i] = saved + 1e-6;
    const double plus = loss();
    x[i] = saved - 1e-6;
    const double minus = loss();
    x[i] = saved;
    CHECK(std::fabs((plus - minus) / 2e-6 - grad[i]) < 1e-6);
  }
}

TEST_CASE("causal_attention errors name both shapes", "[kernels]") {
  const Tensor q = Tensor::zeros({2, 4, 16, 8});
  CHECK_THROWS_WITH(causal_attention(q, Tensor::zeros({2, 4, 16, 4}), q),
                    Catch::Contains("causal_attention: k of shape [2, 4, 16, 4] must be (B, NKV, Tk, HS) with q's B "
                                    "and HS, q being [2, 4, 16, 8]"));
  const AttentionOutputs fwd = causal_attention(q, q, q);
  CHECK(error_of([&] {
          causal_attention_backward(q, q, q, q, fwd.out, Tensor::zeros({2, 4, 15}));
        }) ==
        "causal_attention_backward: lse must be a f32 tensor of shape [2, 4, 16] (B, NH, Tq), got "
        "Tensor[f32, cpu, [2, 4, 15]]");
}

// ---------------------------------------------------------------- normalisation

TEST_CASE("layernorm and rmsnorm backward are bit-identical for any thread count", "[kernels]") {
  Generator gen(15);
  // 1000 rows: many row blocks for the dweight/dbias partial sums.
  for (DType dtype : {DType::F32, DType::BF16}) {
    const Tensor x = uniform({1000, 67}, gen, -2, 2, dtype), dy = uniform({1000, 67}, gen, -1, 1, dtype);
    const Tensor w = uniform({67}, gen, 0.5, 1.5, dtype), b = uniform({67}, gen, -1, 1, dtype);
    check_same_bits_for_any_thread_count([&] {
      const LayerNormOutputs f = layernorm(x, w, b);
      const LayerNormGrads g = layernorm_backward(dy, x, w, f.mean, f.rstd);
      const RmsNormOutputs rf = rmsnorm(x, w);
      const RmsNormGrads rg = rmsnorm_backward(dy, x, w, rf.rstd);
      return std::vector<Tensor>{f.y, f.mean, f.rstd, g.dx, g.dweight, g.dbias, rf.y, rf.rstd, rg.dx, rg.dweight};
    });
  }
}

TEST_CASE("layernorm without weight or bias, and its dweight/dbias against f64 sums", "[kernels]") {
  Generator gen(16);
  const Tensor x = uniform({300, 33}, gen, -2, 2, DType::F64), dy = uniform({300, 33}, gen, -1, 1, DType::F64);
  const LayerNormOutputs plain = layernorm(x, Tensor(), Tensor());
  const Tensor ones = Tensor::ones({33}, DType::F64), zeros = Tensor::zeros({33}, DType::F64);
  const LayerNormOutputs affine = layernorm(x, ones, zeros);
  CHECK(mismatch(plain.y, affine.y, 0, 0) == "");
  const LayerNormGrads g = layernorm_backward(dy, x, Tensor(), plain.mean, plain.rstd);
  CHECK(!g.dweight.defined());
  const LayerNormGrads ga = layernorm_backward(dy, x, ones, affine.mean, affine.rstd);
  CHECK(mismatch(g.dx, ga.dx, 0, 0) == "");
  // dweight = sum over rows of dy * xhat, dbias = sum of dy (here xhat = y since weight = 1, bias = 0).
  const auto yv = affine.y.to_vector<double>(), dyv = dy.to_vector<double>();
  std::vector<double> dw(33, 0), db(33, 0);
  for (int64_t r = 0; r < 300; ++r)
    for (int64_t c = 0; c < 33; ++c) {
      dw[c] += dyv[r * 33 + c] * yv[r * 33 + c];
      db[c] += dyv[r * 33 + c];
    }
  CHECK(mismatch(ga.dweight.to_vector<double>(), dw, 1e-12, 1e-12) == "");
  CHECK(mismatch(ga.dbias.to_vector<double>(), db, 1e-12, 1e-12) == "");

  const RmsNormOutputs r = rmsnorm(x, Tensor());
  CHECK(mismatch(r.y, rmsnorm(x, ones).y, 0, 0) == "");
  CHECK(!rmsnorm_backward(dy, x, Tensor(), r.rstd).dweight.defined());
}

TEST_CASE("layernorm backward kernel accumulates into every gradient buffer", "[kernels]") {
  Generator gen(17);
  const Tensor x = uniform({7, 9}, gen, -2, 2), dy = uniform({7, 9}, gen, -1, 1);
  const Tensor w = uniform({9}, gen, 0.5, 1.5), b = uniform({9}, gen, -1, 1);
  const LayerNormOutputs f = layernorm(x, w, b);
  const LayerNormGrads once = layernorm_backward(dy, x, w, f.mean, f.rstd);
  Tensor dx = Tensor::ones({7, 9}), dw = Tensor::ones({9}), db = Tensor::ones({9});
  kernels::layernorm_backward_cpu(DType::F32, dx.raw_data(), dw.raw_data(), db.raw_data(), dy.raw_data(), x.raw_data(),
                                  w.raw_data(), f.mean.raw_data(), f.rstd.raw_data(), nullptr, nullptr, 7, 9, true);
  for (const auto& [got, base] : {std::pair{dx, once.dx}, std::pair{dw, once.dweight}, std::pair{db, once.dbias}}) {
    const auto a = got.to_vector<float>(), e = base.to_vector<float>();
    for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == 1.0f + e[i]);
  }
}

TEST_CASE("layernorm and rmsnorm gradients through their saved statistics", "[kernels]") {
  // The gradients of sum(gm * mean + gr * rstd) by finite differences, for callers that use
  // the statistics as outputs.
  Generator gen(18);
  const Tensor x = uniform({3, 6}, gen, -2, 2, DType::F64);
  const Tensor gm = uniform({3}, gen, -1, 1, DType::F64), gr = uniform({3}, gen, -1, 1, DType::F64);
  const Tensor zero = Tensor::zeros({3, 6}, DType::F64);
  const LayerNormOutputs f = layernorm(x, Tensor(), Tensor());
  const Tensor dx = layernorm_backward(zero, x, Tensor(), f.mean, f.rstd, true, false, false, gm, gr).dx;
  const RmsNormOutputs rf = rmsnorm(x, Tensor());
  const Tensor rdx = rmsnorm_backward(zero, x, Tensor(), rf.rstd, true, false, gr).dx;
  const auto gmv = gm.to_vector<double>(), grv = gr.to_vector<double>();
  Tensor xp = x.clone();
  double* p = xp.data<double>();
  auto ln_loss = [&] {
    const LayerNormOutputs o = layernorm(xp, Tensor(), Tensor());
    const auto m = o.mean.to_vector<double>(), s = o.rstd.to_vector<double>();
    double total = 0;
    for (int r = 0; r < 3; ++r) total += gmv[r] * m[r] + grv[r] * s[r];
    return total;
  };
  auto rms_loss = [&] {
    const auto s = rmsnorm(xp, Tensor()).rstd.to_vector<double>();
    double total = 0;
    for (int r = 0; r < 3; ++r) total += grv[r] * s[r];
    return total;
  };
  const auto analytic = dx.to_vector<double>(), r_analytic = rdx.to_vector<double>();
  for (int64_t i = 0; i < 18; ++i) {
    const double saved = p[i];
    p[i] = saved + 1e-6;
    const double lp = ln_loss(), rp = rms_loss();
    p[i] = saved - 1e-6;
    const double lm = ln_loss(), rm = rms_loss();
    p[i] = saved;
    CHECK(std::fabs((lp - lm) / 2e-6 - analytic[i]) < 1e-7);
    CHECK(std::fabs((rp - rm) / 2e-6 - r_analytic[i]) < 1e-7);
  }
}

TEST_CASE("normalisation errors name both shapes and the fix", "[kernels]") {
  const Tensor x = Tensor::zeros({4, 64, 768});
  CHECK(error_of([&] { layernorm(x, Tensor::ones({512}), Tensor()); }) ==
        "layernorm: weight of shape [512] does not match the last dim of x of shape [4, 64, 768]; pass a "
        "weight of shape [768]");
  const LayerNormOutputs f = layernorm(x, Tensor(), Tensor());
  CHECK(error_of([&] { layernorm_backward(x, x, Tensor(), f.mean.to(DType::F64), f.rstd); }) ==
        "layernorm_backward: mean must be f32 for f32 x, got f64");
  CHECK(error_of([&] { layernorm_backward(x, x, Tensor(), f.mean.narrow(1, 0, 3), f.rstd); }) ==
        "layernorm_backward: mean of shape [4, 3] must have x's shape without its last dim, [4, 64] (x is "
        "[4, 64, 768])");
  CHECK(error_of([&] {
          rmsnorm_backward(Tensor::zeros({4, 64, 767}), x, Tensor(), rmsnorm(x, Tensor()).rstd);
        }) == "rmsnorm_backward: dy of shape [4, 64, 767] must match x of shape [4, 64, 768]");
}

// ---------------------------------------------------------------- embedding and softmax

TEST_CASE("embedding backward sums repeated indices in a fixed order for any thread count", "[kernels]") {
  Generator gen(19);
  const Tensor idx = randint({64, 130}, gen, 0, 50);  // many repeats per row
  for (DType dtype : {DType::F32, DType::BF16}) {
    const Tensor dout = uniform({64, 130, 40}, gen, -1, 1, dtype);
    check_same_bits_for_any_thread_count([&] { return std::vector<Tensor>{embedding_backward(dout, idx, 57)}; });
  }
  // Against an f64 scatter-add, with unused rows zero, and accumulating.
  const Tensor dout = uniform({64, 130, 40}, gen, -1, 1, DType::F64);
  const auto iv = idx.to_vector<int64_t>();
  const auto dv = dout.to_vector<double>();
  std::vector<double> expected(57 * 40, 1.0);
  for (size_t n = 0; n < iv.size(); ++n)
    for (int64_t c = 0; c < 40; ++c) expected[iv[n] * 40 + c] += dv[n * 40 + c];
  Tensor dweight = Tensor::ones({57, 40}, DType::F64);
  embedding_backward_into(dweight, dout, idx.to(DType::I32), /*accumulate=*/true);
  CHECK(mismatch(dweight.to_vector<double>(), expected, 1e-12, 1e-12) == "");
  CHECK_THROWS_WITH(embedding_backward(dout, idx, 49),
                    Catch::Contains("embedding_backward: index 49 at (flat) position"));
}

TEST_CASE("softmax of a row with one dominant logit is exact, and 16-bit rows round once", "[kernels]") {
  const Tensor x = Tensor::from_vector<float>({1000, 0, -1000, 1000, 1000, 1000}, {2, 3});
  CHECK(softmax(x).to_vector<float>() == std::vector<float>{1, 0, 0, 1.0f / 3, 1.0f / 3, 1.0f / 3});
  const std::vector<float> ls = log_softmax(x).to_vector<float>();
  CHECK(ls[0] == 0.0f);
  CHECK(ls[2] == -2000.0f);
  Generator gen(20);
  const Tensor h = uniform({5, 40}, gen, -3, 3, DType::F16);
  const auto got = softmax(h).to_vector<float>();
  const auto want = softmax(h.to(DType::F32)).to(DType::F16).to_vector<float>();
  CHECK(got == want);
  CHECK(error_of([&] {
          softmax_backward(Tensor::zeros({5, 41}), softmax(h));
        }) == "softmax_backward: dy of shape [5, 41] must match the forward output y of shape [5, 40]");
}

TEST_CASE("the shared f32 exp approximation stays within 2 ulp of libm", "[kernels]") {
  float worst = 0;
  for (float x = -87.0f; x <= 88.7f; x += 0.0037f) {
    const float got = math::exp(x), want = std::exp(x);
    worst = std::max(worst, std::fabs(got - want) / (std::nextafter(want, INFINITY) - want));
  }
  CHECK(worst <= 2.0f);
  CHECK(math::exp(0.0f) == 1.0f);
  CHECK(math::exp(-INFINITY) == 0.0f);
  CHECK(math::exp(INFINITY) == INFINITY);
  CHECK(std::isnan(math::exp(NAN)));
}
