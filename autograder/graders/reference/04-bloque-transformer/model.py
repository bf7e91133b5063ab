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
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x):
        x = self.c_fc(x)  # (B, T, 4C)
        x = self.gelu(x)
        x = self.c_proj(x)  # (B, T, C)
        return self.dropout(x)


class Block(nn.Module):
    """Un bloque Transformer pre-norm: (B, T, C) -> (B, T, C)."""

    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = MLP(cfg)

    def forward(self, x):
        a = self.attn(self.ln_1(x))
        x = x + a  # (B, T, C)
        m = self.mlp(self.ln_2(x))
        x = x + m  # (B, T, C)
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
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

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
