#include "tools/viz/font.h"

#include <fontconfig/fontconfig.h>
#include <ft2build.h>
#include FT_FREETYPE_H

#include <cstdlib>
#include <string>
#include <vector>

#include "ordo/error.hpp"

namespace ordo::tools {

namespace {

constexpr const char* kInstallHint =
    "install a font (tools/scripts/install_deps.sh installs fonts-dejavu-core), or set ORDO_FONT to a .ttf file";

// UTF-8 -> code points; a malformed sequence becomes U+FFFD and decoding goes on.
std::vector<char32_t> code_points(std::string_view text) {
  std::vector<char32_t> out;
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
    char32_t cp = extra == 0 ? c : extra == 1 ? (c & 0x1F) : extra == 2 ? (c & 0x0F) : (c & 0x07);
    bool ok = extra >= 0 && i + static_cast<std::size_t>(extra) < text.size();
    for (int k = 1; ok && k <= extra; ++k) {
      const auto next = static_cast<unsigned char>(text[i + static_cast<std::size_t>(k)]);
      ok = (next & 0xC0) == 0x80;
      cp = (cp << 6) | (next & 0x3F);
    }
    out.push_back(ok ? cp : U'\uFFFD');
    i += ok ? static_cast<std::size_t>(extra) + 1 : 1;
  }
  return out;
}

}  // namespace

std::filesystem::path find_label_font() {
  if (const char* chosen = std::getenv("ORDO_FONT"); chosen != nullptr && *chosen != '\0') {
    if (!std::filesystem::is_regular_file(chosen))
      throw Error("$ORDO_FONT", std::string("'") + chosen + "' is not a font file", "unset it or name a .ttf file");
    return chosen;
  }
  // fontconfig's objects are C handles: each released on every path out.
  const std::unique_ptr<FcConfig, decltype(&FcConfigDestroy)> config(FcInitLoadConfigAndFonts(), FcConfigDestroy);
  if (!config) throw Error("fontconfig", "could not load its configuration", kInstallHint);
  const std::unique_ptr<FcPattern, decltype(&FcPatternDestroy)> pattern(
      FcNameParse(reinterpret_cast<const FcChar8*>("DejaVu Sans")), FcPatternDestroy);
  FcConfigSubstitute(config.get(), pattern.get(), FcMatchPattern);
  FcDefaultSubstitute(pattern.get());
  FcResult result = FcResultNoMatch;
  const std::unique_ptr<FcPattern, decltype(&FcPatternDestroy)> match(
      FcFontMatch(config.get(), pattern.get(), &result), FcPatternDestroy);
  FcChar8* file = nullptr;
  if (!match || FcPatternGetString(match.get(), FC_FILE, 0, &file) != FcResultMatch || file == nullptr)
    throw Error("labels", "no font found for the picture's labels", kInstallHint);
  return reinterpret_cast<const char*>(file);
}

struct Font::Face {
  FT_Library library = nullptr;
  FT_Face face = nullptr;
  int line_height = 0;
  int ascent = 0;
  ~Face() {
    if (face != nullptr) FT_Done_Face(face);
    if (library != nullptr) FT_Done_FreeType(library);
  }
};

Font::Font(const std::filesystem::path& file, int pixel_height) : face_(std::make_unique<Face>()) {
  if (FT_Init_FreeType(&face_->library) != 0) throw Error("FreeType", "could not start");
  if (FT_New_Face(face_->library, file.c_str(), 0, &face_->face) != 0)
    throw Error(file.string(), "FreeType cannot read it as a font", kInstallHint);
  if (FT_Set_Pixel_Sizes(face_->face, 0, static_cast<FT_UInt>(pixel_height)) != 0)
    throw Error(file.string(), "has no size of " + std::to_string(pixel_height) + " pixels", kInstallHint);
  const FT_Size_Metrics& m = face_->face->size->metrics;
  face_->ascent = static_cast<int>((m.ascender + 63) >> 6);
  face_->line_height = static_cast<int>((m.ascender - m.descender + 63) >> 6);
}

Font::~Font() = default;
Font::Font(Font&&) noexcept = default;
Font& Font::operator=(Font&&) noexcept = default;

int Font::line_height() const { return face_->line_height; }

template <class Plot>
void Font::render(std::string_view text, const Plot& plot) const {
  FT_Face face = face_->face;
  long pen = 0;  // 26.6 fixed point
  for (const char32_t cp : code_points(text)) {
    if (FT_Load_Char(face, cp, FT_LOAD_RENDER) != 0) continue;  // a glyph it cannot draw: skipped
    const FT_GlyphSlot g = face->glyph;
    const FT_Bitmap& bitmap = g->bitmap;
    const int left = static_cast<int>(pen >> 6) + g->bitmap_left;
    const int top = face_->ascent - g->bitmap_top;
    for (unsigned row = 0; row < bitmap.rows; ++row)
      for (unsigned col = 0; col < bitmap.width; ++col) {
        const int alpha = bitmap.buffer[static_cast<long>(row) * bitmap.pitch + col];
        if (alpha > 0) plot(left + static_cast<int>(col), top + static_cast<int>(row), alpha);
      }
    pen += g->advance.x;
  }
}

int Font::width(std::string_view text) const {
  FT_Face face = face_->face;
  long pen = 0;
  for (const char32_t cp : code_points(text))
    if (FT_Load_Char(face, cp, FT_LOAD_DEFAULT) == 0) pen += face->glyph->advance.x;
  return static_cast<int>((pen + 63) >> 6);
}

void Font::draw(Image& image, int x, int y, std::string_view text, Rgb colour) const {
  render(text, [&](int u, int v, int alpha) { image.blend(x + u, y + v, colour, alpha); });
}

void Font::draw_up(Image& image, int x, int y, std::string_view text, Rgb colour) const {
  // A quarter turn left: along the text is up the picture, down the line is right.
  render(text, [&](int u, int v, int alpha) { image.blend(x + v, y - u, colour, alpha); });
}

}  // namespace ordo::tools
