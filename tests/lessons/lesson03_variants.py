"""Lesson 03's catalog of variant submissions (see tests/support/variants.py for the rules), used to
prove its hidden graders. Each variant edits a file of solutions/03-atencion-causal/ with its
region markers stripped. A plain module: tests/lessons/test_variants.py grades every variant.
"""

from __future__ import annotations

from support.variants import Variant

ATTN = "attention.py"
NP = "attention_numpy.py"


# --------------------------------------------------------------------------- fragments
# Exact lines of the marker-stripped solution that several variants edit.

MASK_BUILD = "tril = torch.tril(torch.ones(bs, bs, dtype=torch.bool))"
MASK_REGISTER = 'self.register_buffer("mask", tril.view(1, 1, bs, bs), persistent=False)'
MASK_APPLY = 'att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))'
SCORES = "att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))"
SPLIT = "q, k, v = qkv.split(C, dim=2)"
HEADS = """\
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
"""
MERGE = "y = y.transpose(1, 2).contiguous().view(B, T, C)"
SOFTMAX = "att = F.softmax(att, dim=-1)"
ZERO_FUTURE = "att = att.masked_fill(self.mask[:, :, :T, :T] == 0, 0.0)"
ATTN_DROP = "att = self.attn_drop(att)"
SDPA_CALL = """\
        return F.scaled_dot_product_attention(
            q, k, v,
            attn_mask=None,
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=True,
        )
"""
FUSED_DROPOUT = "dropout_p=self.dropout if self.training else 0.0,"

NP_FUTURE = "future = np.triu(np.ones((T, T), dtype=bool), k=1)"
NP_WHERE = "return np.where(future, -1e9, 0.0)"
NP_SOFTMAX = """\
    z = x - np.max(x, axis=axis, keepdims=True)  # el mayor exponente pasa a ser 0
    e = np.exp(z)
    return e / np.sum(e, axis=axis, keepdims=True)
"""
NP_SCORES = "scores = Q @ K.T / np.sqrt(d_k) + causal_mask(X.shape[0])"
NP_WEIGHTS = "weights = softmax(scores, axis=-1)"
NP_EDGES = "return T * (T + 1) // 2 if causal else T * T"


# --------------------------------------------------------------------------- buggy

BUGGY: list[Variant] = [
    # ---- TODO [mask]
    Variant(
        "mask-not-cropped",
        ATTN,
        MASK_APPLY,
        'att = att.masked_fill(self.mask == 0, float("-inf"))',
        "mask",
        "applies the whole (block_size, block_size) mask instead of [:T, :T]",
    ),
    Variant(
        "mask-tril-diagonal-minus-1",
        ATTN,
        MASK_BUILD,
        "tril = torch.tril(torch.ones(bs, bs, dtype=torch.bool), diagonal=-1)",
        "mask",
        "masks the diagonal too: token 0 sees nothing",
    ),
    Variant(
        "mask-triu",
        ATTN,
        MASK_BUILD,
        "tril = torch.triu(torch.ones(bs, bs, dtype=torch.bool))",
        "mask",
        "upper instead of lower triangle: looks only at the future",
    ),
    Variant(
        "mask-result-discarded",
        ATTN,
        MASK_APPLY,
        'att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))',
        "mask",
        "masked_fill is not in place; its result is thrown away",
    ),
    Variant(
        "mask-inverted",
        ATTN,
        MASK_APPLY,
        'att = att.masked_fill(self.mask[:, :, :T, :T] == 1, float("-inf"))',
        "mask",
        "fills where the mask is 1 (the allowed cells)",
    ),
    Variant(
        "mask-fill-zero",
        ATTN,
        MASK_APPLY,
        "att = att.masked_fill(self.mask[:, :, :T, :T] == 0, 0)",
        "mask",
        "puts 0 instead of -inf: exp(0) = 1, the future still gets weight",
    ),
    Variant(
        "mask-after-softmax",
        ATTN,
        f"            {MASK_APPLY}\n",
        "",
        "mask",
        "zeroes the future after the softmax: rows no longer sum to 1",
        also=((SOFTMAX, f"{SOFTMAX}\n            {ZERO_FUTURE}"),),
    ),
    Variant(
        "mask-persistent",
        ATTN,
        MASK_REGISTER,
        'self.register_buffer("mask", tril.view(1, 1, bs, bs), persistent=True)',
        "mask",
        "persistent buffer: the mask ends up in state_dict",
    ),
    Variant(
        "mask-plain-attribute",
        ATTN,
        MASK_REGISTER,
        "self.mask = tril.view(1, 1, bs, bs)",
        "mask",
        "a plain attribute does not follow .to(device)",
    ),
    # ---- TODO [scaling]
    Variant(
        "scale-sqrt-C",
        ATTN,
        SCORES,
        "att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C))",
        "scaling",
        "divides by sqrt(n_embd) instead of sqrt(head size)",
    ),
    Variant("scale-none", ATTN, SCORES, "att = q @ k.transpose(-2, -1)", "scaling", "no 1/sqrt(hs)"),
    Variant(
        "scale-hs",
        ATTN,
        SCORES,
        "att = (q @ k.transpose(-2, -1)) * (1.0 / hs)",
        "scaling",
        "divides by hs instead of sqrt(hs)",
    ),
    Variant(
        "scale-times-sqrt-hs",
        ATTN,
        SCORES,
        "att = (q @ k.transpose(-2, -1)) * math.sqrt(hs)",
        "scaling",
        "multiplies by sqrt(hs)",
    ),
    Variant(
        "scale-sqrt-T",
        ATTN,
        SCORES,
        "att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-2)))",
        "scaling",
        "size(-2) of k is T, not hs",
    ),
    # ---- TODO [head-reshape]
    Variant(
        "heads-interleaved",
        ATTN,
        HEADS,
        """\
        q = q.view(B, T, hs, self.n_head).transpose(2, 3).transpose(1, 2)
        k = k.view(B, T, hs, self.n_head).transpose(2, 3).transpose(1, 2)
        v = v.view(B, T, hs, self.n_head).transpose(2, 3).transpose(1, 2)
""",
        "head-reshape",
        "view(B, T, hs, nh): head h gets channels h, h+nh, ...",
    ),
    Variant(
        "heads-reshape-without-transpose",
        ATTN,
        HEADS,
        """\
        q = q.reshape(B, self.n_head, T, hs)
        k = k.reshape(B, self.n_head, T, hs)
        v = v.reshape(B, self.n_head, T, hs)
""",
        "head-reshape",
        "reshapes (B, T, C) straight to (B, nh, T, hs): tokens get mixed",
    ),
    Variant(
        "qk-swapped",
        ATTN,
        SPLIT,
        "k, q, v = qkv.split(C, dim=2)",
        "head-reshape",
        "splits in the order k, q, v",
    ),
    # ---- TODO [contiguous-view]
    Variant(
        "merge-no-transpose",
        ATTN,
        MERGE,
        "y = y.contiguous().view(B, T, C)",
        "contiguous-view",
        "views (B, nh, T, hs) as (B, T, C) without moving T first",
    ),
    Variant(
        "merge-view-not-contiguous",
        ATTN,
        MERGE,
        "y = y.transpose(1, 2).view(B, T, C)",
        "contiguous-view",
        "view after transpose raises: not contiguous",
    ),
    # ---- outside the TODO regions
    Variant(
        "softmax-dim-minus-2",
        ATTN,
        SOFTMAX,
        "att = F.softmax(att, dim=-2)",
        None,
        "normalises over the queries",
    ),
    Variant(
        "dropout-functional",
        ATTN,
        ATTN_DROP,
        "att = F.dropout(att, self.dropout)",
        None,
        "F.dropout defaults to training=True: dropout also in eval",
    ),
    Variant(
        "attn-drop-twice",
        ATTN,
        ATTN_DROP,
        "att = self.attn_drop(self.attn_drop(att))",
        None,
        "dropout applied twice to the weights",
    ),
    Variant(
        "proj-forgotten",
        ATTN,
        "return self.resid_drop(self.proj(y))",
        "return self.resid_drop(y)",
        None,
        "output projection not applied",
    ),
    # ---- TODO [fused]
    # q and k (or k and v) swapped in the SDPA call alone: the output is what a shared-code bug
    # (the projections split in another order) gives, but the explicit path is right.
    Variant(
        "fused-qk-swapped",
        ATTN,
        "            q, k, v,\n            attn_mask=None,",
        "            k, q, v,\n            attn_mask=None,",
        "fused",
        "q and k swapped in the scaled_dot_product_attention call (the future leaks)",
    ),
    Variant(
        "fused-kv-swapped",
        ATTN,
        "            q, k, v,\n            attn_mask=None,",
        "            q, v, k,\n            attn_mask=None,",
        "fused",
        "k and v swapped in the scaled_dot_product_attention call",
    ),
    Variant(
        "fused-not-causal",
        ATTN,
        "            is_causal=True,\n",
        "",
        "fused",
        "scaled_dot_product_attention without is_causal=True",
    ),
    Variant(
        "fused-explicit-code",
        ATTN,
        SDPA_CALL,
        """\
        att = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        T = q.size(-2)
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.dropout(F.softmax(att, dim=-1), self.dropout, self.training)
        return att @ v
""",
        "fused",
        "the fused path recomputes the explicit attention instead of calling SDPA",
    ),
    Variant(
        "fused-dropout-always",
        ATTN,
        FUSED_DROPOUT,
        "dropout_p=self.dropout,",
        "fused",
        "dropout also in eval",
    ),
    Variant("fused-dropout-zero", ATTN, FUSED_DROPOUT, "dropout_p=0.0,", "fused", "no dropout in training"),
    Variant(
        "fused-scaled-twice",
        ATTN,
        SDPA_CALL,
        """\
        q = q / math.sqrt(q.size(-1))  # SDPA already scales: this is a second scale
        return F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0,
                                              is_causal=True)
""",
        "fused",
        "scales q by 1/sqrt(hs) before SDPA, which scales again",
    ),
    # ---- TODO [np-mask]
    Variant(
        "np-mask-multiplicative",
        NP,
        NP_WHERE,
        "return np.where(future, 0.0, 1.0)",
        "np-mask",
        "a 0/1 keep-mask instead of an additive one",
    ),
    Variant(
        "np-mask-diagonal",
        NP,
        NP_FUTURE,
        "future = np.triu(np.ones((T, T), dtype=bool), k=0)",
        "np-mask",
        "k=0 masks the diagonal too",
    ),
    # ---- TODO [np-softmax]
    Variant(
        "np-softmax-no-max",
        NP,
        NP_SOFTMAX,
        """\
    e = np.exp(x)
    return e / np.sum(e, axis=axis, keepdims=True)
""",
        "np-softmax",
        "overflows for inputs around 1000",
    ),
    Variant(
        "np-softmax-ignores-axis",
        NP,
        NP_SOFTMAX,
        """\
    z = x - np.max(x, axis=-1, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=-1, keepdims=True)
""",
        "np-softmax",
        "always normalises the last axis",
    ),
    Variant(
        "np-softmax-no-keepdims",
        NP,
        NP_SOFTMAX,
        """\
    z = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=axis)
""",
        "np-softmax",
        "the sum loses its axis and broadcasts along the wrong one",
    ),
    # ---- TODO [np-attention]
    Variant(
        "np-attention-sqrt-dmodel",
        NP,
        NP_SCORES,
        "scores = Q @ K.T / np.sqrt(X.shape[1]) + causal_mask(X.shape[0])",
        "np-attention",
        "scales by sqrt(d_model)",
    ),
    Variant(
        "np-attention-no-mask",
        NP,
        NP_SCORES,
        "scores = Q @ K.T / np.sqrt(d_k)",
        "np-attention",
        "forgets to add the mask",
    ),
    Variant(
        "np-attention-softmax-axis-0",
        NP,
        NP_WEIGHTS,
        "weights = softmax(scores, axis=0)",
        "np-attention",
        "normalises the columns",
    ),
    # ---- TODO [np-edges]
    Variant(
        "np-edges-no-diagonal",
        NP,
        NP_EDGES,
        "return T * (T - 1) // 2 if causal else T * T",
        "np-edges",
        "forgets that each token attends to itself",
    ),
    Variant(
        "np-edges-float",
        NP,
        NP_EDGES,
        "return T * (T + 1) / 2 if causal else T * T",
        "np-edges",
        "true division returns a float",
    ),
    Variant(
        "np-edges-ignores-causal",
        NP,
        NP_EDGES,
        "return T * (T + 1) // 2",
        "np-edges",
        "returns the causal count also for causal=False",
    ),
]


# --------------------------------------------------------------------------- correct

CORRECT: list[Variant] = [
    Variant(
        "reshape",
        ATTN,
        MERGE,
        "y = y.transpose(1, 2).reshape(B, T, C)",
        note="reshape instead of contiguous().view",
    ),
    Variant(
        "fill-minus-1e9",
        ATTN,
        MASK_APPLY,
        "att = att.masked_fill(self.mask[:, :, :T, :T] == 0, -1e9)",
        note="a very negative number instead of -inf",
    ),
    Variant(
        "einsum-scores",
        ATTN,
        SCORES,
        'att = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.size(-1))',
        note="einsum, and hs read from q",
    ),
    Variant(
        "torch-where",
        ATTN,
        MASK_APPLY,
        'att = torch.where(self.mask[:, :, :T, :T], att, float("-inf"))',
        note="torch.where on the boolean keep-mask",
    ),
    Variant(
        "additive-float-mask",
        ATTN,
        f"""\
        {MASK_BUILD}
        # Un buffer sigue a .to(device) como los parámetros, pero no se entrena; no
        # persistente porque se recalcula aquí y no tiene nada que guardar en el state_dict.
        {MASK_REGISTER}
""",
        """\
        future = torch.triu(torch.ones(bs, bs, dtype=torch.bool), diagonal=1)
        additive = torch.zeros(bs, bs).masked_fill(future, float("-inf"))
        self.register_buffer("mask", additive.view(1, 1, bs, bs), persistent=False)
""",
        note="a float 0/-inf buffer added to the scores",
        also=((MASK_APPLY, "att = att + self.mask[:, :, :T, :T]"),),
    ),
    Variant(
        "float-tril-ones",
        ATTN,
        MASK_BUILD,
        "tril = torch.tril(torch.ones(bs, bs))",
        note="float tril of ones, compared with == 0",
    ),
    Variant("chunk", ATTN, SPLIT, "q, k, v = qkv.chunk(3, dim=-1)", note="chunk instead of split"),
    Variant(
        "qkv-view-permute",
        ATTN,
        f"""\
        {SPLIT}  # 3 x (B, T, C)
{HEADS}""",
        """\
        qkv = qkv.view(B, T, 3, self.n_head, hs).permute(2, 0, 3, 1, 4)  # (3, B, nh, T, hs)
        q, k, v = qkv.unbind(0)
""",
        note="one view + permute for q, k, v together",
    ),
    Variant(
        "scale-q-and-k",
        ATTN,
        SCORES,
        "att = (q * hs ** -0.25) @ (k * hs ** -0.25).transpose(-2, -1)",
        note="scales q and k by hs**-0.25 each",
    ),
    Variant(
        "fused-explicit-arguments",
        ATTN,
        SDPA_CALL,
        """\
        p = self.attn_drop.p if self.training else 0.0
        return F.scaled_dot_product_attention(q, k, v, None, p, True, scale=None)
""",
        note="positional arguments, scale=None, dropout_p from attn_drop.p",
    ),
    Variant(
        "fused-attn-mask",
        ATTN,
        SDPA_CALL,
        """\
        T = q.size(-2)
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=self.mask[:, :, :T, :T],
            dropout_p=self.dropout if self.training else 0.0)
""",
        note="the cropped boolean mask as attn_mask instead of is_causal",
    ),
    Variant(
        "np-softmax-logsumexp",
        NP,
        NP_SOFTMAX,
        """\
    m = np.max(x, axis=axis, keepdims=True)
    lse = m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
    return np.exp(x - lse)
""",
        note="exp(x - logsumexp(x))",
    ),
    Variant(
        "np-mask-minus-inf",
        NP,
        NP_WHERE,
        "return np.where(future, -np.inf, 0.0)",
        note="-inf instead of -1e9",
    ),
    Variant(
        "np-edges-sum-range",
        NP,
        NP_EDGES,
        "return sum(range(1, T + 1)) if causal else T * T",
        note="sum(range(1, T + 1))",
    ),
]


# --------------------------------------------------------------------------- more realistic slips
# Realistic slips and idioms adapted from well-known codebases (nanoGPT, minGPT, the Karpathy
# lecture's per-head Head modules, LLMs-from-scratch, Hugging Face GPT-2), each caught by a
# check of its own TODO only.

EXPLICIT = """\
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, nh, T, T)
            att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
            # Cada fila es una distribución sobre las claves: el futuro, con -inf, recibe 0.
            att = F.softmax(att, dim=-1)
            att = self.attn_drop(att)
            y = att @ v  # (B, nh, T, T) @ (B, nh, T, hs) -> (B, nh, T, hs)
"""
SOFTMAX_DROP = f"{SOFTMAX}\n            {ATTN_DROP}"
ATT_V = "y = att @ v  # (B, nh, T, T) @ (B, nh, T, hs) -> (B, nh, T, hs)"
QKV = "qkv = self.qkv(x)  # (B, T, 3C)"
RETURN = "return self.resid_drop(self.proj(y))"

BUGGY += [
    # ---- TODO [mask]
    Variant(
        "mask-built-in-forward-cpu",
        ATTN,
        MASK_APPLY,
        'att = att.masked_fill(torch.tril(torch.ones(T, T)) == 0, float("-inf"))',
        "mask",
        "builds a fresh mask in forward without device=: breaks on a GPU (caught on meta)",
    ),
    Variant(
        "mask-marks-future",
        ATTN,
        MASK_BUILD,
        "tril = torch.triu(torch.ones(bs, bs), diagonal=1)",
        "mask",
        "LLMs-from-scratch's convention: the buffer is 1 where j > i (what to hide)",
        also=((MASK_APPLY, "att = att.masked_fill(self.mask.bool()[:, :, :T, :T], -torch.inf)"),),
    ),
    Variant(
        "mask-crop-rows-only",
        ATTN,
        MASK_APPLY,
        'att = att.masked_fill(self.mask[:, :, :T] == 0, float("-inf"))',
        "mask",
        "crops the rows of the mask but not its columns",
    ),
    # ---- TODO [scaling]
    Variant(
        "scale-q-and-k-each-sqrt",
        ATTN,
        SCORES,
        "att = (q / math.sqrt(hs)) @ (k / math.sqrt(hs)).transpose(-2, -1)",
        "scaling",
        "scales q and k by 1/sqrt(hs) each: 1/hs in all",
    ),
    Variant(
        "scores-transpose-1-2",
        ATTN,
        SCORES,
        "att = (q @ k.transpose(1, 2)) * (1.0 / math.sqrt(hs))",
        "scaling",
        "transposes heads and time of k instead of its last two dimensions (raises)",
    ),
    # ---- TODO [head-reshape]
    Variant(
        "heads-split-dim-1",
        ATTN,
        SPLIT,
        "q, k, v = qkv.split(C, dim=1)",
        "head-reshape",
        "splits along T instead of the channels (raises)",
    ),
    # ---- TODO [contiguous-view]
    Variant(
        "merge-interleaved",
        ATTN,
        MERGE,
        "y = y.permute(0, 2, 3, 1).reshape(B, T, C)",
        "contiguous-view",
        "merges the channels in (hs, nh) order: heads interleaved",
    ),
    # ---- outside the TODO regions
    Variant(
        "resid-drop-forgotten",
        ATTN,
        RETURN,
        "return self.proj(y)",
        None,
        "no output dropout: only the weights are dropped in training",
    ),
    Variant(
        "dropout-before-softmax",
        ATTN,
        SOFTMAX_DROP,
        f"{ATTN_DROP}\n            {SOFTMAX}",
        None,
        "attn_drop on the scores, before the softmax",
    ),
    Variant(
        "attn-drop-on-output",
        ATTN,
        f"            {ATTN_DROP}\n",
        "",
        None,
        "dropout on att @ v instead of on the weights",
        also=((ATT_V, "y = self.attn_drop(att @ v)"),),
    ),
    Variant(
        "qkv-on-data",
        ATTN,
        QKV,
        "qkv = self.qkv(x.data)",
        None,
        "x.data cuts the input from autograd: no gradient reaches x",
    ),
    # ---- TODO [fused]
    Variant(
        "fused-float-keep-mask",
        ATTN,
        SDPA_CALL,
        """\
        T = q.size(-2)
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=self.mask[:, :, :T, :T].float(),
            dropout_p=self.dropout if self.training else 0.0)
""",
        "fused",
        "a float 0/1 mask is added to the scores, it hides nothing",
    ),
    # ---- NumPy
    Variant(
        "np-mask-tril",
        NP,
        NP_FUTURE,
        "future = np.tril(np.ones((T, T), dtype=bool), k=-1)",
        "np-mask",
        "masks the past instead of the future",
    ),
    Variant(
        "np-softmax-global-max",
        NP,
        NP_SOFTMAX,
        """\
    z = x - np.max(x)
    e = np.exp(z)
    return e / np.sum(e, axis=axis, keepdims=True)
""",
        "np-softmax",
        "subtracts the global max: a row far below it underflows to 0/0",
    ),
    Variant(
        "np-attention-kq-swapped",
        NP,
        NP_SCORES,
        "scores = K @ Q.T / np.sqrt(d_k) + causal_mask(X.shape[0])",
        "np-attention",
        "K Q^T: rows are keys, columns queries",
    ),
    Variant(
        "np-edges-half-square",
        NP,
        NP_EDGES,
        "return T * T // 2 if causal else T * T",
        "np-edges",
        "T^2 / 2 forgets the diagonal's half",
    ),
]

CORRECT += [
    Variant(
        "per-head-loop",
        ATTN,
        EXPLICIT,
        """\
            heads = []
            for h in range(self.n_head):  # the Karpathy lecture's Head, one at a time
                wei = q[:, h] @ k[:, h].transpose(-2, -1) * hs ** -0.5  # (B, T, T)
                wei = wei.masked_fill(self.mask[0, 0, :T, :T] == 0, float("-inf"))
                wei = F.softmax(wei, dim=-1)
                wei = self.attn_drop(wei)
                heads.append(wei @ v[:, h])  # (B, T, hs)
            y = torch.stack(heads, dim=1)  # (B, nh, T, hs)
""",
        note="heads one by one in a loop, attn_drop once per head",
    ),
    Variant(
        "einsum-everywhere",
        ATTN,
        EXPLICIT,
        """\
            att = torch.einsum("bhtd,bhsd->bhts", q, k) / math.sqrt(hs)
            att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
            att = att.softmax(dim=-1)
            att = self.attn_drop(att)
            y = torch.einsum("bhts,bhsd->bhtd", att, v)
""",
        note="einsum for the scores and the weighted sum, Tensor.softmax, ~mask",
    ),
    Variant(
        "hf-where-finfo-min",
        ATTN,
        MASK_APPLY,
        "att = torch.where(self.mask[:, :, :T, :T].bool(), att, torch.finfo(att.dtype).min)",
        note="Hugging Face GPT-2's torch.where with the dtype's most negative value",
    ),
    Variant(
        "masked-fill-inplace",
        ATTN,
        MASK_APPLY,
        'att.masked_fill_(self.mask[:, :, :T, :T] == 0, float("-inf"))',
        note="masked_fill_ in place",
    ),
    Variant(
        "scale-k-size",
        ATTN,
        SCORES,
        "att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))",
        note="nanoGPT's 1/sqrt(k.size(-1))",
    ),
    Variant(
        "fused-explicit-scale",
        ATTN,
        SDPA_CALL,
        """\
        return F.scaled_dot_product_attention(
            q, k, v, is_causal=True, scale=1.0 / math.sqrt(q.size(-1)),
            dropout_p=self.attn_drop.p if self.training else 0.0)
""",
        note="the default scale passed explicitly",
    ),
]

BUGGY += [
    Variant(
        "mask-2d-buffer",
        ATTN,
        MASK_REGISTER,
        'self.register_buffer("mask", tril, persistent=False)',
        "mask",
        "the lecture's (block_size, block_size) tril buffer, not (1, 1, bs, bs)",
        also=((MASK_APPLY, 'att = att.masked_fill(self.mask[:T, :T] == 0, float("-inf"))'),),
    ),
    Variant(
        "scale-precedence",
        ATTN,
        SCORES,
        "att = (q @ k.transpose(-2, -1)) * (1 / hs ** 1 / 2)",
        "scaling",
        "hs ** 1 / 2 is hs / 2: operator precedence",
    ),
    Variant(
        "qkv-order-q-v-k",
        ATTN,
        SPLIT,
        "q, v, k = qkv.split(C, dim=2)",
        "head-reshape",
        "splits in the order q, v, k",
    ),
    Variant(
        "fused-dropout-inverted",
        ATTN,
        FUSED_DROPOUT,
        "dropout_p=self.dropout if not self.training else 0.0,",
        "fused",
        "dropout in eval and none in training",
    ),
    Variant(
        "np-softmax-sum-all",
        NP,
        NP_SOFTMAX,
        """\
    z = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e)
""",
        "np-softmax",
        "divides by the sum of every element, not along the axis",
    ),
    Variant(
        "np-attention-returns-swapped",
        NP,
        "return weights @ V, weights  # (T, d_v), (T, T)",
        "return weights, weights @ V",
        "np-attention",
        "returns (weights, output)",
    ),
]

CORRECT += [
    Variant(
        "picogpt-additive-1e10",
        ATTN,
        f"""\
        {MASK_BUILD}
        # Un buffer sigue a .to(device) como los parámetros, pero no se entrena; no
        # persistente porque se recalcula aquí y no tiene nada que guardar en el state_dict.
        {MASK_REGISTER}
""",
        """\
        additive = (1 - torch.tril(torch.ones(bs, bs))) * -1e10  # picoGPT's causal mask
        self.register_buffer("mask", additive.view(1, 1, bs, bs), persistent=False)
""",
        note="picoGPT's (1 - tri) * -1e10, added to the scores",
        also=((MASK_APPLY, "att = att + self.mask[:, :, :T, :T]"),),
    ),
    Variant(
        "hf-scale-full-tensor",
        ATTN,
        SCORES,
        "att = (q @ k.transpose(-2, -1)) / torch.full([], k.size(-1) ** 0.5, dtype=q.dtype, device=q.device)",
        note="Hugging Face GPT-2's division by a 0-d tensor made on q's device",
    ),
    Variant(
        "merge-permute-flatten",
        ATTN,
        MERGE,
        "y = y.permute(0, 2, 1, 3).flatten(2)",
        note="permute + flatten instead of transpose + contiguous + view",
    ),
    Variant(
        "heads-unflatten",
        ATTN,
        HEADS,
        """\
        q = q.unflatten(-1, (self.n_head, hs)).transpose(1, 2)
        k = k.unflatten(-1, (self.n_head, hs)).transpose(1, 2)
        v = v.unflatten(-1, (self.n_head, hs)).transpose(1, 2)
""",
        note="Tensor.unflatten",
    ),
    Variant(
        "np-scale-after-mask",
        NP,
        NP_SCORES,
        "scores = (Q @ K.T + causal_mask(X.shape[0])) / np.sqrt(d_k)",
        note="the mask added before the scale: still hugely negative",
    ),
    Variant(
        "np-mask-triu-full",
        NP,
        f"""\
    {NP_FUTURE}  # True donde j > i
""",
        "",
        note="np.triu of a -1e9 matrix",
        also=((NP_WHERE, "return np.triu(np.full((T, T), -1e9), k=1)"),),
    ),
    Variant(
        "np-edges-tri-sum",
        NP,
        NP_EDGES,
        "return int(np.tri(T).sum()) if causal else T * T",
        note="counts the ones of np.tri",
    ),
]

BUGGY += [
    Variant(
        "fused-mask-on-cpu",
        ATTN,
        SDPA_CALL,
        """\
        T = q.size(-2)
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool))  # no device=: on the CPU
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=causal, dropout_p=self.dropout if self.training else 0.0)
""",
        "fused",
        "builds attn_mask in the fused path without device=: breaks on a GPU (caught on meta)",
    ),
]


# Issue 31: a dropout probability written as a constant passed while the checks used only
# dropout = 0.5; a dropout applied after scaled_dot_product_attention went unseen.
BUGGY += [
    Variant(
        "fused-dropout-constant",
        ATTN,
        FUSED_DROPOUT,
        "dropout_p=0.5 if self.training else 0.0,",
        "fused",
        "dropout_p = 0.5 written as a constant instead of self.dropout",
    ),
    Variant(
        "fused-dropout-after-sdpa",
        ATTN,
        SDPA_CALL,
        """\
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0,
                                           is_causal=True)
        return F.dropout(y, self.dropout, self.training)  # a second dropout, on the heads' output
""",
        "fused",
        "drops the heads' output again after SDPA already dropped the weights",
    ),
    Variant(
        "attn-drop-constant",
        ATTN,
        "self.attn_drop = nn.Dropout(cfg.dropout)",
        "self.attn_drop = nn.Dropout(0.5)",
        None,
        "nn.Dropout(0.5) for the weights instead of cfg.dropout",
    ),
]

# Issue 31: each TODO's own checks run with T < block_size and every size different; a softmax
# over the wrong dimension is no mask's fault; q and k mixed up in the scores are TODO [scaling]'s
# when the fused path shows the heads right; v cut wrongly is TODO [head-reshape]'s, not the fused
# path's; the fused path's gradient is judged too.
BUGGY += [
    Variant(
        "merge-view-block-size",
        ATTN,
        MERGE,
        "y = y.transpose(1, 2).contiguous().view(B, self.mask.size(-1), C)",
        "contiguous-view",
        "the merged length read from the mask's size (block_size) instead of T",
    ),
    Variant(
        "softmax-dim-heads",
        ATTN,
        SOFTMAX,
        "att = F.softmax(att, dim=1)",
        None,
        "softmax over the heads: NaN where the mask put -inf, though the mask is right",
    ),
    Variant(
        "scores-k-q",
        ATTN,
        SCORES,
        "att = (k @ q.transpose(-2, -1)) * (1.0 / math.sqrt(hs))",
        "scaling",
        "k q^T: the same weights as q and k swapped in the split, but the split is right",
    ),
    Variant(
        "v-heads-interleaved",
        ATTN,
        "v = v.view(B, T, self.n_head, hs).transpose(1, 2)",
        "v = v.view(B, T, hs, self.n_head).transpose(2, 3).transpose(1, 2)",
        "head-reshape",
        "only v's channels dealt to the heads interleaved: the weights are right",
    ),
    Variant(
        "fused-k-detached",
        ATTN,
        "            q, k, v,\n            attn_mask=None,",
        "            q, k.detach(), v,\n            attn_mask=None,",
        "fused",
        "k detached in the fused call: the same output, no gradient through the keys",
    ),
]

# Issue 31: masked_self_attention judged on one size only let a length written as a constant pass;
# the mask's dtype was never checked.
BUGGY += [
    Variant(
        "np-attention-mask-of-5",
        NP,
        NP_SCORES,
        "scores = Q @ K.T / np.sqrt(d_k) + causal_mask(5)",
        "np-attention",
        "the mask's length written as the length of the one input it was tried on",
    ),
    Variant(
        "np-mask-integers",
        NP,
        NP_WHERE,
        "return np.where(future, -10**9, 0)",
        "np-mask",
        "an integer mask: the values are right, the dtype is not float",
    ),
]

# Issue 31: a crash where a value is first used, caused by the TODO that made it. Both paths
# fail where they first use q, k, v (a head-reshape mistake, not the scores' nor the fused
# call's); self.proj fails on what the merge left (not the mask's nor the heads').
BUGGY += [
    Variant(
        "q-not-transposed",
        ATTN,
        "q = q.view(B, T, self.n_head, hs).transpose(1, 2)",
        "q = q.view(B, T, self.n_head, hs)",
        "head-reshape",
        "q left as (B, T, nh, hs): the scores' matmul and the fused call raise",
    ),
    Variant(
        "merge-forgotten",
        ATTN,
        MERGE,
        "pass  # the heads are never merged back",
        "contiguous-view",
        "y left as (B, nh, T, hs): self.proj raises in the given code",
    ),
]

# --------------------------------------------------------------------------- practice sample

# The CI sample of practice-vs-official agreement (tests/lessons/test_practice_agreement.py):
# buggy variants whose diagnosis the recording answers, each a symptom issue 30 saw in practice
# (a .view without .contiguous(), no 1/sqrt(hs), a reversed mask). bench/bench_practice_agreement.py
# compares every buggy variant.
PRACTICE_SAMPLE = ("merge-view-not-contiguous", "scale-none", "mask-triu")
