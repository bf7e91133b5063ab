"""Pruebas de práctica de la lección 03.

Son rápidas y visibles: léelas si una falla. Desde la raíz del repositorio:

    pytest exercises/03-atencion-causal

No sustituyen a `autograder grade 03`, que comprueba bastante más (y con otros datos).
Mientras un TODO siga pendiente, sus pruebas fallan con NotImplementedError. La marca
@pytest.mark.todo("...") de cada prueba dice qué TODO ejercita.
"""

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

HERE = Path(__file__).resolve().parent
# Tus archivos pueden importarse entre sí; se cargan con un nombre propio de esta carpeta
# para que exercises/ y solutions/ nunca compartan una entrada en sys.modules.
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))


def _load(name):
    unique = f"_leccion03_{abs(hash(str(HERE)))}_{name}"
    if unique in sys.modules:
        return sys.modules[unique]
    spec = importlib.util.spec_from_file_location(unique, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[unique] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


anp = _load("attention_numpy")
att = _load("attention")

# T, nh, hs y C todos distintos y T < block_size: así no pasa inadvertido un eje cambiado.
B, T, N_HEAD, HS, BLOCK = 2, 5, 3, 4, 8
C = N_HEAD * HS


def _modulo(fused=False, dropout=0.0):
    torch.manual_seed(0)
    cfg = att.AttentionConfig(n_embd=C, n_head=N_HEAD, block_size=BLOCK, dropout=dropout)
    return att.CausalSelfAttention(cfg, fused=fused).eval()


# --- NumPy -----------------------------------------------------------------------------


@pytest.mark.todo("np-mask")
def test_np_mascara_forma_y_valores():
    """causal_mask(4): 0 en la diagonal y debajo, muy negativo encima."""
    m = anp.causal_mask(4)
    assert m.shape == (4, 4), f"causal_mask(4) debe tener forma (4, 4), tiene {m.shape}"
    abajo = np.tril(np.ones((4, 4), dtype=bool))
    assert np.all(m[abajo] == 0), f"donde j <= i la máscara debe valer 0:\n{m}"
    assert np.all(m[~abajo] <= -1e9), f"donde j > i la máscara debe valer -1e9 o -inf:\n{m}"


@pytest.mark.todo("np-softmax")
def test_np_softmax_filas_suman_uno_y_estable():
    """softmax: cada fila suma 1, también con entradas del orden de 1e3 (sin inf ni NaN)."""
    x = np.array([[1.0, 2.0, 3.0], [1000.0, 1001.0, 999.0]])
    s = anp.softmax(x, axis=-1)
    assert s.shape == x.shape, f"softmax no debe cambiar la forma: {s.shape} != {x.shape}"
    assert np.all(np.isfinite(s)), f"softmax devuelve inf o NaN con entradas de 1e3:\n{s}"
    assert np.allclose(s.sum(axis=-1), 1.0), f"cada fila debe sumar 1, suman {s.sum(axis=-1)}"
    # Restar la misma constante a todas las entradas no debe cambiar el resultado.
    assert np.allclose(s[1], anp.softmax(x[1] - 1000.0)), "softmax(x) debe ser softmax(x - c)"


@pytest.mark.todo("np-attention")
def test_np_atencion_causal():
    """masked_self_attention: formas, filas que suman 1, futuro con peso 0, fila 0 = V[0]."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5, 6))
    W_Q, W_K, W_V = rng.normal(size=(6, 4)), rng.normal(size=(6, 4)), rng.normal(size=(6, 3))
    out, w = anp.masked_self_attention(X, W_Q, W_K, W_V)
    assert out.shape == (5, 3), f"output debe ser (T, d_v) = (5, 3), es {out.shape}"
    assert w.shape == (5, 5), f"weights debe ser (T, T) = (5, 5), es {w.shape}"
    assert np.allclose(w.sum(axis=-1), 1.0), f"cada fila de pesos debe sumar 1: {w.sum(axis=-1)}"
    assert np.all(np.triu(w, k=1) == 0), f"los pesos con j > i deben ser exactamente 0:\n{w}"
    # El primer token solo puede mirarse a sí mismo: su salida es su propio valor.
    assert np.allclose(out[0], X[0] @ W_V), "el token 0 solo se ve a sí mismo: out[0] = V[0]"


@pytest.mark.todo("np-edges")
@pytest.mark.parametrize("T_, causal, esperado", [(1, True, 1), (4, True, 10), (4, False, 16)])
def test_np_aristas(T_, causal, esperado):
    """count_edges: T(T+1)/2 con máscara causal, T*T sin ella."""
    n = anp.count_edges(T_, causal=causal)
    assert n == esperado and isinstance(n, int), (
        f"count_edges({T_}, causal={causal}) devolvió {n!r}; se esperaba el int {esperado}"
    )


# --- PyTorch ---------------------------------------------------------------------------


@pytest.mark.todo("mask")
def test_mascara_es_buffer_no_persistente():
    """La máscara es un buffer (1, 1, block_size, block_size) que no va al state_dict."""
    m = _modulo()
    buffers = dict(m.named_buffers())
    assert "mask" in buffers, "registra la máscara con self.register_buffer('mask', ...)"
    assert tuple(buffers["mask"].shape) == (1, 1, BLOCK, BLOCK), (
        f"mask debe tener forma (1, 1, {BLOCK}, {BLOCK}), tiene {tuple(buffers['mask'].shape)}"
    )
    assert "mask" not in m.state_dict(), "mask no debe ir al state_dict: usa persistent=False"


@pytest.mark.todo("head-reshape")
@pytest.mark.parametrize("fused", [False, True], ids=["explicito", "fusionado"])
def test_forma_de_la_salida(fused):
    """forward: (B, T, C) -> (B, T, C), también con T = 1 y T = block_size."""
    m = _modulo(fused=fused)
    for t in (1, T, BLOCK):
        y = m(torch.randn(B, t, C))
        assert y.shape == (B, t, C), f"con x de forma {(B, t, C)} la salida es {tuple(y.shape)}"


@pytest.mark.todo("mask")
@pytest.mark.parametrize("fused", [False, True], ids=["explicito", "fusionado"])
def test_no_ve_el_futuro(fused):
    """Cambiar el último token no puede mover la salida de los tokens anteriores."""
    m = _modulo(fused=fused)
    x = torch.randn(B, T, C)
    x2 = x.clone()
    x2[:, -1, :] = torch.randn(B, C)
    with torch.no_grad():
        y, y2 = m(x), m(x2)
    diff = (y[:, :-1] - y2[:, :-1]).abs().max().item()
    assert diff == 0.0, (
        f"al cambiar solo el token {T - 1}, la salida de los tokens 0..{T - 2} se movió "
        f"(diferencia máxima {diff:.3g}): la información del futuro se filtra"
    )
    assert not torch.allclose(y[:, -1], y2[:, -1]), "la salida del último token debería cambiar"


@pytest.mark.todo("mask")
def test_pesos_suman_uno_y_triangulo_superior_cero():
    """Los pesos que pasan por attn_drop: filas que suman 1 y 0 exacto donde j > i."""
    m = _modulo()
    capturados = []
    m.attn_drop.register_forward_hook(lambda mod, inp, out: capturados.append(inp[0].detach()))
    with torch.no_grad():
        m(torch.randn(B, T, C))
    # Una vez con los pesos (B, nh, T, T), o una por cabeza si las calculas en un bucle.
    if len(capturados) == N_HEAD and capturados[0].dim() == 3:
        capturados = [torch.stack(capturados, dim=1)]
    assert len(capturados) == 1, "los pesos deben pasar una vez por self.attn_drop(...)"
    w = capturados[0]
    assert w.shape == (B, N_HEAD, T, T), f"los pesos deben ser (B, nh, T, T), son {tuple(w.shape)}"
    assert torch.allclose(w.sum(-1), torch.ones(B, N_HEAD, T)), "cada fila de pesos debe sumar 1"
    futuro = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    assert torch.all(w[..., futuro] == 0), f"pesos con j > i distintos de 0:\n{w[0, 0]}"


def test_una_cabeza_coincide_con_numpy():
    """Con n_head = 1 y sin sesgos, la atención explícita coincide con tu versión NumPy."""
    torch.manual_seed(0)
    cfg = att.AttentionConfig(n_embd=C, n_head=1, block_size=BLOCK, dropout=0.0)
    m = att.CausalSelfAttention(cfg).double().eval()
    x = torch.randn(1, T, C, dtype=torch.float64)
    with torch.no_grad():
        # Proyección de salida identidad y sin sesgos: solo queda la atención.
        m.qkv.bias.zero_()
        m.proj.weight.copy_(torch.eye(C))
        m.proj.bias.zero_()
        y = m(x)[0].numpy()
    # nn.Linear calcula x @ W.T, y sus filas vienen en el orden q, k, v.
    W_Q, W_K, W_V = (w.detach().T.numpy() for w in m.qkv.weight.split(C, dim=0))
    esperado, _ = anp.masked_self_attention(x[0].numpy(), W_Q, W_K, W_V)
    err = np.abs(y - esperado).max()
    assert err < 1e-9, f"con una cabeza, attention.py y attention_numpy.py difieren en {err:.3g}"


@pytest.mark.todo("fused")
def test_fusionado_coincide_con_explicito():
    """Mismos pesos, mismo x: los dos caminos dan lo mismo (atol 1e-5) en modo eval."""
    explicito, fusionado = _modulo(fused=False), _modulo(fused=True)
    fusionado.load_state_dict(explicito.state_dict())
    x = torch.randn(B, T, C)
    with torch.no_grad():
        err = (explicito(x) - fusionado(x)).abs().max().item()
    assert err <= 1e-5, f"fused=True y fused=False difieren en {err:.3g} (tolerancia 1e-5)"
