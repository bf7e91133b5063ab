"""Generar texto con el GPT de la lección 04: muestreo y caché de claves y valores (KV cache).

Un modelo de lenguaje genera de uno en uno: mira el contexto, da los logits del token
siguiente, se elige uno y se añade al contexto. De abajo arriba:

- sample_next: de los logits (B, V) de la última posición a un token por fila, con
  temperatura (0 es greedy: el más probable) y top-k (solo los k mejores pueden salir);
- crop_context: el modelo solo admite block_size posiciones, así que se le pasan las últimas;
- KVCache, cached_attention y forward_cached: en lugar de recalcular todo el contexto en cada
  paso, se guardan las claves y los valores de los tokens ya vistos y solo se calcula lo del
  token nuevo;
- generate: el bucle, con caché o sin ella; las dos formas dan los mismos tokens.

Nombres de las dimensiones en los comentarios de forma: B lote, T longitud, V vocab_size,
C n_embd, nh n_head, hs = C // nh, T_past tokens ya guardados en la caché.
"""

import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

# Generas con tu modelo de la lección 04 (que usa tu atención de la 03). Las carpetas se añaden
# al final de sys.path para que, al corregir, manden los archivos que se ponen junto a este
# (los de referencia, o los tuyos en la comprobación de encaje).
_LESSONS = Path(__file__).resolve().parents[1]
sys.path.append(str(_LESSONS / "04-bloque-transformer"))
sys.path.append(str(_LESSONS / "03-atencion-causal"))
from model import GPT, GPTConfig  # noqa: E402

# ------------------------------------------------------------------ muestreo


def sample_next(logits, temperature=1.0, top_k=None, generator=None):
    """Elige el token siguiente de cada fila: logits (B, V) -> índices (B, 1), int64.

    temperature divide los logits: < 1 afila la distribución, > 1 la aplana, y 0 significa
    greedy (el token de logit máximo, sin sortear: `generator` queda intacto). top_k deja
    sortear solo entre los k logits mayores de cada fila (si top_k >= V, entre todos). El
    sorteo usa `generator`.
    """
    ### BEGIN SOLUTION temperature
    #: temperatura 0 es greedy: devuelve ya el argmax de cada fila.
    #: Con forma (B, 1): mira Tensor.argmax y su argumento keepdim. Si no, divide los logits
    #: por la temperatura (con 0 no se puede dividir: por eso va antes).
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)  # (B, 1)
    logits = logits / temperature
    ### END SOLUTION
    if top_k is not None:
        ### BEGIN SOLUTION top-k
        #: pon -inf en los logits menores que el k-ésimo mayor de su fila.
        #: Así la softmax les da probabilidad 0. Mira torch.topk (por la última dimensión) y
        #: quédate con el k-ésimo con forma (B, 1), para comparar fila a fila. Si top_k es
        #: mayor que V, usa V.
        k = min(top_k, logits.size(-1))
        kth = torch.topk(logits, k, dim=-1).values[:, [-1]]  # (B, 1): el k-ésimo mayor
        logits = logits.masked_fill(logits < kth, float("-inf"))
        ### END SOLUTION
    probs = F.softmax(logits, dim=-1)  # (B, V): una distribución por fila
    return torch.multinomial(probs, num_samples=1, generator=generator)  # (B, 1)


def crop_context(idx, block_size):
    """Los últimos block_size tokens de cada fila: idx (B, T) -> (B, min(T, block_size))."""
    ### BEGIN SOLUTION crop-context
    #: devuelve las últimas block_size columnas de idx.
    #: El modelo tiene block_size embeddings de posición. Si hay menos columnas, todas. Ojo
    #: con la dimensión: la 0 es el lote.
    return idx[:, -block_size:]
    ### END SOLUTION


# ------------------------------------------------------------------ la caché


class KVCache:
    """Las claves y los valores de los tokens ya procesados, capa a capa.

    keys[i] y values[i] son los de la capa i, con forma (B, nh, T_past, hs); None mientras la
    caché está vacía. Las consultas no se guardan: la de un token solo sirve para calcular
    su propia salida, y esa ya está calculada.
    """

    def __init__(self, n_layer):
        self.keys = [None] * n_layer
        self.values = [None] * n_layer

    @property
    def length(self):
        """Cuántos tokens hay guardados (T_past)."""
        return 0 if self.keys[0] is None else self.keys[0].size(2)


def cached_attention(attn, x, past_k=None, past_v=None):
    """La atención de `attn` (una CausalSelfAttention de la lección 03, con SUS pesos qkv y
    proj) para los tokens nuevos x (B, T, C), que atienden a las claves guardadas y a las suyas.

    Devuelve (y, k, v): la salida (B, T, C) y las claves y valores de TODOS los tokens,
    (B, nh, T_past + T, hs), que pasan a ser la caché de esta capa.
    """
    B, T, C = x.size()
    nh = attn.n_head
    q, k, v = attn.qkv(x).split(C, dim=2)  # 3 x (B, T, C)
    q = q.view(B, T, nh, C // nh).transpose(1, 2)  # (B, nh, T, hs)
    k = k.view(B, T, nh, C // nh).transpose(1, 2)  # (B, nh, T, hs)
    v = v.view(B, T, nh, C // nh).transpose(1, 2)  # (B, nh, T, hs)
    if past_k is not None:
        ### BEGIN SOLUTION kv-cache
        #: pon delante de k y v los guardados, past_k y past_v.
        #: Por la dimensión del tiempo (la 2) y en orden: primero el pasado, después lo nuevo
        #: (mira torch.cat).
        k = torch.cat((past_k, k), dim=2)  # (B, nh, T_past + T, hs)
        v = torch.cat((past_v, v), dim=2)  # (B, nh, T_past + T, hs)
        ### END SOLUTION
    ### BEGIN SOLUTION cache-alignment
    #: calcula y (B, nh, T, hs) sobre todas las claves.
    #: Hay T consultas y T_past + T claves: la consulta i es el token T_past + i y ve las
    #: claves 0..T_past + i, así que la máscara causal va alineada abajo a la derecha. Ojo:
    #: is_causal=True de F.scaled_dot_product_attention la alinea arriba a la izquierda (la
    #: consulta i vería las claves 0..i) y solo acierta si T_past es 0. Construye la máscara
    #: booleana (T, T_past + T), True donde se ve, con torch.tril y su argumento diagonal, y
    #: pásala como attn_mask.
    T_past = k.size(2) - T
    visible = torch.ones(T, T_past + T, dtype=torch.bool, device=x.device).tril(diagonal=T_past)
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=visible)  # (B, nh, T, hs)
    ### END SOLUTION
    y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
    return attn.resid_drop(attn.proj(y)), k, v


def forward_cached(model, idx_new, cache):
    """El forward del GPT solo para los tokens nuevos idx_new (B, T), que ocupan las posiciones
    cache.length .. cache.length + T - 1. Devuelve los logits (B, T, V) y deja en `cache` las
    claves y valores de todos los tokens vistos."""
    B, T = idx_new.size()
    T_past = cache.length
    assert T_past + T <= model.cfg.block_size, (
        f"{T_past} tokens en caché + {T} nuevos no caben en block_size = {model.cfg.block_size}"
    )
    tr = model.transformer
    ### BEGIN SOLUTION kv-cache
    #: define pos, las posiciones de los tokens nuevos.
    #: No empiezan en 0, sino donde acaba lo que ya hay en la caché. Créalas en el dispositivo
    #: de idx_new.
    pos = torch.arange(T_past, T_past + T, device=idx_new.device)  # (T,)
    ### END SOLUTION
    x = tr.drop(tr.wte(idx_new) + tr.wpe(pos))  # (B, T, C)
    for i, block in enumerate(tr.h):
        # El mismo bloque pre-norm de la lección 04, con la atención que usa la caché.
        a, cache.keys[i], cache.values[i] = cached_attention(
            block.attn, block.ln_1(x), cache.keys[i], cache.values[i])
        x = x + a
        x = x + block.mlp(block.ln_2(x))
    return model.lm_head(tr.ln_f(x))  # (B, T, V)


# ------------------------------------------------------------------ el bucle


@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None,
             use_cache=True):
    """Añade max_new_tokens tokens a cada fila de idx (B, T): devuelve (B, T + max_new_tokens).

    Sin caché, cada paso pasa por el modelo el contexto recortado entero. Con caché, el primer
    paso procesa el contexto (prefill) y los demás solo el token nuevo (un token por paso: el
    corrector lo cuenta). Cuando la caché ya tiene block_size tokens no cabe uno más: las
    posiciones son absolutas, así que al desplazar la ventana cambian las de todos los tokens y
    sus claves guardadas dejan de valer. Entonces se reconstruye desde el contexto recortado. Así los dos caminos dan los mismos tokens
    (con la ventana llena, la caché ya no ahorra nada: cada paso es un prefill completo).
    """
    was_training = model.training
    model.eval()  # sin dropout: generar no es entrenar
    block_size = model.cfg.block_size
    cache = None
    try:
        for _ in range(max_new_tokens):
            if use_cache:
                ### BEGIN SOLUTION kv-cache
                #: define logits (B, T, V) con forward_cached.
                #: La primera vez, o si la caché ya tiene block_size tokens, crea una KVCache
                #: nueva (una entrada por bloque de model.transformer.h) y pásale el contexto
                #: recortado; si no, pásale solo el último token de idx, el único que la caché
                #: aún no ha visto.
                if cache is None or cache.length == block_size:
                    cache = KVCache(len(model.transformer.h))
                    logits = forward_cached(model, crop_context(idx, block_size), cache)
                else:
                    logits = forward_cached(model, idx[:, -1:], cache)  # (B, 1, V)
                ### END SOLUTION
            else:
                logits, _ = model(crop_context(idx, block_size))  # (B, T, V)
            idx_next = sample_next(logits[:, -1, :], temperature, top_k, generator)  # (B, 1)
            idx = torch.cat((idx, idx_next), dim=1)
    finally:
        model.train(was_training)
    return idx


if __name__ == "__main__":
    # Un modelo sin entrenar genera tokens al azar, pero sirve para ver que los dos caminos dan
    # lo mismo y cuánto ahorra la caché.
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=72, block_size=256, n_layer=4, n_head=4, n_embd=128))
    prompt = torch.zeros(1, 1, dtype=torch.long)
    for use_cache in (False, True):
        start = time.perf_counter()
        out = generate(model, prompt, 200, temperature=0, use_cache=use_cache)
        took = time.perf_counter() - start
        print(f"use_cache={use_cache}: {took:.2f} s, últimos tokens {out[0, -8:].tolist()}")
