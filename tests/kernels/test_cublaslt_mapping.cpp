// The host side of the cuBLASLt GEMMs (kernels/gemm_problem.h), checked on the CPU: the
// row-major -> column-major mapping is run through a naive column-major GEMM with cuBLASLt's
// documented semantics (op flags, leading dims, batch strides, bias / GELU-aux / bias-gradient
// epilogues) over the very same memory and compared with the row-major product it stands for.
// Then the problem checks, the epilogue constraints, the compute types, pointer alignment and the
// plan-cache key.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "kernels/elementwise_math.h"
#include "kernels/gemm_problem.h"

using namespace fathom;
using namespace fathom::kernels;

namespace {

// Element (r, c) of a column-major matrix.
double at(const std::vector<double>& m, int64_t offset, const LtMatrix& layout, int64_t r, int64_t c) {
  REQUIRE(r < layout.rows);
  REQUIRE(c < layout.cols);
  return m[offset + r + c * layout.ld];
}

struct LtBuffers {
  std::vector<double> c, aux, bias;
};

// What cuBLASLt computes for `g`: D = op(A) op(B) (+ C) per batch, then the epilogue.
void lt_reference(const LtGemm& g, GemmEpilogue epilogue, bool accumulate, const std::vector<double>& a,
                  const std::vector<double>& b, LtBuffers& out) {
  REQUIRE(g.c.rows == g.m);
  REQUIRE(g.c.cols == g.n);
  REQUIRE(g.c.ld >= g.c.rows);
  REQUIRE(g.a.ld >= g.a.rows);
  REQUIRE(g.b.ld >= g.b.rows);
  // op(A) is m x k, op(B) is k x n.
  REQUIRE((g.transpose_a ? g.a.cols : g.a.rows) == g.m);
  REQUIRE((g.transpose_a ? g.a.rows : g.a.cols) == g.k);
  REQUIRE((g.transpose_b ? g.b.cols : g.b.rows) == g.k);
  REQUIRE((g.transpose_b ? g.b.rows : g.b.cols) == g.n);
  for (int64_t batch = 0; batch < g.batch; ++batch) {
    const int64_t oa = batch * g.a.batch_stride, ob = batch * g.b.batch_stride, oc = batch * g.c.batch_stride;
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < g.k; ++p) {
          const double x = g.transpose_a ? at(a, oa, g.a, p, i) : at(a, oa, g.a, i, p);
          const double y = g.transpose_b ? at(b, ob, g.b, j, p) : at(b, ob, g.b, p, j);
          sum += x * y;
        }
        double& d = out.c[oc + i + j * g.c.ld];
        if (accumulate) sum += d;
        if (epilogue == GemmEpilogue::Bias || epilogue == GemmEpilogue::GeluBias) {
          REQUIRE(g.bias_length == g.m);  // one bias value per row of D
          sum += out.bias[i];
        }
        if (epilogue == GemmEpilogue::Gelu || epilogue == GemmEpilogue::GeluBias) {
          REQUIRE(g.aux.rows == g.m);
          REQUIRE(g.aux.cols == g.n);
          out.aux[i + j * g.aux.ld] = sum;
          sum = math::gelu_tanh(sum);
        }
        d = sum;
      }
    if (epilogue == GemmEpilogue::BiasGrad) {  // BGRADB: sums of op(B) over k, one per column of D
      REQUIRE(g.bias_length == g.n);
      for (int64_t j = 0; j < g.n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < g.k; ++p) sum += g.transpose_b ? at(b, ob, g.b, j, p) : at(b, ob, g.b, p, j);
        out.bias[j] = sum;
      }
    }
  }
}

// Row-major storage of op(X) (rows x cols): element (r, c) of the stored matrix.
double row_major(const std::vector<double>& m, int64_t offset, int64_t ld, int64_t r, int64_t c) {
  return m[offset + r * ld + c];
}

struct Case {
  bool ta, tb;
  int64_t M, N, K, pad;  // pad: extra elements per stored row
  int64_t batch;
  GemmEpilogue epilogue;
  bool accumulate;
};

void check_case(const Case& cs) {
  INFO("ta " << cs.ta << " tb " << cs.tb << " M " << cs.M << " N " << cs.N << " K " << cs.K << " pad " << cs.pad
             << " batch " << cs.batch << " epilogue " << int(cs.epilogue) << " accumulate " << cs.accumulate);
  GemmProblem p;
  p.transpose_a = cs.ta;
  p.transpose_b = cs.tb;
  p.M = cs.M;
  p.N = cs.N;
  p.K = cs.K;
  p.lda = stored_cols_a(p) + cs.pad;
  p.ldb = stored_cols_b(p) + cs.pad;
  p.ldc = p.N + cs.pad;
  p.ldaux = p.N + 2 * cs.pad;
  p.batch = cs.batch;
  const int64_t rows_a = cs.ta ? cs.K : cs.M, rows_b = cs.tb ? cs.N : cs.K;
  p.stride_a = rows_a * p.lda + 3;  // batches need not be packed
  p.stride_b = rows_b * p.ldb + 1;
  p.stride_c = p.M * p.ldc + 2;
  p.epilogue = cs.epilogue;
  p.accumulate = cs.accumulate;
  REQUIRE(gemm_problem_error(p).empty());

  std::mt19937 rng(7);
  std::uniform_real_distribution<double> dist(-1, 1);
  auto random = [&](int64_t n) {
    std::vector<double> v(n);
    for (double& x : v) x = dist(rng);
    return v;
  };
  const std::vector<double> a = random(p.stride_a * cs.batch), b = random(p.stride_b * cs.batch);
  LtBuffers lt{random(p.stride_c * cs.batch), std::vector<double>(p.M * p.ldaux, 0.0), random(std::max(p.M, p.N))};
  const LtBuffers before = lt;

  const LtGemm g = to_column_major(p);
  CHECK(g.m == p.N);
  CHECK(g.n == p.M);
  CHECK(g.k == p.K);
  lt_reference(g, p.epilogue, p.accumulate, /*cuBLASLt's A is our B*/ b, a, lt);

  for (int64_t n = 0; n < cs.batch; ++n) {
    const int64_t oa = n * p.stride_a, ob = n * p.stride_b, oc = n * p.stride_c;
    for (int64_t i = 0; i < p.M; ++i)
      for (int64_t j = 0; j < p.N; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < p.K; ++k) {
          const double x = cs.ta ? row_major(a, oa, p.lda, k, i) : row_major(a, oa, p.lda, i, k);
          const double y = cs.tb ? row_major(b, ob, p.ldb, j, k) : row_major(b, ob, p.ldb, k, j);
          sum += x * y;
        }
        if (p.accumulate) sum += before.c[oc + i * p.ldc + j];
        if (p.epilogue == GemmEpilogue::Bias || p.epilogue == GemmEpilogue::GeluBias) sum += before.bias[j];
        if (p.epilogue == GemmEpilogue::Gelu || p.epilogue == GemmEpilogue::GeluBias) {
          REQUIRE(lt.aux[i * p.ldaux + j] == Approx(sum).margin(1e-12));
          sum = math::gelu_tanh(sum);
        }
        REQUIRE(lt.c[oc + i * p.ldc + j] == Approx(sum).margin(1e-12));
      }
    // Padding between rows and batches is never written.
    for (int64_t i = 0; i < p.M; ++i)
      for (int64_t j = p.N; j < p.ldc && oc + i * p.ldc + j < static_cast<int64_t>(lt.c.size()); ++j)
        REQUIRE(lt.c[oc + i * p.ldc + j] == before.c[oc + i * p.ldc + j]);
  }
  if (p.epilogue == GemmEpilogue::BiasGrad) {  // dbias[m] = sum over k of op(A)[m][k]
    for (int64_t i = 0; i < p.M; ++i) {
      double sum = 0;
      for (int64_t k = 0; k < p.K; ++k) sum += cs.ta ? row_major(a, 0, p.lda, k, i) : row_major(a, 0, p.lda, i, k);
      REQUIRE(lt.bias[i] == Approx(sum).margin(1e-12));
    }
  }
}

}  // namespace

TEST_CASE("cuBLASLt mapping: every transpose, padded leading dims, strided batches", "[cublaslt]") {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t pad : {0, 3})
        for (int64_t batch : {1, 3}) check_case({ta, tb, 5, 7, 4, pad, batch, GemmEpilogue::None, false});
  check_case({false, false, 1, 1, 1, 0, 1, GemmEpilogue::None, false});
  check_case({true, false, 1, 9, 2, 0, 2, GemmEpilogue::None, true});
  check_case({false, true, 6, 1, 3, 1, 1, GemmEpilogue::None, true});
}

TEST_CASE("cuBLASLt mapping: bias, GELU aux and bias-gradient epilogues", "[cublaslt]") {
  // The linear layer's forward: x (M x K) times W^T, W stored N x K.
  check_case({false, true, 6, 8, 5, 0, 1, GemmEpilogue::Bias, false});
  check_case({false, true, 6, 8, 5, 2, 1, GemmEpilogue::GeluBias, false});
  check_case({false, true, 3, 8, 4, 0, 1, GemmEpilogue::Gelu, false});
  // Its weight gradient: dy (rows x N, stored) transposed times x; dbias = dy's column sums.
  check_case({true, false, 8, 5, 6, 0, 1, GemmEpilogue::BiasGrad, false});
  check_case({true, false, 8, 5, 6, 1, 1, GemmEpilogue::BiasGrad, false});
  // Bias on other layouts too.
  check_case({true, true, 4, 3, 5, 1, 1, GemmEpilogue::Bias, false});
}

TEST_CASE("cuBLASLt mapping: stored matrices as cuBLASLt describes them", "[cublaslt]") {
  GemmProblem p;
  p.M = 16384;
  p.N = 2304;
  p.K = 768;
  p.transpose_b = true;  // GPT-2's c_attn: x (16384 x 768) times W^T, W stored 2304 x 768
  p.lda = 768;
  p.ldb = 768;
  p.ldc = 2304;
  const LtGemm g = to_column_major(p);
  CHECK(g.transpose_a);
  CHECK_FALSE(g.transpose_b);
  CHECK(g.a == LtMatrix{768, 2304, 768, 0});    // W read column-major: K x N
  CHECK(g.b == LtMatrix{768, 16384, 768, 0});   // x read column-major: K x M
  CHECK(g.c == LtMatrix{2304, 16384, 2304, 0});  // C^T: N x M
  CHECK(g.bias_length == 0);
}

TEST_CASE("gemm_problem_error names what cuBLASLt would reject", "[cublaslt]") {
  GemmProblem p;
  p.M = 4;
  p.N = 5;
  p.K = 3;
  p.lda = 3;
  p.ldb = 5;
  p.ldc = 5;
  CHECK(gemm_problem_error(p).empty());
  GemmProblem q = p;
  q.lda = 2;
  CHECK(gemm_problem_error(q) == "lda = 2 is less than A's stored columns (3)");
  q = p;
  q.transpose_a = true;  // A stored K x M: rows of 4
  CHECK(gemm_problem_error(q) == "lda = 3 is less than A's stored columns (4)");
  q = p;
  q.transpose_b = true;  // B stored N x K: rows of 3, so ldb 5 is fine
  CHECK(gemm_problem_error(q).empty());
  q.ldb = 2;
  CHECK(gemm_problem_error(q) == "ldb = 2 is less than B's stored columns (3)");
  q = p;
  q.ldc = 4;
  CHECK(gemm_problem_error(q) == "ldc = 4 is less than N (5)");
  q = p;
  q.K = 0;
  CHECK(gemm_problem_error(q) == "empty GEMM (M, N, K must be positive): M = 4, N = 5, K = 0");
  q = p;
  q.batch = 0;
  CHECK(gemm_problem_error(q) == "batch must be at least 1, got 0");
  q = p;
  q.M = int64_t{1} << 31;
  CHECK(gemm_problem_error(q) == "a size or leading dim beyond 2^31 - 1 (2147483648)");
  q = p;
  q.epilogue = GemmEpilogue::GeluBias;
  q.ldaux = 4;
  CHECK(gemm_problem_error(q) == "ldaux = 4 is less than N (5)");
  q.ldaux = 8;
  CHECK(gemm_problem_error(q).empty());
  q.batch = 2;
  CHECK(gemm_problem_error(q) == "epilogues are for single (unbatched) GEMMs");
}

TEST_CASE("gemm_epilogue_supported follows cuBLASLt's documented constraints", "[cublaslt]") {
  GemmProblem p;
  p.dtype = DType::BF16;
  p.M = 64;
  p.N = 24;
  p.K = 8;
  CHECK(gemm_epilogue_supported(p));  // no epilogue
  p.epilogue = GemmEpilogue::Bias;
  CHECK(gemm_epilogue_supported(p));
  p.epilogue = GemmEpilogue::GeluBias;
  p.ldaux = 24;
  CHECK(gemm_epilogue_supported(p));
  p.ldaux = 20;  // the GELU input's leading dim must be a multiple of 8
  CHECK_FALSE(gemm_epilogue_supported(p));
  p.ldaux = 24;
  p.accumulate = true;
  CHECK_FALSE(gemm_epilogue_supported(p));
  p.accumulate = false;
  p.batch = 2;
  CHECK_FALSE(gemm_epilogue_supported(p));
  p.batch = 1;
  p.dtype = DType::F64;
  CHECK_FALSE(gemm_epilogue_supported(p));
  p.dtype = DType::F32;
  p.epilogue = GemmEpilogue::BiasGrad;
  CHECK(gemm_epilogue_supported(p));
}

TEST_CASE("gemm_compute: f32 accumulation for 16-bit, TF32 only for f32 when allowed", "[cublaslt]") {
  CHECK(gemm_compute(DType::F32, false) == GemmCompute::F32);
  CHECK(gemm_compute(DType::F32, true) == GemmCompute::F32FastTf32);
  CHECK(gemm_compute(DType::BF16, true) == GemmCompute::F32);
  CHECK(gemm_compute(DType::F16, false) == GemmCompute::F32);
  CHECK(gemm_compute(DType::F64, true) == GemmCompute::F64);
}

TEST_CASE("pointer_alignment is the largest power of two up to 256 dividing the address", "[cublaslt]") {
  CHECK(pointer_alignment(0) == 256);
  CHECK(pointer_alignment(1) == 1);
  CHECK(pointer_alignment(2) == 2);
  CHECK(pointer_alignment(6) == 2);
  CHECK(pointer_alignment(0x1000) == 256);
  CHECK(pointer_alignment(0x7f0000000010) == 16);
  CHECK(pointer_alignment(0x7f0000000180) == 128);
  CHECK(pointer_alignment(uintptr_t{1} << 63) == 256);
}

TEST_CASE("gemm_key: equal problems and alignments share a plan, any difference does not", "[cublaslt]") {
  GemmProblem p;
  p.dtype = DType::BF16;
  p.M = 32;
  p.N = 16;
  p.K = 8;
  p.lda = 8;
  p.ldb = 16;
  p.ldc = 16;
  auto ptr = [](uintptr_t address) { return reinterpret_cast<const void*>(address); };
  const GemmKey base = gemm_key(p, ptr(0x1000), ptr(0x2000), ptr(0x3000), nullptr, nullptr);
  // Other addresses with the same alignment: the same plan.
  const GemmKey same = gemm_key(p, ptr(0x5000), ptr(0x6100), ptr(0x8000), nullptr, nullptr);
  CHECK(base == same);
  CHECK(GemmKeyHash{}(base) == GemmKeyHash{}(same));

  std::vector<GemmKey> variants;
  variants.push_back(gemm_key(p, ptr(0x1002), ptr(0x2000), ptr(0x3000), nullptr, nullptr));  // misaligned A
  variants.push_back(gemm_key(p, ptr(0x1000), ptr(0x2000), ptr(0x3010), nullptr, nullptr));  // C 16-byte aligned
  auto vary = [&](auto&& change) {
    GemmProblem q = p;
    change(q);
    variants.push_back(gemm_key(q, ptr(0x1000), ptr(0x2000), ptr(0x3000), nullptr, nullptr));
  };
  vary([](GemmProblem& q) { q.dtype = DType::F16; });
  vary([](GemmProblem& q) { q.transpose_a = true; });
  vary([](GemmProblem& q) { q.transpose_b = true; });
  vary([](GemmProblem& q) { q.M = 33; });
  vary([](GemmProblem& q) { q.N = 24; });
  vary([](GemmProblem& q) { q.K = 9; });
  vary([](GemmProblem& q) { q.lda = 9; });
  vary([](GemmProblem& q) { q.ldb = 17; });
  vary([](GemmProblem& q) { q.ldc = 17; });
  vary([](GemmProblem& q) { q.batch = 2; });
  vary([](GemmProblem& q) { q.stride_a = 256; });
  vary([](GemmProblem& q) { q.stride_b = 128; });
  vary([](GemmProblem& q) { q.stride_c = 512; });
  vary([](GemmProblem& q) { q.accumulate = true; });
  vary([](GemmProblem& q) { q.allow_tf32 = true; });
  vary([](GemmProblem& q) { q.epilogue = GemmEpilogue::Bias; });
  vary([](GemmProblem& q) { q.ldaux = 16; });
  std::set<size_t> hashes{GemmKeyHash{}(base)};
  for (size_t i = 0; i < variants.size(); ++i) {
    INFO("variant " << i);
    CHECK_FALSE(variants[i] == base);
    hashes.insert(GemmKeyHash{}(variants[i]));
  }
  CHECK(hashes.size() == variants.size() + 1);  // no collisions among these
}
