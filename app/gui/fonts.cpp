#include "app/gui/fonts.h"

#include <cstdint>
#include <fstream>
#include <iterator>
#include <set>
#include <vector>

#include <imgui.h>

#include "model/text/utf8.h"

namespace app {
namespace {

// Glyphs every atlas holds: Basic Latin, Latin-1, Latin Extended-A, Greek (tau), and the marks the
// token strip and the help window draw (· in Latin-1; ␣ ↵ « » → … and friends below).
const ImWchar kBaseRanges[] = {
    0x0020, 0x017F,  // Basic Latin, Latin-1 Supplement, Latin Extended-A
    0x0370, 0x03FF,  // Greek (τ, and Greek text costs little)
    0x2013, 0x2014,  // – —
    0x2026, 0x2026,  // … (ImGui's ellipsis too)
    0x2070, 0x207B,  // ⁰ ⁴..⁹ ⁻: a log colour bar's 10⁻⁴ (¹ ² ³ are Latin-1's)
    0x2190, 0x2193,  // ← ↑ → ↓
    0x21B5, 0x21B5,  // ↵
    0x2248, 0x2248,  // ≈
    0x2264, 0x2265,  // ≤ ≥
    0x2423, 0x2423,  // ␣
    0xFFFD, 0xFFFD,  // replacement character
    0,
};

// At most this many characters beyond the base set, so a pathological text cannot grow the
// atlas past what a GL texture holds.
constexpr size_t kMaxExtraGlyphs = 6000;

const char* const kMainFonts[] = {
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",  // fonts-dejavu-core
};
// CJK-capable fallbacks, smallest package first.
const char* const kFallbackFonts[] = {
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",                 // fonts-wqy-microhei
    "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf",      // fonts-droid-fallback
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",         // fonts-noto-cjk
    "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",                   // fonts-wqy-zenhei
};

struct FontFiles {
    std::vector<unsigned char> main, fallback;  // the atlas reads these on every build; they live for the process
    float pixel_size = 15.0f;
    bool have_ttf = false;
    std::set<ImWchar> extra;   // characters seen beyond the base ranges
    ImVector<ImWchar> ranges;  // must outlive each build: the font configs point into it
    unsigned generation = 0;
};

FontFiles& Files() {
    static FontFiles files;
    return files;
}

// Reads a font file whole if it looks like TrueType / OpenType (a corrupt file would trip
// stb_truetype's assertions); empty on any failure.
std::vector<unsigned char> ReadFontFile(const char* path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return {};
    std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes.size() < 12) return {};
    const uint32_t tag = (uint32_t(bytes[0]) << 24) | (uint32_t(bytes[1]) << 16) | (uint32_t(bytes[2]) << 8) | bytes[3];
    const bool known = tag == 0x00010000u || tag == 0x74727565u /* true */ || tag == 0x4F54544Fu /* OTTO */ || tag == 0x74746366u /* ttcf */;
    return known ? bytes : std::vector<unsigned char>{};
}

// Clears the atlas and adds the fonts again with the base ranges plus every extra character.
void BuildAtlas() {
    FontFiles& f = Files();
    ImFontAtlas* atlas = ImGui::GetIO().Fonts;
    atlas->Clear();
    ++f.generation;
    if (!f.have_ttf) {
        atlas->AddFontDefault();
        atlas->Build();
        return;
    }

    ImFontGlyphRangesBuilder builder;
    builder.AddRanges(kBaseRanges);
    for (ImWchar c : f.extra) builder.AddChar(c);
    f.ranges.clear();
    builder.BuildRanges(&f.ranges);

    ImFontConfig main;
    main.FontDataOwnedByAtlas = false;
    main.OversampleH = 2;
    main.OversampleV = 1;
    atlas->AddFontFromMemoryTTF(f.main.data(), static_cast<int>(f.main.size()), f.pixel_size, &main, f.ranges.Data);
    if (!f.fallback.empty()) {
        // Merged: it fills in only the characters the main font lacks (CJK, mostly).
        ImFontConfig merge;
        merge.FontDataOwnedByAtlas = false;
        merge.MergeMode = true;
        merge.OversampleH = 1;
        merge.OversampleV = 1;
        merge.PixelSnapH = true;
        atlas->AddFontFromMemoryTTF(f.fallback.data(), static_cast<int>(f.fallback.size()), f.pixel_size, &merge, f.ranges.Data);
    }
    if (!atlas->Build()) {  // a font stb_truetype could not read after all
        f.have_ttf = false;
        atlas->Clear();
        atlas->AddFontDefault();
        atlas->Build();
    }
}

bool InBaseRanges(uint32_t cp) {
    for (const ImWchar* r = kBaseRanges; r[0]; r += 2)
        if (cp >= r[0] && cp <= r[1]) return true;
    return false;
}

}  // namespace

bool LoadFonts(float pixel_size) {
    FontFiles& f = Files();
    f.pixel_size = pixel_size > 0 ? pixel_size : 15.0f;
    f.main.clear();
    f.fallback.clear();
    for (const char* path : kMainFonts)
        if (f.main.empty()) f.main = ReadFontFile(path);
    for (const char* path : kFallbackFonts)
        if (f.fallback.empty()) f.fallback = ReadFontFile(path);
    if (f.main.empty()) f.main.swap(f.fallback);  // a CJK font alone still beats the bitmap font
    f.have_ttf = !f.main.empty();
    BuildAtlas();
    return f.have_ttf;
}

bool EnsureGlyphs(const std::string& text) {
    FontFiles& f = Files();
    if (!f.have_ttf) return false;
    bool added = false;
    for (size_t i = 0; i < text.size();) {
        // Bad bytes give U+FFFD, which the base ranges hold: ImGui draws them as that too.
        const char32_t cp = model::NextCodePoint(text, &i);
        // ImWchar is 16-bit in Debian's build: planes 1-16 (emoji) cannot be in the atlas.
        if (cp < 0x20 || cp > 0xFFFF || InBaseRanges(cp)) continue;
        if (f.extra.size() >= kMaxExtraGlyphs) break;
        added |= f.extra.insert(static_cast<ImWchar>(cp)).second;
    }
    if (!added) return false;
    BuildAtlas();
    return true;
}

unsigned FontAtlasGeneration() { return Files().generation; }

}  // namespace app
