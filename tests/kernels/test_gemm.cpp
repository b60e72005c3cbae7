// CPU GEMM (kernels/cpu/gemm.h) against a naive f64 product: every backend in the build and
// every own-kernel instruction set this CPU runs, all transposes, odd sizes around the register
// and cache blocks, alpha/beta (beta = 0 over NaN), padded leading dims, 16-bit operands,
// broadcast batches, and identical bits for any thread count.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/threads.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_backend.h"
#include "kernels/cpu/gemm_kernels.h"

namespace fk = fathom::kernels;
using fathom::BFloat16;
using fathom::Half;

namespace {

// Restores the process-wide GEMM settings a test changes.
struct SettingsGuard {
  fk::GemmBackend backend = fk::gemm_backend();
  fk::GemmIsa isa = fk::gemm_isa();
  int threads = fathom::num_threads();
  ~SettingsGuard() {
    fk::set_gemm_backend(backend);
    fk::set_gemm_isa(isa);
    fathom::set_num_threads(threads);
  }
};

// One way to run the f32/f64 GEMM: a backend, and for the own kernels an instruction set.
struct Flavour {
  fk::GemmBackend backend;
  fk::GemmIsa isa;
  std::string name() const {
    return std::string(fk::gemm_backend_name(backend)) +
           (backend == fk::GemmBackend::Own ? std::string("/") + fk::gemm_isa_name(isa) : "");
  }
  void select() const {
    fk::set_gemm_backend(backend);
    if (backend == fk::GemmBackend::Own) fk::set_gemm_isa(isa);
  }
};

std::vector<Flavour> flavours() {
  std::vector<Flavour> all;
  for (fk::GemmIsa isa : {fk::GemmIsa::Portable, fk::GemmIsa::Avx2, fk::GemmIsa::Avx512, fk::GemmIsa::Amx})
    if (fk::gemm_isa_supported(isa)) all.push_back({fk::GemmBackend::Own, isa});
  for (fk::GemmBackend backend : {fk::GemmBackend::Eigen, fk::GemmBackend::OpenBlas})
    if (fk::gemm_backend_available(backend)) all.push_back({backend, fk::gemm_isa()});
  return all;
}

std::vector<double> random_values(int64_t count, std::mt19937& rng) {
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> values(count);
  for (double& v : values) v = uniform(rng);
  return values;
}

// The matrices of one test product, stored with padded leading dims, as doubles.
struct Problem {
  bool ta = false, tb = false;
  int64_t M = 0, N = 0, K = 0, lda = 0, ldb = 0, ldc = 0;
  double alpha = 1, beta = 0;
  std::vector<double> A, B, C;  // C: the initial contents

  Problem(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha_, double beta_, int64_t pad,
          std::mt19937& rng)
      : ta(trans_a), tb(trans_b), M(m), N(n), K(k), alpha(alpha_), beta(beta_) {
    lda = (ta ? M : K) + pad;
    ldb = (tb ? K : N) + pad;
    ldc = N + pad;
    A = random_values((ta ? K : M) * lda, rng);
    B = random_values((tb ? N : K) * ldb, rng);
    C = random_values(M * ldc, rng);
  }
  double a(int64_t i, int64_t k) const { return ta ? A[k * lda + i] : A[i * lda + k]; }
  double b(int64_t k, int64_t j) const { return tb ? B[j * ldb + k] : B[k * ldb + j]; }
  // alpha * op(A) op(B) + beta * C in f64 (beta == 0 ignores C), on the operands as rounded by
  // `round` (the precision the GEMM receives them in).
  template <typename Round>
  std::vector<double> reference(Round round) const {
    std::vector<double> out(C);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < K; ++k) sum += round(a(i, k)) * round(b(k, j));
        out[i * ldc + j] = alpha * sum + (beta == 0 ? 0.0 : beta * C[i * ldc + j]);
      }
    return out;
  }
  std::string str() const {
    return std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) + (ta ? " A^T" : "") +
           (tb ? " B^T" : "") + " alpha " + std::to_string(alpha) + " beta " + std::to_string(beta) + " lda " +
           std::to_string(lda);
  }
};

template <typename T>
std::vector<T> convert(const std::vector<double>& values) {
  std::vector<T> out;
  out.reserve(values.size());
  for (double v : values) out.push_back(T(static_cast<float>(v)));
  return out;
}
template <>
std::vector<double> convert<double>(const std::vector<double>& values) {
  return values;
}

// C with beta == 0 starts as NaN: the result must not depend on it.
template <typename Acc>
std::vector<Acc> initial_c(const Problem& p) {
  std::vector<Acc> c(p.C.begin(), p.C.end());
  if (p.beta == 0) std::fill(c.begin(), c.end(), std::numeric_limits<Acc>::quiet_NaN());
  return c;
}

// Elementwise |got - want| <= atol * K + rtol * |want| over the M x N entries (the padding of C
// must keep its initial value). Returns "" or the first mismatch.
template <typename Acc>
std::string mismatch(const Problem& p, const std::vector<Acc>& got, const std::vector<double>& want, double atol,
                     double rtol) {
  for (int64_t i = 0; i < p.M; ++i)
    for (int64_t j = 0; j < p.ldc; ++j) {
      const double g = got[i * p.ldc + j], w = want[i * p.ldc + j];
      const bool padding = j >= p.N;
      const bool ok = padding ? (p.beta == 0 ? std::isnan(g) : g == static_cast<Acc>(w))
                              : std::fabs(g - w) <= atol * std::max<int64_t>(p.K, 1) + rtol * std::fabs(w);
      if (!ok)
        return p.str() + ": C[" + std::to_string(i) + ", " + std::to_string(j) + "] = " + std::to_string(g) +
               ", expected " + std::to_string(w);
    }
  return "";
}

double identity(double v) { return v; }
double round_f32(double v) { return static_cast<float>(v); }
double round_bf16(double v) { return static_cast<float>(BFloat16(static_cast<float>(v))); }
double round_half(double v) { return static_cast<float>(Half(static_cast<float>(v))); }

std::string check_f32(const Problem& p) {
  const auto A = convert<float>(p.A), B = convert<float>(p.B);
  auto C = initial_c<float>(p);
  fk::gemm_f32(p.ta, p.tb, p.M, p.N, p.K, float(p.alpha), A.data(), p.lda, B.data(), p.ldb, float(p.beta), C.data(),
               p.ldc);
  return mismatch(p, C, p.reference(round_f32), 2e-6, 1e-5);
}

std::string check_f64(const Problem& p) {
  auto C = initial_c<double>(p);
  fk::gemm_f64(p.ta, p.tb, p.M, p.N, p.K, p.alpha, p.A.data(), p.lda, p.B.data(), p.ldb, p.beta, C.data(), p.ldc);
  return mismatch(p, C, p.reference(identity), 1e-14, 1e-12);
}

std::string check_bf16(const Problem& p) {
  const auto A = convert<BFloat16>(p.A), B = convert<BFloat16>(p.B);
  auto C = initial_c<float>(p);
  fk::gemm_bf16(p.ta, p.tb, p.M, p.N, p.K, float(p.alpha), A.data(), p.lda, B.data(), p.ldb, float(p.beta), C.data(),
                p.ldc);
  return mismatch(p, C, p.reference(round_bf16), 2e-6, 1e-5);
}

std::string check_f16(const Problem& p) {
  const auto A = convert<Half>(p.A), B = convert<Half>(p.B);
  auto C = initial_c<float>(p);
  fk::gemm_f16(p.ta, p.tb, p.M, p.N, p.K, float(p.alpha), A.data(), p.lda, B.data(), p.ldb, float(p.beta), C.data(),
               p.ldc);
  return mismatch(p, C, p.reference(round_half), 2e-6, 1e-5);
}

struct Size {
  int64_t M, N, K;
};
// Around the register tiles (4-32 rows, 4-32 columns) and cache blocks (KC 256/512, MC 72-256;
// more than 2 MC rows switch from the A-resident loop order to Goto's).
const Size kSizes[] = {{1, 1, 1},    {7, 5, 3},    {17, 33, 65},   {65, 130, 17},  {33, 1, 129},
                       {1, 67, 300}, {150, 70, 520}, {300, 20, 270}, {530, 40, 33}, {16, 45, 40}, {13, 37, 129}};

template <typename Check>
void check_all(const char* what, Check check) {
  std::mt19937 rng(7);
  for (const Size& s : kSizes)
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      for (const auto& [alpha, beta] : {std::pair{1.0, 0.0}, std::pair{-0.5, 1.0}, std::pair{2.0, 0.5}}) {
        const Problem p(ta, tb, s.M, s.N, s.K, alpha, beta, (s.M + t) % 3 == 0 ? 0 : 3, rng);
        INFO(what);
        REQUIRE(check(p) == "");
      }
    }
}

}  // namespace

TEST_CASE("f32 and f64 GEMM match the f64 reference for every backend and instruction set", "[kernels]") {
  SettingsGuard guard;
  for (const Flavour& flavour : flavours()) {
    flavour.select();
    const std::string name = flavour.name();
    check_all(name.c_str(), check_f32);
    check_all(name.c_str(), check_f64);
  }
}

TEST_CASE("bf16 and f16 GEMM accumulate in f32 for every instruction set", "[kernels]") {
  SettingsGuard guard;
  for (const Flavour& flavour : flavours()) {
    if (flavour.backend != fk::GemmBackend::Own) continue;  // 16-bit always runs the own kernels
    flavour.select();
    const std::string name = flavour.name();
    check_all(name.c_str(), check_bf16);
    check_all(name.c_str(), check_f16);
  }
}

TEST_CASE("bf16 pair packing (the vdpbf16ps layout) is right on any CPU", "[kernels]") {
  // The AVX512_BF16 kernel packs k in pairs; this runs the same packing through a plain-vector
  // emulation of vdpbf16ps, odd K and a K past the 512-deep block included.
  using namespace fk::gemm_detail;
  std::mt19937 rng(11);
  for (const Size& s : {Size{7, 5, 3}, Size{13, 9, 1}, Size{20, 17, 515}})
    for (int t = 0; t < 4; ++t) {
      const Problem p(t & 1, t & 2, s.M, s.N, s.K, 1.5, 0.0, 1, rng);
      const auto A = convert<BFloat16>(p.A), B = convert<BFloat16>(p.B);
      auto C = initial_c<float>(p);
      GemmProblem<BFloat16, float> problem{p.ta, p.tb, p.M,        p.N,   p.K,      1.5f, A.data(),
                                           p.lda, B.data(), p.ldb, 0.0f, C.data(), p.ldc};
      blocked_gemm(portable_bf16_pair_kernel(), problem, 1);
      REQUIRE(mismatch(p, C, p.reference(round_bf16), 2e-6, 1e-5) == "");
    }
}

TEST_CASE("the AMX tile layout (A rows in 32s, B in pairs, 32 x 32 tiles) is right on any CPU", "[kernels]") {
  // The AMX kernel's packing through a plain C++ product over the same layout: K below, at and
  // past the 32-deep group and across 64-deep blocks; rows and columns past one tile and, at 150
  // rows, past the block where packed A stays for a whole k block.
  using namespace fk::gemm_detail;
  std::mt19937 rng(13);
  for (const Size& s : {Size{7, 5, 3}, Size{33, 40, 32}, Size{40, 70, 131}, Size{150, 33, 65}})
    for (int t = 0; t < 4; ++t)
      for (const float beta : {0.0f, 1.0f}) {
        const Problem p(t & 1, t & 2, s.M, s.N, s.K, 1.0, beta, 1, rng);
        const auto A = convert<BFloat16>(p.A), B = convert<BFloat16>(p.B);
        auto C = initial_c<float>(p);
        GemmProblem<BFloat16, float> problem{p.ta,  p.tb,     p.M,  p.N,      p.K,   1.0f,   A.data(),
                                             p.lda, B.data(), p.ldb, beta, C.data(), p.ldc};
        blocked_gemm(portable_amx_layout_kernel(), problem, 1 + t % 2);
        INFO("M=" << s.M << " N=" << s.N << " K=" << s.K << " trans " << t << " beta " << beta);
        REQUIRE(mismatch(p, C, p.reference(round_bf16), 2e-6, 1e-5) == "");
      }
}

TEST_CASE("the AVX-512 flavour reports whether it has vdpbf16ps", "[kernels]") {
  if (!fk::gemm_isa_supported(fk::GemmIsa::Amx))
    WARN("this CPU (or OS) has no AMX: the AMX bf16 kernel was not run, only its layout's emulation");
  if (!fk::gemm_isa_supported(fk::GemmIsa::Avx512)) {
    CHECK_FALSE(fk::gemm_has_bf16_dot());
    WARN("this CPU has no AVX-512: the AVX-512 and AVX512_BF16 kernels were not run");
  }
}

TEST_CASE("K == 0 and alpha == 0 scale C by beta without reading A or B", "[kernels]") {
  std::vector<float> C = {1, 2, 3, 4};
  fk::gemm_f32(false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.5f, C.data(), 2);
  CHECK(C == std::vector<float>{0.5f, 1, 1.5f, 2});
  std::vector<float> nan_c(4, std::numeric_limits<float>::quiet_NaN());
  const std::vector<float> A = {1, 2, 3, 4}, B = {1, 0, 0, 1};
  fk::gemm_f32(false, false, 2, 2, 2, 0.0f, A.data(), 2, B.data(), 2, 0.0f, nan_c.data(), 2);
  CHECK(nan_c == std::vector<float>(4, 0.0f));
}

TEST_CASE("strided-batched GEMM broadcasts operands with stride 0", "[kernels]") {
  SettingsGuard guard;
  std::mt19937 rng(3);
  const int64_t batch = 5, M = 9, N = 20, K = 13;
  for (const Flavour& flavour : flavours()) {
    flavour.select();
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      // A shared by every product; B and C per product.
      const Problem shared(ta, tb, M, N, K, 1.0, 0.0, 0, rng);
      std::vector<Problem> products;
      for (int64_t b = 0; b < batch; ++b) {
        products.emplace_back(ta, tb, M, N, K, 1.0, 0.0, 0, rng);
        products.back().A = shared.A;
      }
      std::vector<float> A = convert<float>(shared.A), B, C(batch * M * N, std::nanf(""));
      for (const Problem& p : products) {
        const auto b = convert<float>(p.B);
        B.insert(B.end(), b.begin(), b.end());
      }
      fk::gemm_batched_f32(ta, tb, M, N, K, 1.0f, A.data(), shared.lda, B.data(), shared.ldb, 0.0f, C.data(), N,
                           fk::GemmBatch{batch, 0, K * N, M * N});
      for (int64_t b = 0; b < batch; ++b) {
        const std::vector<float> c(C.begin() + b * M * N, C.begin() + (b + 1) * M * N);
        INFO(flavour.name() << " product " << b);
        REQUIRE(mismatch(products[b], c, products[b].reference(round_f32), 2e-6, 1e-5) == "");
      }
    }
  }
}

TEST_CASE("GEMM results are bit-identical for 1, 2 and 3 threads", "[kernels]") {
  SettingsGuard guard;
  std::mt19937 rng(5);
  auto run_f32 = [](const Problem& p, const fk::GemmBatch& batch) {
    const auto A = convert<float>(p.A), B = convert<float>(p.B);
    std::vector<float> C(p.C.begin(), p.C.end());
    C.resize(p.M * p.ldc * batch.count);
    fk::gemm_batched_f32(p.ta, p.tb, p.M, p.N, p.K, 0.75f, A.data(), p.lda, B.data(), p.ldb, 0.5f, C.data(), p.ldc,
                         batch);
    return C;
  };
  auto run_bf16 = [](const Problem& p, const fk::GemmBatch& batch) {
    const auto A = convert<BFloat16>(p.A), B = convert<BFloat16>(p.B);
    std::vector<float> C(p.C.begin(), p.C.end());
    C.resize(p.M * p.ldc * batch.count);
    fk::gemm_batched_bf16(p.ta, p.tb, p.M, p.N, p.K, 1.0f, A.data(), p.lda, B.data(), p.ldb, 0.0f, C.data(), p.ldc,
                          batch);
    return C;
  };
  auto run_f64 = [](const Problem& p, const fk::GemmBatch& batch) {
    std::vector<double> C(p.C);
    C.resize(p.M * p.ldc * batch.count);
    fk::gemm_batched_f64(p.ta, p.tb, p.M, p.N, p.K, 1.0, p.A.data(), p.lda, p.B.data(), p.ldb, 0.0, C.data(), p.ldc,
                         batch);
    return C;
  };
  // Large enough for 3 threads to split it (about 4 MFLOP each), with edge tiles; and a batch
  // of small products, which threads split by product instead.
  const Problem large(false, true, 151, 263, 300, 1.0, 0.5, 1, rng);
  const Problem tall(true, false, 310, 70, 300, 1.0, 0.5, 0, rng);  // Goto's loop order
  const Problem small(true, false, 20, 19, 17, 1.0, 0.5, 0, rng);
  // A few rows (generation's shape): B read in place, as rows (A B^T) or row-major (A B).
  const Problem skinny_nt(false, true, 13, 1030, 301, 1.0, 0.5, 1, rng);
  const Problem skinny_nn(false, false, 16, 700, 203, 1.0, 0.5, 2, rng);
  const fk::GemmBatch single{}, batch{6, 0, 0, 20 * 19};
  for (const Flavour& flavour : flavours()) {
    flavour.select();
    INFO(flavour.name());
    fathom::set_num_threads(1);
    const auto f32 = run_f32(large, single), f32_batch = run_f32(small, batch);
    const auto f64 = run_f64(large, single), f64_tall = run_f64(tall, single);
    const auto f32_tall = run_f32(tall, single);
    const auto f32_skinny_nt = run_f32(skinny_nt, single), f32_skinny_nn = run_f32(skinny_nn, single);
    const auto bf16 = run_bf16(large, single);
    // OpenBLAS and Eigen choose their blocking by thread count, so their sums can differ in the
    // last bits; the build option documents that those backends give up this guarantee.
    const bool peer_splits_k = flavour.backend != fk::GemmBackend::Own;
    if (peer_splits_k) WARN(flavour.name() << " f32/f64 results may depend on the thread count; only bf16 (own kernels) is checked");
    for (int threads : {2, 3}) {
      fathom::set_num_threads(threads);
      INFO(threads << " threads");
      CHECK(run_bf16(large, single) == bf16);
      if (peer_splits_k) continue;
      CHECK(run_f32(large, single) == f32);
      CHECK(run_f32(small, batch) == f32_batch);
      CHECK(run_f64(large, single) == f64);
      CHECK(run_f32(tall, single) == f32_tall);
      CHECK(run_f64(tall, single) == f64_tall);
      CHECK(run_f32(skinny_nt, single) == f32_skinny_nt);
      CHECK(run_f32(skinny_nn, single) == f32_skinny_nn);
    }
  }
}

TEST_CASE("GEMM rejects leading dims shorter than a row", "[kernels]") {
  std::vector<float> A(64), B(64), C(64);
  auto message = [&](auto call) {
    try {
      call();
    } catch (const fathom::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(message([&] { fk::gemm_f32(false, false, 4, 4, 5, 1, A.data(), 4, B.data(), 4, 0, C.data(), 4); }),
             Catch::Contains("lda 4 is less than A's row length 5 (A stored as [4, 5])"));
  CHECK_THAT(message([&] { fk::gemm_f32(false, true, 4, 6, 4, 1, A.data(), 4, B.data(), 3, 0, C.data(), 6); }),
             Catch::Contains("ldb 3 is less than B's row length 4 (B stored as [6, 4])"));
  CHECK_THAT(message([&] { fk::gemm_f32(false, false, 4, 4, 4, 1, A.data(), 4, B.data(), 4, 0, C.data(), 3); }),
             Catch::Contains("ldc 3 is less than C's row length 4"));
  CHECK_THAT(message([&] {
               fk::gemm_batched_f32(false, false, 2, 2, 2, 1, A.data(), 2, B.data(), 2, 0, C.data(), 2,
                                    fk::GemmBatch{3, 4, 4, 0});
             }),
             Catch::Contains("C's batch stride is 0 for a batch of 3"));
}
