#!/usr/bin/env python3
"""Independent NumPy oracle for attnscope's golden tests.

Writes one JSON file per case into OUT_DIR: a session (the attnscope session format) and the results
NumPy computes for it in float64, with a header naming the format and its version. The C++ test
(test_golden.cpp) loads each session through attnscope's own parser, computes it on every CPU path and
compares. Usage: numpy_reference.py OUT_DIR
"""
import json
import os
import sys

import numpy as np

FORMAT = "attnscope-golden"
VERSION = 1


def softmax_masked(scores, masked, fill):
    """Row softmax of scores with masked entries set to fill; rows fully masked with -inf become 0."""
    s = np.where(masked, fill, scores)
    out = np.zeros_like(s)
    fully = []
    for i in range(s.shape[0]):
        if np.isneginf(fill) and masked[i].all():
            fully.append(i)
            continue
        e = np.exp(s[i] - s[i].max())
        out[i] = e / e.sum()
    return out, fully


def build_mask(T, S, mask):
    m = np.zeros((T, S), dtype=bool)
    if mask.get("causal"):
        m |= np.arange(S)[None, :] > np.arange(T)[:, None]
    if "key_padding" in mask:
        m |= np.array(mask["key_padding"], dtype=bool)[None, :]
    if "valid_lens" in mask:
        vl = np.array(mask["valid_lens"]).reshape(-1)
        vl = np.repeat(vl, T) if vl.size == 1 else vl
        m |= np.arange(S)[None, :] >= vl[:, None]
    if "custom" in mask:
        m |= np.array(mask["custom"], dtype=bool)
    return m


def attention(sess):
    """Row-layout multi-head attention, float64."""
    f = lambda k: np.array(sess[k], dtype=np.float64)
    mode, H, score = sess["mode"], sess["heads"], sess["score"]
    if mode == "direct":
        Q, K, V = f("Q"), f("K"), f("V")
    else:
        X = f("X")
        Xkv = f("X_kv") if mode == "cross" else X
        Q, K, V = X @ f("Wq"), Xkv @ f("Wk"), Xkv @ f("Wv")
        if "bq" in sess: Q = Q + f("bq")
        if "bk" in sess: K = K + f("bk")
        if "bv" in sess: V = V + f("bv")
    T, S = Q.shape[0], K.shape[0]
    dq, dk, dv = Q.shape[1] // H, K.shape[1] // H, V.shape[1] // H
    mask = sess.get("mask", {})
    fill = -np.inf if mask.get("fill", "-inf") == "-inf" else float(mask["fill"])
    masked = build_mask(T, S, mask)
    heads, outs, fully_all = [], [], []
    for h in range(H):
        q, k, v = Q[:, h * dq:(h + 1) * dq], K[:, h * dk:(h + 1) * dk], V[:, h * dv:(h + 1) * dv]
        if score == "additive":
            a = sess["additive"]
            qa, ka = q @ np.array(a["Wq"]), k @ np.array(a["Wk"])
            sc = np.tanh(qa[:, None, :] + ka[None, :, :]) @ np.array(a["wv"])
        else:
            scale = sess.get("scale", 1.0 / np.sqrt(dk) if score == "scaled_dot" else 1.0)
            sc = (q @ k.T) * scale
        w, fully = softmax_masked(sc, masked, fill)
        o = w @ v
        heads.append({"scores": sc, "masked": masked.astype(int), "weights": w, "output": o})
        outs.append(o)
        fully_all.append(fully)
    concat = np.concatenate(outs, axis=1)
    output = concat @ f("Wo") + (f("bo") if "bo" in sess else 0) if "Wo" in sess else concat
    return heads, concat, output, fully_all


def transpose_session(sess):
    """The column-layout session: every matrix transposed, vectors unchanged."""
    t = dict(sess)
    t["layout"] = "column"
    for k in ["X", "X_kv", "Wq", "Wk", "Wv", "Wo", "Q", "K", "V"]:
        if k in t:
            t[k] = np.array(t[k]).T.tolist()
    if "additive" in t:
        t["additive"] = dict(t["additive"], Wq=np.array(t["additive"]["Wq"]).T.tolist(),
                             Wk=np.array(t["additive"]["Wk"]).T.tolist())
    if "mask" in t and "custom" in t["mask"]:
        t["mask"] = dict(t["mask"], custom=np.array(t["mask"]["custom"]).T.tolist())
    return t


def r(rng, *shape, s=1.0):
    # float32-representable values so both sides start from the same numbers.
    return (rng.normal(0, s, shape).astype(np.float32)).astype(np.float64).tolist()


def cases():
    rng = np.random.default_rng(2024)
    out = {}
    base = lambda T, M, H, dk, dv: {"attnscope": 1, "layout": "row", "mode": "self", "heads": H,
                                    "score": "scaled_dot", "X": r(rng, T, M), "Wq": r(rng, M, H * dk, s=0.5),
                                    "Wk": r(rng, M, H * dk, s=0.5), "Wv": r(rng, M, H * dv, s=0.5)}
    out["multihead"] = base(6, 8, 4, 2, 3)
    c = base(6, 8, 2, 4, 2); c["mask"] = {"causal": True}; out["causal"] = c
    c = base(5, 4, 1, 3, 3); c["mask"] = {"key_padding": [False, False, True, False, True]}; out["key_padding"] = c
    c = base(5, 4, 1, 3, 3); c["mask"] = {"valid_lens": 3}; out["valid_lens_scalar"] = c
    c = base(5, 4, 1, 3, 3); c["mask"] = {"valid_lens": [1, 0, 5, 2, 4]}; out["valid_lens_per_query"] = c
    c = base(5, 4, 1, 3, 3); c["mask"] = {"valid_lens": [1, 0, 5, 2, 4], "fill": -1e6}; out["valid_lens_fill"] = c
    c = base(4, 4, 2, 2, 2)
    c["mask"] = {"custom": (rng.random((4, 4)) < 0.4).astype(int).tolist(), "causal": True}
    out["custom_and_causal"] = c
    c = base(5, 6, 2, 3, 2); c.update(bq=r(rng, 6), bk=r(rng, 6), bv=r(rng, 4), Wo=r(rng, 4, 3), bo=r(rng, 3))
    out["biases_and_wo"] = c
    c = base(3, 5, 1, 4, 2); c.update(mode="cross", X_kv=r(rng, 7, 5)); c["mask"] = {"causal": True}
    out["cross_causal"] = c
    out["direct_dot"] = {"attnscope": 1, "mode": "direct", "heads": 2, "score": "dot",
                         "Q": r(rng, 3, 4), "K": r(rng, 6, 4), "V": r(rng, 6, 2)}
    out["direct_scale_override"] = dict(out["direct_dot"], score="scaled_dot", scale=0.3)
    out["additive_direct"] = {"attnscope": 1, "mode": "direct", "heads": 1, "score": "additive",
                              "Q": r(rng, 2, 4), "K": r(rng, 3, 3), "V": r(rng, 3, 2),
                              "additive": {"Wq": r(rng, 4, 5), "Wk": r(rng, 3, 5), "wv": r(rng, 5)}}
    c = base(4, 6, 2, 3, 2)
    c.update(score="additive", additive={"Wq": r(rng, 3, 4), "Wk": r(rng, 3, 4), "wv": r(rng, 4)})
    c["mask"] = {"key_padding": [False, True, False, False]}
    out["additive_self_heads"] = c
    # Large unscaled scores: a naive softmax would overflow, the stable one must not.
    c = base(4, 4, 1, 4, 2); c["score"] = "dot"; c["X"] = (np.array(c["X"]) * 40).tolist(); out["huge_scores"] = c
    for name in list(out):
        out[name + "_column"] = transpose_session(out[name])
    return out


def cases_row_of(col_sess):
    """Inverse of transpose_session (transposing twice restores the row session)."""
    return dict(transpose_session(col_sess), layout="row")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: numpy_reference.py OUT_DIR")
    os.makedirs(sys.argv[1], exist_ok=True)
    all_cases = cases()
    for name, sess in all_cases.items():
        # Column cases are computed in row form by NumPy and their results transposed back.
        col = sess.get("layout") == "column"
        heads, concat, output, fully = attention(cases_row_of(sess) if col else sess)
        lay = (lambda a: np.asarray(a).T.tolist()) if col else (lambda a: np.asarray(a).tolist())
        doc = {"format": FORMAT, "version": VERSION, "case": name, "session": sess,
               "expected": {"heads": [{k: lay(v) for k, v in h.items()} for h in heads],
                            "concat": lay(concat), "output": lay(output), "fully_masked": fully}}
        with open(os.path.join(sys.argv[1], name + ".json"), "w") as fh:
            json.dump(doc, fh)
    print(f"wrote {len(all_cases)} golden cases to {sys.argv[1]}")


if __name__ == "__main__":
    main()
