// A [rows, cols] grid of floats, row-major: the values of one heatmap panel. The
// pictures' own container, so that they need nothing of the engine's tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace ordo::tools {

class Grid {
 public:
  Grid() = default;
  Grid(std::int64_t rows, std::int64_t cols) { resize(rows, cols); }

  // Changes the shape; values are zero afterwards.
  void resize(std::int64_t rows, std::int64_t cols) {
    rows_ = rows;
    cols_ = cols;
    values_.assign(static_cast<std::size_t>(rows * cols), 0.0f);
  }
  void fill(float value) { values_.assign(values_.size(), value); }

  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  float* data() { return values_.data(); }
  const float* data() const { return values_.data(); }
  float& operator()(std::int64_t r, std::int64_t c) { return values_[index(r, c)]; }
  float operator()(std::int64_t r, std::int64_t c) const { return values_[index(r, c)]; }
  std::span<float> row(std::int64_t r) { return {values_.data() + index(r, 0), static_cast<std::size_t>(cols_)}; }
  std::span<const float> row(std::int64_t r) const {
    return {values_.data() + index(r, 0), static_cast<std::size_t>(cols_)};
  }

 private:
  std::size_t index(std::int64_t r, std::int64_t c) const { return static_cast<std::size_t>(r * cols_ + c); }

  std::vector<float> values_;
  std::int64_t rows_ = 0;
  std::int64_t cols_ = 0;
};

}  // namespace ordo::tools
