#pragma once
// Proof that a ZeRO stage-3 test ran the mode it names. Stage 3 with the default
// stage3_param_persistence_threshold (1e5 elements) keeps every parameter of a tiny test model
// whole on every rank, so "stage 3" would test an unpartitioned layout: a stage-3 test calls
// require_stage3_partitioned(engine) after training, which fails unless parameters were
// partitioned (released between uses, gathered by all-gathers) and, over more than one
// data-parallel rank, each rank stores less than the whole model.

#include <catch2/catch.hpp>

#include "engine/engine.h"
#include "zero/sharded_state.h"

namespace fathom::testing {

struct Stage3Evidence {
  int64_t partitioned = 0;     // parameters released between uses (not persistent)
  int64_t persistent = 0;      // parameters kept whole on every rank
  int64_t gathers = 0;         // all-gathers issued so far
  int64_t shard_elements = 0;  // elements this rank stores (its padded shard)
  int64_t model_elements = 0;  // elements of the whole model
  int ranks = 1;               // data-parallel ranks the parameters are sharded over
};

inline Stage3Evidence stage3_evidence(const Engine& engine) {
  const zero::ShardedState* sharded = zero::as_sharded(engine.training_state());
  INFO("the engine's training state is not ZeRO's sharded state: stage 3 was not active");
  REQUIRE(sharded != nullptr);
  INFO("ZeRO stage " << sharded->stage() << " has no parameter gatherer: stage 3 was not active");
  REQUIRE(sharded->gatherer() != nullptr);
  const zero::FlatParameters& flat = sharded->flat_parameters();
  Stage3Evidence e;
  for (size_t s = 0; s < flat.slots().size(); ++s)
    (sharded->gatherer()->is_persistent(s) ? e.persistent : e.partitioned) += 1;
  e.gathers = sharded->gatherer()->gathers_issued();
  e.shard_elements = flat.partition().shard_size();
  e.model_elements = flat.partition().numel();
  e.ranks = sharded->group().size();
  return e;
}

// `all`: every parameter must be partitioned (stage3_param_persistence_threshold 0).
inline Stage3Evidence require_stage3_partitioned(const Engine& engine, bool all = true) {
  const Stage3Evidence e = stage3_evidence(engine);
  INFO("stage 3: " << e.partitioned << " parameters partitioned, " << e.persistent << " persistent, " << e.gathers
                   << " all-gathers, " << e.shard_elements << " of " << e.model_elements << " elements over "
                   << e.ranks << " ranks");
  REQUIRE(e.partitioned > 0);
  if (all) REQUIRE(e.persistent == 0);
  REQUIRE(e.gathers > 0);
  if (e.ranks > 1) REQUIRE(e.shard_elements < e.model_elements);
  return e;
}

}  // namespace fathom::testing
