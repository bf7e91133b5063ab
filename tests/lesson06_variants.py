"""Lesson 06's catalog of variant submissions (see tests/variants.py for the rules), used to
prove its hidden graders. Each variant edits solutions/06-generar/generate.py with its region
markers stripped. A plain module: tests/test_variants.py grades every variant.
"""

from __future__ import annotations

from variants import Variant

GEN = "generate.py"


# --------------------------------------------------------------------------- fragments
# Exact lines of the marker-stripped solution that several variants edit.

GREEDY = """\
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)  # (B, 1)
"""
ARGMAX = "        return logits.argmax(dim=-1, keepdim=True)  # (B, 1)"
DIVIDE = "    logits = logits / temperature\n"
TOPK_K = "        k = min(top_k, logits.size(-1))"
TOPK_KTH = "        kth = torch.topk(logits, k, dim=-1).values[:, [-1]]  # (B, 1): el k-ésimo mayor"
TOPK_FILL = '        logits = logits.masked_fill(logits < kth, float("-inf"))'
CROP = "    return idx[:, -block_size:]"
CAT_K = "        k = torch.cat((past_k, k), dim=2)  # (B, nh, T_past + T, hs)"
CAT_V = "        v = torch.cat((past_v, v), dim=2)  # (B, nh, T_past + T, hs)"
VISIBLE = "    visible = torch.ones(T, T_past + T, dtype=torch.bool, device=x.device).tril(diagonal=T_past)"
SDPA = "    y = F.scaled_dot_product_attention(q, k, v, attn_mask=visible)  # (B, nh, T, hs)"
MASKED_ATTENTION = f"""\
    T_past = k.size(2) - T
{VISIBLE}
{SDPA}
"""
POS = "    pos = torch.arange(T_past, T_past + T, device=idx_new.device)  # (T,)"
REBUILD = "                if cache is None or cache.length == block_size:"
PREFILL = "                    logits = forward_cached(model, crop_context(idx, block_size), cache)"
STEP = "                    logits = forward_cached(model, idx[:, -1:], cache)  # (B, 1, V)"
EVAL = "    model.eval()  # sin dropout: generar no es entrenar"
RESTORE = "        model.train(was_training)"


# --------------------------------------------------------------------------- buggy

BUGGY: list[Variant] = [
    # ---- TODO [temperature]
    Variant("greedy-no-keepdim", GEN, ARGMAX, "        return logits.argmax(dim=-1)",
            "temperature", "argmax without keepdim: (B,) instead of (B, 1)",
            collateral=()),
    # dividing by 0 gives nan
    Variant("greedy-divides-by-zero", GEN, GREEDY, "",
            "temperature", "no special case for temperature 0: divides by zero",
            collateral=()),
    Variant("greedy-samples", GEN, ARGMAX, "        temperature = 1.0",
            "temperature", "temperature 0 treated as 1: samples instead of taking the argmax",
            collateral=()),
    Variant("temperature-multiplied", GEN, DIVIDE, "    logits = logits * temperature\n",
            "temperature", "multiplies the logits by the temperature",
            collateral=()),
    Variant("temperature-ignored", GEN, DIVIDE, "",
            "temperature", "never applies the temperature",
            collateral=()),
    Variant("temperature-on-probabilities", GEN, DIVIDE, "",
            "temperature", "divides the probabilities, which the draw renormalises",
            also=(("    probs = F.softmax(logits, dim=-1)  # (B, V): una distribución por fila",
                   "    probs = F.softmax(logits, dim=-1) / max(temperature, 1e-8)  # (B, V)"),),
            collateral=()),
    # ---- TODO [top-k]
    Variant("top-k-less-or-equal", GEN, TOPK_FILL,
            '        logits = logits.masked_fill(logits <= kth, float("-inf"))',
            "top-k", "<= also hides the k-th best: keeps k-1",
            collateral=()),
    Variant("top-k-fill-zero", GEN, TOPK_FILL, "        logits = logits.masked_fill(logits < kth, 0.0)",
            "top-k", "puts 0 instead of -inf: the discarded tokens keep probability",
            collateral=()),
    Variant("top-k-no-clamp", GEN, TOPK_K, "        k = top_k",
            "top-k", "torch.topk with k > V raises",
            collateral=()),
    Variant("top-k-result-discarded", GEN, TOPK_FILL,
            '        logits.masked_fill(logits < kth, float("-inf"))',
            "top-k", "masked_fill is not in place; its result is thrown away",
            collateral=()),
    Variant("top-k-largest-as-threshold", GEN, TOPK_KTH,
            "        kth = torch.topk(logits, k, dim=-1).values[:, [0]]",
            "top-k", "compares with the largest logit: keeps only one token",
            collateral=()),
    Variant("top-k-one-threshold-for-the-batch", GEN, TOPK_KTH,
            "        kth = torch.topk(logits.flatten(), k).values[-1]",
            "top-k", "one threshold for the whole batch instead of one per row",
            collateral=()),
    # ---- TODO [crop-context]
    # the cache's prefill crops too: a long prompt fails cache-generate [kv-cache]
    Variant("crop-first-tokens", GEN, CROP, "    return idx[:, :block_size]",
            "crop-context", "keeps the first block_size tokens",
            collateral=("kv-cache",)),
    # the cache's prefill crops too: a long prompt fails cache-generate [kv-cache]
    Variant("crop-batch-dimension", GEN, CROP, "    return idx[-block_size:]",
            "crop-context", "crops dimension 0, the batch",
            collateral=("kv-cache",)),
    Variant("crop-negative-start", GEN, CROP, "    return idx[:, idx.size(1) - block_size:]",
            "crop-context", "T - block_size is negative when T < block_size",
            collateral=()),
    # the cache is rebuilt with block_size - 1 tokens: cache-generate [kv-cache] fails too
    Variant("crop-one-less", GEN, CROP, "    return idx[:, -block_size + 1:]",
            "crop-context", "keeps block_size - 1 tokens",
            collateral=("kv-cache",)),
    # ---- TODO [kv-cache]
    # chunks after the cache then see their keys in the wrong places [cache-alignment]
    Variant("cache-new-keys-first", GEN, CAT_K, "        k = torch.cat((k, past_k), dim=2)",
            "kv-cache", "puts the new keys and values before the cached ones",
            also=((CAT_V, "        v = torch.cat((v, past_v), dim=2)"),),
            collateral=("cache-alignment",)),
    Variant("cache-not-kept", GEN, CAT_K, "        past_k = torch.cat((past_k, k), dim=2)",
            "kv-cache", "concatenates into past_k/past_v: k and v stay the new ones only",
            also=((CAT_V, "        past_v = torch.cat((past_v, v), dim=2)"),),
            collateral=("cache-alignment",)),
    Variant("cache-cat-heads-dim", GEN, CAT_K, "        k = torch.cat((past_k, k), dim=1)",
            "kv-cache", "concatenates along the heads dimension",
            also=((CAT_V, "        v = torch.cat((past_v, v), dim=1)"),),
            collateral=("cache-alignment",)),
    Variant("positions-from-zero", GEN, POS, "    pos = torch.arange(T, device=idx_new.device)",
            "kv-cache", "new tokens get positions 0..T-1 instead of T_past..",
            collateral=("cache-alignment",)),
    Variant("generate-never-rebuilds", GEN, REBUILD, "                if cache is None:",
            "kv-cache", "never rebuilds the cache: it overflows past block_size",
            collateral=()),
    Variant("generate-prefill-uncropped", GEN, PREFILL,
            "                    logits = forward_cached(model, idx, cache)",
            "kv-cache", "prefills with the whole context, longer than block_size",
            collateral=()),
    Variant("generate-refeeds-context", GEN, STEP,
            "                    logits = forward_cached(model, crop_context(idx, block_size), cache)",
            "kv-cache", "feeds the whole context again into the same cache",
            collateral=()),
    Variant("generate-prefill-last-token", GEN, PREFILL,
            "                    logits = forward_cached(model, idx[:, -1:], cache)",
            "kv-cache", "the prefill only sees the last token of the prompt",
            collateral=()),
    # ---- TODO [cache-alignment]
    # one new token after a cache sees key 0 only: the one-token checks [kv-cache] fail too
    Variant("is-causal-always", GEN, MASKED_ATTENTION,
            "    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)\n",
            "cache-alignment", "is_causal=True aligns the mask to the top-left",
            collateral=("kv-cache",)),
    Variant("is-causal-for-several", GEN, MASKED_ATTENTION,
            "    y = F.scaled_dot_product_attention(q, k, v, is_causal=T > 1)\n",
            "cache-alignment", "is_causal only for several new tokens: right for prefill and one token, "
                               "wrong for a chunk after the cache",
            collateral=()),
    # top-left like is_causal: the one-token checks [kv-cache] fail too
    Variant("mask-top-left", GEN, VISIBLE,
            "    visible = torch.ones(T, T_past + T, dtype=torch.bool, device=x.device).tril()",
            "cache-alignment", "tril without diagonal=T_past",
            collateral=("kv-cache",)),
    # the prefill sees the future: cache-generate [kv-cache] fails too
    Variant("no-mask", GEN, MASKED_ATTENTION, "    y = F.scaled_dot_product_attention(q, k, v)\n",
            "cache-alignment", "no causal mask at all",
            collateral=("kv-cache",)),
    Variant("mask-square", GEN, VISIBLE,
            "    visible = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()",
            "cache-alignment", "a (T, T) mask for (T, T_past + T) scores",
            collateral=()),
    # no token sees itself: nan in the prefill, wrong one-token steps [kv-cache]
    Variant("mask-diagonal-hidden", GEN, VISIBLE,
            "    visible = torch.ones(T, T_past + T, dtype=torch.bool, device=x.device).tril(diagonal=T_past - 1)",
            "cache-alignment", "diagonal=T_past - 1: each query misses its own key",
            collateral=("kv-cache",)),
    # ---- outside the TODO regions
    Variant("generate-not-eval", GEN, EVAL, "    pass",
            None, "generates with dropout on (no model.eval())",
            collateral=()),
    Variant("generate-mode-not-restored", GEN, RESTORE, "        pass",
            None, "leaves the model in eval mode",
            collateral=()),
]


# --------------------------------------------------------------------------- correct

CORRECT: list[Variant] = [
    Variant("greedy-not-temperature", GEN, "    if temperature == 0:", "    if not temperature:",
            note="`not temperature` for temperature 0"),
    Variant("temperature-reciprocal", GEN, DIVIDE, "    logits = logits * (1.0 / temperature)\n",
            note="multiplies by 1 / temperature"),
    Variant("top-k-sorted-where", GEN, f"{TOPK_KTH}\n{TOPK_FILL}", """\
        kth = torch.sort(logits, dim=-1, descending=True).values[:, k - 1:k]
        logits = torch.where(logits < kth, torch.full_like(logits, float("-inf")), logits)""",
            note="sort + torch.where"),
    Variant("top-k-scatter", GEN, f"{TOPK_KTH}\n{TOPK_FILL}", """\
        best, where = torch.topk(logits, k, dim=-1)
        logits = torch.full_like(logits, float("-inf")).scatter(-1, where, best)""",
            note="scatters the k best into a row of -inf"),
    Variant("crop-conditional", GEN, CROP,
            "    return idx if idx.size(1) <= block_size else idx[:, -block_size:]",
            note="crops only when the context is too long"),
    Variant("crop-max-start", GEN, CROP, "    return idx[:, max(0, idx.size(1) - block_size):]",
            note="an explicit, never negative start"),
    Variant("cat-negative-dim", GEN, CAT_K, "        k = torch.cat([past_k, k], dim=-2)",
            also=((CAT_V, "        v = torch.cat([past_v, v], dim=-2)"),), note="dim=-2 and lists"),
    Variant("positions-offset-added", GEN, POS, "    pos = T_past + torch.arange(T, device=idx_new.device)",
            note="arange(T) shifted by T_past"),
    Variant("explicit-attention", GEN, MASKED_ATTENTION, """\
    T_past = k.size(2) - T
    att = (q @ k.transpose(-2, -1)) / k.size(-1) ** 0.5  # (B, nh, T, T_past + T)
    future = torch.ones(T, T_past + T, dtype=torch.bool, device=x.device).triu(diagonal=T_past + 1)
    y = F.softmax(att.masked_fill(future, float("-inf")), dim=-1) @ v
""", note="explicit scores, masked_fill and softmax instead of SDPA"),
    Variant("mask-rows-of-square", GEN, VISIBLE, """\
    S = k.size(2)
    visible = torch.ones(S, S, dtype=torch.bool, device=x.device).tril()[S - T:]""",
            note="the last T rows of the square causal mask"),
    Variant("is-causal-only-when-empty", GEN, MASKED_ATTENTION, """\
    T_past = k.size(2) - T
    if T_past == 0:
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        visible = torch.ones(T, T_past + T, dtype=torch.bool, device=x.device).tril(diagonal=T_past)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=visible)
""", note="is_causal only with an empty cache, where it is right"),
    Variant("rebuild-when-at-least-full", GEN, REBUILD,
            "                if cache is None or cache.length >= block_size:",
            note=">= block_size"),
]
