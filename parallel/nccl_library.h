#pragma once
// libnccl.so.2, loaded on first use with dlopen: the functions the NCCL backend calls, typed
// from <nccl.h>. Internal to the parallel layer.

#include <nccl.h>

#include <string>

namespace fathom::parallel {

struct NcclLibrary {
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclCommSplit) comm_split = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&ncclGetErrorString) get_error_string = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclReduce) reduce = nullptr;
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  std::string error;  // why loading failed ("" when it did not)
  bool loaded() const { return error.empty(); }
};

// Loads the library once (thread-safe); check loaded() before use.
const NcclLibrary& nccl_library();

// FATHOM_NCCL_CHECK(nccl_library().all_reduce(...)): throws naming the call and NCCL's message.
void check_nccl(ncclResult_t result, const char* call, const char* file, int line);

}  // namespace fathom::parallel

#define FATHOM_NCCL_CHECK(call) ::fathom::parallel::check_nccl((call), #call, __FILE__, __LINE__)
