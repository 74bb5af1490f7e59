// An OpenGL texture owned by the UI thread, drawn with ImGui::Image. Upload replaces the pixels
// (re-allocating only when the size changes); the destructor frees it, so a Texture must die
// before the GL context does.
#pragma once

#include <imgui.h>

#include "viz/heatmap.h"

namespace viz {

class Texture {
public:
    Texture() = default;
    ~Texture();
    Texture(const Texture&) = delete;
    Texture& operator=(const Texture&) = delete;
    Texture(Texture&& other) noexcept;
    Texture& operator=(Texture&& other) noexcept;

    void Upload(const Image& image, bool smooth = false);
    ImTextureID Id() const;
    int Width() const { return m_width; }
    int Height() const { return m_height; }
    bool Valid() const { return m_id != 0; }

private:
    unsigned int m_id = 0;
    int m_width = 0, m_height = 0;
};

}  // namespace viz
