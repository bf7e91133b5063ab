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
    # TODO [np-mask]: una matriz (T, T) de floats: 0.0 si j <= i, muy negativa si j > i.
    # Las posiciones j > i quedan estrictamente por encima de la diagonal (mira np.triu y
    # su argumento k); np.where elige entre dos valores según una condición booleana.
    raise NotImplementedError("TODO [np-mask] pendiente: construye la máscara causal aditiva")


def softmax(x, axis=-1):
    """Softmax numéricamente estable a lo largo de `axis`; devuelve la misma forma que x.

    Debe funcionar con entradas del orden de 1e3, donde np.exp(x) desborda a inf.
    """
    # TODO [np-softmax]: resta el máximo antes de exponenciar, para que np.exp no desborde.
    # softmax(x) no cambia si restas la misma constante a todos los elementos. Usa el
    # máximo a lo largo de `axis` con keepdims=True (así la resta se difunde bien),
    # exponencia y divide por la suma a lo largo del mismo eje.
    raise NotImplementedError("TODO [np-softmax] pendiente: softmax numéricamente estable")


def masked_self_attention(X, W_Q, W_K, W_V):
    """Self-attention causal de una cabeza.

    X:   (T, d_model)  un vector por token
    W_Q: (d_model, d_k),  W_K: (d_model, d_k),  W_V: (d_model, d_v)

    Devuelve (output, weights):
    output:  (T, d_v)  para cada token, la media de los valores ponderada por la atención
    weights: (T, T)    fila i = cuánto atiende el token i a cada token j (suma 1, 0 si j > i)
    """
    # TODO [np-attention]: proyecciones, puntuaciones, máscara, softmax y suma ponderada.
    # 1) Proyecta X a Q, K y V con las tres matrices (el operador @ multiplica matrices).
    # 2) Puntuaciones = Q K^T dividido por sqrt(d_k), más causal_mask(T).
    # 3) Pesos = tu softmax por filas; salida = pesos multiplicados por V.
    raise NotImplementedError("TODO [np-attention] pendiente: self-attention enmascarada de una cabeza")


def count_edges(T, causal=True):
    """Número de aristas del grafo de atención sobre T tokens (un entero).

    Hay una arista i -> j por cada par (consulta i, clave j) con peso que puede ser
    distinto de cero; cada token se atiende también a sí mismo.
    """
    # TODO [np-edges]: cuenta las parejas (consulta i, clave j) permitidas; devuelve un int.
    # Causal: el token i ve i + 1 claves (0..i); súmalo para i = 0..T-1 (hay fórmula
    # cerrada). Sin máscara, cada consulta ve las T claves.
    raise NotImplementedError("TODO [np-edges] pendiente: cuenta las aristas del grafo de atención")
