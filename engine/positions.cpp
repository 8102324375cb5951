#include "engine/positions.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "engine/error.h"

namespace ordo {

namespace {

std::string str(Index n) { return std::to_string(n); }

// Calls emit(index, value) for every entry of the sinusoidal vector of `position`:
// sin(p w_i) and cos(p w_i), in double, at the layout's indices.
template <class Emit>
void for_each_sinusoid(const std::vector<double>& frequencies, SinusoidalLayout layout,
                       Index position, Emit&& emit) {
  const Index half = static_cast<Index>(frequencies.size());
  const double p = static_cast<double>(position);
  for (Index i = 0; i < half; ++i) {
    const double angle = p * frequencies[static_cast<std::size_t>(i)];
    const double s = std::sin(angle);
    const double c = std::cos(angle);
    if (layout == SinusoidalLayout::Interleaved) {
      emit(2 * i, s);
      emit(2 * i + 1, c);
    } else {
      emit(i, s);
      emit(half + i, c);
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Sinusoidal

SinusoidalPositions::SinusoidalPositions(Index dim, SinusoidalLayout layout,
                                         SinusoidalFrequencies frequencies, Index offset, Index max_steps,
                                         std::optional<int> skip_token)
    : dim_(dim), layout_(layout), offset_(offset), max_steps_(max_steps), skip_token_(skip_token) {
  const char* where = "sinusoidal positions";
  if (dim <= 0 || dim % 2 != 0)
    throw Error(where, "dimension " + str(dim) + " is not a positive even number",
                "sin/cos come in pairs; check d_model");
  if (frequencies == SinusoidalFrequencies::Tensor2Tensor && dim < 4)
    throw Error(where,
                "tensor2tensor frequencies exp(-i ln(10000) / (d/2 - 1)) need d >= 4, got d=" +
                    str(dim),
                "use vaswani frequencies for so small a dimension");
  if (offset < 0) throw Error(where, "position offset " + str(offset) + " is negative");
  if (max_steps <= 0) throw Error(where, "max_steps " + str(max_steps) + " is not positive");

  const Index half = dim / 2;
  frequencies_.resize(static_cast<std::size_t>(half));
  for (Index i = 0; i < half; ++i) {
    const double w = frequencies == SinusoidalFrequencies::Vaswani
                         ? std::pow(10000.0, -2.0 * static_cast<double>(i) /
                                                 static_cast<double>(dim))
                         : std::exp(-static_cast<double>(i) * std::log(10000.0) /
                                    static_cast<double>(half - 1));
    frequencies_[static_cast<std::size_t>(i)] = w;
  }
}

void SinusoidalPositions::add(MatrixRef embeddings, const BatchRows& rows) const {
  if (embeddings.cols() != dim_)
    throw Error("sinusoidal positions",
                "embeddings " + shape_of(embeddings) + " are not " + str(dim_) + " wide",
                "positions and embeddings must share d_model");
  check_batch_rows("sinusoidal positions", rows, embeddings.rows());
  // emb[s*T + t] [d] += pe(offset + first_step[s] + t) [d], each entry rounded once.
  for (Index s = 0; s < rows.sequences(); ++s) {
    check_steps(rows.first_step(s), rows.length(s));  // padding rows past a bound are never read
    const MatrixRef block = rows.of(embeddings, s);
    for (Index t = 0; t < block.rows(); ++t) {
      float* row = block.data() + t * block.stride();
      for_each_sinusoid(frequencies_, layout_, offset_ + rows.first_step(s) + t,
                        [row](Index j, double value) { row[j] += static_cast<float>(value); });
    }
  }
}

void SinusoidalPositions::add(MatrixRef embeddings, const BatchRows& rows, std::span<const int> ids) const {
  if (!skip_token_) return add(embeddings, rows);
  if (static_cast<Index>(ids.size()) != embeddings.rows())
    throw Error("sinusoidal positions", str(static_cast<Index>(ids.size())) + " ids for " +
                                            str(embeddings.rows()) + " embedding rows");
  if (embeddings.cols() != dim_)
    throw Error("sinusoidal positions",
                "embeddings " + shape_of(embeddings) + " are not " + str(dim_) + " wide",
                "positions and embeddings must share d_model");
  check_batch_rows("sinusoidal positions", rows, embeddings.rows());
  // As fairseq's make_positions: position = offset + first_step + (non-skipped rows
  // before this one in the call); a skipped row gets nothing. Padding rows are skipped
  // too (never read).
  for (Index s = 0; s < rows.sequences(); ++s) {
    check_steps(rows.first_step(s), rows.length(s));
    const MatrixRef block = rows.of(embeddings, s);
    Index counted = 0;
    for (Index t = 0; t < rows.length(s); ++t) {
      if (ids[static_cast<std::size_t>(s * rows.rows_per_sequence + t)] == *skip_token_) continue;
      float* row = block.data() + t * block.stride();
      for_each_sinusoid(frequencies_, layout_, offset_ + rows.first_step(s) + counted++,
                        [row](Index j, double value) { row[j] += static_cast<float>(value); });
    }
  }
}

void SinusoidalPositions::encode(Index position, std::span<float> out) const {
  if (static_cast<Index>(out.size()) != dim_)
    throw Error("sinusoidal positions",
                "output has " + str(static_cast<Index>(out.size())) + " entries, expected dim=" +
                    str(dim_));
  float* values = out.data();
  for_each_sinusoid(frequencies_, layout_, position,
                    [values](Index j, double value) { values[j] = static_cast<float>(value); });
}

// ---------------------------------------------------------------------------------------
// Learned

LearnedPositions::LearnedPositions(TensorView table, Index offset)
    : table_(std::move(table)), offset_(offset) {
  const char* where = "learned positions";
  if (table_.empty() || table_.rank() != 2)
    throw Error(where, "table " + to_string(table_.shape()) +
                           " is not a matrix [max_position_embeddings + offset, d]");
  if (offset < 0 || offset >= table_.dim(0))
    throw Error(where, "position offset " + str(offset) + " leaves no usable row of table " +
                           to_string(table_.shape()),
                "check position_offset in config.json");
}

void LearnedPositions::add(MatrixRef embeddings, const BatchRows& rows) const {
  const char* where = "learned positions";
  const Index width = table_.dim(1);
  if (embeddings.cols() != width)
    throw Error(where,
                "embeddings " + shape_of(embeddings) + " do not match table " +
                    to_string(table_.shape()) + ": widths " + str(embeddings.cols()) +
                    " and " + str(width) + " differ",
                "positions and embeddings must share d_model");
  check_batch_rows(where, rows, embeddings.rows());
  for (Index s = 0; s < rows.sequences(); ++s) {
    const Index first_step = rows.first_step(s);
    const Index count = rows.length(s);
    check_steps(first_step, count);
    // Real rows and the padding rows the table still covers; later padding gets nothing.
    const Index covered = std::max(count, std::min(rows.rows_per_sequence, max_steps() - first_step));
    // emb[s*T + t] [d] += table[offset + first_step + t] [d]
    const MatrixRef block = rows.of(embeddings, s);
    for (Index t = 0; t < covered; ++t) {
      const float* in = table_.data() + (offset_ + first_step + t) * width;
      float* out = block.data() + t * block.stride();
      for (Index j = 0; j < width; ++j) out[j] += in[j];
    }
  }
}

// ---------------------------------------------------------------------------------------
// Rotary

RotaryEmbedding::RotaryEmbedding(Index head_dim, double theta, RopeLayout layout, Index offset,
                                 const RopeScaling& scaling, Index max_position_embeddings)
    : head_dim_(head_dim),
      theta_(theta),
      layout_(layout),
      offset_(offset),
      scaling_(scaling),
      max_position_embeddings_(max_position_embeddings) {
  const char* where = "rotary embedding";
  if (head_dim <= 0 || head_dim % 2 != 0)
    throw Error(where, "head_dim " + str(head_dim) + " is not a positive even number",
                "rope rotates pairs of dimensions");
  if (!(theta > 0.0) || !std::isfinite(theta))
    throw Error(where, "theta " + std::to_string(theta) + " is not a positive number",
                "check rope_theta in config.json (usually 10000)");
  if (offset < 0) throw Error(where, "position offset " + str(offset) + " is negative");
  if (scaling.enabled() && (!(scaling.factor > 0.0) || !std::isfinite(scaling.factor)))
    throw Error(where, "rope scaling factor " + std::to_string(scaling.factor) + " is not a finite number > 0");
  if (scaling.type == RopeScalingType::Dynamic && max_position_embeddings <= 0)
    throw Error(where, "dynamic rope scaling needs max_position_embeddings > 0, got " + str(max_position_embeddings),
                "it is the length from which the base grows");
  fixed_ = rope_frequencies(head_dim, theta, scaling, max_position_embeddings, max_position_embeddings);
}

RopeFrequencies RotaryEmbedding::frequencies(Index sequence_length) const {
  if (scaling_.type != RopeScalingType::Dynamic || sequence_length <= max_position_embeddings_) return fixed_;
  return rope_frequencies(head_dim_, theta_, scaling_, max_position_embeddings_, sequence_length);
}

void RotaryEmbedding::rotate(MatrixRef x, const BatchRows& rows) const {
  if (x.cols() % head_dim_ != 0)
    throw Error("rotary embedding",
                "input " + shape_of(x) + " has width " + str(x.cols()) +
                    ", not a multiple of head_dim=" + str(head_dim_),
                "pass a [T, heads*head_dim] projection");
  check_batch_rows("rotary embedding", rows, x.rows());
  const Index heads = x.cols() / head_dim_;
  const Index half = head_dim_ / 2;
  // Pair i is (a, b) = (i*step, i*step + gap): (i, i + dh/2) or (2i, 2i+1).
  const Index step = layout_ == RopeLayout::Half ? 1 : 2;
  const Index gap = layout_ == RopeLayout::Half ? half : 1;
  const double scale = fixed_.attention_factor;  // YaRN's; 1 otherwise
  const double exponent = -2.0 / static_cast<double>(head_dim_);

  // x[r, h*dh + a], x[r, h*dh + b] -> (a cos - b sin, a sin + b cos) * scale, angle p * w_i
  // with p = offset + first_steps[s] + t for row r = s*T + t; every head h the same.
  // cos/sin once per (row, i).
  for (Index s = 0; s < rows.sequences(); ++s) {
    // Dynamic scaling past max_position_embeddings: this sequence's own base, its
    // frequencies computed as they are used (a decode step allocates nothing).
    const Index length = offset_ + rows.first_step(s) + std::max<Index>(rows.length(s), 1);
    const bool dynamic = scaling_.type == RopeScalingType::Dynamic && length > max_position_embeddings_;
    const double base =
        dynamic ? dynamic_rope_base(head_dim_, theta_, scaling_.factor, max_position_embeddings_, length) : theta_;
    const MatrixRef block = rows.of(x, s);
    for (Index t = 0; t < block.rows(); ++t) {
      float* row = block.data() + t * block.stride();
      const double p = static_cast<double>(offset_ + rows.first_step(s) + t);
      for (Index i = 0; i < half; ++i) {
        const double w = dynamic ? std::pow(base, exponent * static_cast<double>(i))
                                 : fixed_.inverse[static_cast<std::size_t>(i)];
        const double angle = p * w;
        const double c = std::cos(angle) * scale;
        const double sn = std::sin(angle) * scale;
        float* pair = row + i * step;
        for (Index h = 0; h < heads; ++h, pair += head_dim_) {
          const double a = pair[0];
          const double b = pair[gap];
          pair[0] = static_cast<float>(a * c - b * sn);
          pair[gap] = static_cast<float>(a * sn + b * c);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// One sequence

void AdditivePositions::check_steps(Index first_step, Index count) const {
  // Written as a subtraction so that a huge first_step cannot overflow.
  if (count > 0 && first_step > max_steps() - count) {
    const Index tokens = first_step + count;
    throw Error("learned positions",
                "a sequence of " + str(tokens) + " tokens needs positions up to " + str(tokens - 1) +
                    ", but this model has max_position_embeddings=" + str(max_steps()),
                "shorten the input or use a model with sinusoidal/rope positions");
  }
}

void AdditivePositions::add(MatrixRef embeddings, Index first_step) const {
  const Index first_steps[] = {first_step};
  const Index lengths[] = {embeddings.rows()};
  add(embeddings, BatchRows{embeddings.rows(), first_steps, lengths});
}

void RotaryEmbedding::rotate(MatrixRef x, Index first_step) const {
  const Index first_steps[] = {first_step};
  const Index lengths[] = {x.rows()};
  rotate(x, BatchRows{x.rows(), first_steps, lengths});
}

}  // namespace ordo
