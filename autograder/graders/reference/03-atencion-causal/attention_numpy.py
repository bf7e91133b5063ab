"""Calentamiento en NumPy: self-attention causal de una sola cabeza, sin lote.

Antes de escribir la versión de PyTorch con varias cabezas y lotes, aquí haces la misma
cuenta a mano sobre matrices pequeñas, donde cada forma cabe en la cabeza:

    X (T, d_model) --W_Q, W_K, W_V--> Q, K (T, d_k) y V (T, d_v)
    puntuaciones = Q K^T / sqrt(d_k) + máscara      (T, T)
    pesos = softmax por filas                        (T, T)
    salida = pesos V                                 (T, d_v)

La fila i de `pesos` dice cuánto mira el token i a cada token j. La máscara causal hace
que esos pesos sean exactamente 0 cuando j > i: ningún token ve el futuro.
"""

import numpy as np


def causal_mask(T):
    """Máscara causal aditiva de forma (T, T).

    Vale 0 donde la clave j puede verse desde la consulta i (j <= i) y un número negativo
    enorme (-1e9 o -inf) donde j > i, para que tras la softmax el futuro pese 0.
    """
    future = np.triu(np.ones((T, T), dtype=bool), k=1)  # True donde j > i
    # -1e9 en lugar de -inf: exp(-1e9) ya es 0 y así la máscara nunca produce NaN si
    # alguien la multiplica por 0.
    return np.where(future, -1e9, 0.0)


def softmax(x, axis=-1):
    """Softmax numéricamente estable a lo largo de `axis`; devuelve la misma forma que x.

    Debe funcionar con entradas del orden de 1e3, donde np.exp(x) desborda a inf.
    """
    z = x - np.max(x, axis=axis, keepdims=True)  # el mayor exponente pasa a ser 0
    e = np.exp(z)
    return e / np.sum(e, axis=axis, keepdims=True)


def masked_self_attention(X, W_Q, W_K, W_V):
    """Self-attention causal de una cabeza.

    X:   (T, d_model)  un vector por token
    W_Q: (d_model, d_k),  W_K: (d_model, d_k),  W_V: (d_model, d_v)

    Devuelve (output, weights):
    output:  (T, d_v)  para cada token, la media de los valores ponderada por la atención
    weights: (T, T)    fila i = cuánto atiende el token i a cada token j (suma 1, 0 si j > i)
    """
    Q = X @ W_Q  # (T, d_k)
    K = X @ W_K  # (T, d_k)
    V = X @ W_V  # (T, d_v)
    d_k = Q.shape[-1]
    scores = Q @ K.T / np.sqrt(d_k) + causal_mask(X.shape[0])  # (T, T)
    weights = softmax(scores, axis=-1)  # (T, T)
    return weights @ V, weights  # (T, d_v), (T, T)


def count_edges(T, causal=True):
    """Número de aristas del grafo de atención sobre T tokens (un entero).

    Hay una arista i -> j por cada par (consulta i, clave j) con peso que puede ser
    distinto de cero; cada token se atiende también a sí mismo.
    """
    T = int(T)
    return T * (T + 1) // 2 if causal else T * T
