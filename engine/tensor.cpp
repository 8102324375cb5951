#include "engine/tensor.h"

namespace ordo {

std::string to_string(const Shape& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

std::string shape_of(ConstMatrixRef m) { return to_string(Shape{m.rows(), m.cols()}); }

Index element_count(const Shape& shape) {
  Index count = 1;
  for (Index d : shape) count *= d;
  return count;
}

}  // namespace ordo
