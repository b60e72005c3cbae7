// Collective benchmark in the style of nccl-tests: Fathom's MPI communicator beside raw MPI on
// the same buffers and the same ranks, in one run.
//
//   mpirun -np 4 --oversubscribe fathom_comm_bench [--max-bytes 64M] [--iters 40] [--json FILE]
//
// For all_reduce (sum), reduce_scatter, all_gather and broadcast on f32, and all_reduce on bf16,
// at sizes from 8 B to --max-bytes in x4 steps: Fathom's blocking call (queued to the
// communicator's progress thread and waited on) against MPI_Allreduce / MPI_Reduce_scatter_block
// / MPI_Allgather / MPI_Bcast called from the main thread on the same MPI_Comm, alternating
// round by round. Each timed call starts after a barrier; its time is the slowest rank's, and a
// row reports the median over rounds. Sizes, algbw and busbw follow nccl-tests (bus_bandwidth.h).
// MPI has no bf16: the bf16 row's baseline is MPI_Allreduce on f32 with the same element count
// (what Fathom runs after staging to f32), so it moves twice the bytes.
// Buffers hold zeros, so repeated in-place sums stay finite and never go subnormal.
// Last, an overlap line: all_reduce_async of 16 MiB beside a compute loop of about the same
// length, against the two back to back. Only rank 0 prints.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "benchmarks/comm/bus_bandwidth.h"
#include "parallel/mpi_check.h"
#include "parallel/mpi_native.h"
#include "parallel/runtime.h"

namespace {

using fathom::DType;
using fathom::Tensor;
using fathom::bench::algbw_gbps;
using fathom::bench::busbw_gbps;
using fathom::bench::CollectiveOp;
using fathom::parallel::Communicator;

struct Options {
  int64_t max_bytes = int64_t{64} << 20;
  int iters = 40;
  std::string json_path;
};

struct Case {
  const char* name;
  CollectiveOp op;
  DType dtype;
};

const Case kCases[] = {{"all_reduce", CollectiveOp::AllReduce, DType::F32},
                       {"reduce_scatter", CollectiveOp::ReduceScatter, DType::F32},
                       {"all_gather", CollectiveOp::AllGather, DType::F32},
                       {"broadcast", CollectiveOp::Broadcast, DType::F32},
                       {"all_reduce", CollectiveOp::AllReduce, DType::BF16}};

struct Size {
  int64_t count = 0;     // elements of the nccl-tests size S
  double bytes = 0;      // S in Fathom's dtype
  double raw_bytes = 0;  // S of the raw call (f32)
};

// One collective at one size, bound to its buffers: the Fathom call and the raw MPI call.
struct Bound {
  Size size;
  std::function<void()> fathom, raw;
};

struct Row {
  const Case* c;
  Size size;
  double fathom_s, raw_s;
};

// Sizes below one element per rank round up to it (8 B of f32 at 4 ranks: 16 B for the sharded
// collectives, as nccl-tests needs a whole element per rank too).
Bound bind(const Case& c, int64_t target_bytes, Communicator& world, MPI_Comm comm) {
  // The raw calls move MPI_FLOAT: only all_reduce has a non-f32 case (f32 baseline, same count).
  FATHOM_CHECK(c.dtype == DType::F32 || c.op == CollectiveOp::AllReduce, c.name, " on ",
               fathom::dtype_name(c.dtype), " has no raw MPI baseline here");
  const int n = world.size();
  const int64_t element = static_cast<int64_t>(fathom::element_size(c.dtype));
  const bool sharded = c.op == CollectiveOp::ReduceScatter || c.op == CollectiveOp::AllGather;
  const int64_t shard = std::max<int64_t>(1, target_bytes / element / (sharded ? n : 1));
  const int64_t total = shard * (sharded ? n : 1);
  Bound b{{total, double(total * element), double(total * 4)}, {}, {}};
  const Tensor full = Tensor::zeros({total}, c.dtype);
  const Tensor part = Tensor::zeros({shard}, c.dtype);
  const int count = static_cast<int>(total), shard_count = static_cast<int>(shard);
  switch (c.op) {
    case CollectiveOp::AllReduce: {
      const Tensor raw = c.dtype == DType::F32 ? full : Tensor::zeros({total}, DType::F32);
      b.fathom = [&world, full] { world.all_reduce(full); };
      b.raw = [=] {
        FATHOM_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, raw.raw_data(), count, MPI_FLOAT, MPI_SUM, comm));
      };
      break;
    }
    case CollectiveOp::ReduceScatter:
      b.fathom = [&world, full, part] { world.reduce_scatter(full, part); };
      b.raw = [=] {
        FATHOM_MPI_CHECK(
            MPI_Reduce_scatter_block(full.raw_data(), part.raw_data(), shard_count, MPI_FLOAT, MPI_SUM, comm));
      };
      break;
    case CollectiveOp::AllGather:
      b.fathom = [&world, full, part] { world.all_gather(part, full); };
      b.raw = [=] {
        FATHOM_MPI_CHECK(
            MPI_Allgather(part.raw_data(), shard_count, MPI_FLOAT, full.raw_data(), shard_count, MPI_FLOAT, comm));
      };
      break;
    case CollectiveOp::Broadcast:
      b.fathom = [&world, full] { world.broadcast(full, 0); };
      b.raw = [=] { FATHOM_MPI_CHECK(MPI_Bcast(full.raw_data(), count, MPI_FLOAT, 0, comm)); };
      break;
  }
  return b;
}

// The one timing helper. Runs each of `fns` `warmup` times untimed, then `iters` rounds that
// call each of them once after a barrier (interleaved, so that load from elsewhere on the
// machine falls on all of them alike). Returns per function the median over rounds of the
// slowest rank's time, in seconds (the same on every rank).
std::vector<double> time_collectives(MPI_Comm comm, int warmup, int iters,
                                     const std::vector<std::function<void()>>& fns) {
  for (const auto& fn : fns)
    for (int i = 0; i < warmup; ++i) fn();
  const int width = static_cast<int>(fns.size());
  std::vector<double> times(size_t(iters) * width);  // [round][function]
  for (int round = 0; round < iters; ++round)
    for (int f = 0; f < width; ++f) {
      FATHOM_MPI_CHECK(MPI_Barrier(comm));
      const double start = MPI_Wtime();
      fns[f]();
      times[size_t(round) * width + f] = MPI_Wtime() - start;
    }
  FATHOM_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, times.data(), int(times.size()), MPI_DOUBLE, MPI_MAX, comm));
  std::vector<double> medians;
  for (int f = 0; f < width; ++f) {
    std::vector<double> column;
    for (int round = 0; round < iters; ++round) column.push_back(times[size_t(round) * width + f]);
    std::nth_element(column.begin(), column.begin() + iters / 2, column.end());
    medians.push_back(column[iters / 2]);
  }
  return medians;
}

// Fewer iterations for large sizes, so that 4 ranks on 2 cores finish in about a minute:
// the full count up to 512 KiB, then proportionally fewer, at least 5.
int iterations_for(double bytes, int iters) {
  const double scaled = iters * (512.0 * 1024) / bytes;
  return std::clamp(static_cast<int>(scaled), std::min(5, iters), iters);
}
int warmup_for(int iters) { return std::max(1, iters / 5); }

std::vector<int64_t> sizes_up_to(int64_t max_bytes) {
  std::vector<int64_t> sizes;
  for (int64_t s = 8; s <= max_bytes; s *= 4) sizes.push_back(s);
  if (sizes.empty() || sizes.back() != max_bytes) sizes.push_back(max_bytes);
  return sizes;
}

// A dependent chain of multiply-adds: it keeps a core busy without touching memory, so it
// competes with the progress thread for CPU time but not for memory bandwidth. It starts from
// a volatile read: from the constant 1.0 the compiler sees the fixed point and drops the loop.
volatile double g_sink = 1.0;
void compute_loop(int64_t steps) {
  double x = g_sink;
  for (int64_t i = 0; i < steps; ++i) x = x * 0.999999 + 1e-6;
  g_sink = g_sink + x;
}

struct Overlap {
  double bytes, comm_s, compute_s, serial_s, overlapped_s;
  // The share of the communication time that overlapping took off the back-to-back time.
  double hidden() const { return (serial_s - overlapped_s) / comm_s; }
};

Overlap measure_overlap(Communicator& world, MPI_Comm comm, int64_t bytes, int iters_option) {
  const Tensor buffer = Tensor::zeros({bytes / 4}, DType::F32);
  const int iters = std::max(5, iterations_for(double(bytes), iters_option)), warmup = warmup_for(iters);
  Overlap o{double(bytes), 0, 0, 0, 0};
  // Calibrate the loop on every rank at once (the ranks share the cores); the timings are the
  // slowest rank's, identical everywhere, so every rank picks the same step count.
  const int64_t probe = 2'000'000;
  const auto all_reduce = [&] { world.all_reduce(buffer); };
  const auto calibration = time_collectives(comm, warmup, iters, {all_reduce, [&] { compute_loop(probe); }});
  o.comm_s = calibration[0];
  const auto steps = static_cast<int64_t>(probe * o.comm_s / calibration[1]);
  const auto compute = [&] { compute_loop(steps); };
  const auto back_to_back = [&] {
    all_reduce();
    compute();
  };
  const auto overlapped = [&] {
    auto handle = world.all_reduce_async(buffer);
    compute();
    handle->wait();
  };
  const auto times = time_collectives(comm, warmup, iters, {compute, back_to_back, overlapped});
  o.compute_s = times[0], o.serial_s = times[1], o.overlapped_s = times[2];
  return o;
}

// --- reporting (rank 0) ---

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 3) bytes /= 1024, ++unit;
  char text[32];
  std::snprintf(text, sizeof text, bytes == double(int64_t(bytes)) ? "%.0f %s" : "%.1f %s", bytes, units[unit]);
  return text;
}

std::string case_title(const Case& c) {
  std::string title = std::string(c.name) + " (" + fathom::dtype_name(c.dtype);
  if (c.op == CollectiveOp::AllReduce || c.op == CollectiveOp::ReduceScatter) title += ", sum";
  if (c.op == CollectiveOp::Broadcast) title += ", root 0";
  return title + ")";
}

void print_table(const Case& c, const std::vector<Row>& rows, int ranks) {
  std::printf("\n### %s, %d ranks\n", case_title(c).c_str(), ranks);
  if (c.dtype != DType::F32)
    std::printf("Raw MPI has no %s: its column is MPI_Allreduce on f32 with the same count (2x the bytes).\n",
                fathom::dtype_name(c.dtype));
  std::printf("\n| size | count | Fathom (us) | algbw (GB/s) | busbw (GB/s) | MPI (us) | MPI busbw (GB/s) "
              "| MPI time / Fathom time |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Row& r : rows) {
    if (r.c != &c) continue;
    const Size& b = r.size;
    std::printf("| %s | %lld | %.1f | %.3f | %.3f | %.1f | %.3f | %.2f |\n", format_bytes(b.bytes).c_str(),
                static_cast<long long>(b.count), r.fathom_s * 1e6, algbw_gbps(b.bytes, r.fathom_s),
                busbw_gbps(c.op, ranks, b.bytes, r.fathom_s), r.raw_s * 1e6, busbw_gbps(c.op, ranks, b.raw_bytes, r.raw_s),
                r.raw_s / r.fathom_s);
  }
  std::fflush(stdout);
}

void print_overlap(const Overlap& o) {
  std::printf("\n### Async overlap: all_reduce_async of %s + compute loop\n\n"
              "| all_reduce (ms) | compute (ms) | back to back (ms) | overlapped (ms) | communication hidden |\n"
              "|---:|---:|---:|---:|---:|\n| %.2f | %.2f | %.2f | %.2f | %.0f%% |\n",
              format_bytes(o.bytes).c_str(), o.comm_s * 1e3, o.compute_s * 1e3, o.serial_s * 1e3,
              o.overlapped_s * 1e3, 100 * o.hidden());
}

std::string today() {
  char text[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M", std::localtime(&now));
  return text;
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string version(text, length);
  version = version.substr(0, version.find_first_of(",\n"));
  return version;
}

void write_json(const std::string& path, int ranks, const std::vector<Row>& rows, const Overlap& o) {
  std::ofstream json(path);
  json.precision(10);
  json << "{\"ranks\": " << ranks << ", \"date\": \"" << today() << "\", \"mpi\": \"" << mpi_library_version()
       << "\", \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const Size& b = r.size;
    json << (i ? ",\n  " : "\n  ") << "{\"collective\": \"" << r.c->name << "\", \"dtype\": \""
         << fathom::dtype_name(r.c->dtype) << "\", \"bytes\": " << b.bytes << ", \"count\": " << b.count
         << ", \"fathom_us\": " << r.fathom_s * 1e6 << ", \"fathom_algbw\": " << algbw_gbps(b.bytes, r.fathom_s)
         << ", \"fathom_busbw\": " << busbw_gbps(r.c->op, ranks, b.bytes, r.fathom_s)
         << ", \"mpi_bytes\": " << b.raw_bytes << ", \"mpi_us\": " << r.raw_s * 1e6
         << ", \"mpi_algbw\": " << algbw_gbps(b.raw_bytes, r.raw_s)
         << ", \"mpi_busbw\": " << busbw_gbps(r.c->op, ranks, b.raw_bytes, r.raw_s)
         << ", \"mpi_over_fathom\": " << r.raw_s / r.fathom_s << "}";
  }
  json << "\n], \"overlap\": {\"bytes\": " << o.bytes << ", \"all_reduce_ms\": " << o.comm_s * 1e3
       << ", \"compute_ms\": " << o.compute_s * 1e3 << ", \"back_to_back_ms\": " << o.serial_s * 1e3
       << ", \"overlapped_ms\": " << o.overlapped_s * 1e3 << ", \"hidden_fraction\": " << o.hidden() << "}}\n";
}

// "64M", "64MiB", "4096", "2K" -> bytes (binary units); -1 when malformed.
int64_t parse_bytes(const std::string& text) {
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || value <= 0) return -1;
  const std::string suffix(end);
  for (const auto& [unit, shift] : {std::pair{"", 0}, {"K", 10}, {"KiB", 10}, {"M", 20}, {"MiB", 20}, {"G", 30},
                                    {"GiB", 30}})
    if (suffix == unit) return static_cast<int64_t>(value) << shift;
  return -1;
}

bool parse_options(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--max-bytes" && has_value) options.max_bytes = parse_bytes(argv[++i]);
    else if (arg == "--iters" && has_value) options.iters = std::atoi(argv[++i]);
    else if (arg == "--json" && has_value) options.json_path = argv[++i];
    else return false;
  }
  return options.max_bytes >= 8 && options.max_bytes <= (int64_t{1} << 30) && options.iters > 0;
}

}  // namespace

int main(int argc, char** argv) {
  fathom::parallel::Runtime runtime(argc, argv);
  Communicator& world = runtime.world();
  const MPI_Comm comm = fathom::parallel::native_mpi_comm(world);
  const bool main_rank = runtime.is_main_process();
  Options options;
  if (!parse_options(argc, argv, options)) {
    if (main_rank)
      std::fprintf(stderr, "usage: %s [--max-bytes BYTES (8..1G, K/M/G suffixes)] [--iters N] [--json FILE]\n",
                   argv[0]);
    return 2;
  }
  if (main_rank)
    std::printf("# Fathom collectives (MPI backend) vs raw MPI: %d ranks, %s, %s\n"
                "Median of up to %d iterations (fewer above 512 KiB), each after a barrier; time = slowest rank.\n",
                world.size(), mpi_library_version().c_str(), today().c_str(), options.iters);

  std::vector<Row> rows;
  for (const Case& c : kCases) {
    for (int64_t size : sizes_up_to(options.max_bytes)) {
      const Bound b = bind(c, size, world, comm);
      const int iters = iterations_for(b.size.bytes, options.iters), warmup = warmup_for(iters);
      const auto times = time_collectives(comm, warmup, iters, {b.fathom, b.raw});
      rows.push_back({&c, b.size, times[0], times[1]});
    }
    if (main_rank) print_table(c, rows, world.size());
  }
  const Overlap overlap = measure_overlap(world, comm, std::min<int64_t>(16 << 20, options.max_bytes), options.iters);
  if (main_rank) {
    print_overlap(overlap);
    if (!options.json_path.empty()) write_json(options.json_path, world.size(), rows, overlap);
  }
  return 0;
}
