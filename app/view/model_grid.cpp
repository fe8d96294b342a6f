// The model view's grid plan: see model_grid.h.
#include "view/model_grid.h"

#include <algorithm>
#include <cmath>

namespace app {

ModelGridPlan planModelGrid(const ModelGridInput& in)
{
    ModelGridPlan p;
    const int L = std::max(in.layers, 1), H = std::max(in.heads, 1), n = std::max(in.tokens, 1);
    const float byWidth = (in.width - in.labelWidth) / float(H) - kModelThumbGap;
    const float byHeight = (in.height - in.headerHeight) / float(L) - in.rowExtra - kModelThumbGap;
    p.thumb = std::floor(std::clamp(std::min(byWidth, byHeight), kModelThumbMin, kModelThumbMax));
    // Pooled when n exceeds the pixels: a cell narrower than a pixel would be skipped or aliased by the GPU's
    // nearest sampling, and a strong weight could vanish from the thumbnail.
    if (n <= int(p.thumb)) {
        p.shown = n;
        p.cell = p.thumb / float(n);
    } else {
        p.shown = int(p.thumb);
        p.cell = 1.0f;
        p.pooled = true;
    }
    p.pitchX = p.thumb + kModelThumbGap;
    p.pitchY = p.thumb + in.rowExtra + kModelThumbGap;
    p.contentWidth = in.labelWidth + p.pitchX * float(H);
    p.contentHeight = in.headerHeight + p.pitchY * float(L);
    p.scrollX = p.contentWidth > in.width + 0.5f;
    p.scrollY = p.contentHeight > in.height + 0.5f;
    return p;
}

} // namespace app
