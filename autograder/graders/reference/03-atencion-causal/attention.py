"""Self-attention causal con varias cabezas, en PyTorch (al estilo de nanoGPT).

Es la misma cuenta que attention_numpy.py, ahora con un lote de B secuencias y n_head
cabezas a la vez. Nombres de las dimensiones en los comentarios de forma:

    B  tamaño del lote          T  longitud de la secuencia (T <= block_size)
    C  n_embd                   nh n_head
    hs tamaño de cada cabeza = C // nh

La cabeza h trabaja con los canales [h*hs, (h+1)*hs) de q, k y v. Para que todas las
cabezas se calculen en paralelo, pasan a ser una dimensión más del lote: (B, nh, T, hs).

Hay dos caminos que deben dar el mismo resultado:
- explícito (fused=False): puntuaciones, máscara, softmax y suma ponderada, paso a paso;
- fusionado (fused=True): una sola llamada a F.scaled_dot_product_attention, que hace lo
  mismo con un kernel optimizado y sin guardar la matriz (T, T) completa.

Convenciones del curso (el corrector las comprueba; ver el README): la máscara vale 1/True
donde se puede mirar (j <= i, como torch.tril); los pesos (B, nh, T, T) ya normalizados pasan
exactamente una vez por el dropout de los pesos (una por cabeza si las calculas en un bucle)
y la salida de proj por el dropout de salida; todo tensor creado en forward nace en x.device.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class AttentionConfig:
    """Hiperparámetros de la atención; sirve cualquier objeto con estos cuatro atributos."""

    n_embd: int = 64
    n_head: int = 4
    block_size: int = 32  # la T máxima: el tamaño de la máscara que se registra
    dropout: float = 0.0


class CausalSelfAttention(nn.Module):
    """Self-attention causal multi-cabeza: x (B, T, C) -> y (B, T, C)."""

    def __init__(self, cfg, fused: bool = False):
        super().__init__()
        assert cfg.n_embd % cfg.n_head == 0, "n_embd debe ser múltiplo de n_head"
        self.n_head = cfg.n_head
        self.n_embd = cfg.n_embd
        self.dropout = cfg.dropout
        self.fused = fused
        # Una sola capa produce q, k y v para todas las cabezas: una matmul grande en lugar
        # de 3 * n_head pequeñas. Su salida se parte en ese orden: q, k, v.
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        # Tras concatenar las cabezas, mezcla lo que ha encontrado cada una.
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.attn_drop = nn.Dropout(cfg.dropout)
        self.resid_drop = nn.Dropout(cfg.dropout)
        bs = cfg.block_size
        tril = torch.tril(torch.ones(bs, bs, dtype=torch.bool))
        # Un buffer sigue a .to(device) como los parámetros, pero no se entrena; no
        # persistente porque se recalcula aquí y no tiene nada que guardar en el state_dict.
        self.register_buffer("mask", tril.view(1, 1, bs, bs), persistent=False)

    def forward(self, x):
        B, T, C = x.size()
        hs = C // self.n_head
        qkv = self.qkv(x)  # (B, T, 3C)

        q, k, v = qkv.split(C, dim=2)  # 3 x (B, T, C)
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)

        if self.fused:
            y = self._fused_attention(q, k, v)  # (B, nh, T, hs)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, nh, T, T)
            att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
            # Cada fila es una distribución sobre las claves: el futuro, con -inf, recibe 0.
            att = F.softmax(att, dim=-1)
            att = self.attn_drop(att)
            y = att @ v  # (B, nh, T, T) @ (B, nh, T, hs) -> (B, nh, T, hs)

        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.resid_drop(self.proj(y))

    def _fused_attention(self, q, k, v):
        """Camino fusionado: (B, nh, T, hs) x3 -> (B, nh, T, hs)."""
        return F.scaled_dot_product_attention(
            q, k, v,
            attn_mask=None,
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=True,
        )
