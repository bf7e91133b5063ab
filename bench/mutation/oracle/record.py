"""What a probe run writes and how two runs are compared.

A probe run is an ordered list of probes; each probe holds named outputs (in the order the probe
made them) and, when the lesson's code raised inside it, the exception's type and message. The
child process (probe.py) encodes every output into a JSON tree whose arrays live beside it in one
.npz file (numbers only: `np.load(..., allow_pickle=False)` reads it back), and the parent
decodes both sides and compares them here.

Comparison rules (the oracle's notion of "behaves the same"):
- exact: ints, bools, strings, None, dtypes, shapes, devices, integer and bool arrays, the
  exception's type (its message is never compared: probes that care record what it names);
- floats: the same NaN and infinity positions, and |cand - ref| <= atol + rtol * |ref| elsewhere,
  with atol = ATOL * max|ref| (the reference's scale, 1 where it is all zero), per dtype:
  float16/bfloat16 rtol 1e-2, ATOL 1e-3; float32 rtol 1e-4, ATOL 1e-5; float64 arrays rtol 1e-7,
  ATOL 1e-10; Python floats rtol 1e-5, ATOL 1e-8 (they are usually a float32 loss's .item());
- sequences and dicts element by element (list vs tuple is not compared).

Imports numpy only (the parent never imports torch).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

# rtol, ATOL (atol = ATOL * the reference's largest finite magnitude) per float dtype name.
TOLERANCES = {
    "float16": (1e-2, 1e-3),
    "bfloat16": (1e-2, 1e-3),
    "float32": (1e-4, 1e-5),
    "float64": (1e-7, 1e-10),
    "pyfloat": (1e-5, 1e-8),
}

META_KEY = "__meta__"


# --- encoding (child side) -----------------------------------------------------------------------


class Encoder:
    """Turns probe outputs into a JSON-able tree; arrays go to `arrays` under a0, a1, ..."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def _array(self, values: np.ndarray) -> str:
        key = f"a{len(self.arrays)}"
        self.arrays[key] = np.array(values)  # a copy that keeps 0-d arrays 0-d
        return key

    def encode(self, value: Any, depth: int = 0) -> dict:
        if depth > 20:
            return {"t": "object", "type": "too-deep"}
        torch = _torch()
        if torch is not None and isinstance(value, torch.Tensor):
            return self._tensor(value)
        if torch is not None and isinstance(value, torch.dtype):
            return {"t": "dtype", "v": str(value)}
        if torch is not None and isinstance(value, torch.device):
            return {"t": "str", "v": str(value)}
        if torch is not None and isinstance(value, torch.Size):
            return {"t": "seq", "items": [{"t": "int", "v": int(n)} for n in value]}
        if isinstance(value, np.ndarray):
            return self._ndarray(value)
        if isinstance(value, np.generic):
            kind = value.dtype.kind
            if kind == "b":
                return {"t": "bool", "v": bool(value), "type": type(value).__name__}
            if kind in "iu":
                return {"t": "int", "v": int(value), "type": type(value).__name__}
            if kind == "f":
                return {"t": "float", "v": float(value), "type": type(value).__name__}
            return {"t": "object", "type": type(value).__name__}
        if isinstance(value, bool):
            return {"t": "bool", "v": value, "type": "bool"}
        if isinstance(value, int):
            return {"t": "int", "v": value, "type": type(value).__name__}
        if isinstance(value, float):
            return {"t": "float", "v": value, "type": type(value).__name__}
        if isinstance(value, str):
            return {"t": "str", "v": value}
        if value is None:
            return {"t": "none"}
        if isinstance(value, (list, tuple)):
            return {"t": "seq", "items": [self.encode(v, depth + 1) for v in value]}
        if isinstance(value, dict):
            items = sorted(value.items(), key=lambda kv: repr(kv[0]))
            return {"t": "dict", "items": [[repr(k), self.encode(v, depth + 1)] for k, v in items]}
        return {"t": "object", "type": type(value).__name__}

    def _tensor(self, t) -> dict:
        torch = _torch()
        out = {"t": "tensor", "dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape)}
        out["device"] = t.device.type
        if t.device.type == "meta":
            return out
        t = t.detach().cpu()
        if t.is_complex():
            return {**out, "a": self._array(t.resolve_conj().numpy().astype(np.complex128))}
        if t.dtype == torch.bool:
            values = t.numpy()
        elif t.is_floating_point():
            values = t.to(torch.float64).numpy()
        else:
            values = t.to(torch.int64).numpy()
        return {**out, "a": self._array(values)}

    def _ndarray(self, a: np.ndarray) -> dict:
        out = {"t": "ndarray", "dtype": str(a.dtype), "shape": list(a.shape)}
        kind = a.dtype.kind
        if kind == "b":
            values = a.astype(bool)
        elif kind in "iu":
            values = a.astype(np.int64)
        elif kind == "f":
            values = a.astype(np.float64)
        else:
            return {**out, "repr": repr(a.tolist())[:200]}
        return {**out, "a": self._array(values)}


_TORCH = None


def _torch():
    """torch when the child has imported it (the parent never does)."""
    global _TORCH
    if _TORCH is None:
        import sys

        _TORCH = sys.modules.get("torch")
    return _TORCH


def save(path: Path, meta: dict, arrays: dict[str, np.ndarray]) -> None:
    payload = dict(arrays)
    payload[META_KEY] = np.array(json.dumps(meta))
    tmp = Path(str(path) + ".tmp.npz")
    np.savez(tmp, **payload)
    tmp.replace(path)


def load(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files if k != META_KEY}
        meta = json.loads(str(data[META_KEY]))
    return meta, arrays


# --- comparison (parent side) --------------------------------------------------------------------


def describe(node: dict, arrays: dict[str, np.ndarray]) -> str:
    """A short text for one encoded value (for a difference's message)."""
    t = node["t"]
    if t == "tensor":
        return f"a {node['dtype']} tensor of shape {tuple(node['shape'])} on {node['device']}"
    if t == "ndarray":
        return f"an ndarray {node['dtype']} of shape {tuple(node['shape'])}"
    if t in ("int", "float", "bool"):
        return f"{node.get('type', t)} {_fmt(node['v'])}"
    if t == "str":
        return f"the string {node['v']!r}"[:160]
    if t == "dtype":
        return node["v"]
    if t == "none":
        return "None"
    if t == "seq":
        return f"a sequence of {len(node['items'])}"
    if t == "dict":
        return f"a dict of {len(node['items'])} keys"
    return f"an object of type {node.get('type')}"


def _fmt(v: Any, other: Any = None) -> str:
    """A number printed with as many digits as it takes to tell it from `other`."""
    if isinstance(v, float) and not isinstance(v, bool):
        for digits in (6, 9, 12, 17):
            a = format(v, f".{digits}g")
            if other is None or not isinstance(other, float) or a != format(other, f".{digits}g"):
                return a
        return repr(v)
    return repr(v)


def compare_nodes(ref: dict, cand: dict, ref_arrays: dict, cand_arrays: dict, path: str) -> str | None:
    """None when the candidate's value matches the reference's; else what differs (one line)."""
    rt, ct = ref["t"], cand["t"]
    if rt != ct:
        return f"{path}: {describe(cand, cand_arrays)} where the reference has {describe(ref, ref_arrays)}"
    if rt in ("tensor", "ndarray"):
        return _compare_arrays(ref, cand, ref_arrays, cand_arrays, path)
    if rt == "float":
        if ref.get("type") != cand.get("type"):
            return f"{path}: type {cand.get('type')} where the reference has {ref.get('type')}"
        return _compare_floats(np.array(ref["v"]), np.array(cand["v"]), "pyfloat", path, scalar=True)
    if rt in ("int", "bool"):
        if ref.get("type") != cand.get("type"):
            return f"{path}: type {cand.get('type')} where the reference has {ref.get('type')}"
        if ref["v"] != cand["v"]:
            return f"{path}: {_fmt(cand['v'])} where the reference has {_fmt(ref['v'])}"
        return None
    if rt in ("str", "dtype"):
        if ref["v"] != cand["v"]:
            return f"{path}: {cand['v']!r} where the reference has {ref['v']!r}"[:400]
        return None
    if rt == "none":
        return None
    if rt == "object":
        if ref.get("type") != cand.get("type"):
            return (
                f"{path}: {describe(cand, cand_arrays)} where the reference has {describe(ref, ref_arrays)}"
            )
        return None
    if rt == "seq":
        ri, ci = ref["items"], cand["items"]
        if len(ri) != len(ci):
            return f"{path}: {len(ci)} items where the reference has {len(ri)}{_items_apart(ri, ci)}"
        for i, (r, c) in enumerate(zip(ri, ci)):
            diff = compare_nodes(r, c, ref_arrays, cand_arrays, f"{path}[{i}]")
            if diff:
                return diff
        return None
    if rt == "dict":
        rk = [k for k, _ in ref["items"]]
        ck = [k for k, _ in cand["items"]]
        if rk != ck:
            missing = [k for k in rk if k not in ck][:3]
            extra = [k for k in ck if k not in rk][:3]
            return f"{path}: keys differ (missing {missing}, extra {extra})"
        for (k, r), (_, c) in zip(ref["items"], cand["items"]):
            diff = compare_nodes(r, c, ref_arrays, cand_arrays, f"{path}[{k}]")
            if diff:
                return diff
        return None
    return f"{path}: unknown node kind {rt!r}"


def _items_apart(ri: list, ci: list) -> str:
    """For sequences of plain values: which values only one side has."""
    plain = ("str", "int", "bool", "float", "dtype")
    if not all(n["t"] in plain for n in (*ri, *ci)):
        return ""
    rv, cv = [n["v"] for n in ri], [n["v"] for n in ci]
    only_r = [v for v in rv if v not in cv][:5]
    only_c = [v for v in cv if v not in rv][:5]
    parts = ([f"only the reference has {only_r}"] if only_r else []) + (
        [f"only the candidate has {only_c}"] if only_c else []
    )
    return f" ({'; '.join(parts)})" if parts else ""


def _compare_arrays(ref: dict, cand: dict, ref_arrays: dict, cand_arrays: dict, path: str) -> str | None:
    what = "tensor" if ref["t"] == "tensor" else "ndarray"
    if ref["dtype"] != cand["dtype"]:
        return f"{path}: dtype {cand['dtype']} where the reference has {ref['dtype']}"
    if ref["shape"] != cand["shape"]:
        return f"{path}: shape {tuple(cand['shape'])} where the reference has {tuple(ref['shape'])}"
    if ref.get("device") != cand.get("device"):
        return f"{path}: {what} on {cand.get('device')} where the reference's is on {ref.get('device')}"
    if "a" not in ref or "a" not in cand:
        if ref.get("repr") != cand.get("repr"):
            return f"{path}: {cand.get('repr')} where the reference has {ref.get('repr')}"
        return None
    r, c = ref_arrays[ref["a"]], cand_arrays[cand["a"]]
    dtype = ref["dtype"]
    if r.dtype.kind in "biu":
        bad = np.argwhere(r != c)
        if len(bad):
            at = tuple(int(i) for i in bad[0])
            return (
                f"{path} differs at {list(at)}: {_fmt(c[at].item())} where the reference has "
                f"{_fmt(r[at].item())} ({len(bad)} of {r.size} elements differ)"
            )
        return None
    key = dtype if dtype in TOLERANCES else "float64"
    return _compare_floats(r, c, key, path)


def _compare_floats(r: np.ndarray, c: np.ndarray, key: str, path: str, scalar: bool = False) -> str | None:
    rtol, atol_k = TOLERANCES[key]
    r = np.asarray(r, dtype=np.complex128 if np.iscomplexobj(r) else np.float64)
    c = np.asarray(c, dtype=r.dtype)
    rn, cn = np.isnan(r), np.isnan(c)
    finite_r = np.isfinite(r)
    scale = float(np.max(np.abs(r[finite_r]))) if finite_r.any() else 0.0
    atol = atol_k * (scale if scale > 0 else 1.0)
    with np.errstate(invalid="ignore", over="ignore"):
        same_special = (rn == cn) & np.where(np.isinf(r) | np.isinf(c), r == c, True)
        close = np.where(finite_r & np.isfinite(c), np.abs(c - r) <= atol + rtol * np.abs(r), False)
    ok = np.where(rn | cn | np.isinf(r) | np.isinf(c), same_special, close)
    if ok.all():
        return None
    bad = np.argwhere(~ok)
    if scalar or r.ndim == 0:
        return f"{path}: {_fmt(c.item(), r.item())} where the reference has {_fmt(r.item(), c.item())}"
    at = tuple(int(i) for i in bad[0])
    both = finite_r & np.isfinite(c)
    worst = f"max |diff| {float(np.max(np.abs(c[both] - r[both]))):.3g}, " if both.any() else ""
    return (
        f"{path} differs at {list(at)}: {_fmt(c[at].item(), r[at].item())} where the reference has "
        f"{_fmt(r[at].item(), c[at].item())} ({len(bad)} of {r.size} elements differ; "
        f"{worst}tolerance {atol:.2g} + {rtol:g}*|ref|)"
    )


def compare_probe(ref: dict, cand: dict, ref_arrays: dict, cand_arrays: dict) -> str | None:
    """None when the candidate's probe agrees with the reference's; else the first difference."""
    name = ref["name"]
    outs_r, outs_c = ref["outputs"], cand["outputs"]
    keys_c = {k: v for k, v in outs_c}
    for key, node in outs_r:
        if key not in keys_c:
            if cand.get("raises"):
                exc = cand["raises"]
                return (
                    f"probe {name!r}: candidate raises {exc['type']}: {exc['message']} "
                    f"(before '{key}') where the reference does not"
                )[:600]
            return f"probe {name!r}: the candidate gives no '{key}'"
        diff = compare_nodes(node, keys_c[key], ref_arrays, cand_arrays, key)
        if diff:
            return f"probe {name!r}: {diff}"
    rr, cr = ref.get("raises"), cand.get("raises")
    if rr and not cr:
        return f"probe {name!r}: the reference raises {rr['type']} and the candidate does not"
    if cr and not rr:
        return f"probe {name!r}: candidate raises {cr['type']}: {cr['message']} where the reference does not"[
            :600
        ]
    if rr and cr and rr["type"] != cr["type"]:
        return (
            f"probe {name!r}: candidate raises {cr['type']}: {cr['message']} where the reference "
            f"raises {rr['type']}: {rr['message']}"
        )[:600]
    return None
