"""El modelo bigrama, los embeddings de token y de posición, y un bucle de muestreo.

Es el primer modelo de lenguaje del curso, y el más simple: predice el token siguiente
mirando solo el token actual. Nombres de las dimensiones en los comentarios de forma:

    B  tamaño del lote          T  longitud de la secuencia
    V  vocab_size               C  n_embd (el tamaño de cada embedding)

De abajo arriba:
- BigramLanguageModel: una tabla (V, V) cuya fila i son los logits de "qué token sigue a i".
  forward(idx, targets=None) -> (logits (B, T, V), loss), con loss None sin targets.
- TokenPositionEmbedding: qué token es y en qué posición está, sumados en un vector de C
  números. Es la entrada del GPT de la lección 04.
- generate(model, idx, max_new_tokens, generator=None): alarga cada secuencia muestreando
  un token tras otro de la distribución que da la última posición.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class BigramLanguageModel(nn.Module):
    """idx (B, T) int64 -> (logits (B, T, V), loss); loss es None si no hay targets."""

    def __init__(self, vocab_size):
        super().__init__()
        self.vocab_size = vocab_size
        # El modelo entero es esta tabla (V, V): la fila i son los V logits del token que
        # sigue a i. No hay contexto más allá del token actual, de ahí "bigrama".
        self.token_embedding_table = nn.Embedding(vocab_size, vocab_size)

    def forward(self, idx, targets=None):
        # TODO [embedding-lookup]: define logits (B, T, V): la fila de la tabla de cada token de idx.
        # Un nn.Embedding se llama como una función con un tensor de índices enteros y
        # devuelve las filas de su tabla (.weight, de forma (V, V)) en esas posiciones.
        raise NotImplementedError("TODO [embedding-lookup] pendiente: busca los logits de cada token en la tabla")

        # TODO [loss-reshape]: define loss: None sin targets; con targets, la entropía cruzada media.
        # F.cross_entropy espera logits (N, V) y targets (N,), así que junta B y T en
        # N = B*T con .view, en variables aparte: logits debe seguir siendo (B, T, V) al
        # devolverlo. La fila n de los logits y el elemento n de targets deben ser la misma
        # posición (b, t).
        raise NotImplementedError("TODO [loss-reshape] pendiente: la entropía cruzada sobre (B*T, V), o None sin targets")
        return logits, loss


class TokenPositionEmbedding(nn.Module):
    """idx (B, T) int64, con T <= block_size -> x (B, T, C): token + posición."""

    def __init__(self, vocab_size, n_embd, block_size):
        super().__init__()
        self.block_size = block_size
        self.token_embedding_table = nn.Embedding(vocab_size, n_embd)  # (V, C)
        # Una fila por posición posible: el modelo no sabe nada de posiciones >= block_size.
        self.position_embedding_table = nn.Embedding(block_size, n_embd)  # (block_size, C)

    def forward(self, idx):
        B, T = idx.shape
        assert T <= self.block_size, f"la secuencia tiene {T} tokens, más que block_size = {self.block_size}"
        tok = self.token_embedding_table(idx)  # (B, T, C)
        # TODO [positions]: define x (B, T, C): tok más el embedding de las posiciones 0..T-1.
        # Crea esas posiciones con torch.arange en el mismo dispositivo que idx (argumento
        # device=idx.device): si el modelo está en la GPU, un tensor creado en la CPU falla.
        # El resultado de la tabla de posiciones es (T, C) y se difunde sobre el lote.
        raise NotImplementedError("TODO [positions] pendiente: suma los embeddings de las posiciones 0..T-1, creadas en el dispositivo de idx")
        return x


@torch.no_grad()
def generate(model, idx, max_new_tokens, generator=None):
    """Alarga cada fila de idx (B, T) con max_new_tokens tokens: devuelve (B, T + max_new_tokens).

    `model(idx)` debe devolver (logits (B, T, V), loss). Cada token nuevo se muestrea con
    torch.multinomial usando `generator` (un torch.Generator, o None para el global), de
    modo que con la misma semilla sale el mismo texto. idx no se modifica.
    """
    for _ in range(max_new_tokens):
        logits, _ = model(idx)  # (B, T, V)
        # TODO [last-step]: quédate solo con los logits de la última posición: forma (B, V).
        # Son los únicos que predicen un token que aún no está en idx.
        raise NotImplementedError("TODO [last-step] pendiente: quédate con los logits de la última posición")
        # TODO [sampling]: muestrea un token por fila y añádelo al final de idx.
        # Pasa a probabilidades lo que te dejó el paso anterior, con una softmax sobre el
        # vocabulario (la última dimensión), saca un índice por fila con
        # torch.multinomial(probs, num_samples=1, generator=generator), de forma (B, 1), y
        # concaténalo a idx por la dimensión del tiempo con torch.cat (crea un tensor
        # nuevo: no modifiques el idx que te pasaron).
        raise NotImplementedError("TODO [sampling] pendiente: muestrea el token siguiente y concaténalo")
    return idx
