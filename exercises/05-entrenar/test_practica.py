"""Pruebas de práctica de la lección 05.

Son rápidas y visibles: léelas si una falla. Desde la raíz del repositorio:

    pytest exercises/05-entrenar

No sustituyen a `autograder grade 05`, que comprueba bastante más (y con otros datos).
Mientras un TODO siga pendiente, sus pruebas fallan con NotImplementedError. La marca
@pytest.mark.todo("...") de cada prueba dice qué TODO ejercita.

Usan un modelo diminuto definido aquí, con la misma interfaz que el GPT
(model(x, y) -> (logits, loss)): no hace falta haber terminado las lecciones 03 y 04 (aunque
train.py importa sus archivos, así que deben poder importarse).
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
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))


def _load(name):
    unique = f"_leccion05_{abs(hash(str(HERE)))}_{name}"
    if unique in sys.modules:
        return sys.modules[unique]
    spec = importlib.util.spec_from_file_location(unique, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[unique] = module
    spec.loader.exec_module(module)
    return module


tr = _load("train")

V, C, B, T = 11, 8, 4, 6


class Diminuto(nn.Module):
    """Un modelo de lenguaje mínimo: tiene lo que importa en esta lección (un embedding atado
    a la cabeza, una capa lineal con sesgo, una LayerNorm y dropout)."""

    def __init__(self, dropout=0.0):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.fc = nn.Linear(C, C)
        self.ln = nn.LayerNorm(C)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(C, V, bias=False)
        self.head.weight = self.wte.weight  # atados, como en el GPT: el mismo tensor

    def forward(self, idx, targets=None):
        x = self.drop(torch.tanh(self.fc(self.wte(idx))))  # (B, T, C)
        logits = self.head(self.ln(x))  # (B, T, V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, V), targets.view(-1))
        return logits, loss


def _modelo(dropout=0.0):
    torch.manual_seed(0)
    return Diminuto(dropout)


def _lote(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(V, (B, T), generator=g), torch.randint(V, (B, T), generator=g)


def _norma_de_los_gradientes(model):
    return math.sqrt(sum(float(p.grad.pow(2).sum()) for p in model.parameters() if p.grad is not None))


def _gradientes_de(model, x, y):
    """Los gradientes de la pérdida de (x, y), calculados aquí aparte."""
    copia = Diminuto()
    copia.load_state_dict(model.state_dict())
    copia(x, y)[1].backward()
    return [p.grad.clone() for p in copia.parameters()]


# --- TODO [weight-decay-groups] -----------------------------------------------------------


@pytest.mark.todo("weight-decay-groups")
def test_dos_grupos_por_dimension():
    """AdamW, dos grupos: primero los de 2 o más dimensiones (con decaimiento), luego el resto."""
    m = _modelo()
    opt = tr.configure_optimizer(m, weight_decay=0.1, learning_rate=1e-3)
    assert isinstance(opt, torch.optim.AdamW), f"configure_optimizer debe devolver AdamW, no {type(opt).__name__}"
    grupos = opt.param_groups
    assert len(grupos) == 2, f"debe haber 2 grupos de parámetros, hay {len(grupos)}"
    ids = [[id(p) for p in g["params"]] for g in grupos]
    matrices = {id(p) for p in m.parameters() if p.dim() >= 2}
    vectores = {id(p) for p in m.parameters() if p.dim() < 2}
    assert set(ids[0]) == matrices, "el grupo 0 debe tener exactamente los parámetros con dim() >= 2"
    assert set(ids[1]) == vectores, "el grupo 1 debe tener exactamente los parámetros con dim() < 2"
    assert len(ids[0]) + len(ids[1]) == len(matrices | vectores), (
        "cada parámetro debe aparecer una sola vez (el peso atado de wte y head también)"
    )
    assert grupos[0]["weight_decay"] == 0.1 and grupos[1]["weight_decay"] == 0.0, (
        f"weight_decay de los grupos: {grupos[0]['weight_decay']} y {grupos[1]['weight_decay']}; "
        "se esperaba 0.1 y 0.0"
    )


@pytest.mark.todo("weight-decay-groups")
def test_congelados_fuera():
    """Los parámetros con requires_grad = False no van a ningún grupo."""
    m = _modelo()
    m.ln.requires_grad_(False)
    opt = tr.configure_optimizer(m)
    en_grupos = {id(p) for g in opt.param_groups for p in g["params"]}
    assert id(m.ln.weight) not in en_grupos and id(m.ln.bias) not in en_grupos, (
        "la LayerNorm está congelada y no debería estar en el optimizador"
    )
    assert en_grupos == {id(p) for p in m.parameters() if p.requires_grad}, (
        "todos los parámetros entrenables deben estar en algún grupo"
    )


# --- TODO [lr-schedule] -------------------------------------------------------------------


@pytest.mark.todo("lr-schedule")
@pytest.mark.parametrize(
    "step, esperada",
    [(0, 1e-4), (9, 1e-3), (10, 1e-3), (60, 5.5e-4), (110, 1e-4), (500, 1e-4)],
    ids=["paso0", "fin-calentamiento", "inicio-coseno", "mitad", "max_steps", "despues"],
)
def test_tasa_en_los_puntos_clave(step, esperada):
    """warmup_steps=10, max_steps=110, max_lr=1e-3, min_lr=1e-4."""
    lr = tr.get_lr(step, max_lr=1e-3, min_lr=1e-4, warmup_steps=10, max_steps=110)
    assert math.isclose(lr, esperada, rel_tol=1e-6), f"get_lr({step}, ...) = {lr}; se esperaba {esperada}"


# --- TODO [zero-grad] y [grad-clip] -------------------------------------------------------
# Con SGD y lr = 0 los pesos no cambian: tras train_step, .grad es justo lo que llegó a step().


@pytest.mark.todo("zero-grad")
def test_los_gradientes_no_se_acumulan():
    """Tras dos pasos seguidos, .grad tiene solo el gradiente del segundo lote."""
    m = _modelo()
    opt = torch.optim.SGD(m.parameters(), lr=0.0)
    (xa, ya), (xb, yb) = _lote(1), _lote(2)
    tr.train_step(m, opt, xa, ya, grad_clip=1e6)
    tr.train_step(m, opt, xb, yb, grad_clip=1e6)
    for got, esperado in zip([p.grad for p in m.parameters()], _gradientes_de(m, xb, yb)):
        assert got is not None and torch.allclose(got, esperado, atol=1e-6), (
            "el .grad tras el segundo paso no es el gradiente del segundo lote: ¿se suman los del primero?"
        )


@pytest.mark.todo("grad-clip")
def test_recorta_la_norma_global():
    """Por encima de grad_clip, la norma queda en grad_clip; por debajo o con 0, no cambia."""
    x, y = _lote(3)
    total = math.sqrt(sum(float(g.pow(2).sum()) for g in _gradientes_de(_modelo(), x, y)))
    for grad_clip, esperada in ((0.5 * total, 0.5 * total), (2.0 * total, total), (0.0, total)):
        m = _modelo()
        tr.train_step(m, torch.optim.SGD(m.parameters(), lr=0.0), x, y, grad_clip=grad_clip)
        norma = _norma_de_los_gradientes(m)
        assert math.isclose(norma, esperada, rel_tol=1e-4), (
            f"con grad_clip={grad_clip:.4g} (norma sin recortar {total:.4g}) la norma del gradiente "
            f"quedó en {norma:.4g}; se esperaba {esperada:.4g}"
        )


def test_devuelve_la_perdida_antes_del_paso():
    """train_step devuelve un float: la pérdida del lote con los pesos de antes del paso."""
    m = _modelo()
    x, y = _lote(4)
    with torch.no_grad():
        antes = m(x, y)[1].item()
    perdida = tr.train_step(m, torch.optim.SGD(m.parameters(), lr=0.5), x, y)
    assert isinstance(perdida, float), f"train_step debe devolver un float, no {type(perdida).__name__}"
    assert math.isclose(perdida, antes, rel_tol=1e-5), f"devolvió {perdida}; la pérdida antes del paso es {antes}"


# --- TODO [eval-mode] ---------------------------------------------------------------------


@pytest.mark.todo("eval-mode")
@pytest.mark.parametrize("entrenando", [True, False], ids=["desde-train", "desde-eval"])
def test_estimate_loss(entrenando):
    """La media en modo eval (sin dropout), sin gradientes, y el modelo vuelve a su modo."""
    m = _modelo(dropout=0.5)
    m.train(entrenando)
    lotes = [_lote(s) for s in (5, 6, 7)]
    perdida = tr.estimate_loss(m, lotes)
    assert isinstance(perdida, float), f"estimate_loss debe devolver un float, no {type(perdida).__name__}"
    assert m.training is entrenando and m.drop.training is entrenando, (
        f"el modelo estaba en modo {'train' if entrenando else 'eval'} y no volvió a él"
    )
    assert all(p.grad is None for p in m.parameters()), "estimate_loss no debe dejar gradientes"
    m.eval()
    with torch.no_grad():
        esperada = sum(m(x, y)[1].item() for x, y in lotes) / len(lotes)
    assert math.isclose(perdida, esperada, rel_tol=1e-5), (
        f"devolvió {perdida}; la media con el dropout apagado es {esperada}"
    )


# --- todo junto ---------------------------------------------------------------------------


def test_aprende_una_regla_sencilla():
    """train aprende «el siguiente token es el actual + 1»: la pérdida baja a menos de la mitad."""
    m = _modelo()
    x, _ = _lote(8)
    y = (x + 1) % V
    perdidas = tr.train(m, lambda split: (x, y), steps=80, learning_rate=3e-2, min_lr=3e-3,
                        warmup_steps=5, eval_every=1000, eval_batches=1, log=lambda texto: None)
    assert len(perdidas) == 80, f"train debe devolver una pérdida por paso (80), devolvió {len(perdidas)}"
    assert perdidas[-1] < 0.5 * perdidas[0], f"la pérdida pasó de {perdidas[0]:.3f} a {perdidas[-1]:.3f}"
