// What the benchmarks measure of their own process: CPU time and resident
// memory, from getrusage and /proc/self/statm.

#pragma once

#include <fstream>
#include <sys/resource.h>
#include <unistd.h>

namespace quarry::bench {

/// User plus system CPU time of the process so far, in seconds.
inline double process_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto tv = [](const timeval& x) {
    return static_cast<double>(x.tv_sec) + static_cast<double>(x.tv_usec) / 1e6;
  };
  return tv(usage.ru_utime) + tv(usage.ru_stime);
}

/// Resident set size right now, in KiB.
inline long rss_kib() {
  std::ifstream in{"/proc/self/statm"};
  long pages = 0;
  long resident = 0;
  in >> pages >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/// Resident set size right now, in MiB.
inline double rss_mib() {
  return static_cast<double>(rss_kib()) / 1024.0;
}

/// Peak resident set size of the process so far, in KiB.
inline long peak_rss_kib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

} // namespace quarry::bench
