"""Lesson 04 (model.py) probes: MLP, the pre-norm Block and the GPT, built as the lesson builds
them (with the lesson-03 attention found beside it under the same root).

Probe space:
- configs (vocab_size, block_size, n_layer, n_head, n_embd, dropout): (11, 8, 2, 3, 12, 0)
  with n_head > n_layer, (13, 6, 3, 2, 10, 0.1) with n_head < n_layer and n_embd not a power
  of 2, (9, 7, 4, 1, 6, 0.2) with one head and four layers; seeds 0 and 1 for the first.
- MLP: its layers (names, types, GELU's approximation, dropout p, parameter shapes); y in eval
  mode and, with dropout > 0, in train mode under a fixed torch seed; gradients of x and of
  every parameter for a fixed random projection of y.
- Block: the same outputs, plus what reaches attn and mlp (pre-norm) on each call.
- GPT built under a seed: parameter names and shapes, num_params(), whether lm_head.weight IS
  transformer.wte.weight, state_dict keys, each parameter's standard deviation and then its
  values (the init), the loss at init; forward with B = 3 and T < block_size, T = 1,
  T = block_size, with and without targets, eval and (dropout > 0) train mode under a fixed
  seed; gradients of every parameter after loss.backward(); T > block_size (the provided
  assert); float64 (model.double()): logits' dtype and values.
"""

from __future__ import annotations

import torch

from bench.mutation.oracle.probing import capture_inputs, gen, grads_by_name, load_modules

CONFIGS = {
    # name: (vocab_size, block_size, n_layer, n_head, n_embd, dropout)
    "V=11 bs=8 L=2 nh=3 C=12": (11, 8, 2, 3, 12, 0.0),
    "V=13 bs=6 L=3 nh=2 C=10 p=0.1": (13, 6, 3, 2, 10, 0.1),
    "V=9 bs=7 L=4 nh=1 C=6 p=0.2": (9, 7, 4, 1, 6, 0.2),
}


def load(folder):
    return load_modules(folder, ["model"])


def _cfg(lesson, name):
    v, bs, n_layer, n_head, n_embd, dropout = CONFIGS[name]
    return lesson.model.GPTConfig(
        vocab_size=v, block_size=bs, n_layer=n_layer, n_head=n_head, n_embd=n_embd, dropout=dropout
    )


def _structure(module, out):
    out["modules"] = [(name, type(m).__name__) for name, m in module.named_modules()]
    out["parameters"] = [(name, tuple(p.shape)) for name, p in module.named_parameters()]
    out["gelu approximate"] = [m.approximate for m in module.modules() if isinstance(m, torch.nn.GELU)]
    out["dropout p"] = [m.p for m in module.modules() if isinstance(m, torch.nn.Dropout)]


def _forward_backward(module, x, w, tag, out, train_seed=None):
    module.zero_grad(set_to_none=True)
    module.train(train_seed is not None)
    x = x.detach().clone().requires_grad_(True)
    if train_seed is not None:
        torch.manual_seed(train_seed)
    y = module(x)
    out[f"{tag} y"] = y
    (y * w).sum().backward()
    out[f"{tag} x.grad"] = x.grad
    out[f"{tag} grads"] = grads_by_name(module)


def probe_mlp(config, seed, lesson, out):
    cfg = _cfg(lesson, config)
    torch.manual_seed(seed)
    mlp = lesson.model.MLP(cfg)
    _structure(mlp, out)
    x = torch.randn(3, 5, cfg.n_embd, generator=gen(seed + 10))
    w = torch.randn(3, 5, cfg.n_embd, generator=gen(seed + 20))
    _forward_backward(mlp, x, w, "eval", out)
    if cfg.dropout > 0:
        _forward_backward(mlp, x, w, "train", out, train_seed=seed + 30)


def probe_block(config, t, seed, lesson, out):
    cfg = _cfg(lesson, config)
    torch.manual_seed(seed)
    block = lesson.model.Block(cfg)
    _structure(block, out)
    attn_in, mlp_in = capture_inputs(block.attn), capture_inputs(block.mlp)
    x = torch.randn(3, t, cfg.n_embd, generator=gen(seed + 10))
    w = torch.randn(3, t, cfg.n_embd, generator=gen(seed + 20))
    _forward_backward(block, x, w, "eval", out)
    if cfg.dropout > 0:
        _forward_backward(block, x, w, "train", out, train_seed=seed + 30)
    out["attn inputs"] = attn_in
    out["mlp inputs"] = mlp_in


def probe_gpt_init(config, seed, lesson, out):
    cfg = _cfg(lesson, config)
    torch.manual_seed(seed)
    model = lesson.model.GPT(cfg)
    out["parameters"] = [(name, tuple(p.shape)) for name, p in model.named_parameters()]
    out["num_params"] = model.num_params()
    out["tied"] = model.lm_head.weight is model.transformer.wte.weight
    out["state_dict keys"] = sorted(model.state_dict().keys())
    named = dict(model.named_parameters(remove_duplicate=False))
    out["init std"] = {
        name: float(p.detach().double().std()) if p.numel() > 1 else 0.0 for name, p in named.items()
    }
    out["init mean"] = {name: float(p.detach().double().mean()) for name, p in named.items()}
    out["init values"] = {name: p for name, p in named.items()}
    idx = torch.randint(cfg.vocab_size, (4, cfg.block_size), generator=gen(seed + 1))
    targets = torch.randint(cfg.vocab_size, (4, cfg.block_size), generator=gen(seed + 2))
    model.eval()
    out["loss at init"] = model(idx, targets)[1]


def probe_gpt_forward(config, t, seed, lesson, out):
    cfg = _cfg(lesson, config)
    torch.manual_seed(seed)
    model = lesson.model.GPT(cfg)
    idx = torch.randint(cfg.vocab_size, (3, t), generator=gen(seed + 3))
    targets = torch.randint(cfg.vocab_size, (3, t), generator=gen(seed + 4))
    model.eval()
    logits, loss = model(idx)
    out["eval logits"] = logits
    out["eval loss without targets"] = loss
    logits, loss = model(idx, targets)
    out["eval loss"] = loss
    loss.backward()
    out["eval grads"] = grads_by_name(model)
    if cfg.dropout > 0:
        model.zero_grad(set_to_none=True)
        model.train()
        torch.manual_seed(seed + 30)
        logits, loss = model(idx, targets)
        out["train logits"] = logits
        out["train loss"] = loss
        loss.backward()
        out["train grads"] = grads_by_name(model)


def probe_gpt_too_long(lesson, out):
    cfg = _cfg(lesson, "V=11 bs=8 L=2 nh=3 C=12")
    model = lesson.model.GPT(cfg)
    out["logits"] = model(torch.zeros(1, 9, dtype=torch.long))[0]


def probe_gpt_float64(lesson, out):
    cfg = _cfg(lesson, "V=13 bs=6 L=3 nh=2 C=10 p=0.1")
    torch.manual_seed(4)
    model = lesson.model.GPT(cfg).double().eval()
    idx = torch.randint(cfg.vocab_size, (2, 4), generator=gen(9))
    logits, loss = model(idx, idx)
    out["logits"] = logits
    out["loss"] = loss


def _bind(fn, *args):
    return lambda lesson, out: fn(*args, lesson, out)


def probes():
    first = "V=11 bs=8 L=2 nh=3 C=12"
    for config in CONFIGS:
        seeds = (0, 1) if config == first else (0,)
        for seed in seeds:
            yield f"MLP {config} seed={seed}", _bind(probe_mlp, config, seed)
            yield f"GPT init {config} seed={seed}", _bind(probe_gpt_init, config, seed)
        bs = CONFIGS[config][1]
        for t in (bs - 2, 1, bs):
            yield f"Block {config} T={t}", _bind(probe_block, config, t, 0)
            yield f"GPT forward {config} T={t}", _bind(probe_gpt_forward, config, t, 0)
    yield f"GPT forward {first} T=5 seed=1", _bind(probe_gpt_forward, first, 5, 1)
    yield "GPT T > block_size", probe_gpt_too_long
    yield "GPT float64", probe_gpt_float64
