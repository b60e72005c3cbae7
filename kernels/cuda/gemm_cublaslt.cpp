// cuBLASLt behind kernels/cuda/gemm_cublaslt.h. Host code: plans, handles, workspaces.
//
// The row-major problem is handed to cuBLASLt through the column-major view of the same memory
// (kernels/gemm_problem.h), so no operand is ever transposed or copied here. f16/bf16 compute in
// f32 (CUBLAS_COMPUTE_32F, one rounding on store); f32 in strict f32 unless TF32 is allowed; f64
// in f64. The descriptors of a plan are shared by every call with the same key, so the pointer
// attributes (bias, aux) are set and the GEMM enqueued under the device's lock.
#include "kernels/cuda/gemm_cublaslt.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/allocator.h"
#include "core/cuda/cuda_runtime.h"
#include "core/error.h"

#define FATHOM_CUBLAS_CHECK(call)                                                                   \
  do {                                                                                              \
    const cublasStatus_t fathom_cublas_status = (call);                                             \
    if (fathom_cublas_status != CUBLAS_STATUS_SUCCESS) [[unlikely]]                                 \
      FATHOM_FAIL(#call, " failed: ", cublasLtGetStatusName(fathom_cublas_status), " (",            \
                  cublasLtGetStatusString(fathom_cublas_status), ")");                              \
  } while (0)

namespace fathom::kernels {
namespace {

// Enough plans for every shape of a training run; a run that keeps meeting new shapes starts over.
constexpr size_t kMaxPlans = 1024;

cudaDataType_t data_type(DType dtype) {
  switch (dtype) {
    case DType::F32: return CUDA_R_32F;
    case DType::F64: return CUDA_R_64F;
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    default: FATHOM_FAIL("matmul on CUDA: unsupported dtype ", dtype_name(dtype));
  }
}

cublasComputeType_t compute_type(GemmCompute compute) {
  switch (compute) {
    case GemmCompute::F32FastTf32: return CUBLAS_COMPUTE_32F_FAST_TF32;
    case GemmCompute::F64: return CUBLAS_COMPUTE_64F;
    case GemmCompute::F32: break;
  }
  return CUBLAS_COMPUTE_32F;
}

cublasLtEpilogue_t lt_epilogue(GemmEpilogue epilogue) {
  switch (epilogue) {
    case GemmEpilogue::Bias: return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::Gelu: return CUBLASLT_EPILOGUE_GELU_AUX;
    case GemmEpilogue::GeluBias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    // Row sums of op(A) are sums over k of cuBLASLt's B (our A): one value per column of D.
    case GemmEpilogue::BiasGrad: return CUBLASLT_EPILOGUE_BGRADB;
    case GemmEpilogue::None: break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

cublasOperation_t op(bool transpose) { return transpose ? CUBLAS_OP_T : CUBLAS_OP_N; }

template <typename V>
void set_attribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const V& value) {
  FATHOM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)));
}
template <typename V>
void set_attribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attribute, const V& value) {
  FATHOM_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, attribute, &value, sizeof(value)));
}
template <typename V>
void set_attribute(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attribute, const V& value) {
  FATHOM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attribute, &value, sizeof(value)));
}

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool has_algo = false;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

class Preference {
 public:
  Preference() { FATHOM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref_)); }
  ~Preference() { cublasLtMatmulPreferenceDestroy(pref_); }
  Preference(const Preference&) = delete;
  Preference& operator=(const Preference&) = delete;
  cublasLtMatmulPreference_t get() const { return pref_; }

 private:
  cublasLtMatmulPreference_t pref_ = nullptr;
};

cublasLtMatrixLayout_t make_layout(cudaDataType_t type, const LtMatrix& m, int64_t batch) {
  cublasLtMatrixLayout_t layout = nullptr;
  FATHOM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, type, static_cast<uint64_t>(m.rows),
                                                 static_cast<uint64_t>(m.cols), m.ld));
  if (batch > 1) {
    set_attribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, static_cast<int32_t>(batch));
    set_attribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, m.batch_stride);
  }
  return layout;
}

// The pointers are set before the heuristic runs: it reads their alignment from them.
void set_epilogue_pointers(const Plan& plan, const GemmProblem& p, const GemmPointers& ptrs) {
  if (p.epilogue == GemmEpilogue::None) return;
  if (p.epilogue != GemmEpilogue::Gelu) set_attribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, ptrs.bias);
  if (p.epilogue == GemmEpilogue::Gelu || p.epilogue == GemmEpilogue::GeluBias)
    set_attribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, ptrs.aux);
}

std::unique_ptr<Plan> make_plan(cublasLtHandle_t handle, const GemmKey& key, const GemmPointers& ptrs) {
  const GemmProblem& p = key.problem;
  const LtGemm g = to_column_major(p);
  const GemmCompute compute = gemm_compute(p.dtype, p.allow_tf32);
  const cudaDataType_t type = data_type(p.dtype);
  auto plan = std::make_unique<Plan>();
  FATHOM_CUBLAS_CHECK(
      cublasLtMatmulDescCreate(&plan->desc, compute_type(compute), compute == GemmCompute::F64 ? CUDA_R_64F : CUDA_R_32F));
  set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(op(g.transpose_a)));
  set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(op(g.transpose_b)));
  if (p.epilogue != GemmEpilogue::None) {
    set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<uint32_t>(lt_epilogue(p.epilogue)));
    if (p.epilogue == GemmEpilogue::Gelu || p.epilogue == GemmEpilogue::GeluBias)
      set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, g.aux.ld);
    set_epilogue_pointers(*plan, p, ptrs);
  }
  plan->a = make_layout(type, g.a, g.batch);
  plan->b = make_layout(type, g.b, g.batch);
  plan->c = make_layout(type, g.c, g.batch);

  Preference pref;
  set_attribute(pref.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(kCublasLtWorkspaceBytes));
  // cuBLASLt's A is our B and its B our A.
  set_attribute(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_b);
  set_attribute(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_a);
  set_attribute(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c);
  set_attribute(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_c);

  cublasLtMatmulHeuristicResult_t result{};
  int count = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle, plan->desc, plan->a, plan->b, plan->c,
                                                               plan->c, pref.get(), 1, &result, &count);
  // NOT_SUPPORTED (or zero results) means no kernel fits this problem: the caller falls back.
  if (status == CUBLAS_STATUS_SUCCESS && count > 0 && result.state == CUBLAS_STATUS_SUCCESS &&
      result.workspaceSize <= kCublasLtWorkspaceBytes) {
    plan->algo = result.algo;
    plan->has_algo = true;
  } else if (status != CUBLAS_STATUS_SUCCESS && status != CUBLAS_STATUS_NOT_SUPPORTED) {
    FATHOM_CUBLAS_CHECK(status);
  }
  return plan;
}

struct DeviceState {
  std::mutex mutex;
  cublasLtHandle_t handle = nullptr;
  std::unordered_map<GemmKey, std::unique_ptr<Plan>, GemmKeyHash> plans;
  std::unordered_map<void*, void*> workspaces;  // stream -> workspace
};

// Never destroyed: handles and device memory must not be released from static destructors, which
// may run after the CUDA runtime has shut down; the process exit frees them.
DeviceState& device_state(int device) {
  static std::mutex mutex;
  static auto* states = new std::vector<std::unique_ptr<DeviceState>>();
  cuda::require_device(device);
  std::lock_guard<std::mutex> lock(mutex);
  if (states->empty()) states->resize(static_cast<size_t>(cuda::device_count()));
  auto& state = (*states)[static_cast<size_t>(device)];
  if (!state) state = std::make_unique<DeviceState>();
  return *state;
}

void* workspace_for(DeviceState& state, int device, void* stream) {
  void*& workspace = state.workspaces[stream];
  if (!workspace) workspace = allocator_for(Device::cuda(device)).allocate(kCublasLtWorkspaceBytes, MemoryTag::Other);
  return workspace;
}

}  // namespace

bool gemm_cublaslt(const GemmProblem& p, const GemmPointers& ptrs, int device, void* stream) {
  const std::string error = gemm_problem_error(p);
  FATHOM_CHECK(error.empty(), "GEMM on CUDA: ", error);
  if (!gemm_epilogue_supported(p)) return false;
  DeviceState& state = device_state(device);
  std::lock_guard<std::mutex> lock(state.mutex);
  if (!state.handle) FATHOM_CUBLAS_CHECK(cublasLtCreate(&state.handle));

  const GemmKey key = gemm_key(p, ptrs.a, ptrs.b, ptrs.c, ptrs.bias, ptrs.aux);
  auto it = state.plans.find(key);
  if (it == state.plans.end()) {
    if (state.plans.size() >= kMaxPlans) state.plans.clear();
    it = state.plans.emplace(key, make_plan(state.handle, key, ptrs)).first;
  }
  const Plan& plan = *it->second;
  if (!plan.has_algo) return false;
  set_epilogue_pointers(plan, p, ptrs);

  void* workspace = workspace_for(state, device, stream);
  const float alpha_f = 1.0f, beta_f = p.accumulate ? 1.0f : 0.0f;
  const double alpha_d = 1.0, beta_d = p.accumulate ? 1.0 : 0.0;
  const bool f64 = gemm_compute(p.dtype, p.allow_tf32) == GemmCompute::F64;
  const void* alpha = f64 ? static_cast<const void*>(&alpha_d) : static_cast<const void*>(&alpha_f);
  const void* beta = f64 ? static_cast<const void*>(&beta_d) : static_cast<const void*>(&beta_f);
  // cuBLASLt's A is our B and its B our A; C is read (beta = 1) and written in place as D.
  FATHOM_CUBLAS_CHECK(cublasLtMatmul(state.handle, plan.desc, alpha, ptrs.b, plan.a, ptrs.a, plan.b, beta, ptrs.c,
                                     plan.c, ptrs.c, plan.c, &plan.algo, workspace, kCublasLtWorkspaceBytes,
                                     static_cast<cudaStream_t>(stream)));
  cuda::count_kernel_launch();
  return true;
}

size_t gemm_cublaslt_cached_plans(int device) {
  DeviceState& state = device_state(device);
  std::lock_guard<std::mutex> lock(state.mutex);
  return state.plans.size();
}

}  // namespace fathom::kernels
