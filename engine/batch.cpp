#include "engine/batch.h"

#include <string>

#include "engine/error.h"
#include "engine/limits.h"

namespace ordo {

void check_batch_rows(const char* where, const BatchRows& rows, Index matrix_rows) {
  // Strings are built only on failure: this runs inside the allocation-free step.
  if (rows.lengths.size() != rows.first_steps.size() || rows.rows_per_sequence < 0 ||
      rows.rows() != matrix_rows)
    throw Error(where, std::to_string(rows.sequences()) + " sequences x " +
                           std::to_string(rows.rows_per_sequence) + " rows (" +
                           std::to_string(rows.lengths.size()) + " lengths) do not tile " +
                           std::to_string(matrix_rows) + " rows");
  for (Index s = 0; s < rows.sequences(); ++s)
    if (rows.length(s) < 0 || rows.length(s) > rows.rows_per_sequence || rows.first_step(s) < 0)
      throw Error(where, "sequence " + std::to_string(s) + " has " + std::to_string(rows.length(s)) +
                             " real rows from step " + std::to_string(rows.first_step(s)) + " in a block of " +
                             std::to_string(rows.rows_per_sequence));
}

void check_batch_size(Index batch_size) {
  if (batch_size < 1) throw OptionError("batch_size", "must be at least 1, got " + std::to_string(batch_size));
  if (batch_size > kMaxBatchSize)
    throw OptionError("batch_size", "must be at most " + std::to_string(kMaxBatchSize) + ", got " +
                                        std::to_string(batch_size));
}

void check_sequence_length(const char* where, const char* what, Index length, const char* hint) {
  if (length > kMaxSequenceLength)
    throw Error(where, std::string(what) + " of " + std::to_string(length) +
                           " tokens is more than ordo's limit of " + std::to_string(kMaxSequenceLength),
                hint);
}

}  // namespace ordo
