"""Lesson 04's catalog of variant submissions (see tests/support/variants.py for the rules), used to
prove its hidden graders. Each variant edits solutions/04-bloque-transformer/model.py with its
region markers stripped. A plain module: tests/lessons/test_variants.py grades every variant.

The variants are graded alone, without sibling lesson folders, so the informational
`own-pieces` check is skipped for them; the graders' worker holds the reference attention.
"""

from __future__ import annotations

from support.variants import Variant

MODEL = "model.py"


# --------------------------------------------------------------------------- fragments
# Exact lines of the marker-stripped solution that several variants edit.

C_FC = "self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)"
C_PROJ = "self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)"
GELU = "self.gelu = nn.GELU()"
DROPOUT = "self.dropout = nn.Dropout(cfg.dropout)"
MLP_GELU = "        x = self.gelu(x)\n"
MLP_RETURN = "return self.dropout(x)"
MLP_FORWARD = """\
        x = self.c_fc(x)  # (B, T, 4C)
        x = self.gelu(x)
        x = self.c_proj(x)  # (B, T, C)
        return self.dropout(x)
"""
ATTN = "a = self.attn(self.ln_1(x))"
RES_1 = "x = x + a  # (B, T, C)"
MLP_CALL = "m = self.mlp(self.ln_2(x))"
RES_2 = "x = x + m  # (B, T, C)"
BLOCK = f"""\
        {ATTN}
        {RES_1}
        {MLP_CALL}
        {RES_2}
"""
TIE = "self.transformer.wte.weight = self.lm_head.weight"
APPLY = "        self.apply(self._init_weights)\n"
RESCALE_LOOP = """\
        for name, p in self.named_parameters():
            if name.endswith("proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))
"""
RESCALE_IF = 'if name.endswith("proj.weight"):'
RESCALE_STD = "std=0.02 / math.sqrt(2 * cfg.n_layer)"


# --------------------------------------------------------------------------- buggy

BUGGY: list[Variant] = [
    # ---- TODO [mlp]
    Variant("mlp-relu", MODEL, GELU, "self.gelu = nn.ReLU()", "mlp", "ReLU instead of GELU"),
    Variant(
        "mlp-gelu-tanh",
        MODEL,
        GELU,
        'self.gelu = nn.GELU(approximate="tanh")',
        "mlp",
        "the tanh approximation of GELU (GPT-2's), not the exact one",
    ),
    Variant(
        "mlp-no-widening",
        MODEL,
        C_FC,
        "self.c_fc = nn.Linear(cfg.n_embd, cfg.n_embd)",
        "mlp",
        "a hidden layer of C channels instead of 4C",
        also=((C_PROJ, "self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)"),),
    ),
    Variant(
        "mlp-no-activation",
        MODEL,
        MLP_GELU,
        "",
        "mlp",
        "defines gelu but never applies it: two linear layers in a row",
    ),
    Variant(
        "mlp-gelu-after-proj",
        MODEL,
        MLP_FORWARD,
        """\
        x = self.c_proj(self.c_fc(x))
        return self.dropout(self.gelu(x))
""",
        "mlp",
        "GELU after c_proj instead of between the layers",
    ),
    Variant(
        "mlp-dropout-hardcoded",
        MODEL,
        DROPOUT,
        "self.dropout = nn.Dropout(0.1)",
        "mlp",
        "a fixed p instead of cfg.dropout",
    ),
    Variant(
        "mlp-dropout-before-proj",
        MODEL,
        MLP_FORWARD,
        """\
        x = self.dropout(self.gelu(self.c_fc(x)))
        return self.c_proj(x)
""",
        "mlp",
        "dropout on the hidden layer, before c_proj",
    ),
    Variant(
        "mlp-dropout-functional",
        MODEL,
        MLP_RETURN,
        "return F.dropout(x, self.dropout.p)",
        "mlp",
        "F.dropout defaults to training=True: dropout also in eval",
    ),
    Variant(
        "mlp-dropout-forgotten",
        MODEL,
        MLP_RETURN,
        "return x",
        "mlp",
        "creates self.dropout but never applies it",
    ),
    # ---- TODO [pre-norm]
    # post-norm also moves the LayerNorms onto the residual path; the residual checks recognise
    # the whole wiring and leave it to the pre-norm checks, which show the pre-norm block
    Variant(
        "post-norm",
        MODEL,
        BLOCK,
        """\
        a = self.attn(x)
        x = self.ln_1(x + a)
        m = self.mlp(x)
        x = self.ln_2(x + m)
""",
        "pre-norm",
        "the original Transformer's post-norm: ln(x + sublayer(x))",
    ),
    Variant(
        "no-norm",
        MODEL,
        ATTN,
        "a = self.attn(x)",
        "pre-norm",
        "no LayerNorm before either sublayer",
        also=((MLP_CALL, "m = self.mlp(x)"),),
    ),
    Variant(
        "norms-swapped",
        MODEL,
        ATTN,
        "a = self.attn(self.ln_2(x))",
        "pre-norm",
        "ln_2 before attention and ln_1 before the MLP",
        also=((MLP_CALL, "m = self.mlp(self.ln_1(x))"),),
    ),
    Variant(
        "ln-1-twice",
        MODEL,
        MLP_CALL,
        "m = self.mlp(self.ln_1(x))",
        "pre-norm",
        "the attention's LayerNorm reused before the MLP",
    ),
    Variant(
        "mlp-sees-old-x",
        MODEL,
        BLOCK,
        f"""\
        {ATTN}
        {MLP_CALL}
        {RES_1}
        {RES_2}
""",
        "pre-norm",
        "computes the MLP on the block's input: a parallel block",
    ),
    Variant(
        "ln-2-of-attention",
        MODEL,
        MLP_CALL,
        "m = self.mlp(self.ln_2(a))",
        "pre-norm",
        "normalises the attention's output instead of the updated stream",
    ),
    # normalises over (T, C): positions mix, the model sees the future (future-leak fails too)
    Variant(
        "norm-over-time",
        MODEL,
        ATTN,
        "a = self.attn(F.layer_norm(x, x.shape[1:]))",
        "pre-norm",
        "a hand-made normalisation over T and C, without ln_1's parameters",
    ),
    # ---- TODO [residual]
    Variant("no-residual-attn", MODEL, RES_1, "x = a", "residual", "replaces x by the attention's output"),
    Variant("no-residual-mlp", MODEL, RES_2, "x = m", "residual", "replaces x by the MLP's output"),
    Variant(
        "residual-discarded",
        MODEL,
        RES_1,
        "x.add(a)",
        "residual",
        "Tensor.add is not in place: the sum is thrown away",
    ),
    Variant(
        "residual-in-place",
        MODEL,
        RES_1,
        "x += a",
        "residual",
        "x += a modifies a tensor autograd saved: backward fails in training",
        also=((RES_2, "x += m"),),
    ),
    # the mistake is written in the pre-norm gap, but what breaks is the residual stream: the
    # residual checks catch it and say so ("the residual stream carries ln_1(x)")
    Variant(
        "residual-carries-normed-x",
        MODEL,
        ATTN,
        """x = self.ln_1(x)
        a = self.attn(x)""",
        "residual",
        "overwrites x with ln_1(x): the residual stream loses x",
    ),
    # ---- TODO [weight-tying]
    Variant(
        "tying-forgotten", MODEL, f"        {TIE}\n", "", "weight-tying", "lm_head and wte stay two matrices"
    ),
    Variant(
        "tying-copy",
        MODEL,
        TIE,
        "self.transformer.wte.weight = nn.Parameter(self.lm_head.weight.clone())",
        "weight-tying",
        "a copy: equal at the start, then two matrices",
    ),
    Variant(
        "tying-data",
        MODEL,
        TIE,
        "self.transformer.wte.weight.data = self.lm_head.weight.data",
        "weight-tying",
        "shares the memory through .data but keeps two Parameters",
    ),
    # ---- TODO [init]
    Variant("init-no-apply", MODEL, APPLY, "", "init", "never applies _init_weights: PyTorch's default init"),
    Variant(
        "init-apply-on-self",
        MODEL,
        APPLY,
        "        self._init_weights(self)\n",
        "init",
        "calls _init_weights on the GPT itself, which is neither Linear nor Embedding",
    ),
    Variant(
        "init-rescale-before-apply",
        MODEL,
        APPLY + RESCALE_LOOP,
        RESCALE_LOOP + APPLY,
        "init",
        "rescales first; apply then resets the projections to 0.02",
    ),
    Variant(
        "init-no-two",
        MODEL,
        RESCALE_STD,
        "std=0.02 / math.sqrt(cfg.n_layer)",
        "init",
        "0.02/sqrt(n_layer): forgets that each block adds twice",
    ),
    Variant(
        "init-no-sqrt",
        MODEL,
        RESCALE_STD,
        "std=0.02 / (2 * cfg.n_layer)",
        "init",
        "divides by 2*n_layer instead of its square root",
    ),
    Variant(
        "init-rescales-biases",
        MODEL,
        RESCALE_IF,
        'if "proj" in name:',
        "init",
        "matches c_proj.bias and proj.bias too: biases get noise",
    ),
    Variant(
        "init-only-c-proj",
        MODEL,
        RESCALE_IF,
        'if name.endswith("c_proj.weight"):',
        "init",
        "rescales the MLP's projection but not the attention's",
    ),
    Variant(
        "init-every-parameter",
        MODEL,
        APPLY,
        """\
        for p in self.parameters():
            torch.nn.init.normal_(p, mean=0.0, std=0.02)
""",
        "init",
        "N(0, 0.02) on every parameter, LayerNorms and biases included",
    ),
    # ---- adapted idioms and further slips, by TODO
    Variant(
        "mlp-lecture-feedforward",
        MODEL,
        C_FC + "\n        " + GELU + "\n        " + C_PROJ + "\n        " + DROPOUT,
        "self.net = nn.Sequential(nn.Linear(cfg.n_embd, 4 * cfg.n_embd), nn.GELU(),\n"
        "                                 nn.Linear(4 * cfg.n_embd, cfg.n_embd), nn.Dropout(cfg.dropout))",
        "mlp",
        "the lecture's FeedForward: one nn.Sequential, so the layers lose their names",
        also=((MLP_FORWARD, "        return self.net(x)\n"),),
    ),
    Variant(
        "mlp-gelu-tanh-functional",
        MODEL,
        MLP_GELU,
        '        x = F.gelu(x, approximate="tanh")\n',
        "mlp",
        "F.gelu with GPT-2's tanh approximation",
    ),
    Variant(
        "mlp-no-bias",
        MODEL,
        C_FC,
        "self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=False)",
        "mlp",
        "c_fc and c_proj without bias",
        also=((C_PROJ, "self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=False)"),),
    ),
    Variant("mlp-silu", MODEL, GELU, "self.gelu = nn.SiLU()", "mlp", "LLaMA's SiLU instead of GELU"),
    Variant(
        "mlp-no-grad",
        MODEL,
        MLP_FORWARD,
        """\
        with torch.no_grad():
            x = self.c_fc(x)  # (B, T, 4C)
            x = self.gelu(x)
            x = self.c_proj(x)  # (B, T, C)
        return self.dropout(x)
""",
        "mlp",
        "computes the MLP under no_grad: it never trains",
    ),
    Variant(
        "norm-without-affine",
        MODEL,
        ATTN,
        "a = self.attn(F.layer_norm(x, (x.size(-1),)))",
        "pre-norm",
        "F.layer_norm without ln_1's weight and bias",
    ),
    Variant(
        "fresh-layer-norm",
        MODEL,
        MLP_CALL,
        "m = self.mlp(nn.LayerNorm(x.size(-1))(x))",
        "pre-norm",
        "a new LayerNorm made at every call: ln_2's parameters never used",
    ),
    Variant(
        "rms-norm",
        MODEL,
        ATTN,
        "a = self.attn(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.ln_1.weight)",
        "pre-norm",
        "LLaMA's RMSNorm by hand with ln_1's weight",
    ),
    Variant(
        "residual-detached",
        MODEL,
        RES_1,
        "x = x + a.detach()",
        "residual",
        "adds the attention's output detached: the attention never trains",
    ),
    Variant(
        "tying-new-parameter",
        MODEL,
        TIE,
        "self.lm_head.weight = nn.Parameter(self.transformer.wte.weight)",
        "weight-tying",
        "wraps the embedding in a new nn.Parameter: same memory, two parameters",
    ),
    Variant(
        "init-rescale-c-fc",
        MODEL,
        RESCALE_IF,
        'if name.endswith("fc.weight"):',
        "init",
        "rescales c_fc, which does not feed the residual stream",
    ),
    Variant(
        "init-zero-residual",
        MODEL,
        "torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))",
        "torch.nn.init.zeros_(p)",
        "init",
        "zero-initialised residual projections instead of the rescaled normal",
    ),
    Variant(
        "init-rescale-typo",
        MODEL,
        RESCALE_STD,
        "std=0.2 / math.sqrt(2 * cfg.n_layer)",
        "init",
        "0.2 instead of 0.02 in the rescaled std",
    ),
    # ---- issue 31: kinds no catalog named (each slipped through, or cost another TODO, before)
    Variant(
        "mlp-dropout-p-in-forward",
        MODEL,
        MLP_RETURN,
        "return F.dropout(x, 0.5, self.training)",
        "mlp",
        "p written as a number in forward (nn.Dropout(cfg.dropout) unused): right only when cfg.dropout is 0.5",
    ),
    Variant(
        "mlp-returns-float64",
        MODEL,
        MLP_RETURN,
        "return self.dropout(x).double()",
        "mlp",
        "the MLP's output in float64: the block's sum and the next LayerNorm mix dtypes",
    ),
    Variant(
        "mlp-no-return",
        MODEL,
        MLP_RETURN,
        "self.dropout(x)",
        "mlp",
        "forgets the return: the MLP gives None and `x = x + m` (TODO [residual]'s line) raises",
    ),
    Variant(
        "pre-norm-detached",
        MODEL,
        ATTN,
        "a = self.attn(self.ln_1(x).detach())",
        "pre-norm",
        "the normalised input detached: right values, ln_1 and what comes before never learn through attention",
    ),
    Variant(
        "pre-norm-mlp-under-no-grad",
        MODEL,
        MLP_CALL,
        "with torch.no_grad():\n            h = self.ln_2(x)\n        m = self.mlp(h)",
        "pre-norm",
        "ln_2 computed under torch.no_grad(): the MLP trains, ln_2 and x get no gradient through it",
    ),
    Variant(
        "residual-dropout-constant",
        MODEL,
        RES_1,
        "x = x + F.dropout(a, 0.1, self.training)",
        "residual",
        "the original Transformer's residual dropout, p written as a number: seen in train mode only",
    ),
    Variant(
        "init-residual-mean",
        MODEL,
        "torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))",
        "torch.nn.init.normal_(p, mean=0.02, std=0.02 / math.sqrt(2 * cfg.n_layer))",
        "init",
        "the residual projections' mean set to 0.02 (their std right)",
    ),
    Variant(
        "init-n-layer-constant",
        MODEL,
        RESCALE_STD,
        "std=0.02 / math.sqrt(6)",
        "init",
        "2*n_layer written as a number (6, right for 3 layers only)",
    ),
    Variant(
        "init-residual-plus-one",
        MODEL,
        RESCALE_STD,
        "std=0.02 / math.sqrt(2 * cfg.n_layer + 1)",
        "init",
        "counts the embedding as one more residual sum: each std about 4-7 % too small",
    ),
    Variant(
        "init-replaces-parameters",
        MODEL,
        APPLY,
        """\
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                module.weight = nn.Parameter(torch.randn_like(module.weight) * 0.02)
                if getattr(module, "bias", None) is not None:
                    module.bias = nn.Parameter(torch.zeros_like(module.bias))
""",
        "init",
        "new nn.Parameter objects instead of filling the weights: right values, but the tying line's work is undone",
    ),
    Variant(
        "blocks-by-n-head",
        MODEL,
        "h=nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)]),",
        "h=nn.ModuleList([Block(cfg) for _ in range(cfg.n_head)]),",
        None,
        "given code edited: as many blocks as heads",
    ),
    Variant(
        "positions-on-cpu",
        MODEL,
        "pos = torch.arange(T, device=idx.device)",
        'pos = torch.arange(T, device="cpu")',
        None,
        "the positions made on the CPU whatever idx's device",
    ),
]


# --------------------------------------------------------------------------- correct

CORRECT: list[Variant] = [
    Variant(
        "mlp-one-line",
        MODEL,
        MLP_FORWARD,
        "        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))\n",
        note="the MLP's forward in one expression",
    ),
    Variant(
        "mlp-functional",
        MODEL,
        MLP_FORWARD,
        """\
        x = F.gelu(self.c_fc(x))
        return F.dropout(self.c_proj(x), self.dropout.p, self.training)
""",
        note="F.gelu and F.dropout with training=self.training",
    ),
    Variant(
        "block-two-lines",
        MODEL,
        BLOCK,
        """\
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
""",
        note="each sublayer added in one line, as in nanoGPT",
    ),
    Variant(
        "functional-layer-norm",
        MODEL,
        ATTN,
        "a = self.attn(F.layer_norm(x, (x.size(-1),), self.ln_1.weight, self.ln_1.bias))",
        note="F.layer_norm with ln_1's parameters instead of calling the module",
    ),
    Variant(
        "tie-the-other-way",
        MODEL,
        TIE,
        "self.lm_head.weight = self.transformer.wte.weight",
        note="lm_head takes the embedding's Parameter",
    ),
    Variant(
        "init-by-modules",
        MODEL,
        RESCALE_LOOP,
        """\
        residual_std = 0.02 / math.sqrt(2 * cfg.n_layer)
        for block in self.transformer.h:
            for layer in (block.attn.proj, block.mlp.c_proj):
                torch.nn.init.normal_(layer.weight, mean=0.0, std=residual_std)
""",
        note="the residual projections found through the blocks, not by name",
    ),
    Variant(
        "init-in-place-normal",
        MODEL,
        RESCALE_LOOP,
        """\
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith(("attn.proj.weight", "mlp.c_proj.weight")):
                    p.normal_(0.0, 0.02 * (2 * cfg.n_layer) ** -0.5)
""",
        note="Tensor.normal_ under no_grad, the names spelled out",
    ),
    Variant(
        "mlp-sequential",
        MODEL,
        "class MLP(nn.Module):",
        "class MLP(nn.Sequential):",
        note="MLP as an nn.Sequential of its four named layers, without a forward of its own",
        also=(("    def forward(self, x):\n" + MLP_FORWARD, ""),),
    ),
    Variant(
        "mlp-gelu-exact-spelled",
        MODEL,
        GELU,
        'self.gelu = nn.GELU(approximate="none")',
        note="the exact GELU asked for by name",
    ),
    Variant(
        "mlp-gelu-erf",
        MODEL,
        MLP_GELU,
        "        x = 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))\n",
        note="the exact GELU written with erf",
    ),
    Variant(
        "residual-commuted", MODEL, RES_1, "x = a + x", note="a + x", also=((RES_2, "x = torch.add(x, m)"),)
    ),
    Variant(
        "pre-norm-named",
        MODEL,
        ATTN,
        "h = self.ln_1(x)\n        a = self.attn(h)",
        note="the normalised input in a variable of its own",
    ),
    Variant(
        "tie-after-init",
        MODEL,
        f"        {TIE}\n",
        "",
        note="ties after the initialisation, as Hugging Face does",
        also=(
            (
                "    def _init_weights(self, module):",
                f"        {TIE}\n\n    def _init_weights(self, module):",
            ),
        ),
    ),
    Variant(
        "init-modules-loop",
        MODEL,
        APPLY,
        "        for module in self.modules():\n            self._init_weights(module)\n",
        note="a loop over self.modules() instead of apply",
    ),
    Variant(
        "init-layers-from-blocks",
        MODEL,
        RESCALE_STD,
        "std=0.02 / math.sqrt(2 * len(self.transformer.h))",
        note="the number of layers counted from the blocks",
    ),
    Variant(
        "init-data-normal",
        MODEL,
        "torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))",
        "p.data.normal_(mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))",
        note="Tensor.normal_ on p.data",
    ),
    Variant(
        "tie-new-head-other-way",
        MODEL,
        TIE,
        "self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)\n"
        "        self.lm_head.weight = self.transformer.wte.weight",
        note="lm_head made again in the TODO, then given the embedding's Parameter",
    ),
    Variant(
        "mlp-dropout-by-hand",
        MODEL,
        MLP_RETURN,
        "if not self.training or self.dropout.p == 0:\n"
        "            return x\n"
        "        keep = (torch.rand_like(x) >= self.dropout.p).to(x.dtype)\n"
        "        return x * keep / (1 - self.dropout.p)",
        note="dropout written by hand from torch.rand: other draws than nn.Dropout's, the same law",
    ),
    Variant(
        "block-mlp-forward-call",
        MODEL,
        MLP_CALL,
        "m = self.mlp.forward(self.ln_2(x))",
        note="calls mlp.forward directly",
    ),
]

# The practice agreement sample (tests/lessons/test_practice_agreement.py): buggy variants whose
# diagnosis the recording answers, so practice and official grading must tell the same story.
# Each diagnosis comes from different recorded values: post-norm from the whole post-norm block
# on the grader's input, mlp-gelu-tanh from the MLP's known mistakes (mlp_mistakes),
# no-residual-attn from the attention on the input the learner's block gave it (attention_out).
PRACTICE_SAMPLE = ("post-norm", "mlp-gelu-tanh", "no-residual-attn")
