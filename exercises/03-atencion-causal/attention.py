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
        # TODO [mask]: registra la máscara causal como buffer no persistente llamado "mask".
        # Construye una matriz triangular inferior de unos (block_size, block_size) (mira
        # torch.tril), dale forma (1, 1, block_size, block_size) para que se difunda sobre
        # (B, nh, T, T) y regístrala con self.register_buffer(..., persistent=False).
        raise NotImplementedError("TODO [mask] pendiente: registra la máscara causal y aplícala recortada a T")

    def forward(self, x):
        B, T, C = x.size()
        hs = C // self.n_head
        qkv = self.qkv(x)  # (B, T, 3C)

        # TODO [head-reshape]: define q, k, v con forma (B, nh, T, hs).
        # Parte qkv en q, k, v de forma (B, T, C) cada uno (en ese orden, por la última
        # dimensión: mira Tensor.split). Después, en cada uno, separa C en (nh, hs) con
        # .view y mueve las cabezas delante de T con .transpose.
        raise NotImplementedError("TODO [head-reshape] pendiente: separa q, k, v en cabezas")

        if self.fused:
            y = self._fused_attention(q, k, v)  # (B, nh, T, hs)
        else:
            # TODO [scaling]: define las puntuaciones att con forma (B, nh, T, T).
            # att = q por k traspuesta (traspón solo las dos últimas dimensiones de k),
            # multiplicado por 1/sqrt(hs).
            raise NotImplementedError("TODO [scaling] pendiente: escala las puntuaciones por 1/sqrt(hs)")
            # TODO [mask]: pon -inf en att donde la máscara causal vale 0.
            # Recorta antes self.mask a las T posiciones reales ([:, :, :T, :T]); mira
            # Tensor.masked_fill.
            raise NotImplementedError("TODO [mask] pendiente: registra la máscara causal y aplícala recortada a T")
            # Cada fila es una distribución sobre las claves: el futuro, con -inf, recibe 0.
            att = F.softmax(att, dim=-1)
            att = self.attn_drop(att)
            y = att @ v  # (B, nh, T, T) @ (B, nh, T, hs) -> (B, nh, T, hs)

        # TODO [contiguous-view]: une las cabezas: y pasa de (B, nh, T, hs) a (B, T, C).
        # Vuelve a poner T antes que nh con .transpose y junta (nh, hs) en C con .view.
        # Ojo: tras transpose el tensor no es contiguo en memoria y .view fallaría; haz
        # antes .contiguous().
        raise NotImplementedError("TODO [contiguous-view] pendiente: vuelve a unir las cabezas")
        return self.resid_drop(self.proj(y))

    def _fused_attention(self, q, k, v):
        """Camino fusionado: (B, nh, T, hs) x3 -> (B, nh, T, hs)."""
        # TODO [fused]: devuelve el resultado de F.scaled_dot_product_attention.
        # Pásale q, k, v, sin attn_mask, con is_causal=True y dropout_p = self.dropout
        # solo en entrenamiento (0.0 si no: mira self.training). Ya escala por
        # 1/sqrt(hs) por su cuenta.
        raise NotImplementedError("TODO [fused] pendiente: el camino fusionado con scaled_dot_product_attention")
