"""Values <-> data for engine/recording.py: a reference call's arguments and result as a JSON tree
with its arrays set aside (what `recording.json` and `recording.npz` hold), read back without
running anything, and the states of the random generators a call leaves behind.

May import: numpy (torch only when a value is a tensor or a tensor is read back).
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from typing import Any

import numpy as np

__all__ = [
    "PLAIN",
    "Encoder",
    "RecordingError",
    "Unrecordable",
    "decode",
    "digest_json",
    "generator_state",
    "loaded_torch",
    "set_generator_state",
    "signature",
]


class RecordingError(Exception):
    """A recording that cannot be used: unreadable, edited, of another format, or made for other
    graders. The message says which file and what to do."""


PLAIN = (str, int, float, bool, type(None))


class Unrecordable(Exception):
    """A value that is not plain data (a module, a function, an nn.Module, a meta tensor)."""


def loaded_torch():
    return sys.modules.get("torch")


class Encoder:
    """Turns a value into a JSON tree, its arrays set aside (the tree names them by index)."""

    def __init__(self) -> None:
        self.arrays: list[np.ndarray] = []
        self.generators: list[Any] = []  # the generator objects met, in order

    def array(self, tag: str, value: np.ndarray, **extra) -> dict:
        self.arrays.append(value)
        return {
            "t": tag,
            "i": len(self.arrays) - 1,
            "shape": list(value.shape),
            "dtype": str(value.dtype),
            **extra,
        }

    def encode(self, value: Any) -> Any:
        torch = loaded_torch()
        if isinstance(value, bool) or value is None or isinstance(value, str):
            return value
        if isinstance(value, int) and type(value) is int:
            return value
        if isinstance(value, float) and type(value) is float:
            return {"t": "float", "v": repr(value)} if not math.isfinite(value) else value
        if isinstance(value, np.ndarray):
            if value.dtype.hasobject:
                raise Unrecordable("ndarray of objects")
            return self.array("np", np.ascontiguousarray(value).reshape(value.shape))  # 0-d stays 0-d
        if isinstance(value, np.generic):
            if isinstance(value, np.object_):
                raise Unrecordable("numpy object")
            return {"t": "npscalar", "dtype": str(value.dtype), "v": self.encode(value.item())}
        if isinstance(value, np.random.Generator):
            self.generators.append(value)
            return {"t": "npgen", "s": digest_json(value.bit_generator.state)}
        if torch is not None:
            if isinstance(value, torch.Tensor):
                return self.tensor(value, torch)
            if isinstance(value, torch.Generator):
                if value.device.type != "cpu":
                    raise Unrecordable("generator not on the CPU")
                self.generators.append(value)
                return {"t": "tgen", "s": hashlib.sha256(value.get_state().numpy().tobytes()).hexdigest()}
            if isinstance(value, torch.Size):
                return {"t": "size", "v": list(value)}
            if isinstance(value, torch.dtype):
                return {"t": "tdtype", "v": str(value).replace("torch.", "")}
        if type(value) in (list, tuple):
            return {"t": type(value).__name__, "v": [self.encode(item) for item in value]}
        if type(value) is dict:
            items = []
            for key, item in value.items():
                if not isinstance(key, PLAIN):
                    raise Unrecordable(f"dict key {type(key).__name__}")
                items.append([self.encode(key), self.encode(item)])
            return {"t": "dict", "v": items}
        raise Unrecordable(type(value).__name__)

    def tensor(self, value, torch) -> dict:
        if value.is_sparse or value.device.type == "meta" or value.layout != torch.strided:
            raise Unrecordable("tensor without plain values")
        data = value.detach().cpu()
        dtype = str(data.dtype).replace("torch.", "")
        if data.dtype == torch.bfloat16:
            data = data.float()  # NumPy has no bfloat16: kept exactly as float32
        extra = {"torch_dtype": dtype}
        if value.requires_grad:
            extra["grad"] = True
        # np.ascontiguousarray makes a 0-d array 1-d: the reshape keeps it 0-d.
        return self.array("torch", np.ascontiguousarray(data.numpy()).reshape(tuple(data.shape)), **extra)


def decode(tree: Any, arrays: list[np.ndarray]) -> Any:
    if not isinstance(tree, dict):
        return tree
    tag = tree.get("t")
    if tag == "float":
        return float(tree["v"])
    if tag in ("list", "tuple"):
        items = [decode(item, arrays) for item in tree["v"]]
        return items if tag == "list" else tuple(items)
    if tag == "dict":
        return {decode(k, arrays): decode(v, arrays) for k, v in tree["v"]}
    if tag == "np":
        return arrays[tree["i"]].copy()
    if tag == "npscalar":
        return np.dtype(tree["dtype"]).type(decode(tree["v"], arrays))
    import torch

    if tag == "torch":
        tensor = torch.from_numpy(arrays[tree["i"]].copy())
        dtype = getattr(torch, tree.get("torch_dtype", ""), None)
        if isinstance(dtype, torch.dtype) and tensor.dtype != dtype:
            tensor = tensor.to(dtype)
        if tree.get("grad"):
            tensor.requires_grad_(True)
        return tensor
    if tag == "size":
        return torch.Size(tree["v"])
    if tag == "tdtype":
        return getattr(torch, tree["v"])
    raise RecordingError(f"unknown value kind {tag!r}")


def signature(tree: Any) -> str:
    """The tree without its array indices: what must be equal for two calls to match."""

    def strip(node):
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k != "i"}
        if isinstance(node, list):
            return [strip(item) for item in node]
        return node

    return json.dumps(strip(tree), sort_keys=True, separators=(",", ":"))


def digest_json(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def generator_state(gen) -> Any:
    torch = loaded_torch()
    if torch is not None and isinstance(gen, torch.Generator):
        return np.ascontiguousarray(gen.get_state().numpy().copy())
    return gen.bit_generator.state  # a dict of plain data (big ints included)


def set_generator_state(gen, state) -> None:
    if isinstance(state, np.ndarray):
        import torch

        gen.set_state(torch.from_numpy(state.copy()))
    else:
        gen.bit_generator.state = state
