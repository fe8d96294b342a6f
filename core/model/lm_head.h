// The LM head over many positions (core/model/lm_head.cpp): each position's log-probability of its next token
// without the n×V logits, the unembedding read once per forward; and each row's largest logits (the logit lens).
// Internal to attnscope_model; decoder.cpp's predictions and updateDecoderSurprise and interp.cpp's logitLens call it.
#pragma once

#include "attnscope/decoder.h"
#include "attnscope/weight_matrix.h"

#include <vector>

namespace attn::detail {

// How the work is split; 0 takes the default (tests make each small, to cross every boundary).
struct LmHeadSplit {
    Eigen::Index columns = 0;    // vocabulary columns per task (taskCols(V): 512 for Gemma 3's 262 144)
    Eigen::Index rows = 0;       // positions per product inside a task (kLmHeadRows)
    Eigen::Index positions = 0;  // positions per read of the whole head (as many as kLmHeadPartials allow, ≥ 1024)
    Eigen::Index wholeRows = -1; // up to this many positions, one product over the whole vocabulary (-1: kWholeRows)
};

// For each row r of h (n×M, the final norm's output), with logits = cap(h_r·E) (E: M×V, the unembedding;
// cap: c.finalSoftcap when > 0): logProb[r] = log softmax(logits)[targets[r]] (targets: n ids; NaN where
// targets[r] < 0, −∞ where it is ≥ V, as logProbability says), and with kept ≠ nullptr, row keepRow's logits whole
// (V values). The vocabulary in tasks of columns (outside, split over the thread team), the positions inside:
// each task's panel of E is dequantized once and its logits folded into a maximum and a sum of exponentials per
// position, which are combined in task order (the same bits on any number of threads).
void lmHeadLogProbabilities(const DecoderConfig& c, const WeightMatrix& E, const MatrixCRef& h, const std::vector<int>& targets,
                            float* logProb, Eigen::Index keepRow, Vector* kept, const LmHeadSplit& split = {});

// One of a row's largest logits: its id, value and probability (softmax over the whole vocabulary).
struct TopLogit {
    int id = 0;
    float logit = 0;
    float p = 0;
};

// For each row of h (n×M), the k largest of cap(h_r·E), best first (the lower id first among equal values), the
// head read as lmHeadLogProbabilities reads it: each task keeps its own k best per position, merged per position.
// top: n lists of min(k, V).
void lmHeadTop(const DecoderConfig& c, const WeightMatrix& E, const MatrixCRef& h, int k, std::vector<std::vector<TopLogit>>& top,
               const LmHeadSplit& split = {});

} // namespace attn::detail
