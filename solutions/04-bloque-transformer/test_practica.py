"""Pruebas de práctica de la lección 04.

Son rápidas y visibles: léelas si una falla. Desde la raíz del repositorio:

    pytest exercises/04-bloque-transformer

No sustituyen a `autograder grade 04`, que comprueba bastante más (y con otros datos).
Mientras un TODO siga pendiente, sus pruebas fallan con NotImplementedError. La marca
@pytest.mark.todo("...") de cada prueba dice qué TODO ejercita. model.py usa tu atención de la
lección 03: si una prueba falla dentro de attention.py, termina antes esa lección.
"""

import importlib.util
import math
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent


def _load(name, path):
    # Un nombre propio de esta carpeta: exercises/ y solutions/ nunca comparten una entrada
    # en sys.modules.
    unique = f"_leccion04_{abs(hash(str(path)))}_{name}"
    if unique in sys.modules:
        return sys.modules[unique]
    spec = importlib.util.spec_from_file_location(unique, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[unique] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


def _load_model():
    # model.py hace `from attention import CausalSelfAttention`: que encuentre la atención de
    # la lección 03 que va con esta carpeta (la de al lado, o la de la carpeta hermana
    # 03-atencion-causal), aunque otra carpeta ya haya importado la suya.
    candidates = [HERE / "attention.py", HERE.parent / "03-atencion-causal" / "attention.py"]
    found = next((p for p in candidates if p.is_file()), None)
    saved = sys.modules.pop("attention", None)
    if found is not None:
        sys.modules["attention"] = _load("attention", found)
    try:
        return _load("model", HERE / "model.py")
    finally:
        sys.modules.pop("attention", None)
        if saved is not None:
            sys.modules["attention"] = saved


model = _load_model()

# T, nh, hs, C y V todos distintos y T < block_size: así no pasa inadvertido un eje cambiado.
B, T = 2, 5
CFG = {"vocab_size": 11, "block_size": 8, "n_layer": 2, "n_head": 3, "n_embd": 12, "dropout": 0.0}
C = CFG["n_embd"]


def _cfg(**cambios):
    return model.GPTConfig(**{**CFG, **cambios})


def _gpt(**cambios):
    torch.manual_seed(0)
    return model.GPT(_cfg(**cambios)).eval()


@pytest.mark.todo("mlp")
def test_mlp_capas_y_forma():
    """MLP: c_fc (C -> 4C), gelu, c_proj (4C -> C) y dropout(cfg.dropout); (B, T, C) -> (B, T, C)."""
    mlp = model.MLP(_cfg(dropout=0.25))
    assert isinstance(mlp.c_fc, nn.Linear) and tuple(mlp.c_fc.weight.shape) == (4 * C, C), (
        "c_fc debe ser nn.Linear(C, 4C): su peso tiene forma (4C, C)")
    assert isinstance(mlp.c_proj, nn.Linear) and tuple(mlp.c_proj.weight.shape) == (C, 4 * C), (
        "c_proj debe ser nn.Linear(4C, C): su peso tiene forma (C, 4C)")
    assert isinstance(mlp.gelu, nn.GELU), "gelu debe ser nn.GELU()"
    assert isinstance(mlp.dropout, nn.Dropout) and mlp.dropout.p == 0.25, "dropout debe ser nn.Dropout(cfg.dropout)"
    y = mlp(torch.randn(B, T, C))
    assert y.shape == (B, T, C), f"la MLP debe devolver (B, T, C) = {(B, T, C)}, devolvió {tuple(y.shape)}"


@pytest.mark.todo("mlp")
def test_mlp_hace_la_cuenta():
    """En modo eval, MLP(x) = c_proj(gelu(c_fc(x))), con la GELU exacta."""
    torch.manual_seed(0)
    mlp = model.MLP(_cfg()).eval()
    x = torch.randn(B, T, C)
    with torch.no_grad():
        esperado = mlp.c_proj(F.gelu(mlp.c_fc(x)))
        y = mlp(x)
    assert torch.allclose(y, esperado, atol=1e-6), "la MLP debe devolver dropout(c_proj(gelu(c_fc(x))))"


@pytest.mark.todo("pre-norm")
def test_cada_subcapa_recibe_su_layernorm():
    """A self.attn le llega ln_1(x); a self.mlp, ln_2 de la x ya actualizada con la atención."""
    torch.manual_seed(0)
    bloque = model.Block(_cfg()).eval()
    with torch.no_grad():  # LayerNorms con parámetros propios: así se distinguen entre sí
        for ln in (bloque.ln_1, bloque.ln_2):
            ln.weight.normal_(1.0, 0.3)
            ln.bias.normal_(0.0, 0.3)
    llegan = {}
    for nombre in ("attn", "mlp"):
        getattr(bloque, nombre).register_forward_pre_hook(lambda mod, inp, n=nombre: llegan.setdefault(n, inp[0]))
    x = torch.randn(B, T, C) * 2 + 1
    with torch.no_grad():
        bloque(x)
        assert torch.allclose(llegan["attn"], bloque.ln_1(x), atol=1e-6), "a self.attn debe llegarle self.ln_1(x)"
        x_tras_atencion = x + bloque.attn(bloque.ln_1(x))
        assert torch.allclose(llegan["mlp"], bloque.ln_2(x_tras_atencion), atol=1e-5), (
            "a self.mlp debe llegarle self.ln_2(x), con x ya actualizada: x + attn(ln_1(x))")


@pytest.mark.todo("residual")
def test_sin_aportes_el_bloque_es_la_identidad():
    """Con attn.proj y mlp.c_proj a cero, las subcapas no aportan nada: Block(x) = x."""
    torch.manual_seed(0)
    bloque = model.Block(_cfg()).eval()
    with torch.no_grad():
        for capa in (bloque.attn.proj, bloque.mlp.c_proj):
            capa.weight.zero_()
            capa.bias.zero_()
        x = torch.randn(B, T, C)
        y = bloque(x)
    assert torch.allclose(y, x), "sin aportes de las subcapas el bloque debe devolver x tal cual: x = x + a, x = x + m"


@pytest.mark.todo("weight-tying")
def test_lm_head_y_wte_son_el_mismo_tensor():
    """lm_head.weight y transformer.wte.weight son el mismo nn.Parameter, que aparece una vez."""
    gpt = _gpt()
    assert gpt.lm_head.weight is gpt.transformer.wte.weight, "ata los pesos: deben ser el mismo objeto, no una copia"
    formas = [tuple(p.shape) for p in gpt.parameters()]
    assert formas.count((CFG["vocab_size"], C)) == 1, "la matriz atada debe aparecer una sola vez en parameters()"


@pytest.mark.todo("init")
def test_inicializacion():
    """Pesos N(0, 0.02), sesgos a 0 y proyecciones residuales con 0.02 / sqrt(2 * n_layer)."""
    torch.manual_seed(0)
    cfg = _cfg(n_embd=48, n_head=4, vocab_size=300)
    gpt = model.GPT(cfg)
    qkv = torch.cat([blk.attn.qkv.weight.flatten() for blk in gpt.transformer.h])
    proj = torch.cat([p.flatten() for n, p in gpt.named_parameters() if n.endswith("proj.weight")])
    objetivo = 0.02 / math.sqrt(2 * cfg.n_layer)
    assert abs(gpt.transformer.wte.weight.std().item() - 0.02) < 0.002, "wte debe empezar con std 0.02"
    assert abs(qkv.std().item() - 0.02) < 0.002, "los pesos de las Linear deben empezar con std 0.02"
    assert abs(proj.std().item() - objetivo) < 0.1 * objetivo, (
        f"attn.proj y mlp.c_proj deben empezar con std 0.02/sqrt(2*n_layer) = {objetivo:.4f}, "
        f"tienen {proj.std().item():.4f}")
    assert all(torch.all(p == 0) for n, p in gpt.named_parameters() if n.endswith("bias") and ".ln_" not in n
               and "ln_f" not in n), "los sesgos de las Linear deben empezar a 0"


@pytest.mark.todo("init")
def test_perdida_inicial_cerca_de_ln_v():
    """Recién inicializado, el modelo reparte la probabilidad casi por igual: pérdida ≈ ln(V)."""
    V = 300
    gpt = _gpt(n_embd=48, n_head=4, vocab_size=V)
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, V, (8, CFG["block_size"]), generator=g)
    targets = torch.randint(0, V, (8, CFG["block_size"]), generator=g)
    with torch.no_grad():
        _, loss = gpt(idx, targets)
    assert abs(loss.item() - math.log(V)) < 0.1, (
        f"la pérdida inicial es {loss.item():.3f}; con pesos pequeños debería estar cerca de ln({V}) = {math.log(V):.3f}")


def test_cuenta_de_parametros():
    """num_params() = V*C + block_size*C + n_layer*(12*C^2 + 13*C) + 2*C (lm_head atado cuenta una vez)."""
    V, bs, L = CFG["vocab_size"], CFG["block_size"], CFG["n_layer"]
    esperado = V * C + bs * C + L * (12 * C * C + 13 * C) + 2 * C
    assert _gpt().num_params() == esperado, f"num_params() debería ser {esperado}"


def test_el_modelo_no_ve_el_futuro():
    """Cambiar el último token no mueve los logits de las posiciones anteriores."""
    gpt = _gpt()
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, CFG["vocab_size"], (B, T), generator=g)
    otro = idx.clone()
    otro[:, -1] = (otro[:, -1] + 1) % CFG["vocab_size"]
    with torch.no_grad():
        logits, loss = gpt(idx)
        logits2, _ = gpt(otro)
    assert logits.shape == (B, T, CFG["vocab_size"]) and loss is None, "forward(idx) devuelve (logits (B, T, V), None)"
    assert torch.equal(logits[:, :-1], logits2[:, :-1]), "los logits de las posiciones anteriores no pueden cambiar"
