"""Pruebas de práctica de la lección 02.

Son rápidas y visibles: léelas si una falla. Desde la raíz del repositorio:

    pytest exercises/02-bigrama

No sustituyen a `autograder grade 02`, que comprueba bastante más (y con otros datos).
Mientras un TODO siga pendiente, sus pruebas fallan con NotImplementedError. La marca
@pytest.mark.todo("...") de cada prueba dice qué TODO ejercita.
"""

import importlib.util
import math
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent


def _load(name):
    # Se carga con un nombre propio de esta carpeta para que exercises/ y solutions/ nunca
    # compartan una entrada en sys.modules.
    unique = f"_leccion02_{abs(hash(str(HERE)))}_{name}"
    if unique in sys.modules:
        return sys.modules[unique]
    spec = importlib.util.spec_from_file_location(unique, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[unique] = module
    spec.loader.exec_module(module)
    return module


bg = _load("bigram")

# B, T, V y C todos distintos, y T < block_size: así no pasa inadvertido un eje cambiado.
B, T, V, C, BLOCK = 2, 5, 11, 6, 8


def _idx(b=B, t=T, seed=0):
    return torch.randint(0, V, (b, t), generator=torch.Generator().manual_seed(seed))


def _bigrama():
    torch.manual_seed(0)
    return bg.BigramLanguageModel(V)


def _cadena():
    """Un bigrama cuya tabla manda de cada token i, casi con certeza, al token (i + 3) % V."""
    model = _bigrama()
    with torch.no_grad():
        model.token_embedding_table.weight.zero_()
        for i in range(V):
            model.token_embedding_table.weight[i, (i + 3) % V] = 40.0
    return model


@pytest.mark.todo("embedding-lookup")
def test_logits_son_filas_de_la_tabla():
    """forward(idx): logits (B, T, V) y logits[b, t] = tabla[idx[b, t]]."""
    model = _bigrama()
    idx = _idx()
    logits, _ = model(idx)
    assert logits.shape == (B, T, V), f"logits debe tener forma (B, T, V) = {(B, T, V)}, tiene {tuple(logits.shape)}"
    tabla = model.token_embedding_table.weight
    assert torch.equal(logits[1, 3], tabla[idx[1, 3]]), "logits[b, t] debe ser la fila idx[b, t] de la tabla"


@pytest.mark.todo("loss-reshape")
def test_perdida_y_none_sin_targets():
    """Con targets, loss es la entropía cruzada media (un escalar); sin targets, None."""
    model = _bigrama()
    idx, targets = _idx(seed=1), _idx(seed=2)
    logits, loss = model(idx, targets)
    assert logits.shape == (B, T, V), f"devuelve los logits sin aplanar: (B, T, V), no {tuple(logits.shape)}"
    assert isinstance(loss, torch.Tensor) and loss.shape == (), "loss debe ser un tensor escalar (forma ())"
    # La misma cuenta, posición a posición: -log p(target) y la media de todas.
    a_mano = -torch.stack([F.log_softmax(logits[b, t], dim=-1)[targets[b, t]]
                           for b in range(B) for t in range(T)]).mean()
    assert torch.allclose(loss, a_mano, atol=1e-6), f"loss = {loss.item():.6f}, a mano sale {a_mano.item():.6f}"
    _, sin_targets = model(idx)
    assert sin_targets is None, f"sin targets, loss debe ser None (es {sin_targets!r})"


@pytest.mark.todo("loss-reshape")
def test_perdida_inicial_uniforme_es_ln_V():
    """Con la tabla a cero todas las probabilidades valen 1/V: la pérdida es ln(V)."""
    model = _bigrama()
    with torch.no_grad():
        model.token_embedding_table.weight.zero_()
    _, loss = model(_idx(seed=3), _idx(seed=4))
    assert math.isclose(loss.item(), math.log(V), rel_tol=1e-6), f"loss = {loss.item():.5f}, ln({V}) = {math.log(V):.5f}"


@pytest.mark.todo("positions")
def test_token_mas_posicion():
    """x = tabla_tokens[idx] + tabla_posiciones[0..T-1], también con T = 1 y T = block_size."""
    torch.manual_seed(0)
    emb = bg.TokenPositionEmbedding(V, C, BLOCK)
    for t in (T, 1, BLOCK):
        idx = _idx(t=t)
        x = emb(idx)
        assert x.shape == (B, t, C), f"con idx de forma {(B, t)} la salida es {tuple(x.shape)}, no {(B, t, C)}"
        esperado = emb.token_embedding_table.weight[idx] + emb.position_embedding_table.weight[:t]
        assert torch.allclose(x, esperado), f"con T = {t}, x no es token + posición"


@pytest.mark.todo("positions")
def test_posiciones_en_el_dispositivo_de_idx():
    """En el dispositivo "meta" (formas sin datos) las posiciones también deben crearse ahí."""
    emb = bg.TokenPositionEmbedding(V, C, BLOCK).to("meta")
    creadas = []
    emb.position_embedding_table.register_forward_pre_hook(lambda mod, args: creadas.append(args[0].device))
    x = emb(torch.empty(B, T, dtype=torch.long, device="meta"))
    assert x.device.type == "meta" and x.shape == (B, T, C)
    assert all(d.type == "meta" for d in creadas), (
        f"las posiciones se crearon en {creadas[0]}, no en el dispositivo de idx: usa device=idx.device")


@pytest.mark.todo("last-step")
def test_generate_sigue_la_cadena_del_ultimo_token():
    """Con la tabla de _cadena, cada token nuevo es (último + 3) % V."""
    model = _cadena()
    idx = torch.tensor([[0, 1, 2], [7, 5, 9]])
    out = bg.generate(model, idx, 4, generator=torch.Generator().manual_seed(0))
    esperado = [[0, 1, 2, 5, 8, 0, 3], [7, 5, 9, 1, 4, 7, 10]]
    assert out.tolist() == esperado, f"generate devolvió {out.tolist()}, se esperaba {esperado}"


@pytest.mark.todo("sampling")
def test_generate_forma_prefijo_y_semilla():
    """(B, T + n), empieza por idx sin tocarlo, y con la misma semilla da lo mismo."""
    model = _bigrama()
    idx = _idx()
    copia = idx.clone()
    a = bg.generate(model, idx, 6, generator=torch.Generator().manual_seed(1))
    assert a.shape == (B, T + 6) and a.dtype == torch.long, f"forma {tuple(a.shape)}, dtype {a.dtype}"
    assert torch.equal(idx, copia), "generate no debe modificar el idx que recibe"
    assert torch.equal(a[:, :T], idx), "la salida debe empezar por el contexto idx"
    torch.manual_seed(123)  # el azar debe salir del generator, no del generador global
    b = bg.generate(model, idx, 6, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b), "con la misma semilla del generator la salida debe repetirse"
    c = bg.generate(model, idx, 6, generator=torch.Generator().manual_seed(2))
    assert not torch.equal(a, c), "con otra semilla la salida debería cambiar: ¿muestreas con torch.multinomial?"
