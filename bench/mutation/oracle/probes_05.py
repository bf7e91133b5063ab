"""Lesson 05 (train.py) probes: configure_optimizer, get_lr, train_step, estimate_loss and
train, driven on the lesson-04 GPT found under the same root and on a small model with every
kind of parameter.

Probe space:
- models: GPT (11, 8, 2, 3, 12, dropout 0.1) as (vocab, block_size, n_layer, n_head, n_embd,
  dropout), the lm_head tied to wte; and a toy model holding 2-D (Linear, Embedding), 3-D
  (Conv1d), 1-D (biases, LayerNorm) and 0-D (a scalar) parameters, a frozen Linear and a
  Dropout(0.3), every trainable parameter used by its loss.
- configure_optimizer with the defaults and with (weight_decay 0.05, learning_rate 3e-3, betas
  (0.8, 0.99)): the optimizer's class, its groups in order (parameter names in order,
  weight_decay, lr, betas, eps and the other options) and defaults; frozen parameters in none.
- train_step with the two-group AdamW the lesson builds and with a one-group SGD, three steps
  each, grad_clip in {1.0, 0 (off), 0.05 (always clips), 100 (never clips)}, stale gradients
  already in .grad before the first step (accumulated from another batch), train mode with
  dropout > 0 under a fixed torch seed before each step. Outputs: each returned loss (value and
  type), the gradients after each step (clipped ones show), every parameter after the last step,
  the model's and every submodule's training flag afterwards.
- estimate_loss from train mode and from eval mode, batches as a list and as a generator (no
  len()): the value and its type, the mode and every submodule's flag afterwards, and on each
  forward call whether grad mode was on and whether the model was training; no .grad is made.
- get_lr over (max_lr, min_lr, warmup_steps, max_steps) in {(1e-3, 1e-4, 10, 100),
  (6e-4, 6e-5, 3, 7), (1.0, 0.0, 1, 5), (0.5, 0.1, 0, 4), (2e-3, 2e-3, 2, 6)} for steps from 0
  to past max_steps: the value and its type.
- train(): 7 steps on the GPT with eval_every=3, eval_batches=2, batches from a seeded
  generator: the losses, the log lines (text with the numbers taken out, and the numbers), the
  groups' lr at the end, the parameters at the end, every grad_clip train_step was given.
"""

from __future__ import annotations

import re

import torch
import torch.nn as nn
import torch.nn.functional as F

from bench.mutation.oracle.probe import patch
from bench.mutation.oracle.probing import gen, grads_by_name, load_modules, params_by_name, training_flags

GPT_SHAPE = dict(vocab_size=11, block_size=8, n_layer=2, n_head=3, n_embd=12, dropout=0.1)


def load(folder):
    return load_modules(folder, ["train"])


class Toy(nn.Module):
    """Every kind of parameter: 2-D, 3-D, 1-D, 0-D, and a frozen layer; model(x, y) -> (logits,
    loss) like the GPT."""

    def __init__(self, vocab=9):
        super().__init__()
        self.emb = nn.Embedding(vocab, 6)  # 2-D
        self.conv = nn.Conv1d(6, 6, 3, padding=1)  # 3-D weight, 1-D bias
        self.frozen = nn.Linear(6, 6)
        self.frozen.requires_grad_(False)
        self.ln = nn.LayerNorm(6)  # 1-D weight and bias
        self.drop = nn.Dropout(0.3)
        self.head = nn.Linear(6, vocab)  # 2-D weight, 1-D bias
        self.scale = nn.Parameter(torch.tensor(1.5))  # 0-D

    def forward(self, idx, targets=None):
        x = self.emb(idx)  # (B, T, 6)
        x = x + self.conv(x.transpose(1, 2)).transpose(1, 2)
        x = self.ln(self.drop(self.frozen(x)) + x)
        logits = self.head(x) * self.scale
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss


def _model(lesson, kind, seed):
    torch.manual_seed(seed)
    if kind == "gpt":
        return (
            lesson.train.GPT(lesson.train.GPTConfig(**GPT_SHAPE)),
            GPT_SHAPE["vocab_size"],
            GPT_SHAPE["block_size"],
        )
    return Toy(), 9, 5


def _batch(vocab, t, seed, b=4):
    g = gen(seed)
    return torch.randint(vocab, (b, t), generator=g), torch.randint(vocab, (b, t), generator=g)


def _groups(model, optimizer, out):
    names = {id(p): n for n, p in model.named_parameters()}
    out["class"] = type(optimizer).__name__
    out["group count"] = len(optimizer.param_groups)
    for i, group in enumerate(optimizer.param_groups):
        out[f"group {i} params"] = [
            names.get(id(p), "<not a parameter of the model>") for p in group["params"]
        ]
        out[f"group {i} options"] = {k: v for k, v in group.items() if k != "params"}
    out["defaults"] = {k: v for k, v in optimizer.defaults.items() if k != "params"}


def probe_optimizer(kind, kwargs, lesson, out):
    model, _, _ = _model(lesson, kind, 0)
    opt = lesson.train.configure_optimizer(model, **kwargs)
    _groups(model, opt, out)


def probe_steps(kind, optim, clips, stale, lesson, out):
    model, vocab, t = _model(lesson, kind, 1)
    if optim == "adamw":
        opt = lesson.train.configure_optimizer(model, weight_decay=0.1, learning_rate=1e-2)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
    model.train()
    if stale:
        # Gradients already accumulated from another batch: the step must not add to them.
        x, y = _batch(vocab, t, 99)
        model(x, y)[1].backward()
        model(x, y)[1].backward()
    for step, clip in enumerate(clips):
        x, y = _batch(vocab, t, 10 + step)
        torch.manual_seed(50 + step)
        loss = lesson.train.train_step(model, opt, x, y, grad_clip=clip)
        out[f"step {step} loss"] = loss
        out[f"step {step} grads"] = grads_by_name(model)
    out["parameters after"] = params_by_name(model)
    out["training flags after"] = training_flags(model)


def probe_step_default_clip(lesson, out):
    model, vocab, t = _model(lesson, "toy", 2)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    x, y = _batch(vocab, t, 3)
    model.eval()
    out["loss"] = lesson.train.train_step(model, opt, x, y)
    out["grads"] = grads_by_name(model)
    out["parameters after"] = params_by_name(model)
    out["training after"] = model.training


def probe_estimate(kind, start_training, as_generator, lesson, out):
    model, vocab, t = _model(lesson, kind, 3)
    model.train(start_training)
    seen = []
    model.register_forward_pre_hook(lambda m, _a: seen.append((torch.is_grad_enabled(), m.training)))
    batches = [_batch(vocab, t, 20 + i, b=3) for i in range(3)]
    source = (b for b in batches) if as_generator else batches
    torch.manual_seed(7)
    value = lesson.train.estimate_loss(model, source)
    out["value"] = value
    out["forward calls (grad enabled, training)"] = seen
    out["training after"] = model.training
    out["flags after"] = training_flags(model)
    out["grads made"] = [n for n, p in model.named_parameters() if p.grad is not None]
    out["grad mode after"] = torch.is_grad_enabled()


LR_CASES = [
    (1e-3, 1e-4, 10, 100),
    (6e-4, 6e-5, 3, 7),
    (1.0, 0.0, 1, 5),
    (0.5, 0.1, 0, 4),
    (2e-3, 2e-3, 2, 6),
]


def probe_lr(case, lesson, out):
    max_lr, min_lr, warmup, max_steps = case
    steps = sorted(
        set(range(0, min(max_steps, 14) + 3))
        | {max_steps // 2, max_steps - 1, max_steps, max_steps + 1, max_steps * 2}
    )
    for step in steps:
        out[f"step {step}"] = lesson.train.get_lr(
            step, max_lr=max_lr, min_lr=min_lr, warmup_steps=warmup, max_steps=max_steps
        )


def probe_train(lesson, out):
    model, vocab, t = _model(lesson, "gpt", 4)
    data = torch.randint(vocab, (200,), generator=gen(5))
    g = gen(6)

    def get_batch(split):
        part = data[:150] if split == "train" else data[150:]
        ix = torch.randint(len(part) - t, (4,), generator=g)
        return torch.stack([part[i : i + t] for i in ix]), torch.stack([part[i + 1 : i + t + 1] for i in ix])

    made = []
    original = lesson.train.configure_optimizer

    def keep(*args, **kwargs):
        made.append(original(*args, **kwargs))
        return made[-1]

    patch(lesson.train, "configure_optimizer", keep)
    clips = []
    step_fn = lesson.train.train_step

    def step(model, optimizer, x, y, grad_clip=1.0):
        clips.append(grad_clip)
        return step_fn(model, optimizer, x, y, grad_clip)

    patch(lesson.train, "train_step", step)
    logs = []
    torch.manual_seed(8)
    losses = lesson.train.train(
        model,
        get_batch,
        steps=7,
        learning_rate=1e-2,
        min_lr=1e-3,
        warmup_steps=2,
        eval_every=3,
        eval_batches=2,
        log=logs.append,
    )
    out["losses"] = losses
    out["log text"] = [re.sub(r"[-+]?\d[\d.e+-]*", "#", str(line)) for line in logs]
    out["log numbers"] = [
        [float(n) for n in re.findall(r"[-+]?\d+\.\d+(?:e[-+]?\d+)?", str(line))] for line in logs
    ]
    out["optimizers made"] = len(made)
    out["final lrs"] = [group["lr"] for group in made[0].param_groups] if made else None
    out["grad_clip given"] = clips
    out["parameters after"] = params_by_name(model)
    out["training after"] = model.training


def _bind(fn, *args):
    return lambda lesson, out: fn(*args, lesson, out)


def probes():
    for kind in ("gpt", "toy"):
        yield f"configure_optimizer {kind} defaults", _bind(probe_optimizer, kind, {})
        yield (
            f"configure_optimizer {kind} wd=0.05 lr=3e-3 betas=(0.8, 0.99)",
            _bind(probe_optimizer, kind, dict(weight_decay=0.05, learning_rate=3e-3, betas=(0.8, 0.99))),
        )
    for kind in ("gpt", "toy"):
        for optim in ("adamw", "sgd"):
            yield (
                f"train_step {kind} {optim} clips 1, 0, 0.05",
                _bind(probe_steps, kind, optim, (1.0, 0.0, 0.05), False),
            )
            yield (
                f"train_step {kind} {optim} stale grads, clips 100, 1",
                _bind(probe_steps, kind, optim, (100.0, 1.0), True),
            )
    yield "train_step default grad_clip, eval mode", probe_step_default_clip
    for kind in ("gpt", "toy"):
        for start in (True, False):
            for as_gen in (False, True):
                yield (
                    f"estimate_loss {kind} from {'train' if start else 'eval'}{' generator' if as_gen else ''}",
                    _bind(probe_estimate, kind, start, as_gen),
                )
    for case in LR_CASES:
        yield (
            f"get_lr max_lr={case[0]} min_lr={case[1]} warmup={case[2]} max_steps={case[3]}",
            _bind(probe_lr, case),
        )
    yield "train 7 steps", probe_train
