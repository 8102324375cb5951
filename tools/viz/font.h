// Text for picture labels: FreeType renders a TrueType font that fontconfig finds.
//
// Why FreeType and fontconfig rather than a bitmap font compiled in: labels are
// SentencePiece pieces ("▁Katzen", "jagen", "Hündin"): umlauts, ß and the ▁ word mark
// need a Unicode font, which Debian's small bitmap fonts in headers (stb_easy_font) are
// not. fontconfig is how Linux programs find fonts, so ordo asks it for "DejaVu Sans"
// (fonts-dejavu-core, which tools/scripts/install_deps.sh installs) and takes whatever sans it
// offers instead; $ORDO_FONT names a font file to use instead. Without any, drawing
// fails with one line saying what to install.
#pragma once

#include <filesystem>
#include <memory>
#include <string_view>

#include "tools/viz/png_image.h"

namespace ordo::tools {

// The font file labels use: $ORDO_FONT if set, else fontconfig's match for "DejaVu
// Sans". Throws Error saying what to install or set when there is none.
std::filesystem::path find_label_font();

class Font {
 public:
  // The font in `file` at `pixel_height` pixels per em. Throws Error naming the file
  // when FreeType cannot read it.
  Font(const std::filesystem::path& file, int pixel_height);
  ~Font();
  Font(Font&&) noexcept;
  Font& operator=(Font&&) noexcept;

  // Pixels from the top of a line to the next line's top.
  int line_height() const;
  // Width in pixels of UTF-8 text (malformed bytes count as U+FFFD).
  int width(std::string_view text) const;

  // Draws UTF-8 text left to right with the top-left of its line box at (x, y).
  void draw(Image& image, int x, int y, std::string_view text, Rgb colour) const;
  // Draws it turned a quarter left, reading bottom to top: the text starts at (x, y)
  // and goes up; its line box spans x .. x + line_height().
  void draw_up(Image& image, int x, int y, std::string_view text, Rgb colour) const;

 private:
  struct Face;
  // Calls plot(u, v, alpha) for every covered pixel of the text laid out horizontally
  // (u right from the start, v down from the line top).
  template <class Plot>
  void render(std::string_view text, const Plot& plot) const;

  std::unique_ptr<Face> face_;
};

}  // namespace ordo::tools
