// fathom-report: what this Fathom build is and what it finds on this machine (like DeepSpeed's
// ds_report): build options, library versions, CPU features and cores, GPUs, and whether the
// MPI and NCCL backends work. Paste its output into bug reports.
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <string>
#include <utility>

#include "core/cuda/cuda_runtime.h"
#include "core/threads.h"
#include "launcher/cpu_cores.h"
#include "parallel/backend_info.h"

#ifdef FATHOM_WITH_CUDA
#include <cuda_runtime_api.h>
#if __has_include(<cublas_api.h>)
#include <cublas_api.h>
#endif
#if __has_include(<cudnn_version.h>)
#include <cudnn_version.h>
#endif
#endif
#if __has_include(<Eigen/Core>)
#include <Eigen/Core>
#endif

namespace {

constexpr int kLabelWidth = 22;

// Rows are printed as they are found, so a backend check that hangs still leaves the rest.
void section(const std::string& title) { std::cout << "\n" << title << "\n" << std::string(title.size(), '-') << "\n"; }

void row(const std::string& label, const std::string& value) {
  std::cout << "  " << label << std::string(label.size() < kLabelWidth ? kLabelWidth - label.size() : 1, ' ') << value
            << std::endl;
}

template <typename... Parts>
std::string join(const Parts&... parts) {
  return (std::string() + ... + std::string(parts));
}

std::string dotted(int major, int minor, int patch) {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

// CUDA encodes versions as 1000 * major + 10 * minor (13000 = 13.0).
std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

void report_build() {
  section("Fathom");
  row("version", FATHOM_VERSION);
  row("build type", FATHOM_BUILD_TYPE);
  row("FATHOM_WITH_CUDA", fathom::cuda::built_with_cuda() ? "ON" : "OFF");
  row("CUDA architectures", fathom::cuda::built_with_cuda() ? FATHOM_CUDA_ARCHITECTURES : "(CUDA off)");
  row("FATHOM_CPU_BASELINE", FATHOM_CPU_BASELINE);
  row("FATHOM_CPU_GEMM", FATHOM_CPU_GEMM);
  row("C++ compiler", FATHOM_CXX_COMPILER);
  if (fathom::cuda::built_with_cuda()) row("CUDA compiler", FATHOM_CUDA_COMPILER);
}

void report_cuda_versions() {
#ifdef FATHOM_WITH_CUDA
  int runtime = 0, driver = 0;
  row("CUDA runtime", cudaRuntimeGetVersion(&runtime) == cudaSuccess ? cuda_version_text(runtime) : "none");
  // The driver reports 0 when none is installed.
  row("CUDA driver", cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0 ? cuda_version_text(driver) : "none");
#ifdef CUBLAS_VER_MAJOR
  row("cuBLAS", dotted(CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH) + " (headers)");
#else
  row("cuBLAS", "no headers");
#endif
#ifdef CUDNN_MAJOR
  row("cuDNN", dotted(CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL) + " (headers)");
#else
  row("cuDNN", "no headers");
#endif
#else
  row("CUDA", "not built (FATHOM_CUDA=OFF)");
#endif
}

void report_versions() {
  namespace parallel = fathom::parallel;
  section("Versions");
  report_cuda_versions();
  row("NCCL", parallel::nccl_built() ? (parallel::nccl_version().empty() ? "not loadable" : parallel::nccl_version())
                                        : "not built");
  row("MPI", join(parallel::mpi_library_version(), " (", parallel::mpi_standard_version(), ")"));
#ifdef EIGEN_WORLD_VERSION
  row("Eigen", dotted(EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION) + " (headers)");
#else
  row("Eigen", "no headers");
#endif
  row("yaml-cpp", FATHOM_YAML_CPP_VERSION);
}

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.starts_with("model name")) return line.substr(line.find(':') + 2);
  return "unknown";
}

std::string cpu_features() {
  __builtin_cpu_init();
  std::string present, missing;
  const auto note = [&](const char* name, bool supported) { (supported ? present : missing) += join(" ", name); };
  note("avx2", __builtin_cpu_supports("avx2"));
  note("fma", __builtin_cpu_supports("fma"));
  note("f16c", __builtin_cpu_supports("f16c"));
  note("avx512f", __builtin_cpu_supports("avx512f"));
  // GCC 10 and Clang 18 were the first to know this feature name.
#if (defined(__clang__) && __clang_major__ >= 18) || (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 10)
  note("avx512bf16", __builtin_cpu_supports("avx512bf16"));
#else
  missing += " avx512bf16(unknown to this compiler)";
#endif
  return join(present.empty() ? "none" : present.substr(1), missing.empty() ? "" : join("; missing:", missing));
}

void report_cpu() {
  section("CPU");
  row("model", cpu_model());
  row("features", cpu_features());
  row("online cores", std::to_string(fathom::launcher::online_cores()));
  row("affinity cores", std::to_string(fathom::launcher::affinity_cores()));
  row("physical cores", std::to_string(fathom::launcher::allowed_physical_cores()) + " (in the affinity mask)");
  row("Fathom threads", std::to_string(fathom::num_threads()));
}

void report_gpus() {
  section("GPUs");
  const int count = fathom::cuda::device_count();
  if (count == 0) row("devices", "none (" + fathom::cuda::unavailable_reason() + ")");
  for (int index = 0; index < count; ++index) {
    const fathom::cuda::DeviceProperties device = fathom::cuda::device_properties(index);
    char memory[32];
    std::snprintf(memory, sizeof memory, "%.1f GiB", static_cast<double>(device.total_memory) / (1 << 30));
    row("cuda:" + std::to_string(index), join(device.name, ", sm_", std::to_string(device.major),
                                              std::to_string(device.minor), ", ", memory, ", ",
                                              std::to_string(device.multiprocessors), " SMs"));
  }
}

void report_backends() {
  section("Backends");
  for (const auto& [name, check] : {std::pair{"MPI", &fathom::parallel::check_mpi},
                                    std::pair{"NCCL", &fathom::parallel::check_nccl}}) {
    const fathom::parallel::BackendCheck result = check();
    row(name, join(result.ok ? "OK" : "FAILED", ": ", result.detail));
  }
}

}  // namespace

int main() {
  std::cout << "Fathom report\n";
  // A section that throws still leaves the others, and the report always exits 0.
  for (void (*report)() : {report_build, report_versions, report_cpu, report_gpus, report_backends}) {
    try {
      report();
    } catch (const std::exception& error) {
      row("error", error.what());
    }
  }
  return 0;
}
