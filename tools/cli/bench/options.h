// What one `ordo bench` run is asked to do, as its flags set it (tools/cli/command_bench.cpp
// defines the flags; the workload, the probes and the report read these).
#pragma once

#include <algorithm>
#include <string>
#include <thread>

#include "engine/tensor.h"

namespace ordo::tools::bench {

struct BenchOptions {
  std::string model_dir;
  std::string rope_scaling;  // --rope-scaling TYPE:FACTOR; empty: the config's
  std::string shape;
  Index batch = 1;
  Index src_len = 32;
  Index new_tokens = 32;
  Index beam = 1;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int repeats = 5;
  int warmup = 1;
  bool json = false;
  bool list_shapes = false;

  int runs() const { return warmup + repeats; }
};

}  // namespace ordo::tools::bench
