// Lesson 7 (seed 003, "MSA of images"): an RGB image cut into p×p patches, each patch a token of its 3p²
// raw values; click a patch to see its attention over the image.
//
// Images are decoded by stb_image from Debian's libstb (PNG and JPEG), the same library the window's
// screenshots use.
#include <stb_image.h>

#include "lessons/lesson_panels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace app {

namespace {

constexpr const char* kSampleImage = "desk_cup_notebook.png";
constexpr int kMaxImageSide = 4096;   // larger images are refused: the lesson is about a few hundred patches

attn::Expected<attn::RgbImage> loadImage(const std::string& path)
{
    int w = 0, h = 0, channels = 0;
    if (!stbi_info(path.c_str(), &w, &h, &channels))
        return attn::makeError(attn::StatusCode::IoError, path + ": cannot read as PNG or JPEG (" + stbi_failure_reason() + ")");
    if (w > kMaxImageSide || h > kMaxImageSide)
        return attn::invalidArgument(path + ": " + std::to_string(w) + "×" + std::to_string(h) + " is larger than " +
                                     std::to_string(kMaxImageSide) + " pixels on a side");
    unsigned char* data = stbi_load(path.c_str(), &w, &h, &channels, 3);
    if (!data) return attn::makeError(attn::StatusCode::IoError, path + ": cannot decode (" + stbi_failure_reason() + ")");
    attn::RgbImage img;
    img.width = w;
    img.height = h;
    img.rgb.assign(data, data + std::size_t(w) * std::size_t(h) * 3);
    stbi_image_free(data);
    return img;
}

std::string cacheKey(const std::string& path, const LessonState& st)
{
    const attn::PatchSessionOptions& o = st.patchOptions;
    return path + "|" + std::to_string(st.patch) + "|" + std::to_string(int(o.projection)) + "|" + std::to_string(o.centre) +
           "|" + std::to_string(o.dk) + "|" + std::to_string(o.seed) + "|" + std::to_string(o.heads);
}

// (Re)builds image → patches → session → result when a parameter changed. Errors go to st.imageError and
// keep the last good state.
void rebuild(const std::string& path, LessonState& st)
{
    const std::string key = cacheKey(path, st);
    if (key == st.imageKey) return;
    st.imageKey = key;
    st.imageError.clear();
    if (!st.image || st.loadedImagePath != path) {
        auto img = loadImage(path);
        if (!img) {
            st.imageError = img.status().message;
            return;
        }
        st.image = std::move(*img);
        st.loadedImagePath = path;
    }
    auto grid = attn::patchify(*st.image, st.patch, attn::PatchFit::Crop);
    if (!grid) {
        st.imageError = grid.status().message;
        return;
    }
    auto session = attn::patchSession(*grid, st.patchOptions);
    if (!session) {
        st.imageError = session.status().message;
        return;
    }
    auto result = attn::compute(session->input, session->config);
    if (!result) {
        st.imageError = result.status().message;
        return;
    }
    st.grid = std::move(*grid);
    st.patchResult = std::move(*result);
    st.patchQuery = std::clamp(st.patchQuery, 0, st.grid->rows * st.grid->cols - 1);
}

} // namespace

void drawImagePatchesPanel(const LessonInputs& in, LessonState& st, bool* open)
{
    if (!beginLessonPanel(LessonId::ImagePatches, ImVec2(720, 760), open)) return;
    char path[1024];
    std::snprintf(path, sizeof path, "%s", st.imagePath.c_str());
    ImGui::SetNextItemWidth(420);
    // The hint names the sample by file name only: where the assets live differs from one machine to the next.
    const std::string hint = std::string("sample ") + kSampleImage + " (type a PNG/JPEG path, Enter)";
    if (ImGui::InputTextWithHint("image", hint.c_str(), path, sizeof path,
                                 ImGuiInputTextFlags_EnterReturnsTrue))
        st.imagePath = path;
    ImGui::SetNextItemWidth(160);
    ImGui::SliderInt("patch size p", &st.patch, 1, 32);
    ImGui::SameLine();
    ImGui::Checkbox("centre values (-0.5)", &st.patchOptions.centre);
    int proj = int(st.patchOptions.projection);
    ImGui::SetNextItemWidth(200);
    if (ImGui::Combo("W^Q = W^K = W^V", &proj, "identity\0seeded random projection\0"))
        st.patchOptions.projection = attn::PatchProjection(proj);
    if (st.patchOptions.projection == attn::PatchProjection::Random) {
        ImGui::SameLine();
        ImGui::SetNextItemWidth(100);
        ImGui::InputInt("d_k", &st.patchOptions.dk);
    }
    const std::string file = st.imagePath.empty() ? in.imageDir + "/" + kSampleImage : st.imagePath;
    rebuild(file, st);
    if (!st.imageError.empty()) errorText(st.imageError);
    if (!st.image || !st.grid || !st.patchResult) {
        ImGui::End();
        return;
    }
    const attn::PatchGrid& g = *st.grid;
    textWrapped("%d×%d patches of %d×%d pixels = %d tokens of 3·p² = %d values%s", g.cols, g.rows, g.patch, g.patch,
                g.cols * g.rows, int(g.tokens.cols()),
                (g.usedWidth != g.originalWidth || g.usedHeight != g.originalHeight) ? " (image cropped to whole patches)" : "");
    noteText("Click a patch: the overlay shows its attention weights over all patches.");

    // The image, scaled to fit: f display pixels per image pixel; large images are drawn in blocks of `step`
    // image pixels (nearest neighbour), each at least ~2 display pixels, to bound the number of rectangles.
    const float avail = std::min(ImGui::GetContentRegionAvail().x, 520.0f);
    const float maxSide = float(std::max(g.usedWidth, g.usedHeight));
    const float f = maxSide <= avail ? std::floor(avail / maxSide) : avail / maxSide;
    const int step = maxSide <= avail ? 1 : int(std::ceil(2.0f / f));
    const ImVec2 o = ImGui::GetCursorScreenPos();
    ImGui::InvisibleButton("image", ImVec2(float(g.usedWidth) * f, float(g.usedHeight) * f));
    const bool clicked = ImGui::IsItemClicked();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const attn::RgbImage& img = *st.image;
    for (int y = 0; y < g.usedHeight; y += step)
        for (int x = 0; x < g.usedWidth; x += step) {
            const std::size_t i = (std::size_t(y) * std::size_t(img.width) + std::size_t(x)) * 3;
            dl->AddRectFilled(ImVec2(o.x + float(x) * f, o.y + float(y) * f),
                              ImVec2(o.x + float(std::min(x + step, g.usedWidth)) * f, o.y + float(std::min(y + step, g.usedHeight)) * f),
                              IM_COL32(img.rgb[i], img.rgb[i + 1], img.rgb[i + 2], 255));
        }
    const float patchPx = float(g.patch) * f;
    auto weights = attn::patchWeightsGrid(*st.patchResult, g, 0, st.patchQuery);
    if (weights) {
        const attn::DisplayRange range = attn::displayRange(*weights, nullptr, false);
        for (int r = 0; r < g.rows; ++r)
            for (int c = 0; c < g.cols; ++c) {
                const attn::Rgb8 col = attn::colormapColor(in.colormap(LessonMap::Weights), attn::normalize((*weights)(r, c), range));
                // Alpha 150 of 255: the patch's pixels stay visible under its weight colour.
                dl->AddRectFilled(ImVec2(o.x + float(c) * patchPx, o.y + float(r) * patchPx),
                                  ImVec2(o.x + float(c + 1) * patchPx, o.y + float(r + 1) * patchPx), toImColor(col, 150));
            }
        ImGui::Text("weights of patch %d: from %s to %s (colour range)", st.patchQuery, attn::formatValue(range.lo, 3).c_str(),
                    attn::formatValue(range.hi, 3).c_str());
    } else {
        errorText(weights.status().message);
    }
    const int qr = st.patchQuery / g.cols, qc = st.patchQuery % g.cols;
    dl->AddRect(ImVec2(o.x + float(qc) * patchPx, o.y + float(qr) * patchPx),
                ImVec2(o.x + float(qc + 1) * patchPx, o.y + float(qr + 1) * patchPx), IM_COL32(0, 255, 120, 255), 0.0f, 0, 3.0f);
    if (clicked) {
        const ImVec2 mp = ImGui::GetMousePos();
        const int c = int((mp.x - o.x) / patchPx), r = int((mp.y - o.y) / patchPx);
        if (r >= 0 && r < g.rows && c >= 0 && c < g.cols) st.patchQuery = r * g.cols + c;
    }
    if (in.applySession && ImGui::Button("Open the patch session in the main views")) {
        auto s = attn::patchSession(g, st.patchOptions);
        if (s) in.applySession(std::move(*s));
    }
    ImGui::End();
}

} // namespace app
