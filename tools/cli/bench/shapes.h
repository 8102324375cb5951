// The random models `ordo bench --shape NAME` builds: each shape's config.json, written
// here once.
//
// ordo owns them. tools/bench/make_bench_model.py and bench_peer.py read them from the
// ordo binary they are given (`ordo bench --list-shapes --json`, a shape a line) instead
// of keeping copies, so the peer always builds the shapes of the ordo it is compared
// with, even a binary built from another commit. They are code rather than a data file
// because an installed ordo reads nothing from the source tree.
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <ordo/model_files.hpp>

namespace ordo::tools::bench {

struct BenchShape {
  std::string name;       // --shape's value
  std::string summary;    // what it models, for --help and --list-shapes
  nlohmann::json config;  // its config.json
};

// Every shape, in the order --help and --list-shapes show them.
const std::vector<BenchShape>& bench_shapes();

// The shape called `name`, or nullptr.
const BenchShape* find_bench_shape(std::string_view name);

// The shapes' names joined by `separator` ("base, llama"), for help and messages.
std::string bench_shape_names(std::string_view separator);

// The shape's model as ordo reads its config (its tensors, its dimensions); "--shape
// NAME" stands for the file in messages.
ModelLayout model_layout(const BenchShape& shape);

// 99496704 -> "99,496,704".
std::string with_thousands(std::int64_t count);

// --list-shapes --json, one line per shape: name, kind ("encoder-decoder" or
// "decoder-only"), parameters, summary, and config (its config.json).
nlohmann::json describe_shape(const BenchShape& shape);

// --list-shapes: a row per shape, its dimensions read from its config.
void print_shapes_table(std::ostream& out);

}  // namespace ordo::tools::bench
