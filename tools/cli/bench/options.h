// What one `ordo bench` run is asked to do, as its flags set it (tools/cli/command_bench.cpp
// defines the flags; the workload, the probes and the report read these).
#pragma once

#include <algorithm>
#include <string>
#include <thread>

namespace ordo::tools::bench {

struct BenchOptions {
  std::string model_dir;
  std::string rope_scaling;  // --rope-scaling TYPE:FACTOR; empty: the config's
  std::string compute_type = "auto";  // --compute-type
  int group_size = -1;                 // --group-size; -1: the compute type's default
  std::string shape;
  int batch = 1;
  int src_len = 32;
  int new_tokens = 32;
  int beam = 1;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int repeats = 5;
  int warmup = 1;
  bool json = false;
  bool list_shapes = false;

  int runs() const { return warmup + repeats; }
};

}  // namespace ordo::tools::bench
