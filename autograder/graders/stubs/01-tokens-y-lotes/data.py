"""Del texto a los lotes: un tokenizador de caracteres y las ventanas con que se entrena.

Un modelo de lenguaje no lee letras: lee enteros. Este archivo prepara esos enteros para el
GPT que construye el curso, en cuatro pasos:

    texto  --CharTokenizer.encode-->  ids (list[int])  --torch.tensor-->  data (N,)
    data   --split-->     train (N_train,), val (N_val,)    el texto no se desordena
    train  --get_batch--> x (B, T), y (B, T)                y es x desplazada una posición

Dimensiones en los comentarios de forma:

    N  tokens del texto        B  batch_size (ventanas por lote)        T  block_size

La fila b de x es una ventana de T tokens seguidos de data; la fila b de y, la misma
ventana un token más a la derecha. En cada posición t, y[b, t] es el token que sigue a
x[b, :t+1]: una sola ventana da T ejemplos de "contexto -> siguiente token".
"""

from pathlib import Path

import torch

CORPUS = Path(__file__).with_name("cuentos.txt")


def load_corpus(path=CORPUS):
    """El texto del corpus de la lección (cuentos.txt, junto a este archivo) como un str."""
    return Path(path).read_text(encoding="utf-8")


class CharTokenizer:
    """Tokenizador de caracteres: cada carácter distinto de `text` es un token.

    chars:      list[str], los caracteres distintos de text, ordenados (sorted)
    vocab_size: int, len(chars)
    stoi:       dict str -> int, el id de cada carácter: stoi[chars[i]] == i
    itos:       dict int -> str, su inversa: itos[i] == chars[i]
    """

    def __init__(self, text):
        # TODO [vocab]: define self.chars, self.vocab_size, self.stoi y self.itos.
        # chars es la lista ordenada de los caracteres distintos de text (mira set y sorted).
        # stoi ("string to int") da a chars[i] el id i; itos ("int to string") es su inversa.
        # Los dos son diccionarios: constrúyelos recorriendo enumerate(self.chars).
        raise NotImplementedError("TODO [vocab] pendiente: construye el vocabulario ordenado y sus tablas stoi e itos")

    def encode(self, s):
        """str -> list[int], un id por carácter de s y en el mismo orden.

        Un carácter que no está en el vocabulario es un ValueError cuyo mensaje dice cuál es
        y en qué posición de s está (contando desde 0, como los índices de Python).
        """
        # TODO [encode-decode]: devuelve la lista de ids de s, uno por carácter: self.stoi[ch].
        # Si un carácter no está en self.stoi, lanza ValueError con un mensaje que nombre el
        # carácter y su posición en s (enumerate te da las dos cosas). Un KeyError a secas
        # no le dice a nadie qué ha fallado ni dónde.
        raise NotImplementedError("TODO [encode-decode] pendiente: codifica y decodifica, con un error claro ante un carácter desconocido")

    def decode(self, ids):
        """list[int] -> str; la inversa de encode: decode(encode(s)) == s."""
        # TODO [encode-decode]: devuelve el str de los caracteres self.itos[i] de los ids, en orden.
        # Únelos sin separador ("".join): cada id ya es un carácter, espacios incluidos.
        raise NotImplementedError("TODO [encode-decode] pendiente: codifica y decodifica, con un error claro ante un carácter desconocido")


def split(data, val_fraction=0.1):
    """Parte data (N,) en (train, val) sin desordenar: train es el principio, val el final.

    len(val) es val_fraction * N, redondeado hacia abajo o hacia arriba; len(train) el resto.
    Devuelve dos tensores: train (N_train,) y val (N_val,), trozos de data.
    """
    # TODO [split]: devuelve (train, val): el principio de data y el final.
    # Calcula cuántos tokens van a train (la fracción que no es de validación, pasada a
    # int) y corta data con dos rebanadas. No barajes: mira en el README por qué.
    raise NotImplementedError("TODO [split] pendiente: separa entrenamiento y validación sin desordenar el texto")


def get_batch(data, block_size, batch_size, generator=None):
    """batch_size ventanas al azar de data (N,), con sus objetivos.

    data:       tensor 1-D de ids (int64), por ejemplo train o val
    block_size: T, la longitud de cada ventana (el contexto del modelo)
    batch_size: B, cuántas ventanas
    generator:  torch.Generator del que salen los inicios de las ventanas, para que el mismo
                generador con la misma semilla dé el mismo lote (None: el global de torch)

    Devuelve (x, y), los dos (B, T) e int64: si la ventana b empieza en i,
    x[b] = data[i : i + T] e y[b] = data[i + 1 : i + T + 1].
    """
    # TODO [batch-offsets]: ix (B,), el inicio de cada ventana, sorteado con generator.
    # torch.randint(high, (batch_size,), generator=generator) da enteros de 0 a high - 1.
    # Elige high para que todo inicio válido pueda salir: ¿cuál es el mayor i con el que
    # y = data[i + 1 : i + T + 1] todavía cabe entero en data?
    raise NotImplementedError("TODO [batch-offsets] pendiente: sortea con el generador los inicios de las ventanas, hasta la última válida")
    # TODO [targets-shift]: x e y (B, T): las ventanas que empiezan en ix, e y desplazada un token.
    # La fila b de x son los T tokens de data que empiezan en ix[b]; la fila b de y, esa
    # misma ventana desplazada una posición. Corta data para cada i de ix y apila las filas
    # con torch.stack.
    raise NotImplementedError("TODO [targets-shift] pendiente: construye x e y, con y desplazada una posición")
    return x, y


if __name__ == "__main__":
    # python data.py: el corpus, su vocabulario y un lote pequeño, para verlo con tus ojos.
    text = load_corpus()
    tok = CharTokenizer(text)
    print(f"{len(text)} caracteres, vocabulario de {tok.vocab_size}: {''.join(tok.chars)!r}")
    data = torch.tensor(tok.encode(text), dtype=torch.long)  # (N,)
    train, val = split(data)
    x, y = get_batch(train, 16, 2, torch.Generator().manual_seed(0))  # (2, 16), (2, 16)
    for b in range(x.shape[0]):
        print(f"x[{b}] = {tok.decode(x[b].tolist())!r}\ny[{b}] = {tok.decode(y[b].tolist())!r}")
