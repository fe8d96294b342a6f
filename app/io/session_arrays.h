// The named matrices of a session and its result, for export (npz/npy/csv) and import into a slot.
#pragma once

#include "io/array_io.h"

#include <attnscope/preset_io.h>
#include <attnscope/status.h>
#include <attnscope/types.h>

#include <string>
#include <vector>

namespace app::io {

// Every input present in the session, named as the session fields: X, X_kv, Wq, Wk, Wv, Wo, bq, bk, bv, bo,
// Q, K, V (direct mode), additive_Wq, additive_Wk, additive_wv, mask_custom, mask_key_padding,
// mask_valid_lens; then, when `result` is given, every result matrix per head:
// h<i>_Q, h<i>_K, h<i>_V, h<i>_scores, h<i>_masked (bool), h<i>_weights, h<i>_output, and concat, output.
// All in the session's layout, exactly as `attnscope compute` reports them. The arrays point into
// `s` / `result`, which must outlive the returned list.
std::vector<NamedArray> sessionArrays(const attn::Session& s, const attn::AttentionResult* result);

// The slot names accepted by setSlot, in a fixed order (for help texts and the window's drop-down).
const std::vector<std::string>& slotNames();

// Replaces one input of the session with `m` and re-validates the whole session, so a matrix of the
// wrong shape is refused with core's message (e.g. "Wq: expected 8×8 (d_model × H·d_k), got 8×4").
// Vector slots (bq, bk, bv, bo, additive_wv) take a 1×n or n×1 matrix; mask_custom takes 0/1 values.
// On error `s` is unchanged. Errors: InvalidArgument (unknown slot, shape, values).
attn::Status setSlot(attn::Session& s, const std::string& slot, const attn::Matrix& m);

} // namespace app::io
