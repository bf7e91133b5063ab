"""Pruebas de práctica de la lección 06.

Son rápidas y visibles: léelas si una falla. Desde la raíz del repositorio:

    pytest exercises/06-generar

No sustituyen a `autograder grade 06`, que comprueba bastante más (y con otros datos).
Mientras un TODO siga pendiente, sus pruebas fallan con NotImplementedError. La marca
@pytest.mark.todo("...") de cada prueba dice qué TODO ejercita. Las pruebas que necesitan un
GPT usan el tuyo de las lecciones 03 y 04, y se saltan mientras esas lecciones estén sin hacer.
"""

import importlib.util
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
LESSONS = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))


def _load(path, name):
    """Carga un archivo con un nombre propio de esta carpeta, para que exercises/ y solutions/
    nunca compartan una entrada en sys.modules."""
    unique = f"_leccion06_{abs(hash(str(path)))}_{name}"
    if unique in sys.modules:
        return sys.modules[unique]
    spec = importlib.util.spec_from_file_location(unique, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[unique] = module  # dataclasses look their module up here
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[unique]
        raise
    return module


gen = _load(HERE / "generate.py", "generate")


def _vecino(folder, name):
    """Un archivo de una lección anterior: junto a este (así lo pone el corrector) o en su carpeta."""
    return HERE / name if (HERE / name).is_file() else LESSONS / folder / name


def _tu_gpt(**cfg):
    """Tu GPT de la lección 04 (con tu atención de la 03), cargado de las carpetas vecinas."""
    saved = sys.modules.get("attention")
    try:
        attention = _load(_vecino("03-atencion-causal", "attention.py"), "attention")
        sys.modules["attention"] = attention  # model.py hace `from attention import ...`
        model = _load(_vecino("04-bloque-transformer", "model.py"), "model")
        torch.manual_seed(0)
        gpt = model.GPT(model.GPTConfig(**cfg))
    except (FileNotFoundError, NotImplementedError) as exc:
        pytest.skip(f"necesita tu GPT de las lecciones 03 y 04: {exc}")
    finally:
        if saved is None:
            sys.modules.pop("attention", None)
        else:
            sys.modules["attention"] = saved
    with torch.no_grad():  # pesos mayores que los iniciales: la atención deja de ser uniforme
        for p in gpt.parameters():
            p.normal_(0.0, 0.5)
    return gpt.eval()


# V, B, T, nh, hs y C distintos: así no pasa inadvertido un eje cambiado.
V, B = 17, 3
N_HEAD, HS = 2, 5
C = N_HEAD * HS


def _atencion():
    """Un sustituto de CausalSelfAttention con lo que usa cached_attention: qkv, proj, n_head."""
    torch.manual_seed(0)
    attn = SimpleNamespace(qkv=nn.Linear(C, 3 * C), proj=nn.Linear(C, C), n_head=N_HEAD,
                           resid_drop=nn.Identity())
    with torch.no_grad():
        attn.qkv.weight.mul_(3.0)  # puntuaciones grandes: una máscara mal puesta se nota
    return attn


def _atencion_completa(attn, x):
    """La atención causal de siempre sobre toda la secuencia x (B, T, C), escrita a mano."""
    Bx, T, _ = x.shape
    q, k, v = (t.view(Bx, T, N_HEAD, HS).transpose(1, 2) for t in attn.qkv(x).split(C, dim=2))
    att = q @ k.transpose(-2, -1) / math.sqrt(HS)
    att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).tril() == 0, float("-inf"))
    y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(Bx, T, C)
    return attn.proj(y)


# --- sample_next ------------------------------------------------------------------------


@pytest.mark.todo("temperature")
def test_temperatura_cero_es_greedy():
    """temperature=0: el argmax de cada fila, con forma (B, 1) y dtype int64."""
    logits = torch.randn(B, V)
    out = gen.sample_next(logits, temperature=0)
    assert out.shape == (B, 1), f"sample_next debe devolver (B, 1) = {(B, 1)}, devuelve {tuple(out.shape)}"
    assert out.dtype == torch.int64, f"los tokens son int64, no {out.dtype}"
    assert torch.equal(out, logits.argmax(dim=-1, keepdim=True)), "con temperatura 0 toca el argmax"


@pytest.mark.todo("temperature")
def test_temperatura_reproduce_el_sorteo():
    """Con la misma semilla, el sorteo es el de softmax(logits / T)."""
    logits = torch.randn(64, V) * 2
    for t in (0.5, 2.0):
        out = gen.sample_next(logits, temperature=t, generator=torch.Generator().manual_seed(7))
        probs = F.softmax(logits / t, dim=-1)
        esperado = torch.multinomial(probs, num_samples=1, generator=torch.Generator().manual_seed(7))
        assert torch.equal(out, esperado), f"con temperatura {t} el sorteo no es el de softmax(logits / {t})"


@pytest.mark.todo("top-k")
def test_top_k_nunca_sale_de_los_k_mejores():
    """En 500 filas de logits casi iguales solo salen los k mejores, y salen los k."""
    logits = torch.randn(500, V) * 0.2
    k = 3
    out = gen.sample_next(logits, temperature=2.0, top_k=k, generator=torch.Generator().manual_seed(1))
    mejores = torch.topk(logits, k, dim=-1).indices  # (500, k)
    dentro = (mejores == out).any(dim=-1)
    assert dentro.all(), f"{int((~dentro).sum())} filas sacaron un token fuera de sus {k} mejores"
    puesto = (mejores == out).float().argmax(dim=-1)
    assert set(puesto.tolist()) == set(range(k)), f"alguno de los {k} mejores no salió nunca: ¿te quedas con k-1?"


@pytest.mark.todo("top-k")
def test_top_k_mayor_que_el_vocabulario():
    """Si top_k >= V no se filtra nada (y no salta ningún error)."""
    logits = torch.randn(B, V)
    out = gen.sample_next(logits, top_k=V + 5, generator=torch.Generator().manual_seed(3))
    esperado = gen.sample_next(logits, generator=torch.Generator().manual_seed(3))
    assert torch.equal(out, esperado), "con top_k > V debe dar lo mismo que sin top_k"


# --- crop_context -----------------------------------------------------------------------


@pytest.mark.todo("crop-context")
@pytest.mark.parametrize("T", [12, 8, 5])
def test_recorta_el_contexto(T):
    """crop_context(idx, 8): los últimos 8 tokens de cada fila, o todos si hay menos."""
    idx = torch.arange(B * T).view(B, T)
    out = gen.crop_context(idx, 8)
    esperado = idx[:, max(0, T - 8):]
    assert torch.equal(out, esperado), f"con T = {T} se esperaba la fila 0 {esperado[0].tolist()}, no {out[0].tolist()}"


# --- la caché ---------------------------------------------------------------------------


@pytest.mark.todo("kv-cache")
def test_cached_attention_anade_un_token():
    """Un token nuevo tras 4 guardados: k y v crecen a 5 y la salida es la de la atención completa."""
    attn = _atencion()
    x = torch.randn(B, 5, C)
    with torch.no_grad():
        _, past_k, past_v = gen.cached_attention(attn, x[:, :4])
        y, k, v = gen.cached_attention(attn, x[:, 4:], past_k, past_v)
        completa = _atencion_completa(attn, x)
    assert k.shape == v.shape == (B, N_HEAD, 5, HS), f"k y v deben ser (B, nh, 5, hs), son {tuple(k.shape)}"
    assert torch.equal(k[:, :, :4], past_k), "las 4 primeras claves deben ser las guardadas, en orden"
    err = (y[:, 0] - completa[:, 4]).abs().max().item()
    assert err < 1e-5, f"la salida del token nuevo difiere en {err:.3g} de la atención completa"


@pytest.mark.todo("cache-alignment")
def test_varios_tokens_tras_la_cache():
    """3 tokens nuevos tras 4 guardados: la máscara va alineada abajo a la derecha."""
    attn = _atencion()
    x = torch.randn(B, 7, C)
    with torch.no_grad():
        _, past_k, past_v = gen.cached_attention(attn, x[:, :4])
        y, _, _ = gen.cached_attention(attn, x[:, 4:], past_k, past_v)
        completa = _atencion_completa(attn, x)
    err = (y - completa[:, 4:]).abs().max().item()
    assert err < 1e-5, (
        f"los 3 tokens nuevos difieren en {err:.3g} de la atención completa: la consulta i es el "
        f"token 4 + i y ve las claves 0..4 + i (is_causal=True las alinea mal)"
    )


@pytest.mark.todo("kv-cache")
def test_forward_cached_da_los_logits_del_forward():
    """Con tu GPT: de uno en uno y después en un trozo, los logits del forward completo."""
    gpt = _tu_gpt(vocab_size=V, block_size=9, n_layer=2, n_head=N_HEAD, n_embd=C)
    idx = torch.randint(0, V, (B, 9))
    with torch.no_grad():
        completos, _ = gpt(idx)
        cache = gen.KVCache(2)
        trozos = [gen.forward_cached(gpt, idx[:, t:t + 1], cache) for t in range(5)]
        trozos.append(gen.forward_cached(gpt, idx[:, 5:], cache))
    assert cache.length == 9, f"tras 9 tokens cache.length debe ser 9, es {cache.length}"
    err = (torch.cat(trozos, dim=1) - completos).abs().max().item()
    assert err < 1e-4, f"con la caché los logits difieren en {err:.3g} de los del forward completo"


@pytest.mark.todo("kv-cache")
def test_generate_con_y_sin_cache():
    """Greedy: con caché y sin ella salen los mismos tokens, también pasado block_size."""
    gpt = _tu_gpt(vocab_size=V, block_size=6, n_layer=2, n_head=N_HEAD, n_embd=C)
    idx = torch.randint(0, V, (B, 2))
    sin = gen.generate(gpt, idx, 10, temperature=0, use_cache=False)
    con = gen.generate(gpt, idx, 10, temperature=0, use_cache=True)
    assert sin.shape == (B, 12), f"generate debe devolver (B, T + 10) = {(B, 12)}, devuelve {tuple(sin.shape)}"
    assert torch.equal(sin, con), f"sin caché {sin[0].tolist()}, con caché {con[0].tolist()}"
