"""Attention matrices as a PNG: the attention viewer's export and a picture for feedback.

    attention_png(weights, tokens, leaks=None, *, lang="es", title=None, kind="weights") -> bytes

One heatmap per head (rows: queries i, columns: keys j, labelled with the tokens), drawn with
matplotlib's Agg backend through a `Figure` of its own (no pyplot state: safe in a server
thread). The look is shared with the viewer's page (autograder/learner/viewer_static/), which reads the
constants below, so the page and the PNG show the same picture:

- a visible weight is a shade of COLOR_STOPS, from 0 to 1;
- the masked future (key j > query i with weight exactly 0) is left empty (MASKED_COLOR), and a
  line follows the diagonal where the future begins;
- a leak (j > i with a non-zero weight) keeps its shade and gets a LEAK_COLOR outline;
- NaN is NAN_COLOR.

The future-leak checks draw an influence map instead (kind="influence": how much output i changes
with input x_j, measured on the whole module, not one head's weights): same look, its own labels.
"""

from __future__ import annotations

import io
import textwrap
import unicodedata
from collections.abc import Sequence
from typing import Any

import numpy as np

from autograder.core import i18n
from autograder.engine.feedback import leaking_cells, to_float64

COLOR_STOPS = ("#e8f1fa", "#9ecae1", "#4292c6", "#08519c", "#08306b")
MASKED_COLOR = "#ffffff"
LEAK_COLOR = "#e00000"  # no shade of COLOR_STOPS is red: an outline is never mistaken for a weight
NAN_COLOR = "#9e9e9e"
BORDER_COLOR = "#555555"
DPI = 100
MARGIN = 0.02  # of the figure's width, kept free on each side of a wrapped title or legend
# What a picture shows: a head's attention weights (the viewer, the mask checks) or an influence
# map (output i's sensitivity to input x_j, from the future-leak checks), labelled apart.
KINDS = ("weights", "influence")


def token_label(token: str) -> str:
    """A token as an axis label: a space (or any blank) is shown as '␣'."""
    if token.isspace() or unicodedata.category(token[:1] or " ") == "Zs":
        return "\u2423"
    return token


def attention_png(
    weights: Any,
    tokens: Sequence[str] | None = None,
    leaks: Any = None,
    *,
    lang: str = i18n.DEFAULT_LANGUAGE,
    title: str | None = None,
    kind: str = "weights",
) -> bytes:
    """PNG bytes of `weights`, (T, T) or (heads, T, T), labelled with `tokens` (T strings; None:
    the positions 0..T-1). `leaks` (same shape as weights, or (T, T) for every head) marks the
    cells to outline; None computes them with feedback.leaking_cells, head by head (`head_leaks`).
    `kind` says what the matrix is (KINDS): a head's attention weights, or an influence map
    (how much output i changes with input x_j, measured on the whole module), labelled as such.

    The graders can call it with a captured (B, nh, T, T) tensor's batch 0 and their own
    `leaking_cells` result, and attach the bytes wherever an image can be shown.
    """
    fig = attention_figure(weights, tokens, leaks, lang=lang, title=title, kind=kind)
    out = io.BytesIO()
    fig.savefig(out, format="png", facecolor="white")
    return out.getvalue()


def attention_figure(
    weights: Any,
    tokens: Sequence[str] | None = None,
    leaks: Any = None,
    *,
    lang: str = i18n.DEFAULT_LANGUAGE,
    title: str | None = None,
    kind: str = "weights",
):
    """The matplotlib Figure that attention_png saves (drawing it lays it out): every text fits
    the canvas, a long title or legend wrapped to the figure's width."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.collections import PatchCollection
    from matplotlib.colors import LinearSegmentedColormap, ListedColormap
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    if kind not in KINDS:
        raise ValueError(f"attention_png(): kind {kind!r}, expected one of {', '.join(KINDS)}")
    influence = kind == "influence"
    w = _as_heads(weights)
    heads, T, _ = w.shape
    marks = _leak_marks(w, leaks)
    labels = [token_label(t) for t in tokens] if tokens is not None else [str(i) for i in range(T)]
    if len(labels) != T:
        raise ValueError(f"attention_png(): {len(labels)} tokens for a {T} x {T} matrix")

    cmap = LinearSegmentedColormap.from_list("attention", COLOR_STOPS).with_extremes(bad=MASKED_COLOR)
    nan_cmap = ListedColormap([NAN_COLOR]).with_extremes(bad=(0, 0, 0, 0))
    side = 3.4 if T <= 32 else 4.4
    fig = Figure(figsize=(side * heads + 0.9, side + 1.0), dpi=DPI, layout="constrained")
    canvas = FigureCanvasAgg(fig)
    axes = fig.subplots(1, heads, squeeze=False)[0]
    future = np.triu(np.ones((T, T), dtype=bool), k=1)
    font = 9 if T <= 16 else 7 if T <= 32 else 5
    image = None
    for h, ax in enumerate(axes):
        wh = w[h]
        nan = np.isnan(wh)
        empty = future & (wh == 0)
        image = ax.imshow(
            np.ma.masked_where(empty | nan, wh), cmap=cmap, vmin=0.0, vmax=1.0, interpolation="nearest"
        )
        if nan.any():
            ax.imshow(np.ma.masked_where(~nan, np.zeros_like(wh)), cmap=nan_cmap, interpolation="nearest")
        ax.plot(*_diagonal_border(T), color=BORDER_COLOR, linewidth=0.8)
        cells = [Rectangle((j - 0.5, i - 0.5), 1, 1) for i, j in np.argwhere(marks[h])]
        if cells:
            ax.add_collection(
                PatchCollection(
                    cells, facecolor="none", edgecolor=LEAK_COLOR, linewidth=1.6 if T <= 32 else 1.0
                )
            )
        ax.set_xticks(range(T), labels, fontsize=font)
        ax.set_yticks(range(T), labels, fontsize=font)
        ax.tick_params(length=0)
        if influence:  # not a head: the whole module's output i against its input j
            ax.set_title(i18n.translate("render.figure_influence_axes", lang), fontsize=10)
            ax.set_xlabel(i18n.translate("render.figure_inputs", lang), fontsize=8)
        else:
            ax.set_title(i18n.translate("viewer.head", lang, head=h), fontsize=10)
            ax.set_xlabel(i18n.translate("viewer.keys", lang), fontsize=8)
        if h == 0:
            ax.set_ylabel(
                i18n.translate("render.figure_outputs" if influence else "viewer.queries", lang), fontsize=8
            )
    bar = i18n.translate("render.figure_influence_bar" if influence else "viewer.weight", lang)
    fig.colorbar(image, ax=list(axes), shrink=0.8, label=bar)
    legend = i18n.translate("render.figure_influence_legend" if influence else "viewer.png_legend", lang)
    # As the figure's x label, so that the constrained layout keeps room for it, wrapped or not.
    texts = [fig.supxlabel(legend, x=MARGIN, ha="left", fontsize=7, color=BORDER_COLOR)]
    if title:
        texts.append(fig.suptitle(title, fontsize=11))
    renderer = canvas.get_renderer()
    for text in texts:  # wrapped to the canvas: a title cut at both edges says nothing
        _fit_width(text, renderer, fig.bbox.width * (1 - 2 * MARGIN))
    return fig


def _fit_width(text, renderer, room: float) -> None:
    """Wrap a matplotlib Text at word boundaries until it is at most `room` pixels wide."""
    words = " ".join(text.get_text().split())
    width = text.get_window_extent(renderer).width
    if width <= room:
        return
    columns = max(8, int(len(words) * room / width))
    while True:
        text.set_text(textwrap.fill(words, columns, break_long_words=True))
        if text.get_window_extent(renderer).width <= room or columns <= 8:
            return
        columns -= 1


def head_leaks(weights: np.ndarray) -> np.ndarray:
    """(heads, T, T) bool: feedback.leaking_cells of each head of (heads, T, T) weights."""
    return np.stack([leaking_cells(head) for head in weights])


def _as_heads(weights: Any) -> np.ndarray:
    w = to_float64(weights)  # a torch tensor too, without importing torch here
    while w.ndim > 3 and w.shape[0] == 1:  # a (1, nh, T, T) batch of one
        w = w[0]
    if w.ndim == 2:
        w = w[None]
    if w.ndim != 3 or w.shape[1] != w.shape[2] or w.shape[1] == 0:
        raise ValueError(f"attention_png(): expected (T, T) or (heads, T, T) weights, got {w.shape}")
    return w


def _leak_marks(w: np.ndarray, leaks: Any) -> np.ndarray:
    if leaks is None:
        return head_leaks(w)
    marks = to_float64(leaks).astype(bool)  # numbers, arrays or tensors: non-zero marks a cell
    if marks.shape == w.shape[1:]:
        marks = np.broadcast_to(marks, w.shape)
    if marks.shape != w.shape:
        raise ValueError(f"attention_png(): leaks of shape {marks.shape} for weights {w.shape}")
    return marks


def _diagonal_border(T: int) -> tuple[list[float], list[float]]:
    """The staircase between the visible past (j <= i) and the future (j > i)."""
    xs, ys = [-0.5], [-0.5]
    for i in range(T):
        xs += [i + 0.5, i + 0.5]
        ys += [i - 0.5, i + 0.5]
    return xs, ys
