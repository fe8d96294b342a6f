// Screenshots of the window (PNG) and their comparison with a baseline image, for the screenshot tests.
#pragma once

#include <attnscope/status.h>

#include <cstdint>
#include <string>
#include <vector>

namespace app {

struct Image {
    int width = 0, height = 0;
    std::vector<std::uint8_t> rgb;  // width·height·3, top row first
};

// Reads the current GL back buffer (after rendering, before the swap), width×height pixels.
Image captureFramebuffer(int width, int height);
// Writes PNG (stb_image_write; through a temporary file and a rename, so a failed write leaves nothing
// half-written) or, for a path ending in ".ppm", binary PPM. IoError on failure.
attn::Status writeImage(const std::string& path, const Image& img);
// The part of `img` inside the rectangle [x, x+w) × [y, y+h), clipped to the image (empty when they do not
// overlap): a lesson panel cut out of a window screenshot.
Image cropImage(const Image& img, int x, int y, int w, int h);
attn::Expected<Image> readPng(const std::string& path);

struct ImageDiff {
    double differingFraction = 0;  // pixels whose largest channel difference exceeds kPixelTolerance
    int maxChannelDiff = 0;
};
// A channel may differ by this much without the pixel counting as different: font anti-aliasing and Mesa
// versions move edge pixels by a few levels.
inline constexpr int kPixelTolerance = 24;
// Compares two images of the same size; InvalidArgument when the sizes differ.
attn::Expected<ImageDiff> compareImages(const Image& actual, const Image& reference);

} // namespace app
