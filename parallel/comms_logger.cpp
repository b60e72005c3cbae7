#include "parallel/comms_logger.h"

#include <algorithm>
#include <cstdio>

#include "core/logging.h"
#include "core/memory_stats.h"

namespace fathom::parallel {
namespace {
CollectiveKind kind_named(const std::string& op) {
  for (int k = 0; k <= static_cast<int>(CollectiveKind::Barrier); ++k)
    if (op == collective_name(static_cast<CollectiveKind>(k))) return static_cast<CollectiveKind>(k);
  return CollectiveKind::Barrier;
}
}  // namespace

double CommsRow::algbw_gbps() const {
  const double mean_s = mean_ms() / 1e3;
  return mean_s > 0 ? static_cast<double>(bytes) / mean_s / 1e9 : 0.0;
}

double CommsRow::busbw_gbps() const { return algbw_gbps() * bus_bandwidth_factor(kind_named(op), group_size); }

CommsLogger::CommsLogger(CommsLoggerOptions options, Print print)
    : options_(std::move(options)),
      print_(print ? std::move(print) : Print([](const std::string& line) { FATHOM_LOG(Info, line); })) {}

bool CommsLogger::logs(CollectiveKind kind) const {
  if (options_.prof_all) return true;
  const std::string name = collective_name(kind);
  return std::any_of(options_.prof_ops.begin(), options_.prof_ops.end(),
                     [&](const std::string& op) { return op == name || op + "_v" == name; });
}

void CommsLogger::on_collective(const CollectiveSpan& span) {
  if (!logs(span.kind)) return;
  const std::string op = collective_name(span.kind);
  const double ms = span.seconds() * 1e3;
  CommsRow single{op, span.group, span.group_size, span.bytes, 1, ms};
  {
    std::lock_guard lock(mutex_);
    CommsRow& row = rows_[{op, span.group, span.bytes}];
    if (row.count == 0) row = CommsRow{op, span.group, span.group_size, span.bytes, 0, 0.0};
    ++row.count;
    row.total_ms += ms;
  }
  if (!options_.verbose) return;
  char line[320];
  std::snprintf(line, sizeof line,
                "comm op: %s | group: %s (%d ranks) | time (ms): %.3f | msg size: %s | algbw (GB/s): %.3g | busbw (GB/s): %.3g",
                op.c_str(), span.group.c_str(), span.group_size, ms, format_bytes(static_cast<double>(span.bytes)).c_str(),
                single.algbw_gbps(), single.busbw_gbps());
  std::string text = line;
  if (options_.debug) text += " | #" + std::to_string(span.sequence) + " " + dtype_name(span.dtype);
  print_(text);
}

std::vector<CommsRow> CommsLogger::rows() const {
  std::lock_guard lock(mutex_);
  std::vector<CommsRow> out;
  for (const auto& [key, row] : rows_) out.push_back(row);
  return out;
}

std::string CommsLogger::summary() const {
  std::string out;
  char line[320];
  const char* format = "%-16s %-18s %14s %8s %20s %19s %14s %14s\n";
  std::snprintf(line, sizeof line, format, "op", "group (ranks)", "message size", "count", "total latency (ms)",
                "mean latency (ms)", "algbw (GB/s)", "busbw (GB/s)");
  out += line;
  for (const CommsRow& r : rows()) {
    const std::string group = r.group + " (" + std::to_string(r.group_size) + ")";
    char total[32], mean[32], alg[32], bus[32];
    std::snprintf(total, sizeof total, "%.3f", r.total_ms);
    std::snprintf(mean, sizeof mean, "%.3f", r.mean_ms());
    std::snprintf(alg, sizeof alg, "%.3g", r.algbw_gbps());  // small messages run far below 1 GB/s
    std::snprintf(bus, sizeof bus, "%.3g", r.busbw_gbps());
    std::snprintf(line, sizeof line, format, r.op.c_str(), group.c_str(),
                  format_bytes(static_cast<double>(r.bytes)).c_str(), std::to_string(r.count).c_str(), total, mean, alg,
                  bus);
    out += line;
  }
  return out;
}

void CommsLogger::reset() {
  std::lock_guard lock(mutex_);
  rows_.clear();
}

}  // namespace fathom::parallel
