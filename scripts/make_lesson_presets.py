#!/usr/bin/env python3
"""Writes the lesson presets assets/presets/lesson_*.json (issue 6: the seeds' lessons, one preset each).

Pure Python (no NumPy) and seeded, so the files are reproducible: `python3 scripts/make_lesson_presets.py`.
Numbers are rounded to 3 decimals so that the JSON stays readable and exactly representable enough.
"""
import json
import math
import os
import random

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "assets", "presets")

# Seed 000/001's worked example (tokens as rows).
SEED_X = [[1, 1, 1, 0], [1, 2, 1, 0], [0, 1, 0, 1], [0, 1, 1, 0]]
SEED_WQ = [[1, 0, 1], [1, 1, 1], [0, 0, 1], [1, 0, 0]]
SEED_WK = [[1, 0, 0], [1, 1, 1], [1, 0, 1], [0, 1, 0]]
SEED_WV = [[1, 2, 0], [1, 3, 1], [1, 0, 2], [1, 1, 0]]
SEED_OUT = "[[3.9492, 7.8588, 3.9577], [3.9924, 7.9784, 3.9934], [3.8407, 7.5669, 3.8595], [3.7902, 7.4482, 3.8228]]"


def transpose(m):
    return [list(r) for r in zip(*m)]


def rnd(rows, cols, rng, mu=0.0, sigma=1.0):
    return [[round(rng.gauss(mu, sigma), 3) for _ in range(cols)] for _ in range(rows)]


def identity(n):
    return [[1 if i == j else 0 for j in range(n)] for i in range(n)]


def write(name, session):
    session = {"attnscope": 1, **session}
    path = os.path.join(OUT, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(to_json(session, 0) + "\n")
    print("wrote", os.path.relpath(path, ROOT))


def to_json(v, indent):
    """JSON with one matrix row per line (readable, diff-friendly); flat lists on one line."""
    pad, inner = " " * indent, " " * (indent + 2)
    if isinstance(v, dict):
        items = [inner + json.dumps(k) + ": " + to_json(x, indent + 2) for k, x in v.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(v, list) and v and isinstance(v[0], list):
        return "[\n" + ",\n".join(inner + json.dumps(r, ensure_ascii=False) for r in v) + "\n" + pad + "]"
    return json.dumps(v, ensure_ascii=False)


def main():
    rng = random.Random(2026)

    write("lesson_vector_to_matrix.json", {
        "name": "Lesson: from vector to matrix",
        "description": "Seed 000/001. Click a query i: o_i = Σ_j softmax_j(q_i·k_j/√d_k)·v_j is row i of "
                       "softmax(QKᵀ/√d_k)·V. Q, K, V are [4, 3]; QKᵀ is [4, 3]·[3, 4] → [4, 4]. "
                       "Expected output " + SEED_OUT + ".",
        "layout": "row", "mode": "self", "heads": 1, "score": "scaled_dot",
        "tokens": ["x1", "x2", "x3", "x4"],
        "X": SEED_X, "Wq": SEED_WQ, "Wk": SEED_WK, "Wv": SEED_WV,
        "view": {"lesson": "vector_view", "query": 0},
    })

    write("lesson_two_formulas_column.json", {
        "name": "Lesson: the other formula (tokens as columns)",
        "description": "Seed 000/001. The same data with tokens as columns: X is [p, n] = [4, 4], W^Q is "
                       "[d_k, p] = [3, 4], and attention is V·softmax(KᵀQ/√d_k) with the softmax down each "
                       "column. The output is [3, 4], the transpose of the row formula's " + SEED_OUT + ". "
                       "The wrong-formula panel shows what the row formula does to this layout.",
        "layout": "column", "mode": "self", "heads": 1, "score": "scaled_dot",
        "tokens": ["x1", "x2", "x3", "x4"],
        "X": transpose(SEED_X), "Wq": transpose(SEED_WQ), "Wk": transpose(SEED_WK), "Wv": transpose(SEED_WV),
        "view": {"lesson": "two_formulas"},
    })

    # Scaling: q, k entries ~ N(1, 1) with d_k = 128, so raw q·k ≈ 128 ± 20 (exp overflows float past
    # 88.7) while q·k/√128 ≈ 11.3 ± 1.7 does not.
    dk = 128
    write("lesson_scaling_overflow.json", {
        "name": "Lesson: why 1/√d_k (overflow)",
        "description": "Seeds 002/003. Q and K entries drawn from N(1, 1) with d_k = 128: E(q·k) = d_k·μ² = 128 "
                       "and Var(q·k) = d_k(σ⁴ + 2μ²σ²) = 384. Unscaled, exp(q·k) overflows float (past 88.7) and "
                       "a naive softmax gives inf/NaN; divided by √d_k the scores are ≈ 11 ± 1.7 and nothing "
                       "overflows. Compare score \"dot\" with \"scaled_dot\", and the split form q/d^¼·k/d^¼.",
        "layout": "row", "mode": "direct", "heads": 1, "score": "scaled_dot",
        "tokens": ["t1", "t2", "t3", "t4", "t5"],
        "Q": rnd(5, dk, rng, 1.0, 1.0), "K": rnd(5, dk, rng, 1.0, 1.0), "V": rnd(5, 4, rng),
        "view": {"lesson": "scaling"},
    })

    # Heads, seed 003's block-identity example: W^Q = W^K = W^V = I so Q = K = V = X, and head h sees
    # exactly columns [4h, 4h + 4) of X. W^O mixes the heads back.
    X8 = rnd(4, 8, rng)
    write("lesson_heads_block_identity.json", {
        "name": "Lesson: heads split Q into Q_1 … Q_h",
        "description": "Seed 003. With W^Q = W^K = W^V = I (8×8) and 2 heads, Q = X and head h works on the "
                       "column block [4h, 4h + 4) of Q, K and V: MultiHead = concat(Attention(Q_1, K_1, V_1), "
                       "Attention(Q_2, K_2, V_2))·W^O. Each head reaches the output through its rows of W^O. "
                       "Switch heads to 1 to see the single head mix all blocks: QKᵀ = Q_1K_1ᵀ + Q_2K_2ᵀ.",
        "layout": "row", "mode": "self", "heads": 2, "score": "scaled_dot",
        "tokens": ["a", "b", "c", "d"],
        "X": X8, "Wq": identity(8), "Wk": identity(8), "Wv": identity(8), "Wo": rnd(8, 8, rng, 0.0, 0.5),
        "view": {"lesson": "heads"},
    })

    write("lesson_heads_one_vs_many.json", {
        "name": "Lesson: one head vs four heads",
        "description": "Seeds 002/003. d_model = 8 with 4 heads of d_k = 2 (the paper's 512 = 8 × 64, scaled "
                       "down). Compare with heads = 1 on the same Q, K, V: one head's scores are the sum of "
                       "the four heads' Q_hK_hᵀ, so every output block shares one weight matrix.",
        "layout": "row", "mode": "self", "heads": 4, "score": "scaled_dot",
        "tokens": ["the", "dog", "eats", "meat", "."],
        "X": rnd(5, 8, rng), "Wq": rnd(8, 8, rng, 0.0, 0.6), "Wk": rnd(8, 8, rng, 0.0, 0.6),
        "Wv": rnd(8, 8, rng, 0.0, 0.6), "Wo": rnd(8, 8, rng, 0.0, 0.5),
        "view": {"lesson": "heads"},
    })

    # Seed 004's additive attention sizes: query_size 4, key_size 3, hidden 5, value 2; 2 queries, 3 keys.
    write("lesson_additive.json", {
        "name": "Lesson: additive (Bahdanau) attention",
        "description": "Seed 004. Queries of size 4 and keys of size 3 cannot be dotted; the additive score "
                       "w_vᵀ·tanh(q·A_q + k·A_k) maps both to a hidden size of 5 first. Hover a cell to see the "
                       "hidden vector, its tanh and the per-unit products that sum to the score.",
        "layout": "row", "mode": "direct", "heads": 1, "score": "additive",
        "tokens": {"query": ["q1", "q2"], "key": ["k1", "k2", "k3"]},
        "Q": rnd(2, 4, rng, 0.5, 0.3), "K": rnd(3, 3, rng, 0.5, 0.3), "V": rnd(3, 2, rng, 0.5, 0.3),
        "additive": {"Wq": rnd(4, 5, rng, 0.0, 0.8), "Wk": rnd(3, 5, rng, 0.0, 0.8), "wv": rnd(1, 5, rng)[0]},
        "view": {"lesson": "additive"},
    })

    words = ["<s>", "the", "cat", "sat", "down", "."]
    write("lesson_mask_look_ahead.json", {
        "name": "Lesson: the look-ahead mask",
        "description": "Seed 004. A decoder must not see the future: key j > query i is set to -inf before "
                       "the softmax, so those weights are exactly 0 and each row renormalises over the tokens "
                       "up to itself (the first token attends only to itself).",
        "layout": "row", "mode": "self", "heads": 1, "score": "scaled_dot",
        "tokens": words,
        "X": rnd(6, 4, rng), "Wq": rnd(4, 4, rng, 0.0, 0.8), "Wk": rnd(4, 4, rng, 0.0, 0.8),
        "Wv": rnd(4, 4, rng, 0.0, 0.8),
        "mask": {"causal": True, "fill": "-inf"},
        "view": {"lesson": "masks"},
    })

    padded = ["I", "like", "tea", "<pad>", "<pad>"]
    write("lesson_mask_key_padding.json", {
        "name": "Lesson: key padding",
        "description": "Seed 004. A batch pads short sentences to one length; the padding keys are masked for "
                       "every query (key_padding_mask), so no query attends to <pad>, and the weights over the "
                       "real tokens sum to 1.",
        "layout": "row", "mode": "self", "heads": 1, "score": "scaled_dot",
        "tokens": padded,
        "X": rnd(5, 4, rng), "Wq": rnd(4, 4, rng, 0.0, 0.8), "Wk": rnd(4, 4, rng, 0.0, 0.8),
        "Wv": rnd(4, 4, rng, 0.0, 0.8),
        "mask": {"key_padding": [0, 0, 0, 1, 1], "fill": "-inf"},
        "view": {"lesson": "masks"},
    })

    # Seed 004's masked_softmax(rand(2, 2, 4), [[1, 3], [2, 4]]), flattened to 4 rows with valid lengths
    # 1, 3, 2, 4. With Q = I and K = Sᵀ the scores are exactly S (score "dot", no scaling); S holds ln of
    # the seed's printed weights, so the softmax reproduces them; the masked tail holds arbitrary values
    # that must not matter. V = I makes the output equal to the weights.
    w = [[1.0, 0, 0, 0], [0.4125, 0.3273, 0.2602, 0], [0.5254, 0.4746, 0, 0], [0.3117, 0.2130, 0.1801, 0.2952]]
    lens = [1, 3, 2, 4]
    S = [[round(math.log(w[i][j]), 4) if j < lens[i] else round(rng.uniform(0, 1), 3) for j in range(4)]
         for i in range(4)]
    write("lesson_masked_softmax.json", {
        "name": "Lesson: masked softmax with valid lengths",
        "description": "Seed 004's masked_softmax example: rows with valid lengths 1, 3, 2, 4 (its [[1, 3], "
                       "[2, 4]] flattened). Keys past the valid length get -1e6 as in d2l, so their weights are "
                       "exactly 0 and the rest renormalise: [[1, 0, 0, 0], [0.4125, 0.3273, 0.2602, 0], "
                       "[0.5254, 0.4746, 0, 0], [0.3117, 0.2130, 0.1801, 0.2952]]. Q = I and K = scoresᵀ make "
                       "QKᵀ the seed's scores; V = I makes the output equal the weights.",
        "layout": "row", "mode": "direct", "heads": 1, "score": "dot",
        "tokens": {"query": ["row1", "row2", "row3", "row4"], "key": ["k1", "k2", "k3", "k4"]},
        "Q": identity(4), "K": transpose(S), "V": identity(4),
        "mask": {"valid_lens": lens, "fill": -1e6},
        "view": {"lesson": "masks"},
    })


if __name__ == "__main__":
    main()
