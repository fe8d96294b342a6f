// The one table of lessons (lesson_registry.h).
#include "lessons/lesson_registry.h"

#include "lessons/lesson_figure.h"
#include "lessons/lesson_panels.h"

#include <cassert>

namespace app {
namespace {

constexpr Lesson kLessons[kLessonCount] = {
    {LessonId::VectorView, "vector_view", "Lesson: from vector to matrix", "From vector to matrix (seeds 000/001)",
     "lesson_vector_to_matrix.json", drawVectorViewPanel, buildVectorViewFigure, "From vector to matrix"},
    {LessonId::TwoFormulas, "two_formulas", "Lesson: the two formulas", "The two formulas (seeds 000/001)",
     "lesson_two_formulas_column.json", drawTwoFormulasPanel, buildTwoFormulasFigure, "The two formulas"},
    {LessonId::Scaling, "scaling", "Lesson: why 1/sqrt(d_k)", "Why 1/sqrt(d_k) (seeds 002/003)",
     "lesson_scaling_overflow.json", drawScalingPanel, nullptr, ""},
    {LessonId::Heads, "heads", "Lesson: heads", "Heads (seeds 002/003)", "lesson_heads_block_identity.json",
     drawHeadsPanel, buildHeadsFigure, "Each head's contribution through W^O"},
    {LessonId::Additive, "additive", "Lesson: additive attention", "Additive attention (seed 004)",
     "lesson_additive.json", drawAdditivePanel, buildAdditiveFigure, "Additive attention, term by term"},
    {LessonId::Masks, "masks", "Lesson: masks", "Masks (seed 004)", "lesson_mask_look_ahead.json", drawMasksPanel,
     buildMasksFigure, "Masked softmax"},
    {LessonId::ImagePatches, "image_patches", "Lesson: image patches", "Image patches (seed 003)", "",
     drawImagePatchesPanel, nullptr, ""},
};

} // namespace

std::span<const Lesson> lessons() { return kLessons; }

const Lesson& lesson(LessonId id)
{
    assert(int(id) >= 0 && int(id) < kLessonCount && kLessons[int(id)].id == id);  // the table is in LessonId order
    return kLessons[int(id)];
}

int lessonFromName(const std::string& name)
{
    for (const Lesson& l : kLessons)
        if (name == l.name) return int(l.id);
    return -1;
}

std::string lessonFigureList()
{
    std::string out;
    for (const Lesson& l : kLessons)
        if (l.figure) out += (out.empty() ? "" : "|") + std::string(l.name);
    return out;
}

} // namespace app
