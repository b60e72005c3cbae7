#pragma once
// How a checkpoint lays out the per-element training state so that any world size and ZeRO
// stage can read it back: every such state — the model's parameters, the fp32 master weights,
// each optimizer state (exp_avg, ...) — is one flat vector over the model's parameters
// concatenated in named order ("flat coordinates" [0, Ψ)). A checkpoint stores, per saved rank,
// the contiguous range of flat coordinates that rank owned; a loader reads whichever ranges its
// own layout needs from whichever files hold them. No conversion step exists or is needed.

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "parallel/topology.h"
#include "zero/partition.h"

namespace fathom {

// The range of flat coordinates rank `rank` of `world` writes at ZeRO stage `stage`: its shard
// (stages 1-3), or everything on rank 0 and nothing elsewhere (stage 0, where every rank holds
// the same full state).
zero::Range checkpoint_saved_range(int64_t numel, int world, int rank, int stage);

// Copies the pieces of `source` (flat, covering `source_range`) that fall in `target_range` into
// `target` (flat, covering `target_range`), converting dtype. Returns the elements copied.
int64_t copy_flat_overlap(const Tensor& source, zero::Range source_range, const Tensor& target, zero::Range target_range);

// XXH64 of a tensor's bytes: the checksum against truncation and bit rot, kept in index.json.
inline constexpr const char* kCheckpointChecksum = "xxh64";
uint64_t checkpoint_checksum(const Tensor& tensor);
std::string checksum_hex(uint64_t checksum);  // 16 lowercase hex digits

// Per-element states are grouped by kind, one file per saved rank per kind: "param" (the
// model's weights), "master" (fp32 master weights), "optim" (every "optim.<state>").
std::string checkpoint_state_kind(const std::string& state);
// The file of one rank's states of one kind, named by every coordinate that makes the rank's
// state distinct: its data-parallel rank, and its tensor and pipeline coordinates when those
// axes have more than one rank, so model-parallel peers never write the same file:
// "rank_00002.optim.safetensors", "rank_00002.tp01.pp03.optim.safetensors".
std::string checkpoint_file_name(const parallel::GridCoord& coord, const parallel::Topology& topology,
                                 const std::string& kind);
// The data-parallel-only form: "rank_00002.optim.safetensors".
std::string checkpoint_file_name(int data_rank, const std::string& kind);

}  // namespace fathom
