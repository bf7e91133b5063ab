"""El bloque Transformer y el modelo GPT completo (al estilo de nanoGPT).

Las piezas, de abajo arriba:
- MLP: la red de cada posición por separado, C -> 4C -> C;
- Block: atención (la tuya, de la lección 03) y MLP, cada una con su LayerNorm delante
  (pre-norm) y sumada a una conexión residual;
- GPT: embeddings de token y de posición, n_layer bloques, LayerNorm final y la cabeza
  lm_head, que comparte su matriz con el embedding de tokens.

Nombres de las dimensiones en los comentarios de forma: B lote, T longitud (T <= block_size),
C n_embd, V vocab_size.
"""

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

# La lección 04 usa tu atención de la lección 03: esa carpeta pasa a ser importable. Se añade
# al final de sys.path para que, al corregir, mande la attention.py que se pone junto a este
# archivo (la de referencia, o la tuya en la comprobación de encaje).
sys.path.append(str(Path(__file__).resolve().parents[1] / "03-atencion-causal"))
from attention import CausalSelfAttention  # noqa: E402


@dataclass
class GPTConfig:
    """Hiperparámetros del modelo; la atención usa n_embd, n_head, block_size y dropout."""

    vocab_size: int = 72
    block_size: int = 64
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0


class MLP(nn.Module):
    """La parte de cada posición por separado: (B, T, C) -> (B, T, C)."""

    def __init__(self, cfg):
        super().__init__()
        # TODO [mlp]: crea cuatro capas con estos nombres: c_fc (nn.Linear de C a 4C),
        # gelu (nn.GELU() exacta, no la aproximación tanh de GPT-2), c_proj (nn.Linear de
        # 4C a C) y dropout (nn.Dropout con
        # p = cfg.dropout). La capa intermedia es 4 veces más ancha: ahí cabe lo que cada
        # posición "piensa" por su cuenta tras haber mirado a las demás con la atención.
        raise NotImplementedError("TODO [mlp] pendiente: la MLP: C -> 4C -> C con GELU y dropout")

    def forward(self, x):
        # TODO [mlp]: aplica las cuatro capas en orden: c_fc, gelu, c_proj y dropout.
        # Las formas: (B, T, C) -> (B, T, 4C) -> (B, T, C).
        raise NotImplementedError("TODO [mlp] pendiente: la MLP: C -> 4C -> C con GELU y dropout")


class Block(nn.Module):
    """Un bloque Transformer pre-norm: (B, T, C) -> (B, T, C)."""

    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = MLP(cfg)

    def forward(self, x):
        # TODO [pre-norm]: define a, la salida de self.attn, con su LayerNorm DELANTE:
        # a la atención le llega x normalizada por self.ln_1, y x sin normalizar queda para
        # la conexión residual. (El Transformer original normalizaba después de sumar,
        # ln(x + attn(x)); normalizar antes deja limpio el camino residual.)
        raise NotImplementedError("TODO [pre-norm] pendiente: normaliza antes de cada subcapa (pre-norm)")
        # TODO [residual]: suma a a x (la conexión residual).
        # Guarda el resultado en x: la MLP trabajará con esa x ya actualizada.
        raise NotImplementedError("TODO [residual] pendiente: suma cada subcapa a la conexión residual")
        # TODO [pre-norm]: define m, la salida de self.mlp.
        # También con su LayerNorm delante (la suya, self.ln_2), aplicada a la x que acabas
        # de actualizar.
        raise NotImplementedError("TODO [pre-norm] pendiente: normaliza antes de cada subcapa (pre-norm)")
        # TODO [residual]: y su conexión residual: suma m a x.
        raise NotImplementedError("TODO [residual] pendiente: suma cada subcapa a la conexión residual")
        return x


class GPT(nn.Module):
    """El modelo de lenguaje: idx (B, T) de enteros -> logits (B, T, V) y la pérdida."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(cfg.vocab_size, cfg.n_embd),  # token -> vector
            wpe=nn.Embedding(cfg.block_size, cfg.n_embd),  # posición -> vector
            drop=nn.Dropout(cfg.dropout),
            h=nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)]),
            ln_f=nn.LayerNorm(cfg.n_embd),
        ))
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        # TODO [weight-tying]: ata el embedding de tokens y lm_head: deben ser EL MISMO tensor,
        # no una copia. Los dos pesos tienen forma (V, C): asigna el nn.Parameter de
        # lm_head al atributo weight de self.transformer.wte.
        raise NotImplementedError("TODO [weight-tying] pendiente: ata lm_head al embedding de tokens (el mismo tensor)")
        # TODO [init]: inicializa los pesos. Aplica self._init_weights a todos los
        # submódulos (mira nn.Module.apply) y DESPUÉS reescala las proyecciones que
        # desembocan en el camino residual (los parámetros cuyo nombre acaba en
        # "proj.weight": attn.proj y mlp.c_proj; mira named_parameters) con una normal de
        # media 0 y desviación 0.02 / sqrt(2 * n_layer). Cada bloque suma 2 veces a la
        # residual: sin ese factor, su varianza crecería con la profundidad.
        raise NotImplementedError("TODO [init] pendiente: inicializa N(0, 0.02) y reescala las proyecciones residuales")

    def _init_weights(self, module):
        # N(0, 0.02) en Linear y Embedding, sesgos a 0: con pesos pequeños los logits
        # iniciales son casi iguales y la pérdida empieza cerca de ln(V).
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_params(self):
        """Parámetros distintos del modelo (los atados cuentan una vez)."""
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx, targets=None):
        B, T = idx.size()
        assert T <= self.cfg.block_size, f"secuencia de {T} tokens, block_size es {self.cfg.block_size}"
        pos = torch.arange(T, device=idx.device)  # (T,)
        tok_emb = self.transformer.wte(idx)  # (B, T, C)
        pos_emb = self.transformer.wpe(pos)  # (T, C), se difunde sobre B
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)  # (B, T, C)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)  # (B, T, V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))
        return logits, loss
