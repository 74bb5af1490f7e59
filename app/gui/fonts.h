// Fonts: DejaVu Sans for Latin, Greek and Cyrillic, merged with a CJK-capable fallback font when
// one is installed. The atlas holds only the glyphs the text needs, so it stays small; when the
// text brings new characters the app rebuilds it between frames.
#pragma once

#include <string>

namespace app {

// Builds the initial atlas at the given pixel size (call before the renderer creates its font
// texture). Returns false when no usable TTF was found (ImGui's built-in font is used then).
bool LoadFonts(float pixel_size);

// Adds the characters of `text` that the atlas lacks; returns true when the atlas was rebuilt
// and the renderer's font texture must be re-created. Call between frames only.
bool EnsureGlyphs(const std::string& text);

// Counts atlas builds, so views that cache text measurements know when glyph widths may have
// changed (a character drawn as the fallback glyph before the rebuild has its own width after).
unsigned FontAtlasGeneration();

}  // namespace app
