#include "viz/imgui/texture.h"

#include <cstdint>
#include <utility>

#define GL_GLEXT_PROTOTYPES
#include <GL/gl.h>

namespace viz {

Texture::~Texture() {
    if (m_id) glDeleteTextures(1, &m_id);
}

Texture::Texture(Texture&& other) noexcept
    : m_id(std::exchange(other.m_id, 0)), m_width(other.m_width), m_height(other.m_height) {}

Texture& Texture::operator=(Texture&& other) noexcept {
    if (this != &other) {
        if (m_id) glDeleteTextures(1, &m_id);
        m_id = std::exchange(other.m_id, 0);
        m_width = other.m_width;
        m_height = other.m_height;
    }
    return *this;
}

void Texture::Upload(const Image& image, bool smooth) {
    if (image.width <= 0 || image.height <= 0) return;
    if (!m_id) glGenTextures(1, &m_id);
    glBindTexture(GL_TEXTURE_2D, m_id);
    const GLint filter = smooth ? GL_LINEAR : GL_NEAREST;  // nearest keeps cells crisp when zoomed in
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, filter);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, filter);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
    if (image.width == m_width && image.height == m_height) {
        glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, image.width, image.height, GL_RGBA, GL_UNSIGNED_BYTE, image.pixels.data());
    } else {
        glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, image.width, image.height, 0, GL_RGBA, GL_UNSIGNED_BYTE, image.pixels.data());
        m_width = image.width;
        m_height = image.height;
    }
}

ImTextureID Texture::Id() const { return reinterpret_cast<ImTextureID>(static_cast<intptr_t>(m_id)); }

}  // namespace viz
