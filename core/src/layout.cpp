// The orientation seam (layout.h): the only place that turns token rows into a layout and back.
#include "attnscope/layout.h"

namespace attn {

Matrix tokenRows(const Matrix& stored, Layout l) { return l == Layout::Row ? stored : Matrix(stored.transpose()); }
MaskMatrix tokenRows(const MaskMatrix& stored, Layout l)
{
    return l == Layout::Row ? stored : MaskMatrix(stored.transpose());
}

// Both layouts are transposes of each other, so going in is the same operation as coming out.
Matrix inLayout(const Matrix& rows, Layout l) { return tokenRows(rows, l); }
MaskMatrix inLayout(const MaskMatrix& rows, Layout l) { return tokenRows(rows, l); }

void restateInput(AttentionInput& in, Layout from, Layout to)
{
    if (from == to) return;
    for (Matrix* m : {&in.X, &in.Xkv, &in.Wq, &in.Wk, &in.Wv, &in.Wo, &in.Q, &in.K, &in.V, &in.additive.Aq,
                      &in.additive.Ak}) {
        Matrix t = m->transpose();
        m->swap(t);
    }
    MaskMatrix t = in.mask.custom.transpose();
    in.mask.custom.swap(t);
}

AttentionInput transposedInput(const AttentionInput& in)
{
    AttentionInput t = in;
    restateInput(t, Layout::Row, Layout::Column);
    return t;
}

AttentionInput inputInLayout(const AttentionInput& in, Layout from, Layout to)
{
    AttentionInput t = in;
    restateInput(t, from, to);
    return t;
}

} // namespace attn
