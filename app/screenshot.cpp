#include "screenshot.h"

#include <attnscope/preset_io.h>

#include <glad/gl.h>
#include <stb_image.h>
#include <stb_image_write.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace app {

Image captureFramebuffer(int width, int height)
{
    Image img;
    img.width = width;
    img.height = height;
    std::vector<std::uint8_t> rows(static_cast<std::size_t>(width) * height * 3);
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    // A window's back buffer, or off screen (Platform's framebuffer object, left bound) its colour attachment.
    GLint framebuffer = 0;
    glGetIntegerv(GL_READ_FRAMEBUFFER_BINDING, &framebuffer);
    glReadBuffer(framebuffer != 0 ? GL_COLOR_ATTACHMENT0 : GL_BACK);
    glReadPixels(0, 0, width, height, GL_RGB, GL_UNSIGNED_BYTE, rows.data());
    // GL's first row is the bottom one.
    img.rgb.resize(rows.size());
    const std::size_t stride = static_cast<std::size_t>(width) * 3;
    for (int y = 0; y < height; ++y)
        std::copy_n(rows.data() + stride * static_cast<std::size_t>(height - 1 - y), stride, img.rgb.data() + stride * static_cast<std::size_t>(y));
    return img;
}

attn::Status writeImage(const std::string& path, const Image& img)
{
    const bool ppm = path.size() > 4 && path.compare(path.size() - 4, 4, ".ppm") == 0;
    if (ppm) {
        FILE* f = std::fopen(path.c_str(), "wb");
        if (!f) return attn::makeError(attn::StatusCode::IoError, path + ": cannot write");
        std::fprintf(f, "P6\n%d %d\n255\n", img.width, img.height);
        const bool ok = std::fwrite(img.rgb.data(), 1, img.rgb.size(), f) == img.rgb.size();
        if (std::fclose(f) != 0 || !ok) return attn::makeError(attn::StatusCode::IoError, path + ": write failed");
        return {};
    }
    if (img.width <= 0 || img.height <= 0 || img.rgb.size() != std::size_t(img.width) * std::size_t(img.height) * 3)
        return attn::invalidArgument(path + ": nothing to write (an empty image)");
    std::string bytes;
    const auto append = [](void* ctx, void* data, int size) {
        static_cast<std::string*>(ctx)->append(static_cast<const char*>(data), static_cast<std::size_t>(size));
    };
    if (!stbi_write_png_to_func(append, &bytes, img.width, img.height, 3, img.rgb.data(), img.width * 3))
        return attn::makeError(attn::StatusCode::Internal, path + ": PNG encoding failed");
    return attn::writeFileAtomic(path, bytes);
}

Image cropImage(const Image& img, int x, int y, int w, int h)
{
    const int x0 = std::clamp(x, 0, img.width), y0 = std::clamp(y, 0, img.height);
    const int x1 = std::clamp(x + std::max(w, 0), 0, img.width), y1 = std::clamp(y + std::max(h, 0), 0, img.height);
    Image out;
    if (x1 <= x0 || y1 <= y0) return out;
    out.width = x1 - x0;
    out.height = y1 - y0;
    out.rgb.resize(std::size_t(out.width) * std::size_t(out.height) * 3);
    const std::size_t rowBytes = std::size_t(out.width) * 3;
    for (int r = 0; r < out.height; ++r)
        std::copy_n(img.rgb.data() + (std::size_t(y0 + r) * std::size_t(img.width) + std::size_t(x0)) * 3, rowBytes,
                    out.rgb.data() + std::size_t(r) * rowBytes);
    return out;
}

attn::Expected<Image> readPng(const std::string& path)
{
    int w = 0, h = 0, n = 0;
    unsigned char* data = stbi_load(path.c_str(), &w, &h, &n, 3);
    if (!data) return attn::makeError(attn::StatusCode::IoError, path + ": cannot read the image (" + stbi_failure_reason() + ")");
    Image img;
    img.width = w;
    img.height = h;
    img.rgb.assign(data, data + static_cast<std::size_t>(w) * h * 3);
    stbi_image_free(data);
    return img;
}

attn::Expected<ImageDiff> compareImages(const Image& a, const Image& b)
{
    if (a.width != b.width || a.height != b.height)
        return attn::invalidArgument("image size: expected " + std::to_string(b.width) + "×" + std::to_string(b.height) +
                                     " (the reference), got " + std::to_string(a.width) + "×" + std::to_string(a.height));
    ImageDiff d;
    std::size_t differing = 0;
    const std::size_t pixels = static_cast<std::size_t>(a.width) * a.height;
    for (std::size_t i = 0; i < pixels; ++i) {
        int m = 0;
        for (int c = 0; c < 3; ++c) m = std::max(m, std::abs(int(a.rgb[i * 3 + c]) - int(b.rgb[i * 3 + c])));
        d.maxChannelDiff = std::max(d.maxChannelDiff, m);
        if (m > kPixelTolerance) ++differing;
    }
    d.differingFraction = pixels ? static_cast<double>(differing) / static_cast<double>(pixels) : 0.0;
    return d;
}

} // namespace app
