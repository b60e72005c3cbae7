#include "parallel/nccl_library.h"

#include <dlfcn.h>

#include "core/error.h"

namespace fathom::parallel {
namespace {
template <typename Function>
void bind(void* handle, const char* symbol, Function& slot, std::string& error) {
  slot = reinterpret_cast<Function>(dlsym(handle, symbol));
  if (!slot && error.empty()) error = detail::concat("libnccl.so.2 has no symbol ", symbol, " (NCCL >= 2.18 needed)");
}

NcclLibrary load() {
  NcclLibrary lib;
  void* handle = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
  if (!handle) {
    lib.error = detail::concat("cannot load libnccl.so.2 (", dlerror(),
                               "); add the directory holding it (e.g. a CUDA toolkit's lib64 or the "
                               "nvidia-nccl wheel's lib) to LD_LIBRARY_PATH");
    return lib;
  }
  bind(handle, "ncclGetVersion", lib.get_version, lib.error);
  bind(handle, "ncclGetUniqueId", lib.get_unique_id, lib.error);
  bind(handle, "ncclCommInitRank", lib.comm_init_rank, lib.error);
  bind(handle, "ncclCommSplit", lib.comm_split, lib.error);
  bind(handle, "ncclCommDestroy", lib.comm_destroy, lib.error);
  bind(handle, "ncclCommAbort", lib.comm_abort, lib.error);
  bind(handle, "ncclCommGetAsyncError", lib.comm_get_async_error, lib.error);
  bind(handle, "ncclGetErrorString", lib.get_error_string, lib.error);
  bind(handle, "ncclAllReduce", lib.all_reduce, lib.error);
  bind(handle, "ncclReduceScatter", lib.reduce_scatter, lib.error);
  bind(handle, "ncclAllGather", lib.all_gather, lib.error);
  bind(handle, "ncclBroadcast", lib.broadcast, lib.error);
  bind(handle, "ncclReduce", lib.reduce, lib.error);
  bind(handle, "ncclGroupStart", lib.group_start, lib.error);
  bind(handle, "ncclGroupEnd", lib.group_end, lib.error);
  bind(handle, "ncclSend", lib.send, lib.error);
  bind(handle, "ncclRecv", lib.recv, lib.error);
  return lib;
}
}  // namespace

const NcclLibrary& nccl_library() {
  static const NcclLibrary library = load();
  return library;
}

void check_nccl(ncclResult_t result, const char* call, const char* file, int line) {
  if (result == ncclSuccess || result == ncclInProgress) [[likely]] return;
  const NcclLibrary& lib = nccl_library();
  detail::throw_error(file, line, detail::concat(call, " failed: ", lib.get_error_string
                                                                        ? lib.get_error_string(result)
                                                                        : "unknown NCCL error"));
}

}  // namespace fathom::parallel
