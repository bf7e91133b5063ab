"""Entrenar el GPT: el optimizador, la tasa de aprendizaje, un paso de entrenamiento y la
pérdida de validación (al estilo de nanoGPT).

De abajo arriba:
- configure_optimizer: AdamW con dos grupos de parámetros, uno con decaimiento de pesos
  (las matrices) y otro sin él (sesgos y LayerNorm);
- get_lr: la tasa de aprendizaje de cada paso, con calentamiento lineal y decaimiento coseno;
- train_step: un paso completo, de los gradientes a cero a optimizer.step();
- estimate_loss: la pérdida media sobre unos lotes, en modo evaluación y sin gradientes;
- train: el bucle que junta las cuatro piezas.

El modelo es el GPT de la lección 04 (con tu atención de la lección 03):
model(x, targets) -> (logits (B, T, V), loss), con x y targets (B, T) de enteros.
"""

import math
import sys
from pathlib import Path

import torch

# Tu GPT de la lección 04 y tu atención de la lección 03 pasan a ser importables. Se añaden
# al final de sys.path para que, al corregir, manden los archivos que se ponen junto a este
# (los de referencia, o los tuyos en la comprobación de encaje).
sys.path.append(str(Path(__file__).resolve().parents[1] / "04-bloque-transformer"))
sys.path.append(str(Path(__file__).resolve().parents[1] / "03-atencion-causal"))
from model import GPT, GPTConfig  # noqa: E402


def configure_optimizer(model, weight_decay=0.1, learning_rate=1e-3, betas=(0.9, 0.95)):
    """AdamW sobre los parámetros entrenables de model, en dos grupos y en este orden:

    0. los de 2 o más dimensiones (matrices de las capas lineales y embeddings), con
       weight_decay;
    1. el resto (sesgos y pesos de LayerNorm, de 1 dimensión), con weight_decay = 0.

    Cada parámetro con requires_grad está en exactamente un grupo; los congelados, en ninguno.
    """
    # TODO [weight-decay-groups]: devuelve un torch.optim.AdamW con dos grupos de parámetros.
    # Recorre model.parameters() (da cada tensor una sola vez, también el que comparten
    # wte y lm_head) y salta los que no tienen requires_grad. Reparte el resto según
    # p.dim(): >= 2 al primer grupo, < 2 al segundo. Cada grupo es un diccionario
    # {"params": [...], "weight_decay": ...}; pasa a AdamW la lista de los dos,
    # lr=learning_rate y betas=betas.
    raise NotImplementedError("TODO [weight-decay-groups] pendiente: dos grupos de parámetros: decaimiento solo en tensores de 2 o más dimensiones")


def get_lr(step, *, max_lr, min_lr, warmup_steps, max_steps):
    """La tasa de aprendizaje del paso `step` (0, 1, 2...), un float:

    - step < warmup_steps: sube en línea recta, max_lr * (step + 1) / warmup_steps (ojo: el
      get_lr de nanoGPT divide entre warmup_steps + 1; aquí se divide entre warmup_steps);
    - de warmup_steps a max_steps: baja de max_lr a min_lr siguiendo medio coseno;
    - desde max_steps: min_lr.
    """
    # TODO [lr-schedule]: devuelve la tasa del paso step según los tres tramos del docstring.
    # Calentamiento: el (step + 1) hace que el paso 0 ya tenga una tasa > 0 y que el
    # último paso de calentamiento llegue justo a max_lr. Coseno: con
    # ratio = (step - warmup_steps) / (max_steps - warmup_steps), que va de 0 a 1,
    # coeff = 0.5 * (1 + cos(pi * ratio)) va de 1 a 0; la tasa es
    # min_lr + coeff * (max_lr - min_lr). Mira math.cos y math.pi.
    raise NotImplementedError("TODO [lr-schedule] pendiente: calentamiento lineal y decaimiento coseno de la tasa de aprendizaje")


def train_step(model, optimizer, x, y, grad_clip=1.0):
    """Un paso de entrenamiento con el lote (x, y), los dos (B, T).

    Devuelve la pérdida del lote ANTES de actualizar los pesos, como float de Python.
    Con grad_clip > 0 recorta la norma global del gradiente a grad_clip; con 0, no recorta.
    """
    # TODO [zero-grad]: pon a cero los gradientes antes de calcular los nuevos.
    # loss.backward() SUMA cada gradiente al .grad que ya tenga el parámetro: sin
    # optimizer.zero_grad(), cada paso arrastraría los gradientes de todos los anteriores.
    raise NotImplementedError("TODO [zero-grad] pendiente: pon a cero los gradientes antes de cada paso")
    _, loss = model(x, y)  # logits (B, T, V) y la pérdida, un tensor escalar
    loss.backward()
    # TODO [grad-clip]: si grad_clip > 0, recorta la norma global del gradiente a grad_clip.
    # La norma es la de todos los gradientes juntos: mira
    # torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip). Va aquí, entre
    # backward() (que calcula los gradientes) y step() (que los usa). Con grad_clip = 0
    # no hagas nada.
    raise NotImplementedError("TODO [grad-clip] pendiente: recorta la norma del gradiente antes de actualizar")
    optimizer.step()
    return loss.item()


def estimate_loss(model, batches):
    """La pérdida media de model sobre batches, un iterable de pares (x, y); un float de
    Python (no un tensor, como devuelve el estimate_loss de nanoGPT). batches puede ser un
    generador: no tiene len() y solo se recorre una vez.

    Mide sin entrenar: en modo evaluación (el dropout se apaga) y sin gradientes. Al
    terminar, model vuelve al modo en que estaba, train o eval.
    """
    # TODO [eval-mode]: devuelve la pérdida media de model(x, y) sobre los pares de batches.
    # Antes, guarda el modo en que está el modelo (model.training, True o False) y pásalo
    # a evaluación con model.eval(). Calcula las pérdidas dentro de `with torch.no_grad():`
    # (sin grafo de autograd: menos memoria y más rapidez) y conviértelas en floats con
    # .item(). Al acabar, devuelve el modelo a su modo: model.train(el modo guardado).
    raise NotImplementedError("TODO [eval-mode] pendiente: estima la pérdida en modo evaluación, sin gradientes, y restaura el modo")


def train(model, get_batch, *, steps, learning_rate, min_lr, warmup_steps, weight_decay=0.1,
          grad_clip=1.0, eval_every=100, eval_batches=10, log=print):
    """Entrena model durante `steps` pasos y devuelve la lista de pérdidas de entrenamiento.

    get_batch(split) devuelve un lote (x, y) de "train" o de "val". Cada eval_every pasos (y
    en el último) mide la pérdida de validación con eval_batches lotes y la escribe con log.
    """
    optimizer = configure_optimizer(model, weight_decay=weight_decay, learning_rate=learning_rate)
    model.train()
    losses = []
    for step in range(steps):
        lr = get_lr(step, max_lr=learning_rate, min_lr=min_lr, warmup_steps=warmup_steps, max_steps=steps)
        # Los dos grupos cambian de tasa a la vez; su weight_decay no cambia.
        for group in optimizer.param_groups:
            group["lr"] = lr
        x, y = get_batch("train")
        losses.append(train_step(model, optimizer, x, y, grad_clip))
        if (step + 1) % eval_every == 0 or step == steps - 1:
            val = estimate_loss(model, (get_batch("val") for _ in range(eval_batches)))
            log(f"paso {step + 1:4d}/{steps} | lr {lr:.2e} | pérdida train {losses[-1]:.4f} | val {val:.4f}")
    return losses


if __name__ == "__main__":
    # python train.py: un entrenamiento corto (uno o dos minutos en CPU) con los cuentos del
    # curso y los lotes de tu lección 01. La pérdida empieza cerca de ln(vocab_size) y baja.
    sys.path.append(str(Path(__file__).resolve().parents[1] / "01-tokens-y-lotes"))
    from data import CharTokenizer, get_batch, load_corpus, split

    torch.manual_seed(0)
    text = load_corpus()
    tok = CharTokenizer(text)
    train_data, val_data = split(torch.tensor(tok.encode(text), dtype=torch.long))
    cfg = GPTConfig(vocab_size=tok.vocab_size, block_size=64, n_layer=4, n_head=4, n_embd=64, dropout=0.1)
    gpt = GPT(cfg)
    print(f"{gpt.num_params()} parámetros; ln(vocab_size) = {math.log(tok.vocab_size):.2f}")
    gen = torch.Generator().manual_seed(0)

    def batch(which):
        return get_batch(train_data if which == "train" else val_data, cfg.block_size, 32, gen)

    train(gpt, batch, steps=500, learning_rate=3e-3, min_lr=3e-4, warmup_steps=50, eval_every=100)
