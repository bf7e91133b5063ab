"""Pruebas de práctica de la lección 01.

Son rápidas y visibles: léelas si una falla. Desde la raíz del repositorio:

    python -m pytest exercises/01-tokens-y-lotes

No sustituyen a `autograder grade 01`, que comprueba bastante más (y con otros datos).
Mientras un TODO siga pendiente, sus pruebas fallan con NotImplementedError. La marca
@pytest.mark.todo("...") de cada prueba dice qué TODO ejercita.
"""

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parent


def _load(name):
    # Un nombre propio de esta carpeta: exercises/ y solutions/ nunca comparten sys.modules.
    unique = f"_leccion01_{abs(hash(str(HERE)))}_{name}"
    if unique in sys.modules:
        return sys.modules[unique]
    spec = importlib.util.spec_from_file_location(unique, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[unique] = module
    spec.loader.exec_module(module)
    return module


data = _load("data")

FRASE = "¿Dónde está el niño? ¡Aquí!\nEl niño duerme."


def _datos(n):
    """Un tensor (n,) de valores distintos que no coinciden con sus posiciones."""
    return torch.arange(n, dtype=torch.long) * 3 + 100


@pytest.mark.todo("vocab")
def test_vocabulario_ordenado_y_sin_repetidos():
    """chars es la lista ordenada de caracteres distintos; vocab_size, su longitud."""
    tok = data.CharTokenizer("hola mundo")
    assert tok.chars == [" ", "a", "d", "h", "l", "m", "n", "o", "u"], (
        f"CharTokenizer('hola mundo').chars es {tok.chars!r}: debe ser sorted(set(text))"
    )
    assert tok.vocab_size == 9, f"vocab_size debe ser len(chars) = 9, es {tok.vocab_size!r}"


@pytest.mark.todo("vocab")
def test_stoi_e_itos_son_inversos():
    """stoi[chars[i]] == i e itos[i] == chars[i], también con tildes, eñes y saltos de línea."""
    tok = data.CharTokenizer(FRASE)
    assert tok.chars == sorted(set(FRASE)), f"chars no es sorted(set(text)): {tok.chars!r}"
    for i, ch in enumerate(tok.chars):
        assert tok.stoi[ch] == i, f"stoi[{ch!r}] debe ser {i}, es {tok.stoi[ch]!r}"
        assert tok.itos[i] == ch, f"itos[{i}] debe ser {ch!r}, es {tok.itos[i]!r}"


@pytest.mark.todo("encode-decode")
def test_ida_y_vuelta():
    """decode(encode(s)) == s, y encode da un id por carácter."""
    tok = data.CharTokenizer(FRASE)
    ids = tok.encode("el niño")
    assert ids == [tok.stoi[ch] for ch in "el niño"], f"encode('el niño') devolvió {ids!r}"
    assert tok.decode(ids) == "el niño", f"decode(encode('el niño')) es {tok.decode(ids)!r}"
    assert tok.decode(tok.encode(FRASE)) == FRASE
    assert tok.encode("") == [] and tok.decode([]) == ""


@pytest.mark.todo("encode-decode")
def test_caracter_desconocido():
    """Un carácter fuera del vocabulario: ValueError que dice cuál es y en qué posición."""
    tok = data.CharTokenizer("hola mundo")
    with pytest.raises(ValueError) as info:
        tok.encode("hola ßmundo")
    mensaje = str(info.value)
    assert "ß" in mensaje, f"el mensaje debe nombrar el carácter 'ß': {mensaje!r}"
    assert "5" in mensaje, f"el mensaje debe decir su posición (5): {mensaje!r}"


@pytest.mark.todo("encode-decode")
def test_el_corpus_de_ida_y_vuelta():
    """cuentos.txt: un vocabulario pequeño, y el texto entero sobrevive a encode y decode."""
    texto = data.load_corpus()
    tok = data.CharTokenizer(texto)
    assert tok.vocab_size < 120, f"¿{tok.vocab_size} caracteres distintos en cuentos.txt?"
    assert tok.decode(tok.encode(texto)) == texto


@pytest.mark.todo("split")
def test_split_conserva_el_orden():
    """train es el principio y val el final; juntos, data tal cual."""
    d = _datos(50)
    train, val = data.split(d, val_fraction=0.2)
    assert len(val) == 10 and len(train) == 40, f"con 50 tokens y 0.2: {len(train)} y {len(val)}"
    assert torch.equal(torch.cat([train, val]), d), "train seguido de val debe ser data, en orden"
    train, val = data.split(_datos(100))
    assert len(val) == 10, f"por defecto val_fraction = 0.1: len(val) es {len(val)}, no 10"


@pytest.mark.todo("batch-offsets")
def test_la_unica_ventana_y_la_semilla():
    """Con len(data) = block_size + 1 hay una sola ventana; misma semilla, mismo lote."""
    d = _datos(9)
    x, _ = data.get_batch(d, 8, 3, torch.Generator().manual_seed(0))
    assert torch.equal(x, d[:8].expand(3, 8)), f"la única ventana es data[:8]; x es\n{x}"
    d = _datos(200)
    a = data.get_batch(d, 8, 4, torch.Generator().manual_seed(1))
    b = data.get_batch(d, 8, 4, torch.Generator().manual_seed(1))
    assert torch.equal(a[0], b[0]), "misma semilla, mismo lote: ¿usas generator=generator?"


@pytest.mark.todo("targets-shift")
def test_y_es_x_desplazada():
    """x e y son (B, T) e int64, e y[b] es la ventana de x[b] una posición a la derecha."""
    d = _datos(60)
    x, y = data.get_batch(d, 5, 4, torch.Generator().manual_seed(2))
    assert x.shape == (4, 5) and y.shape == (4, 5), f"formas {tuple(x.shape)} y {tuple(y.shape)}"
    assert x.dtype == torch.int64 and y.dtype == torch.int64, f"tipos {x.dtype} y {y.dtype}"
    assert torch.equal(x[:, 1:], y[:, :-1]), f"y debe ser x desplazada una posición:\n{x}\n{y}"
    assert torch.equal(y[:, -1], x[:, -1] + 3), "el último objetivo es el token que sigue a x"
