#pragma once
// Preemption. A cluster sends SIGTERM before it takes the nodes back (Kubernetes; Slurm, or
// SIGUSR1 with `--signal=USR1@60`), a user presses Ctrl-C (SIGINT), the fathom launcher turns its
// own SIGTERM into SIGUSR1, which Open MPI's mpirun forwards to every rank at once: while a
// StopSignals lives, any of the three asks the training loop to stop at the next optimizer-step
// boundary, save a checkpoint and exit — Megatron's --exit-signal-handler. A second signal
// exits at once, with the shell's status 128 + signal.
//
// The signal may reach the ranks of a job at different moments (mpirun forwards it to each), so
// the loop asks stop_requested(group) after every step: a collective that gives every rank the
// same answer, and every rank stops after the same step.
//
//   StopSignals stop;
//   for (...) {
//     engine.train_batch(next);
//     if (int signal = stop.stop_requested(&world)) { engine.save_checkpoint(dir); return 128 + signal; }
//   }

#include "parallel/communicator.h"

namespace fathom {

class StopSignals {
 public:
  // Installs handlers for SIGTERM, SIGINT and SIGUSR1; one StopSignals at a time.
  StopSignals();
  ~StopSignals();  // restores the previous handlers
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The first signal this process received (SIGTERM, SIGINT or SIGUSR1), or 0.
  static int received();
  // The signal any rank of `group` received (the largest number when they differ), or 0.
  // Collective over `group`; null or a group of one asks this process only. A non-zero answer
  // ends the boundary timeout: the save that follows is bounded by the launcher's --stop_timeout.
  int stop_requested(parallel::Communicator* group) const;

  // How long after a signal the loop may take to reach stop_requested (default 10 s; set it to
  // a few steps' time). A rank that does not get there — it waits in a collective for a rank that
  // died, and mpirun is now stopping the job — exits then with 128 + signal, instead of living on
  // until mpirun kills it.
  void set_boundary_timeout(double seconds);
  // "SIGTERM", "SIGINT", "SIGUSR1".
  static const char* name(int signal);
};

}  // namespace fathom
