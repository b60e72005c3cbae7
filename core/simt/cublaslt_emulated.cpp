// cuBLASLt as the CUDA emulation build links it (docs/gpu.md, "CUDA emulation"): the descriptor,
// layout and preference objects and cublasLtMatmul with cuBLASLt's semantics, the GEMM itself a
// plain CPU loop queued on the call's stream like any device work. So what Fathom's wrapper
// (kernels/cuda/gemm_cublaslt.cpp) decides — the column-major mapping of its row-major problems,
// transposes, leading dimensions, batch strides, which epilogue and where its vectors go — runs
// and is checked against the CPU twins; only cuBLASLt's own kernels are not.
//
// Semantics implemented, D = epilogue(alpha op(A) op(B) + beta C), all column-major:
//   BIAS            + bias[i] (one value per row of D)
//   GELU_AUX        aux = the sum, D = gelu_tanh(aux)
//   GELU_AUX_BIAS   aux = the sum + bias[i], D = gelu_tanh(aux)
//   BGRADB          D as DEFAULT; bias[j] = sum over k of op(B)[k, j] (one per column of D)
// Accumulation in f32 for f32/f16/bf16 (inputs rounded to TF32 under CUBLAS_COMPUTE_32F_FAST_TF32)
// and f64 for f64; bias and aux have D's type. An attribute the emulation does not implement is
// refused (CUBLAS_STATUS_NOT_SUPPORTED), so a wrapper that starts using one fails loudly here.
#include <cublasLt.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "core/simt/device_memory.h"
#include "core/simt/submit.h"

namespace fathom::simt {
namespace {

struct MatmulDesc {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = CUDA_R_32F;
  int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  void* bias = nullptr;
  void* aux = nullptr;
  int64_t aux_ld = 0;
};
struct Layout {
  cudaDataType_t type = CUDA_R_32F;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t batch = 1;
  int64_t batch_stride = 0;
};
// The heuristic offers its one algorithm whatever the preferences: their values are checked, not kept.
struct Preference {};

// The handle types are the header's opaque pointers; the emulation's objects stand behind them.
MatmulDesc& get(cublasLtMatmulDesc_t d) { return *reinterpret_cast<MatmulDesc*>(d); }
Layout& get(cublasLtMatrixLayout_t l) { return *reinterpret_cast<Layout*>(l); }
Preference& get(cublasLtMatmulPreference_t p) { return *reinterpret_cast<Preference*>(p); }

template <class V>
cublasStatus_t set(V& field, const void* buf, size_t size) {
  if (size != sizeof(V)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&field, buf, size);
  return CUBLAS_STATUS_SUCCESS;
}

size_t element_bytes(cudaDataType_t t) {
  switch (t) {
    case CUDA_R_32F:
      return 4;
    case CUDA_R_64F:
      return 8;
    case CUDA_R_16F:
    case CUDA_R_16BF:
      return 2;
    default:
      return 0;
  }
}

double load(cudaDataType_t t, const void* base, int64_t index) {
  switch (t) {
    case CUDA_R_32F:
      return static_cast<const float*>(base)[index];
    case CUDA_R_64F:
      return static_cast<const double*>(base)[index];
    case CUDA_R_16F:
      return half_bits_to_float(static_cast<const uint16_t*>(base)[index]);
    case CUDA_R_16BF:
      return bfloat16_bits_to_float(static_cast<const uint16_t*>(base)[index]);
    default:
      return 0;
  }
}

void store(cudaDataType_t t, void* base, int64_t index, double value) {
  switch (t) {
    case CUDA_R_32F:
      static_cast<float*>(base)[index] = static_cast<float>(value);
      break;
    case CUDA_R_64F:
      static_cast<double*>(base)[index] = value;
      break;
    case CUDA_R_16F:
      static_cast<uint16_t*>(base)[index] = float_to_half_bits(static_cast<float>(value));
      break;
    case CUDA_R_16BF:
      static_cast<uint16_t*>(base)[index] = float_to_bfloat16_bits(static_cast<float>(value));
      break;
    default:
      break;
  }
}

// TF32 keeps 10 of f32's 23 mantissa bits (rounded to nearest, ties away, as the tensor cores do).
float to_tf32(float x) {
  if (!std::isfinite(x)) return x;
  uint32_t bits = fathom::detail::float_bits(x);
  bits = (bits + 0x1000u) & ~0x1FFFu;
  return fathom::detail::bits_float(bits);
}

template <class T>
T gelu_tanh(T x) {
  return T(0.5) * x * (T(1) + std::tanh(T(0.7978845608028654) * (x + T(0.044715) * x * x * x)));
}

struct Gemm {
  MatmulDesc desc;
  Layout a, b, c, d;
  double alpha, beta;
  const void *pa, *pb, *pc;
  void* pd;
};

// op(M) of one batch entry, as `rows` x `depth` in the accumulation type, row-major: D's rows
// from op(A) and its columns from op(B)^T both read along the sum.
template <class Acc>
void pack(const Layout& l, const void* base, int64_t offset, bool transposed, bool along_rows, bool tf32, int64_t rows,
          int64_t depth, std::vector<Acc>& out) {
  out.resize(static_cast<size_t>(rows * depth));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t p = 0; p < depth; ++p) {
      // Element (r, p) of op(A) (along_rows) or (p, r) of op(B), column-major underneath.
      const int64_t i = along_rows ? r : p, j = along_rows ? p : r;
      const double v = load(l.type, base, offset + (transposed ? j + i * l.ld : i + j * l.ld));
      out[static_cast<size_t>(r * depth + p)] =
          tf32 ? static_cast<Acc>(to_tf32(static_cast<float>(v))) : static_cast<Acc>(v);
    }
}

// The whole batch, in the accumulation type `Acc`.
template <class Acc>
void run_gemm(const Gemm& g) {
  const bool ta = g.desc.transa != CUBLAS_OP_N, tb = g.desc.transb != CUBLAS_OP_N;
  const int64_t m = static_cast<int64_t>(g.d.rows), n = static_cast<int64_t>(g.d.cols);
  const int64_t k = static_cast<int64_t>(ta ? g.a.rows : g.a.cols);
  const bool tf32 = g.desc.compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  const uint32_t epilogue = g.desc.epilogue;
  const bool bias = epilogue == CUBLASLT_EPILOGUE_BIAS || epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  const bool gelu = epilogue == CUBLASLT_EPILOGUE_GELU_AUX || epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  std::vector<Acc> a, bt;
  for (int32_t batch = 0; batch < g.d.batch; ++batch) {
    pack(g.a, g.pa, batch * g.a.batch_stride, ta, true, tf32, m, k, a);
    pack(g.b, g.pb, batch * g.b.batch_stride, tb, false, tf32, n, k, bt);
    const int64_t oc = batch * g.c.batch_stride, od = batch * g.d.batch_stride;
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) {
        const Acc* x = a.data() + i * k;
        const Acc* y = bt.data() + j * k;
        Acc sum = 0;
        for (int64_t p = 0; p < k; ++p) sum += x[p] * y[p];
        Acc value = static_cast<Acc>(g.alpha) * sum;
        if (g.beta != 0)
          value += static_cast<Acc>(g.beta) * static_cast<Acc>(load(g.c.type, g.pc, oc + i + j * g.c.ld));
        if (bias) value += static_cast<Acc>(load(g.d.type, g.desc.bias, i));
        if (gelu) {
          store(g.d.type, g.desc.aux, i + j * g.desc.aux_ld, value);
          value = gelu_tanh(value);
        }
        store(g.d.type, g.pd, od + i + j * g.d.ld, value);
      }
  }
  if (epilogue == CUBLASLT_EPILOGUE_BGRADB)  // sums of op(B)'s columns, unrounded inputs
    for (int64_t j = 0; j < n; ++j) {
      Acc sum = 0;
      for (int64_t p = 0; p < k; ++p)
        sum += static_cast<Acc>(load(g.b.type, g.pb, tb ? j + p * g.b.ld : p + j * g.b.ld));
      store(g.d.type, g.desc.bias, j, sum);
    }
}

// What cuBLASLt would refuse: shapes that do not chain, a type it has no kernel for, an
// epilogue vector or matrix that is missing or not in device memory.
cublasStatus_t check(const Gemm& g) {
  const bool ta = g.desc.transa != CUBLAS_OP_N, tb = g.desc.transb != CUBLAS_OP_N;
  const uint64_t m = g.d.rows, n = g.d.cols, k = ta ? g.a.rows : g.a.cols;
  if ((ta ? g.a.cols : g.a.rows) != m || (tb ? g.b.cols : g.b.rows) != k || (tb ? g.b.rows : g.b.cols) != n ||
      g.c.rows != m || g.c.cols != n)
    return CUBLAS_STATUS_INVALID_VALUE;
  for (const Layout* l : {&g.a, &g.b, &g.c, &g.d})
    if (element_bytes(l->type) == 0 || l->type != g.d.type || l->ld < static_cast<int64_t>(l->rows) ||
        l->batch != g.d.batch)
      return CUBLAS_STATUS_NOT_SUPPORTED;
  const uint32_t e = g.desc.epilogue;
  const bool bias =
      e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_BGRADB;
  const bool aux = e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  const size_t bytes = element_bytes(g.d.type);
  if (bias && !is_device_range(g.desc.bias, bytes * (e == CUBLASLT_EPILOGUE_BGRADB ? n : m)))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (aux && (g.desc.aux_ld < static_cast<int64_t>(m) ||
              !is_device_range(g.desc.aux, bytes * (static_cast<uint64_t>(g.desc.aux_ld) * (n - 1) + m))))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (e != CUBLASLT_EPILOGUE_DEFAULT && (g.d.batch != 1 || (!bias && !aux))) return CUBLAS_STATUS_NOT_SUPPORTED;
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace
}  // namespace fathom::simt

using namespace fathom::simt;

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  static int the_handle;
  *handle = reinterpret_cast<cublasLtHandle_t>(&the_handle);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t) { return CUBLAS_STATUS_SUCCESS; }
size_t cublasLtGetVersion(void) { return CUBLAS_VERSION; }
const char* cublasLtGetStatusName(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    default:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
  }
}
const char* cublasLtGetStatusString(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "success";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "an invalid value was used as an argument (SIMT emulation)";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "the functionality requested is not supported (SIMT emulation)";
    default:
      return "an internal operation failed (SIMT emulation)";
  }
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
  auto* d = new MatmulDesc();
  d->compute = compute;
  d->scale = scale;
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(d);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete &get(desc);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                                              const void* buf, size_t size) {
  MatmulDesc& d = get(desc);
  switch (attribute) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
      return set(d.transa, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSB:
      return set(d.transb, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      return set(d.epilogue, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      return set(d.bias, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
      return set(d.aux, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
      return set(d.aux_ld, buf, size);
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(new Layout{type, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete &get(layout);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                cublasLtMatrixLayoutAttribute_t attribute, const void* buf,
                                                size_t size) {
  Layout& l = get(layout);
  switch (attribute) {
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
      return set(l.batch, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
      return set(l.batch_stride, buf, size);
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  *pref = reinterpret_cast<cublasLtMatmulPreference_t>(new Preference());
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete &get(pref);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t,
                                                    cublasLtMatmulPreferenceAttributes_t attribute, const void* buf,
                                                    size_t size) {
  switch (attribute) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      return size == sizeof(uint64_t) && buf ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      return size == sizeof(uint32_t) && buf ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

// One algorithm for every problem cuBLASLt could run, with no workspace; none (NOT_SUPPORTED)
// where cuBLASLt documents that it has none: a GELU input matrix whose leading dimension is not
// a multiple of 8.
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t,
                                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                              cublasLtMatmulPreference_t, int requested,
                                              cublasLtMatmulHeuristicResult_t* results, int* count) {
  *count = 0;
  if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
  const MatmulDesc& d = get(desc);
  const bool gelu = d.epilogue == CUBLASLT_EPILOGUE_GELU_AUX || d.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  if (gelu && d.aux_ld % 8 != 0) return CUBLAS_STATUS_NOT_SUPPORTED;
  results[0] = cublasLtMatmulHeuristicResult_t{};
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *count = 1;
  return CUBLAS_STATUS_SUCCESS;
}

// Checked now, run when the stream gets to it, with the descriptors' values as they are now
// (the caller may change them for its next call before this one runs, as cuBLASLt allows).
cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t a_desc, const void* B, cublasLtMatrixLayout_t b_desc,
                              const void* beta, const void* C, cublasLtMatrixLayout_t c_desc, void* D,
                              cublasLtMatrixLayout_t d_desc, const cublasLtMatmulAlgo_t*, void*, size_t,
                              cudaStream_t stream) {
  Gemm g{get(desc), get(a_desc), get(b_desc), get(c_desc), get(d_desc), 0, 0, A, B, C, D};
  const bool f64 = g.desc.scale == CUDA_R_64F;
  g.alpha = f64 ? *static_cast<const double*>(alpha) : *static_cast<const float*>(alpha);
  g.beta = f64 ? *static_cast<const double*>(beta) : *static_cast<const float*>(beta);
  if (const cublasStatus_t s = check(g); s != CUBLAS_STATUS_SUCCESS) return s;
  const auto extent = [](const Layout& l) -> uint64_t {
    if (l.rows == 0 || l.cols == 0 || l.batch < 1) return 0;
    return element_bytes(l.type) *
           (static_cast<uint64_t>(l.batch - 1) * l.batch_stride + static_cast<uint64_t>(l.ld) * (l.cols - 1) + l.rows);
  };
  if (!is_device_range(A, extent(g.a)) || !is_device_range(B, extent(g.b)) || !is_device_range(D, extent(g.d)) ||
      (g.beta != 0 && !is_device_range(C, extent(g.c))))
    return CUBLAS_STATUS_INVALID_VALUE;
  submit(stream, [g] {
    if (g.d.type == CUDA_R_64F)
      run_gemm<double>(g);
    else
      run_gemm<float>(g);
  });
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
