#include "tools/viz/png_image.h"

#include <png.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "ordo/error.hpp"

namespace ordo::tools {

Image::Image(int width, int height, Rgb background) : width_(width), height_(height) {
  if (width <= 0 || height <= 0 || width > 30000 || height > 30000)
    throw Error("image", std::to_string(width) + " x " + std::to_string(height) + " pixels",
                "a picture is 1 to 30000 pixels on each side");
  pixels_.resize(static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * 3);
  for (std::size_t i = 0; i < pixels_.size(); i += 3) {
    pixels_[i] = background.r;
    pixels_[i + 1] = background.g;
    pixels_[i + 2] = background.b;
  }
}

Rgb Image::at(int x, int y) const {
  if (!inside(x, y))
    throw Error("image", "pixel (" + std::to_string(x) + ", " + std::to_string(y) + ") is outside " +
                             std::to_string(width_) + " x " + std::to_string(height_));
  const std::size_t i = offset(x, y);
  return {pixels_[i], pixels_[i + 1], pixels_[i + 2]};
}

void Image::set(int x, int y, Rgb colour) {
  if (!inside(x, y)) return;
  const std::size_t i = offset(x, y);
  pixels_[i] = colour.r;
  pixels_[i + 1] = colour.g;
  pixels_[i + 2] = colour.b;
}

void Image::blend(int x, int y, Rgb colour, int alpha) {
  if (!inside(x, y) || alpha <= 0) return;
  alpha = std::min(alpha, 255);
  const std::size_t i = offset(x, y);
  const auto mix = [alpha](std::uint8_t under, std::uint8_t over) {
    return static_cast<std::uint8_t>((under * (255 - alpha) + over * alpha + 127) / 255);
  };
  pixels_[i] = mix(pixels_[i], colour.r);
  pixels_[i + 1] = mix(pixels_[i + 1], colour.g);
  pixels_[i + 2] = mix(pixels_[i + 2], colour.b);
}

void Image::fill_rect(int x, int y, int width, int height, Rgb colour) {
  for (int yy = std::max(y, 0); yy < std::min(y + height, height_); ++yy)
    for (int xx = std::max(x, 0); xx < std::min(x + width, width_); ++xx) set(xx, yy, colour);
}

void Image::outline_rect(int x, int y, int width, int height, Rgb colour) {
  fill_rect(x, y, width, 1, colour);
  fill_rect(x, y + height - 1, width, 1, colour);
  fill_rect(x, y, 1, height, colour);
  fill_rect(x + width - 1, y, 1, height, colour);
}

namespace {

// png_image must be released whatever happens after begin_read.
struct PngHandle {
  png_image image;
  PngHandle() {
    std::memset(&image, 0, sizeof image);
    image.version = PNG_IMAGE_VERSION;
  }
  ~PngHandle() { png_image_free(&image); }
  PngHandle(const PngHandle&) = delete;
  PngHandle& operator=(const PngHandle&) = delete;
};

}  // namespace

void write_png(const Image& image, const std::filesystem::path& path) {
  PngHandle png;
  png.image.width = static_cast<png_uint_32>(image.width());
  png.image.height = static_cast<png_uint_32>(image.height());
  png.image.format = PNG_FORMAT_RGB;
  // libpng opens the file itself and says only "png_image_write_to_file: invalid
  // argument" when it cannot; errno still tells why.
  errno = 0;
  if (png_image_write_to_file(&png.image, path.c_str(), 0, image.pixels().data(), 0, nullptr) == 0) {
    const std::string why = errno != 0 ? std::strerror(errno) : png.image.message;
    throw Error(path.string(), "cannot write the PNG: " + why,
                "check that the directory exists and is writable");
  }
}

Image read_png(const std::filesystem::path& path) {
  PngHandle png;
  if (png_image_begin_read_from_file(&png.image, path.c_str()) == 0)
    throw Error(path.string(), std::string("cannot read as PNG: ") + png.image.message);
  png.image.format = PNG_FORMAT_RGB;
  Image out(static_cast<int>(png.image.width), static_cast<int>(png.image.height));
  std::vector<std::uint8_t> pixels(PNG_IMAGE_SIZE(png.image));
  if (png_image_finish_read(&png.image, nullptr, pixels.data(), 0, nullptr) == 0)
    throw Error(path.string(), std::string("cannot decode the PNG: ") + png.image.message);
  for (int y = 0; y < out.height(); ++y)
    for (int x = 0; x < out.width(); ++x) {
      const std::size_t i = (static_cast<std::size_t>(y) * static_cast<std::size_t>(out.width()) +
                             static_cast<std::size_t>(x)) * 3;
      out.set(x, y, {pixels[i], pixels[i + 1], pixels[i + 2]});
    }
  return out;
}

}  // namespace ordo::tools
