// An RGB picture in memory, and PNG files through libpng (its simplified API: no
// setjmp, errors come back as messages).
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace ordo::tools {

struct Rgb {
  std::uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb&) const = default;
};

// width x height pixels, row-major, 3 bytes each. Drawing outside the picture is
// clipped, so callers may place text and shapes without bounds arithmetic.
class Image {
 public:
  Image(int width, int height, Rgb background = {255, 255, 255});

  int width() const { return width_; }
  int height() const { return height_; }
  Rgb at(int x, int y) const;  // throws Error outside the picture
  void set(int x, int y, Rgb colour);
  // Mixes `colour` over the pixel with coverage alpha in [0, 255] (antialiased text).
  void blend(int x, int y, Rgb colour, int alpha);
  void fill_rect(int x, int y, int width, int height, Rgb colour);
  // A 1-pixel outline just inside the rectangle.
  void outline_rect(int x, int y, int width, int height, Rgb colour);
  const std::vector<std::uint8_t>& pixels() const { return pixels_; }

 private:
  bool inside(int x, int y) const { return x >= 0 && y >= 0 && x < width_ && y < height_; }
  std::size_t offset(int x, int y) const {
    return (static_cast<std::size_t>(y) * static_cast<std::size_t>(width_) + static_cast<std::size_t>(x)) * 3;
  }

  int width_;
  int height_;
  std::vector<std::uint8_t> pixels_;
};

// Writes `image` as an 8-bit RGB PNG. Throws Error naming the path when it cannot be
// written (missing directory, no permission, full disk).
void write_png(const Image& image, const std::filesystem::path& path);

// Reads any PNG libpng can, converted to 8-bit RGB (used by the tests to check what
// write_png wrote). Throws Error naming the path.
Image read_png(const std::filesystem::path& path);

}  // namespace ordo::tools
