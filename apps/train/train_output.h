#pragma once
// fathom-train's --out folder, checked before anything trains: a folder that cannot be created
// or written is an error naming --out (not a filesystem error after the last step), and another
// run's checkpoints in it are refused unless --overwrite (a later --resume would pick them up).

#include <optional>

#include "apps/train/train_options.h"
#include "apps/train/train_resume.h"

namespace fathom::apps {

// Every rank calls it (each writes its own checkpoint shards); with --overwrite the first rank
// deletes the old checkpoints.
void prepare_out_dir(const TrainOptions& options, const std::optional<ResumePoint>& resume, bool main_rank);

}  // namespace fathom::apps
