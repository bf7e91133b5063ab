"""Lesson 05's catalog of variant submissions (see tests/support/variants.py for the rules), used to
prove its hidden graders. Each variant edits solutions/05-entrenar/train.py with its region
markers stripped. A plain module: tests/lessons/test_variants.py grades every variant.

The `own-pieces` check is informational and runs only where the learner's lessons 03 and 04
sit beside the submission; these variants are graded alone, so it is skipped for them.
"""

from __future__ import annotations

from support.variants import Variant

TRAIN = "train.py"


# --------------------------------------------------------------------------- fragments
# Exact lines of the marker-stripped solution that several variants edit.

PARAMS = "params = [p for p in model.parameters() if p.requires_grad]"
SPLIT = """\
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
"""
GROUPS = """\
    groups = [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
"""
ADAMW = "return torch.optim.AdamW(groups, lr=learning_rate, betas=betas)"
WARMUP = "return max_lr * (step + 1) / warmup_steps"
AFTER_MAX = """\
    if step >= max_steps:
        return min_lr
"""
RATIO = "ratio = (step - warmup_steps) / (max_steps - warmup_steps)  # de 0 a 1"
COEFF = "coeff = 0.5 * (1.0 + math.cos(math.pi * ratio))  # de 1 a 0"
ZERO = "    optimizer.zero_grad(set_to_none=True)\n"
BACKWARD = "    loss.backward()\n"
CLIP_CALL = "torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)"
CLIP_BLOCK = """\
    if grad_clip > 0:
        # Una sola norma para todos los gradientes, como si fueran un vector: si pasa de
        # grad_clip se escalan todos por el mismo factor. El paso conserva su dirección y
        # solo se acorta cuando un lote raro daría un salto enorme.
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
"""
STEP = "    optimizer.step()\n    return loss.item()\n"
FORWARD_BACKWARD = (
    "    _, loss = model(x, y)  # logits (B, T, V) y la pérdida, un tensor escalar\n" + BACKWARD
)
EVAL = "    model.eval()\n"
RESTORE = "    model.train(was_training)  # train(False) es eval(): si ya estaba en eval, ahí se queda\n"
NO_GRAD_LOOP = """\
    with torch.no_grad():  # sin grafo de autograd: aquí nadie llamará a backward()
        for x, y in batches:
            _, loss = model(x, y)
            losses.append(loss.item())
"""
MEAN = "return sum(losses) / len(losses)"


# --------------------------------------------------------------------------- buggy

BUGGY: list[Variant] = [
    # ---- TODO [weight-decay-groups]
    Variant(
        "decay-by-name",
        TRAIN,
        SPLIT,
        "    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]\n"
        '    decay = [p for n, p in named if n.endswith("weight")]\n'
        '    no_decay = [p for n, p in named if not n.endswith("weight")]\n',
        "weight-decay-groups",
        "splits by the name 'weight': LayerNorm weights get decay",
    ),
    Variant(
        "one-group",
        TRAIN,
        ADAMW,
        "return torch.optim.AdamW(params, lr=learning_rate, betas=betas, weight_decay=weight_decay)",
        "weight-decay-groups",
        "a single group: biases and LayerNorm decay too",
    ),
    Variant(
        "groups-swapped",
        TRAIN,
        GROUPS,
        "    groups = [\n"
        '        {"params": no_decay, "weight_decay": 0.0},\n'
        '        {"params": decay, "weight_decay": weight_decay},\n'
        "    ]\n",
        "weight-decay-groups",
        "the group without decay first",
    ),
    Variant(
        "default-decay-second-group",
        TRAIN,
        '{"params": no_decay, "weight_decay": 0.0}',
        '{"params": no_decay}',
        "weight-decay-groups",
        "the second group gets AdamW's default weight_decay 0.01",
    ),
    Variant(
        "state-dict-tensors",
        TRAIN,
        PARAMS,
        "params = list(model.state_dict().values())",
        "weight-decay-groups",
        "state_dict's detached tensors: the tied weight twice, nothing trained",
    ),
    Variant(
        "frozen-not-skipped",
        TRAIN,
        PARAMS,
        "params = list(model.parameters())",
        "weight-decay-groups",
        "frozen parameters end up in the optimizer",
    ),
    Variant(
        "adam-not-adamw",
        TRAIN,
        ADAMW,
        "return torch.optim.Adam(groups, lr=learning_rate, betas=betas)",
        "weight-decay-groups",
        "Adam: its weight_decay is L2 in the gradient",
    ),
    Variant(
        "learning-rate-ignored",
        TRAIN,
        ADAMW,
        "return torch.optim.AdamW(groups, betas=betas)",
        "weight-decay-groups",
        "AdamW's default lr instead of learning_rate",
    ),
    Variant(
        "embeddings-without-decay",
        TRAIN,
        SPLIT,
        "    embeddings = {id(model.transformer.wte.weight), id(model.transformer.wpe.weight)}\n"
        "    decay = [p for p in params if p.dim() >= 2 and id(p) not in embeddings]\n"
        "    no_decay = [p for p in params if p.dim() < 2 or id(p) in embeddings]\n",
        "weight-decay-groups",
        "minGPT's rule: embeddings without decay",
    ),
    Variant(
        "decay-only-above-two-dims",
        TRAIN,
        SPLIT,
        "    decay = [p for p in params if p.dim() > 2]\n"
        "    no_decay = [p for p in params if p.dim() <= 2]\n",
        "weight-decay-groups",
        "p.dim() > 2: every matrix lands in the group without decay",
    ),
    Variant(
        "weight-decay-hardcoded",
        TRAIN,
        '{"params": decay, "weight_decay": weight_decay}',
        '{"params": decay, "weight_decay": 0.1}',
        "weight-decay-groups",
        "the usual 0.1 instead of the weight_decay argument",
    ),
    Variant(
        "betas-ignored",
        TRAIN,
        ADAMW,
        "return torch.optim.AdamW(groups, lr=learning_rate)",
        "weight-decay-groups",
        "AdamW's default betas (0.9, 0.999) instead of the argument",
    ),
    Variant(
        "params-per-module",
        TRAIN,
        PARAMS,
        "params = [p for m in model.modules() for p in m.parameters(recurse=False) if p.requires_grad]",
        "weight-decay-groups",
        "walks the modules one by one: the tied weight comes twice (wte and lm_head)",
    ),
    Variant(
        "params-detached",
        TRAIN,
        PARAMS,
        "params = [p.detach() for p in model.parameters() if p.requires_grad]",
        "weight-decay-groups",
        "the groups hold detached copies with the parameters' values: AdamW never moves the model",
    ),
    # ---- TODO [lr-schedule]
    Variant(
        "warmup-nanogpt",
        TRAIN,
        WARMUP,
        "return max_lr * (step + 1) / (warmup_steps + 1)",
        "lr-schedule",
        "nanoGPT's warmup, (step + 1) / (warmup_steps + 1): not the course's contract",
    ),
    Variant(
        "ratio-off-by-one",
        TRAIN,
        RATIO,
        "ratio = (step - warmup_steps) / (max_steps - warmup_steps - 1)",
        "lr-schedule",
        "the cosine reaches min_lr one step early",
    ),
    Variant(
        "warmup-from-min-lr",
        TRAIN,
        WARMUP,
        "return min_lr + (max_lr - min_lr) * (step + 1) / warmup_steps",
        "lr-schedule",
        "the warmup climbs from min_lr instead of from 0",
    ),
    Variant(
        "ratio-integer-division",
        TRAIN,
        RATIO,
        "ratio = (step - warmup_steps) // (max_steps - warmup_steps)",
        "lr-schedule",
        "// instead of /: the ratio stays 0 and the cosine never decays",
    ),
    Variant(
        "warmup-without-plus-one",
        TRAIN,
        WARMUP,
        "return max_lr * step / warmup_steps",
        "lr-schedule",
        "step 0 gets rate 0",
    ),
    Variant(
        "warmup-inclusive",
        TRAIN,
        "if step < warmup_steps:",
        "if step <= warmup_steps:",
        "lr-schedule",
        "warmup formula also at step == warmup_steps",
    ),
    Variant(
        "cosine-without-half",
        TRAIN,
        COEFF,
        "coeff = 1.0 + math.cos(math.pi * ratio)",
        "lr-schedule",
        "forgets the 0.5: starts at twice the range",
    ),
    Variant(
        "linear-decay", TRAIN, COEFF, "coeff = 1.0 - ratio", "lr-schedule", "linear instead of cosine decay"
    ),
    Variant(
        "ratio-ignores-warmup",
        TRAIN,
        RATIO,
        "ratio = step / max_steps",
        "lr-schedule",
        "the cosine starts at step 0 instead of warmup_steps",
    ),
    Variant(
        "decays-to-zero",
        TRAIN,
        "return min_lr + coeff * (max_lr - min_lr)",
        "return coeff * max_lr",
        "lr-schedule",
        "the cosine ends at 0, not at min_lr",
    ),
    Variant(
        "no-floor-after-max",
        TRAIN,
        AFTER_MAX,
        "",
        "lr-schedule",
        "the cosine goes on after max_steps and climbs again",
    ),
    Variant(
        "min-lr-hardcoded",
        TRAIN,
        "return min_lr + coeff * (max_lr - min_lr)",
        "return 0.1 * max_lr + coeff * (max_lr - 0.1 * max_lr)",
        "lr-schedule",
        "nanoGPT's min_lr = max_lr / 10 instead of the min_lr argument",
    ),
    # ---- TODO [zero-grad]
    Variant("no-zero-grad", TRAIN, ZERO, "", "zero-grad", "gradients accumulate across steps"),
    Variant(
        "zero-grad-not-called",
        TRAIN,
        "optimizer.zero_grad(set_to_none=True)",
        "optimizer.zero_grad",
        "zero-grad",
        "the method is named but never called",
    ),
    Variant(
        "zero-grad-after-backward",
        TRAIN,
        ZERO + "    _, loss = model(x, y)",
        "    _, loss = model(x, y)",
        "zero-grad",
        "zeroes after backward: step() sees no gradient",
        also=((BACKWARD, BACKWARD + "    optimizer.zero_grad(set_to_none=True)\n"),),
    ),
    Variant(
        "zero-grad-one-group",
        TRAIN,
        ZERO,
        '    for p in optimizer.param_groups[0]["params"]:\n        p.grad = None\n',
        "zero-grad",
        "drops the gradients of the optimizer's first group only: seen with the learner's own two-group AdamW",
    ),
    Variant(
        "zero-weights-not-grads",
        TRAIN,
        ZERO,
        "    with torch.no_grad():\n        for p in model.parameters():\n            p.zero_()\n",
        "zero-grad",
        "zeroes the weights instead of their gradients: the clipping checks wait on zero-grad",
    ),
    Variant(
        "grad-accumulation-unscaled",
        TRAIN,
        ZERO,
        "    optimizer.zero_grad(set_to_none=True)\n"
        "    for xm, ym in zip(x.split(2), y.split(2)):\n"
        "        _, part = model(xm, ym)\n"
        "        part.backward()\n",
        "zero-grad",
        "micro-batches of 2 and 1 whose losses are summed unscaled: same clipped norm, other direction",
        also=((FORWARD_BACKWARD, "    with torch.no_grad():\n        _, loss = model(x, y)\n"),),
    ),
    Variant(
        "grad-accumulation-per-sequence",
        TRAIN,
        ZERO,
        "    optimizer.zero_grad(set_to_none=True)\n"
        "    for xm, ym in zip(x, y):\n"
        "        _, part = model(xm[None], ym[None])\n"
        "        part.backward()\n",
        "zero-grad",
        "one sequence at a time, losses unscaled: the gradient is B times the batch's, clipped or not",
        also=((FORWARD_BACKWARD, "    with torch.no_grad():\n        _, loss = model(x, y)\n"),),
    ),
    # ---- TODO [grad-clip]
    Variant(
        "clip-max-norm",
        TRAIN,
        CLIP_CALL,
        'torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip, norm_type=float("inf"))',
        "grad-clip",
        "norm_type=inf: clips by the largest component, not the 2-norm",
    ),
    Variant(
        "clip-hardcoded-one",
        TRAIN,
        CLIP_CALL,
        "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)",
        "grad-clip",
        "clips to 1.0 whatever grad_clip says",
    ),
    Variant(
        "clip-before-backward",
        TRAIN,
        BACKWARD + CLIP_BLOCK,
        CLIP_BLOCK + BACKWARD,
        "grad-clip",
        "clips before backward(): there is nothing to clip yet",
    ),
    Variant(
        "clip-ge-zero",
        TRAIN,
        "    if grad_clip > 0:\n",
        "    if grad_clip >= 0:\n",
        "grad-clip",
        ">= 0: grad_clip = 0 clips to a norm of 0",
    ),
    Variant(
        "clip-if-not-none",
        TRAIN,
        "    if grad_clip > 0:\n",
        "    if grad_clip is not None:\n",
        "grad-clip",
        "tests for None: grad_clip = 0 clips to a norm of 0",
    ),
    Variant(
        "clip-by-value",
        TRAIN,
        CLIP_CALL,
        "torch.nn.utils.clip_grad_value_(model.parameters(), grad_clip)",
        "grad-clip",
        "clamps each component instead of the global norm",
    ),
    Variant(
        "clip-each-parameter",
        TRAIN,
        CLIP_CALL,
        "for p in model.parameters():\n            torch.nn.utils.clip_grad_norm_(p, grad_clip)",
        "grad-clip",
        "clips each parameter's norm on its own",
    ),
    Variant(
        "clip-after-step",
        TRAIN,
        CLIP_BLOCK + "    optimizer.step()\n",
        "    optimizer.step()\n" + CLIP_BLOCK,
        "grad-clip",
        "clips after the update, when it no longer matters",
    ),
    Variant(
        "clip-even-when-zero",
        TRAIN,
        "    if grad_clip > 0:\n",
        "    if True:\n",
        "grad-clip",
        "grad_clip = 0 clips to a norm of 0",
    ),
    Variant(
        "clip-always-rescales",
        TRAIN,
        CLIP_CALL,
        "total = torch.sqrt(sum((p.grad ** 2).sum() for p in model.parameters()))\n"
        "        for p in model.parameters():\n"
        "            p.grad.mul_(grad_clip / total)",
        "grad-clip",
        "rescales to grad_clip even a smaller gradient",
    ),
    Variant(
        "clip-twice",
        TRAIN,
        CLIP_CALL,
        CLIP_CALL + "\n        " + CLIP_CALL,
        "grad-clip",
        "clips twice: the second clip_grad_norm_ shortens the step again by 1e-6 / grad_clip",
    ),
    Variant(
        "clip-one-group",
        TRAIN,
        CLIP_CALL,
        'torch.nn.utils.clip_grad_norm_(optimizer.param_groups[0]["params"], grad_clip)',
        "grad-clip",
        "clips the optimizer's first group only: seen with the learner's own two-group AdamW",
    ),
    # ---- train_step's return value (no TODO)
    Variant(
        "returns-loss-tensor",
        TRAIN,
        STEP,
        "    optimizer.step()\n    return loss\n",
        None,
        "returns the loss tensor, not a float",
    ),
    Variant(
        "returns-loss-after-step",
        TRAIN,
        STEP,
        "    optimizer.step()\n    with torch.no_grad():\n        return model(x, y)[1].item()\n",
        None,
        "returns the loss after the update",
    ),
    # ---- TODO [eval-mode]
    Variant("no-eval", TRAIN, EVAL, "", "eval-mode", "measures with dropout on"),
    Variant("mode-not-restored", TRAIN, RESTORE, "", "eval-mode", "leaves the model in eval mode"),
    Variant(
        "always-back-to-train",
        TRAIN,
        RESTORE,
        "    model.train()\n",
        "eval-mode",
        "puts a model that was in eval back in train",
    ),
    Variant(
        "training-flag-by-hand",
        TRAIN,
        EVAL,
        "    model.training = False\n",
        "eval-mode",
        "sets the attribute: the submodules' dropout stays on",
        also=((RESTORE, "    model.training = was_training\n"),),
    ),
    Variant(
        "no-no-grad",
        TRAIN,
        NO_GRAD_LOOP,
        "    for x, y in batches:\n        _, loss = model(x, y)\n        losses.append(loss.item())\n",
        "eval-mode",
        "builds an autograd graph while measuring",
    ),
    Variant(
        "grad-disabled-for-good",
        TRAIN,
        NO_GRAD_LOOP,
        "    torch.set_grad_enabled(False)\n"
        "    for x, y in batches:\n"
        "        _, loss = model(x, y)\n"
        "        losses.append(loss.item())\n",
        "eval-mode",
        "switches autograd off for the whole program",
    ),
    Variant(
        "mode-saved-after-eval",
        TRAIN,
        EVAL,
        "",
        "eval-mode",
        "saves the mode after model.eval(): it always restores eval",
        also=(("    was_training = model.training", "    model.eval()\n    was_training = model.training"),),
    ),
    Variant(
        "mode-restored-in-loop",
        TRAIN,
        "            losses.append(loss.item())\n",
        "            losses.append(loss.item())\n            model.train(was_training)\n",
        "eval-mode",
        "restores the mode inside the loop: from the second batch on, dropout is on",
        also=((RESTORE, ""),),
    ),
    Variant(
        "estimate-len-batches",
        TRAIN,
        MEAN,
        "return sum(losses) / len(batches)",
        "eval-mode",
        "len(batches): train() passes a generator, which has no len()",
    ),
    Variant(
        "no-grad-not-entered",
        TRAIN,
        NO_GRAD_LOOP,
        "    torch.no_grad()  # called, but never entered with `with`\n"
        "    for x, y in batches:\n"
        "        _, loss = model(x, y)\n"
        "        losses.append(loss.item())\n",
        "eval-mode",
        "calls torch.no_grad() without `with`: autograd stays on",
    ),
    Variant(
        "estimate-sum", TRAIN, MEAN, "return sum(losses)", "eval-mode", "the sum of the losses, not the mean"
    ),
    Variant(
        "estimate-over-batch-size",
        TRAIN,
        MEAN,
        "return sum(losses) / x.shape[0]",
        "eval-mode",
        "divides by the last batch's size, not by the number of batches",
    ),
    Variant(
        "estimate-tensor",
        TRAIN,
        "losses.append(loss.item())",
        "losses.append(loss)",
        "eval-mode",
        "averages tensors and returns a tensor",
    ),
]


# --------------------------------------------------------------------------- correct

CORRECT: list[Variant] = [
    Variant(
        "named-parameters-dict",
        TRAIN,
        PARAMS + "\n",
        "param_dict = {name: p for name, p in model.named_parameters() if p.requires_grad}\n"
        "    params = list(param_dict.values())\n",
        note="nanoGPT's dict of named parameters, split by dim",
    ),
    Variant(
        "lr-clamped-ratio",
        TRAIN,
        AFTER_MAX + "    " + RATIO + "\n    " + COEFF + "\n    return min_lr + coeff * (max_lr - min_lr)\n",
        "    ratio = min(1.0, (step - warmup_steps) / (max_steps - warmup_steps))\n"
        "    cosine = torch.cos(torch.tensor(math.pi * ratio))  # float32\n"
        "    return min_lr + 0.5 * (max_lr - min_lr) * (1.0 + cosine.item())\n",
        note="one cosine branch with the ratio clamped at 1, computed in float32 with torch",
    ),
    Variant(
        "zero-grad-at-the-end",
        TRAIN,
        ZERO,
        "",
        note="zeroes after step(), like nanoGPT: the next step starts clean",
        also=((STEP, "    optimizer.step()\n    optimizer.zero_grad()\n    return loss.item()\n"),),
    ),
    Variant(
        "model-zero-grad",
        TRAIN,
        "optimizer.zero_grad(set_to_none=True)",
        "model.zero_grad()",
        note="zeroes through the model instead of the optimizer",
    ),
    Variant(
        "manual-clip",
        TRAIN,
        CLIP_CALL,
        "grads = [p.grad for p in model.parameters() if p.grad is not None]\n"
        "        total = torch.sqrt(sum((g * g).sum() for g in grads))\n"
        "        if total > grad_clip:\n"
        "            for g in grads:\n"
        "                g.mul_(grad_clip / total)",
        note="the global norm computed by hand, without clip_grad_norm_'s epsilon",
    ),
    Variant(
        "estimate-inference-mode",
        TRAIN,
        NO_GRAD_LOOP + RESTORE,
        "    with torch.inference_mode():\n"
        "        losses = torch.stack([model(x, y)[1] for x, y in batches])\n"
        "    if was_training:\n"
        "        model.train()\n"
        "    return losses.mean().item()\n",
        note="inference_mode, a stacked mean, and the mode restored with an if",
    ),
    Variant(
        "groups-by-ndim",
        TRAIN,
        SPLIT,
        "    decay = [p for p in params if p.ndim >= 2]\n    no_decay = [p for p in params if p.ndim < 2]\n",
        note="Tensor.ndim instead of dim()",
    ),
    Variant(
        "adamw-extra-options",
        TRAIN,
        ADAMW,
        "return torch.optim.AdamW(groups, lr=learning_rate, betas=betas, eps=1e-8, foreach=False)",
        note="AdamW with its eps spelled out and foreach=False",
    ),
    Variant(
        "after-max-strict",
        TRAIN,
        "    if step >= max_steps:\n",
        "    if step > max_steps:\n",
        note="build-nanogpt's `it > max_steps`: at max_steps the cosine gives min_lr anyway",
    ),
    Variant(
        "warmup-slope",
        TRAIN,
        WARMUP,
        "return (step + 1) * (max_lr / warmup_steps)",
        note="the warmup as a slope times the step",
    ),
    Variant(
        "zero-grad-keep-tensors",
        TRAIN,
        "optimizer.zero_grad(set_to_none=True)",
        "optimizer.zero_grad(set_to_none=False)",
        note="zeroes the .grad tensors instead of dropping them",
    ),
    Variant(
        "manual-zero-grad",
        TRAIN,
        ZERO,
        "    for p in model.parameters():\n        p.grad = None\n",
        note="drops every .grad by hand",
    ),
    Variant(
        "clip-keyword-list",
        TRAIN,
        CLIP_CALL,
        "torch.nn.utils.clip_grad_norm_(list(model.parameters()), max_norm=grad_clip, norm_type=2.0)",
        note="a list of parameters, max_norm and norm_type by keyword",
    ),
    Variant(
        "estimate-running-mean",
        TRAIN,
        NO_GRAD_LOOP + RESTORE + "    " + MEAN,
        "    total, count = 0.0, 0\n"
        "    with torch.set_grad_enabled(False):\n"
        "        for x, y in batches:\n"
        "            total += model(x, y)[1].item()\n"
        "            count += 1\n"
        "    model.train(was_training)\n"
        "    return total / count",
        note="a running sum and count under set_grad_enabled(False)",
    ),
    Variant(
        "estimate-try-finally",
        TRAIN,
        NO_GRAD_LOOP + RESTORE + "    " + MEAN,
        "    try:\n"
        "        with torch.no_grad():\n"
        "            losses = [model(x, y)[1].item() for x, y in batches]\n"
        "    finally:\n"
        "        model.train(was_training)\n"
        "    return float(torch.tensor(losses, dtype=torch.float64).mean())",
        note="the mode restored in a finally, the mean taken with torch",
    ),
    Variant(
        "estimate-stack-mean",
        TRAIN,
        "losses.append(loss.item())",
        "losses.append(loss)",
        note="keeps the loss tensors (made under no_grad) and takes their mean with torch",
        also=((MEAN, "return torch.stack(losses).mean().item()"),),
    ),
    Variant(
        "grad-accumulation-scaled",
        TRAIN,
        ZERO,
        "    optimizer.zero_grad(set_to_none=True)\n"
        "    for xm, ym in zip(x.split(2), y.split(2)):\n"
        "        _, part = model(xm, ym)\n"
        "        (part * (len(xm) / len(x))).backward()\n",
        note="micro-batches of 2 and 1, each part's loss scaled by its share: the batch's gradient",
        also=((FORWARD_BACKWARD, "    with torch.no_grad():\n        _, loss = model(x, y)\n"),),
    ),
    Variant(
        "estimate-fsum", TRAIN, MEAN, "return math.fsum(losses) / len(losses)", note="math.fsum for the sum"
    ),
    Variant(
        "step-returns-float",
        TRAIN,
        STEP,
        "    optimizer.step()\n    return float(loss)\n",
        note="float(loss) instead of loss.item()",
    ),
]

# The practice agreement sample (tests/lessons/test_practice_agreement.py): buggy variants whose
# diagnosis the recording answers, so practice and official grading must tell the same story.
# Each diagnosis comes from a different recorded call: clip-by-value from the clipping
# candidates (clip_case), returns-loss-after-step from the loss at the learner's updated weights
# (recorded for the right update), warmup-nanogpt from the schedule's known mistakes (lr_table).
PRACTICE_SAMPLE = ("clip-by-value", "returns-loss-after-step", "warmup-nanogpt")
