// The lesson panels of issue 6, one ImGui window per file (app/lessons/<name>_panel.cpp). Each shows one thing
// the seed posts derive, on the document's own numbers, from the core lessons (attnscope/lessons/*.h); the
// registry (lesson_registry.h) gives each its window title.
#pragma once

#include "lessons/lesson_common.h"

namespace app {

// Seed 000/001: o_i = Σ_j â_ij·v_j for the selected query next to row i of softmax(QKᵀ/√d_k)·V, and the
// shape of every product. Click a row of the weights to select a query.
void drawVectorViewPanel(const LessonInputs& in, LessonState& st, bool* open);

// Seed 000/001: both formulas on the same data (transposes of each other), and the wrong softmax axis /
// the other formula applied literally, labelled.
void drawTwoFormulasPanel(const LessonInputs& in, LessonState& st, bool* open);
// The panel's paragraphs on the two mistakes of attn::wrongFormulaDemo: (a) the wrong softmax axis, with the
// axis names (torch dims) of the session's layout; (b) what applying the other formula literally did.
std::string wrongAxisParagraph(const attn::WrongFormulaDemo& demo);
std::string literalFormulaParagraph(const attn::WrongFormulaDemo& demo);

// Seeds 002/003: q·k histograms against the predicted mean and variance as d_k grows, one softmax row with
// and without scaling, the naive softmax overflowing, and the split q/d^¼·k/d^¼ form.
void drawScalingPanel(const LessonInputs& in, LessonState& st, bool* open);

// Seeds 002/003: head blocks of W and Q/K/V, the block-identity selector, each head's contribution through
// W^O, one head vs h heads.
void drawHeadsPanel(const LessonInputs& in, LessonState& st, bool* open);

// Seed 004: w_vᵀ·tanh(q·A_q + k·A_k) term by term for the selected pair; A_q, A_k, w_v editable.
void drawAdditivePanel(const LessonInputs& in, LessonState& st, bool* open);

// Seed 004: look-ahead, key padding and valid-length masks: masked weights exactly 0, rows renormalised.
void drawMasksPanel(const LessonInputs& in, LessonState& st, bool* open);

// Seed 003 ("MSA of images"): an image cut into p×p patches, each a token of 3p² values; the weights of the
// clicked patch drawn over the image.
void drawImagePatchesPanel(const LessonInputs& in, LessonState& st, bool* open);

} // namespace app
