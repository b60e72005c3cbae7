#include "apps/train/train_output.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <system_error>

#include "core/error.h"

namespace fathom::apps {

namespace fs = std::filesystem;

void prepare_out_dir(const TrainOptions& options, const std::optional<ResumePoint>& resume, bool main_rank) {
  const fs::path out(options.out_dir);
  std::error_code error;
  fs::create_directories(out, error);
  FATHOM_CHECK(!error, "--out ", options.out_dir, ": cannot create the folder (", error.message(),
               "); choose a folder you can write to");
  FATHOM_CHECK(access(out.c_str(), W_OK | X_OK) == 0, "--out ", options.out_dir,
               ": the folder is not writable; choose a folder you can write to");

  const fs::path checkpoints = out / "checkpoints";
  if (!fs::exists(checkpoints / "latest", error)) return;
  const bool resuming_it = resume && fs::equivalent(fs::path(resume->dir), checkpoints, error);
  if (resuming_it) return;
  std::ifstream latest(checkpoints / "latest");
  std::string tag;
  latest >> tag;
  FATHOM_CHECK(options.overwrite, "--out ", options.out_dir, " already holds another run's checkpoints (latest: ", tag,
               "); continue that run with --resume ", options.out_dir, ", choose another --out, or pass --overwrite "
               "to delete them first");
  if (main_rank) fs::remove_all(checkpoints);
}

}  // namespace fathom::apps
