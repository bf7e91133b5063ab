"""Lesson 06's catalog of variant submissions (see tests/support/variants.py for the rules), used to
prove its hidden graders. Each variant edits solutions/06-generar/generate.py with its region
markers stripped. A plain module: tests/lessons/test_variants.py grades every variant.
"""

from __future__ import annotations

from support.variants import Variant

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
    Variant(
        "greedy-no-keepdim",
        GEN,
        ARGMAX,
        "        return logits.argmax(dim=-1)",
        "temperature",
        "argmax without keepdim: (B,) instead of (B, 1)",
    ),
    # dividing by 0 gives nan
    Variant(
        "greedy-divides-by-zero",
        GEN,
        GREEDY,
        "",
        "temperature",
        "no special case for temperature 0: divides by zero",
    ),
    Variant(
        "greedy-samples",
        GEN,
        ARGMAX,
        "        temperature = 1.0",
        "temperature",
        "temperature 0 treated as 1: samples instead of taking the argmax",
    ),
    Variant(
        "temperature-multiplied",
        GEN,
        DIVIDE,
        "    logits = logits * temperature\n",
        "temperature",
        "multiplies the logits by the temperature",
    ),
    Variant("temperature-ignored", GEN, DIVIDE, "", "temperature", "never applies the temperature"),
    Variant(
        "temperature-on-probabilities",
        GEN,
        DIVIDE,
        "",
        "temperature",
        "divides the probabilities, which the draw renormalises",
        also=(
            (
                "    probs = F.softmax(logits, dim=-1)  # (B, V): una distribución por fila",
                "    probs = F.softmax(logits, dim=-1) / max(temperature, 1e-8)  # (B, V)",
            ),
        ),
    ),
    # ---- TODO [top-k]
    Variant(
        "top-k-less-or-equal",
        GEN,
        TOPK_FILL,
        '        logits = logits.masked_fill(logits <= kth, float("-inf"))',
        "top-k",
        "<= also hides the k-th best: keeps k-1",
    ),
    Variant(
        "top-k-fill-zero",
        GEN,
        TOPK_FILL,
        "        logits = logits.masked_fill(logits < kth, 0.0)",
        "top-k",
        "puts 0 instead of -inf: the discarded tokens keep probability",
    ),
    Variant("top-k-no-clamp", GEN, TOPK_K, "        k = top_k", "top-k", "torch.topk with k > V raises"),
    Variant(
        "top-k-result-discarded",
        GEN,
        TOPK_FILL,
        '        logits.masked_fill(logits < kth, float("-inf"))',
        "top-k",
        "masked_fill is not in place; its result is thrown away",
    ),
    Variant(
        "top-k-largest-as-threshold",
        GEN,
        TOPK_KTH,
        "        kth = torch.topk(logits, k, dim=-1).values[:, [0]]",
        "top-k",
        "compares with the largest logit: keeps only one token",
    ),
    Variant(
        "top-k-one-threshold-for-the-batch",
        GEN,
        TOPK_KTH,
        "        kth = torch.topk(logits.flatten(), k).values[-1]",
        "top-k",
        "one threshold for the whole batch instead of one per row",
    ),
    # ---- TODO [crop-context]
    Variant(
        "crop-first-tokens",
        GEN,
        CROP,
        "    return idx[:, :block_size]",
        "crop-context",
        "keeps the first block_size tokens",
    ),
    Variant(
        "crop-batch-dimension",
        GEN,
        CROP,
        "    return idx[-block_size:]",
        "crop-context",
        "crops dimension 0, the batch",
    ),
    Variant(
        "crop-negative-start",
        GEN,
        CROP,
        "    return idx[:, idx.size(1) - block_size:]",
        "crop-context",
        "T - block_size is negative when T < block_size",
    ),
    Variant(
        "crop-one-less",
        GEN,
        CROP,
        "    return idx[:, -block_size + 1:]",
        "crop-context",
        "keeps block_size - 1 tokens",
    ),
    # ---- TODO [kv-cache]
    Variant(
        "cache-new-keys-first",
        GEN,
        CAT_K,
        "        k = torch.cat((k, past_k), dim=2)",
        "kv-cache",
        "puts the new keys and values before the cached ones",
        also=((CAT_V, "        v = torch.cat((v, past_v), dim=2)"),),
    ),
    Variant(
        "cache-not-kept",
        GEN,
        CAT_K,
        "        past_k = torch.cat((past_k, k), dim=2)",
        "kv-cache",
        "concatenates into past_k/past_v: k and v stay the new ones only",
        also=((CAT_V, "        past_v = torch.cat((past_v, v), dim=2)"),),
    ),
    Variant(
        "cache-cat-heads-dim",
        GEN,
        CAT_K,
        "        k = torch.cat((past_k, k), dim=1)",
        "kv-cache",
        "concatenates along the heads dimension",
        also=((CAT_V, "        v = torch.cat((past_v, v), dim=1)"),),
    ),
    Variant(
        "positions-from-zero",
        GEN,
        POS,
        "    pos = torch.arange(T, device=idx_new.device)",
        "kv-cache",
        "new tokens get positions 0..T-1 instead of T_past..",
    ),
    Variant(
        "generate-never-rebuilds",
        GEN,
        REBUILD,
        "                if cache is None:",
        "kv-cache",
        "never rebuilds the cache: it overflows past block_size",
    ),
    Variant(
        "generate-prefill-uncropped",
        GEN,
        PREFILL,
        "                    logits = forward_cached(model, idx, cache)",
        "kv-cache",
        "prefills with the whole context, longer than block_size",
    ),
    Variant(
        "generate-refeeds-context",
        GEN,
        STEP,
        "                    logits = forward_cached(model, crop_context(idx, block_size), cache)",
        "kv-cache",
        "feeds the whole context again into the same cache",
    ),
    Variant(
        "generate-prefill-last-token",
        GEN,
        PREFILL,
        "                    logits = forward_cached(model, idx[:, -1:], cache)",
        "kv-cache",
        "the prefill only sees the last token of the prompt",
    ),
    # ---- TODO [cache-alignment]
    Variant(
        "is-causal-always",
        GEN,
        MASKED_ATTENTION,
        "    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)\n",
        "cache-alignment",
        "is_causal=True aligns the mask to the top-left",
    ),
    Variant(
        "is-causal-for-several",
        GEN,
        MASKED_ATTENTION,
        "    y = F.scaled_dot_product_attention(q, k, v, is_causal=T > 1)\n",
        "cache-alignment",
        "is_causal only for several new tokens: right for prefill and one token, "
        "wrong for a chunk after the cache",
    ),
    Variant(
        "mask-top-left",
        GEN,
        VISIBLE,
        "    visible = torch.ones(T, T_past + T, dtype=torch.bool, device=x.device).tril()",
        "cache-alignment",
        "tril without diagonal=T_past",
    ),
    Variant(
        "no-mask",
        GEN,
        MASKED_ATTENTION,
        "    y = F.scaled_dot_product_attention(q, k, v)\n",
        "cache-alignment",
        "no causal mask at all",
    ),
    Variant(
        "mask-square",
        GEN,
        VISIBLE,
        "    visible = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()",
        "cache-alignment",
        "a (T, T) mask for (T, T_past + T) scores",
    ),
    Variant(
        "mask-diagonal-hidden",
        GEN,
        VISIBLE,
        "    visible = torch.ones(T, T_past + T, dtype=torch.bool, device=x.device).tril(diagonal=T_past - 1)",
        "cache-alignment",
        "diagonal=T_past - 1: each query misses its own key",
    ),
    # ---- more realistic slips and adapted idioms
    Variant(
        "greedy-tiny-temperature",
        GEN,
        GREEDY,
        """\
    if temperature == 0:
        temperature = 1e-8  # casi greedy
""",
        "temperature",
        "temperature 0 replaced by a tiny one: the argmax comes out, but drawn with the generator",
    ),
    Variant(
        "greedy-max-values",
        GEN,
        ARGMAX,
        "        return logits.max(dim=-1, keepdim=True).values",
        "temperature",
        "returns the largest logit (values), not its index",
    ),
    Variant(
        "greedy-argmax-batch-dim",
        GEN,
        ARGMAX,
        "        return logits.argmax(dim=0, keepdim=True)",
        "temperature",
        "argmax over the batch dimension: (1, V)",
    ),
    Variant(
        "top-k-indices-as-threshold",
        GEN,
        TOPK_KTH,
        "        kth = torch.topk(logits, k, dim=-1).indices[:, [-1]]",
        "top-k",
        "compares the logits with the k-th best's INDEX",
    ),
    Variant(
        "top-k-smallest",
        GEN,
        TOPK_KTH,
        "        kth = torch.topk(logits, k, dim=-1, largest=False).values[:, [-1]]",
        "top-k",
        "largest=False: the threshold is the k-th smallest logit",
    ),
    Variant(
        "top-k-threshold-flat",
        GEN,
        TOPK_KTH,
        "        kth = torch.topk(logits, k, dim=-1).values[:, -1]",
        "top-k",
        "the k-th value as (B,), which broadcasts along the vocabulary",
    ),
    Variant(
        "crop-last-token-only",
        GEN,
        CROP,
        "    return idx[:, -1:]",
        "crop-context",
        "keeps only the last token, as the bigram did",
    ),
    Variant(
        "crop-drops-last",
        GEN,
        CROP,
        "    return idx[:, -block_size:-1]",
        "crop-context",
        "the slice stops before the last token",
    ),
    Variant(
        "crop-start-from-batch-size",
        GEN,
        CROP,
        "    return idx[:, max(0, idx.size(0) - block_size):]",
        "crop-context",
        "uses idx.size(0), the batch, as the length",
    ),
    Variant(
        "crop-one-more",
        GEN,
        CROP,
        "    return idx[:, -block_size - 1:]",
        "crop-context",
        "keeps block_size + 1 tokens",
    ),
    Variant(
        "cache-values-get-keys",
        GEN,
        CAT_V,
        "        v = torch.cat((past_k, v), dim=2)  # (B, nh, T_past + T, hs)",
        "kv-cache",
        "copy-paste: the cached keys go in front of the new values",
    ),
    Variant(
        "positions-on-cpu",
        GEN,
        POS,
        "    pos = torch.arange(T_past, T_past + T)  # (T,)",
        "kv-cache",
        "positions made without device=: born on the CPU",
    ),
    Variant(
        "positions-one-late",
        GEN,
        POS,
        "    pos = torch.arange(T_past + 1, T_past + T + 1, device=idx_new.device)",
        "kv-cache",
        "positions start one after the cached tokens",
    ),
    Variant(
        "generate-rebuilds-every-step",
        GEN,
        REBUILD,
        "                if True:  # cache is None or cache.length == block_size",
        "kv-cache",
        "a new cache and a prefill at every step: right tokens, nothing reused",
    ),
    Variant(
        "generate-cache-ignored",
        GEN,
        f"{REBUILD}\n",
        """\
                if True:
                    logits, _ = model(crop_context(idx, block_size))
                elif cache is None or cache.length == block_size:
""",
        "kv-cache",
        "use_cache=True runs the full forward anyway",
    ),
    Variant(
        "generate-rebuilds-early",
        GEN,
        REBUILD,
        "                if cache is None or cache.length == block_size - 1:",
        "kv-cache",
        "rebuilds one step before the cache is full",
    ),
    Variant(
        "mask-on-cpu",
        GEN,
        VISIBLE,
        "    visible = torch.ones(T, T_past + T, dtype=torch.bool).tril(diagonal=T_past)",
        "cache-alignment",
        "the mask is made without device=: born on the CPU",
    ),
    Variant(
        "mask-as-float",
        GEN,
        SDPA,
        "    y = F.scaled_dot_product_attention(q, k, v, attn_mask=visible.float())  # (B, nh, T, hs)",
        "cache-alignment",
        "a float 0/1 mask, which SDPA adds to the scores instead of hiding",
    ),
    Variant(
        "mask-sees-one-ahead",
        GEN,
        VISIBLE,
        "    visible = torch.ones(T, T_past + T, dtype=torch.bool, device=x.device).tril(diagonal=T_past + 1)",
        "cache-alignment",
        "diagonal=T_past + 1: each query also sees the next token",
    ),
    Variant(
        "mask-triu",
        GEN,
        VISIBLE,
        "    visible = torch.ones(T, T_past + T, dtype=torch.bool, device=x.device).triu(diagonal=T_past)",
        "cache-alignment",
        "triu instead of tril: each query sees itself and the future",
    ),
    Variant(
        "mask-and-is-causal",
        GEN,
        SDPA,
        "    y = F.scaled_dot_product_attention(q, k, v, attn_mask=visible, is_causal=True)  # (B, nh, T, hs)",
        "cache-alignment",
        "attn_mask and is_causal=True together (SDPA refuses both)",
    ),
    # The crash (past_k is None at the prefill) is in cache-alignment's code, but autograder/engine/blame.py
    # cannot tell which of the two adjacent TODO blocks the line replaced (its names appear in
    # both hints), so the kv-cache checks that prefill are not told they wait on cache-alignment.
    Variant(
        "t-past-from-past-k",
        GEN,
        "    T_past = k.size(2) - T\n",
        "    T_past = past_k.size(2)\n",
        "cache-alignment",
        "T_past read from past_k, which is None with an empty cache",
    ),
    # ---- issue 31: inputs at the contract's edges, config values, dtypes
    Variant(
        "temperature-clamped",
        GEN,
        DIVIDE,
        "    logits = logits / max(temperature, 0.5)\n",
        "temperature",
        "clamps the temperature to 0.5: any T in (0, 0.5) samples as 0.5",
    ),
    Variant(
        "generator-none-own-generator",
        GEN,
        DIVIDE,
        DIVIDE + "    generator = generator if generator is not None else torch.Generator()\n",
        "temperature",
        "generator=None draws from a fresh generator instead of torch's global one",
    ),
    Variant(
        "top-k-quantile",
        GEN,
        TOPK_KTH,
        "        kth = torch.quantile(logits, 1 - k / logits.size(-1), dim=-1, keepdim=True)",
        "top-k",
        "the k-th largest as the quantile 1 - k/V: in float32 it lands on the (k+1)-th over a large vocabulary",
    ),
    Variant(
        "top-k-at-most-v-minus-1",
        GEN,
        TOPK_K,
        "        k = min(top_k, logits.size(-1) - 1)",
        "top-k",
        "caps k at V - 1: with top_k >= V the least likely token is dropped",
    ),
    Variant(
        "crop-as-float",
        GEN,
        CROP,
        "    return idx[:, -block_size:].float()",
        "crop-context",
        "returns the crop as floats: torch.equal alone compares values, the embedding refuses them",
    ),
    Variant(
        "crop-constant-block-size",
        GEN,
        CROP,
        "    return idx[:, -8:]",
        "crop-context",
        "a block size written as a constant",
    ),
    Variant(
        "cache-sized-by-heads",
        GEN,
        "KVCache(len(model.transformer.h))",
        "KVCache(model.cfg.n_head)",
        "kv-cache",
        "one cache entry per head instead of per block: passes while n_head >= n_layer",
    ),
    # ---- issue 31: blame by cause (the checks of other TODOs wait on the one at fault)
    Variant(
        "greedy-condition-inverted",
        GEN,
        "    if temperature == 0:",
        "    if temperature:",
        "temperature",
        "`if temperature:` takes every T > 0 as greedy: the sampled checks of other TODOs wait on it",
    ),
    Variant(
        "attention-call-forgotten",
        GEN,
        SDPA + "\n",
        "",
        "cache-alignment",
        "the mask is built but y is never computed: given code reads y undefined, the kv-cache checks wait",
    ),
    Variant(
        "attention-keys-values-swapped",
        GEN,
        SDPA,
        "    y = F.scaled_dot_product_attention(q, v, k, attn_mask=visible)  # (B, nh, T, hs)",
        "cache-alignment",
        "v and k swapped in the attention call: the kv-cache checks that need the output wait",
    ),
    Variant(
        "cache-cat-last-dim",
        GEN,
        CAT_K,
        "        k = torch.cat((past_k, k), dim=-1)",
        "kv-cache",
        "concatenates along the last dimension (hs): the cat raises, cache-alignment's checks wait",
        also=((CAT_V, "        v = torch.cat((past_v, v), dim=-1)"),),
    ),
    # ---- outside the TODO regions
    Variant("generate-not-eval", GEN, EVAL, "    pass", None, "generates with dropout on (no model.eval())"),
    Variant(
        "generate-mode-not-restored", GEN, RESTORE, "        pass", None, "leaves the model in eval mode"
    ),
]


# --------------------------------------------------------------------------- correct

CORRECT: list[Variant] = [
    Variant(
        "greedy-not-temperature",
        GEN,
        "    if temperature == 0:",
        "    if not temperature:",
        note="`not temperature` for temperature 0",
    ),
    Variant(
        "temperature-reciprocal",
        GEN,
        DIVIDE,
        "    logits = logits * (1.0 / temperature)\n",
        note="multiplies by 1 / temperature",
    ),
    Variant(
        "top-k-sorted-where",
        GEN,
        f"{TOPK_KTH}\n{TOPK_FILL}",
        """\
        kth = torch.sort(logits, dim=-1, descending=True).values[:, k - 1:k]
        logits = torch.where(logits < kth, torch.full_like(logits, float("-inf")), logits)""",
        note="sort + torch.where",
    ),
    Variant(
        "top-k-scatter",
        GEN,
        f"{TOPK_KTH}\n{TOPK_FILL}",
        """\
        best, where = torch.topk(logits, k, dim=-1)
        logits = torch.full_like(logits, float("-inf")).scatter(-1, where, best)""",
        note="scatters the k best into a row of -inf",
    ),
    Variant(
        "crop-conditional",
        GEN,
        CROP,
        "    return idx if idx.size(1) <= block_size else idx[:, -block_size:]",
        note="crops only when the context is too long",
    ),
    Variant(
        "crop-max-start",
        GEN,
        CROP,
        "    return idx[:, max(0, idx.size(1) - block_size):]",
        note="an explicit, never negative start",
    ),
    Variant(
        "cat-negative-dim",
        GEN,
        CAT_K,
        "        k = torch.cat([past_k, k], dim=-2)",
        also=((CAT_V, "        v = torch.cat([past_v, v], dim=-2)"),),
        note="dim=-2 and lists",
    ),
    Variant(
        "positions-offset-added",
        GEN,
        POS,
        "    pos = T_past + torch.arange(T, device=idx_new.device)",
        note="arange(T) shifted by T_past",
    ),
    Variant(
        "explicit-attention",
        GEN,
        MASKED_ATTENTION,
        """\
    T_past = k.size(2) - T
    att = (q @ k.transpose(-2, -1)) / k.size(-1) ** 0.5  # (B, nh, T, T_past + T)
    future = torch.ones(T, T_past + T, dtype=torch.bool, device=x.device).triu(diagonal=T_past + 1)
    y = F.softmax(att.masked_fill(future, float("-inf")), dim=-1) @ v
""",
        note="explicit scores, masked_fill and softmax instead of SDPA",
    ),
    Variant(
        "mask-rows-of-square",
        GEN,
        VISIBLE,
        """\
    S = k.size(2)
    visible = torch.ones(S, S, dtype=torch.bool, device=x.device).tril()[S - T:]""",
        note="the last T rows of the square causal mask",
    ),
    Variant(
        "is-causal-only-when-empty",
        GEN,
        MASKED_ATTENTION,
        """\
    T_past = k.size(2) - T
    if T_past == 0:
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        visible = torch.ones(T, T_past + T, dtype=torch.bool, device=x.device).tril(diagonal=T_past)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=visible)
""",
        note="is_causal only with an empty cache, where it is right",
    ),
    Variant(
        "rebuild-when-at-least-full",
        GEN,
        REBUILD,
        "                if cache is None or cache.length >= block_size:",
        note=">= block_size",
    ),
    Variant(
        "greedy-max-indices",
        GEN,
        ARGMAX,
        "        return torch.max(logits, dim=-1, keepdim=True).indices",
        note="torch.max(...).indices",
    ),
    Variant(
        "greedy-softmax-argmax",
        GEN,
        ARGMAX,
        "        return F.softmax(logits, dim=-1).argmax(dim=-1, keepdim=True)",
        note="argmax of the probabilities (the same order)",
    ),
    Variant(
        "top-k-kthvalue",
        GEN,
        TOPK_KTH,
        "        kth = torch.kthvalue(logits, logits.size(-1) - k + 1, dim=-1, keepdim=True).values",
        note="torch.kthvalue from below",
    ),
    Variant(
        "top-k-finfo-min",
        GEN,
        TOPK_FILL,
        "        logits = logits.masked_fill(logits < kth, torch.finfo(logits.dtype).min)",
        note="the dtype's smallest value instead of -inf (HF's filter value)",
    ),
    Variant("crop-ellipsis", GEN, CROP, "    return idx[..., -block_size:]", note="idx[..., -block_size:]"),
    Variant(
        "positions-from-cache-length",
        GEN,
        POS,
        "    pos = torch.arange(cache.length, cache.length + T, dtype=torch.long, device=idx_new.device)",
        note="cache.length instead of T_past",
    ),
    Variant(
        "mask-from-aranges",
        GEN,
        VISIBLE,
        """\
    rows = torch.arange(T, device=x.device).view(T, 1) + T_past
    visible = torch.arange(T_past + T, device=x.device).view(1, -1) <= rows""",
        note="the mask from two aranges",
    ),
    Variant(
        "mask-additive-float",
        GEN,
        SDPA,
        """\
    bias = torch.zeros(T, T_past + T, device=x.device).masked_fill(~visible, float("-inf"))
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)  # (B, nh, T, hs)""",
        note="an additive float mask with -inf",
    ),
    Variant(
        "t-past-from-past-k-or-zero",
        GEN,
        "    T_past = k.size(2) - T\n",
        "    T_past = 0 if past_k is None else past_k.size(2)\n",
        note="T_past from past_k",
    ),
    # adapted from rasbt's LLMs-from-scratch KV cache: the rows of the module's own causal buffer
    Variant(
        "mask-from-module-buffer",
        GEN,
        VISIBLE,
        "    visible = attn.mask[0, 0, T_past:T_past + T, :T_past + T].bool()",
        note="slices lesson 03's registered mask buffer (rasbt's KV-cache idiom)",
    ),
    # adapted from nanoGPT / minGPT's generate: in-place indexing with the k-th of topk
    Variant(
        "top-k-nanogpt-inplace",
        GEN,
        f"{TOPK_KTH}\n{TOPK_FILL}",
        """\
        v, _ = torch.topk(logits, k)
        logits = logits.clone()
        logits[logits < v[:, [-1]]] = -float("Inf")""",
        note="nanoGPT's in-place top-k",
    ),
    # ---- issue 31
    Variant(
        "generator-none-default-generator",
        GEN,
        DIVIDE,
        DIVIDE + "    generator = generator if generator is not None else torch.default_generator\n",
        note="None replaced by torch.default_generator, which is the global generator",
    ),
    Variant(
        "crop-explicit-long",
        GEN,
        CROP,
        "    return idx[:, -block_size:].long()",
        note="the crop converted to long explicitly",
    ),
]


# --------------------------------------------------------------------------- practice agreement

# The CI sample of tests/lessons/test_practice_agreement.py: buggy variants whose diagnosis the
# recording answers (the replay tells the same TODO and the same diagnosis as the official
# grade). The KV-cache concatenated along the heads, which once got three stories; positions
# restarting at 0 (cache-state, cache-one-token and cache-generate diagnose it from recorded
# walks); a mask aligned to the top-left (judged on the learner's own keys and values, which are
# the recorded ones when only the mask is wrong).
PRACTICE_SAMPLE = ("cache-cat-heads-dim", "positions-from-zero", "mask-top-left")
