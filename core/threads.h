#pragma once
// How many threads Fathom's CPU kernels use.
//
// Default: when the process's affinity mask is narrower than the cores online (mpirun binds
// each rank to cores at -np 1 and 2), use the mask as it is; otherwise share the mask among
// the processes on this node, max(1, mask / local processes), so `mpirun -np 4
// --oversubscribe` on 2 cores runs 4 threads in all rather than 8. FATHOM_NUM_THREADS
// overrides the default; set_num_threads() overrides both.

namespace fathom {

int num_threads();
void set_num_threads(int threads);  // threads >= 1
// The default rule as a pure function, for tests and reports.
int default_num_threads(int affinity_cores, int online_cores, int local_processes);
// Processes of this job on this node, from the launcher's environment (Open MPI, MPICH,
// Slurm); 1 when not launched by one.
int local_process_count();

}  // namespace fathom
