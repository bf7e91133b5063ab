"""The wire format between the trusted grader and the sandboxed worker: JSON plus raw buffers.

Nothing read from the worker can run code in the trusted process: a frame is a JSON header
followed by byte buffers, and tensors are rebuilt with `torch.frombuffer` from a whitelist of
dtypes. Objects that are not data (a module, a class) stay in the worker and travel as
opaque handles. Sizes and nesting are bounded so a hostile worker cannot exhaust memory.

Frame layout: b"AGW1" | uint32 header length | header JSON | buffers back to back.
The header is {"msg": <tree>, "buffers": [length, ...]}.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import struct
import sys
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable

MAGIC = b"AGW1"
MAX_HEADER = 32 * 1024 * 1024
MAX_BUFFERS = 512 * 1024 * 1024
MAX_DEPTH = 48
MAX_BIGINT_DIGITS = 4000
# Devices a tensor may claim to be on; anything else is garbage, not a device to initialise.
DEVICE_TYPES = ("cpu", "cuda", "meta", "mps")

# The only dtypes that can cross the boundary (name -> itemsize).
DTYPES = {
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "uint8": 1,
    "bool": 1,
}


class ProtocolError(Exception):
    """The peer sent something that is not a well-formed frame."""


@dataclass(frozen=True)
class Handle:
    """An object that lives in the worker (a module, a class, an nn.Module)."""

    id: int
    type: str
    repr: str
    generation: int = 0  # which worker process it belongs to (set by the sandbox)


# ---------------------------------------------------------------- encoding


def encode(value: Any, make_handle: Callable[[Any], dict] | None = None) -> tuple[Any, list[bytes]]:
    buffers: list[bytes] = []

    def enc(v: Any, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise ProtocolError("value nested too deeply")
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int):
            return v if abs(v) < 2**62 else {"$t": "bigint", "v": str(v)}
        if isinstance(v, float):  # NumPy's float64 is a float too: its repr is "np.float64(nan)"
            return v if math.isfinite(v) else {"$t": "float", "v": float.__repr__(v)}
        if isinstance(v, list):
            return [enc(x, depth + 1) for x in v]
        if isinstance(v, tuple):
            return {"$t": "tuple", "items": [enc(x, depth + 1) for x in v]}
        if isinstance(v, dict):
            return {"$t": "dict", "items": [[enc(k, depth + 1), enc(x, depth + 1)] for k, x in v.items()]}
        if isinstance(v, SimpleNamespace):
            return {"$t": "namespace", "attrs": {str(k): enc(x, depth + 1) for k, x in vars(v).items()}}
        if isinstance(v, Handle):
            return {"$t": "handle", "id": v.id}
        # By isinstance, not by module: a Parameter or a learner's own Tensor/ndarray subclass is
        # still data (sent as a plain tensor or array, whatever the subclass overrides).
        torch, numpy = sys.modules.get("torch"), sys.modules.get("numpy")
        if torch is not None and isinstance(v, (torch.Tensor, torch.dtype, torch.device)):
            return _encode_torch(v, buffers, make_handle)
        if numpy is not None and isinstance(v, (numpy.ndarray, numpy.generic)):
            return _encode_numpy(v, buffers, make_handle)
        if make_handle is None:
            raise ProtocolError(f"cannot send a {type(v).__name__}")
        return make_handle(v)

    return enc(value, 0), buffers


def _encode_torch(v: Any, buffers: list[bytes], make_handle) -> Any:
    import torch

    if isinstance(v, torch.Tensor):
        # A subclass's __torch_function__ must not decide what its data looks like on the wire.
        no_subclass = getattr(torch._C, "DisableTorchFunctionSubclass", contextlib.nullcontext)
        with no_subclass():
            return _encode_tensor(torch.Tensor.detach(v), buffers)
    if isinstance(v, torch.dtype):
        return {"$t": "dtype", "name": str(v).removeprefix("torch.")}
    if isinstance(v, torch.device):
        return {"$t": "device", "name": str(v)}
    if isinstance(v, torch.Size):
        return {"$t": "tuple", "items": list(v)}
    if make_handle is None:
        raise ProtocolError(f"cannot send a {type(v).__name__}")
    return make_handle(v)


def _encode_tensor(t: Any, buffers: list[bytes]) -> dict:
    import torch

    if type(t) is not torch.Tensor:
        t = t.as_subclass(torch.Tensor)
    name = str(t.dtype).removeprefix("torch.")
    meta = {"$t": "tensor", "dtype": name, "shape": list(t.shape), "device": t.device.type, "buf": None}
    if name not in DTYPES:
        raise ProtocolError(f"unsupported tensor dtype {name}")
    if t.device.type == "meta":
        return meta
    t = t.to("cpu").resolve_conj().resolve_neg().contiguous()
    meta["buf"] = len(buffers)
    # As bytes (NumPy has no bfloat16); flattened first, as a 0-d tensor has no bytes view.
    buffers.append(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return meta


def _encode_numpy(v: Any, buffers: list[bytes], make_handle) -> Any:
    import numpy as np

    if isinstance(v, np.ndarray):
        v = np.asarray(v.view(np.ndarray), order="C")  # a subclass's overrides play no part
        name = str(v.dtype)
        if name not in DTYPES:
            raise ProtocolError(f"unsupported array dtype {name}")
        meta = {"$t": "ndarray", "dtype": name, "shape": list(v.shape), "buf": len(buffers)}
        buffers.append(v.tobytes())
        return meta
    if isinstance(v, np.generic):
        item = v.item()
        if isinstance(item, (bool, int, float)):
            return (
                item
                if not isinstance(item, float) or math.isfinite(item)
                else {"$t": "float", "v": repr(item)}
            )
    if make_handle is None:
        raise ProtocolError(f"cannot send a {type(v).__name__}")
    return make_handle(v)


# ---------------------------------------------------------------- decoding


def decode(tree: Any, buffers: list[bytes], resolve_handle: Callable[[dict], Any]) -> Any:
    """Rebuild a value; `resolve_handle` turns {"$t": "handle", ...} into something local.

    Whatever the tree holds, this raises ProtocolError and nothing else for a malformed one
    (a peer's garbage must never look like a bug of the grader), and runs no code of the peer's.
    """
    try:
        return _decode(tree, buffers, resolve_handle)
    except ProtocolError:
        raise
    except (ValueError, TypeError, OverflowError, RuntimeError, RecursionError, MemoryError) as exc:
        raise ProtocolError(f"malformed value ({type(exc).__name__}: {str(exc)[:200]})") from None


def _decode(tree: Any, buffers: list[bytes], resolve_handle: Callable[[dict], Any]) -> Any:

    def dec(v: Any, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise ProtocolError("value nested too deeply")
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, list):
            return [dec(x, depth + 1) for x in v]
        if not isinstance(v, dict) or not isinstance(v.get("$t"), str):
            raise ProtocolError("malformed value")
        tag = v["$t"]
        if tag == "tuple":
            return tuple(dec(x, depth + 1) for x in _list(v, "items"))
        if tag == "dict":
            out = {}
            for pair in _list(v, "items"):
                if not isinstance(pair, list) or len(pair) != 2:
                    raise ProtocolError("malformed dict item")
                key = dec(pair[0], depth + 1)
                if not isinstance(key, (str, int, float, bool, type(None), tuple)):
                    raise ProtocolError("unhashable dict key")
                out[key] = dec(pair[1], depth + 1)
            return out
        if tag == "namespace":
            attrs = v.get("attrs")
            if not isinstance(attrs, dict):
                raise ProtocolError("malformed namespace")
            return SimpleNamespace(**{str(k): dec(x, depth + 1) for k, x in attrs.items()})
        if tag == "float":
            if v.get("v") not in ("nan", "inf", "-inf"):
                raise ProtocolError("malformed float")
            return float(v["v"])
        if tag == "bigint":
            digits = v.get("v")
            if not isinstance(digits, str) or len(digits) > MAX_BIGINT_DIGITS:
                raise ProtocolError("malformed bigint")
            return int(digits)
        if tag == "tensor":
            return _decode_tensor(v, buffers)
        if tag == "ndarray":
            return _decode_ndarray(v, buffers)
        if tag == "dtype":
            import torch

            name = v.get("name")
            if name not in DTYPES:
                raise ProtocolError("unsupported dtype")
            return getattr(torch, name)
        if tag == "device":
            import torch

            return torch.device(_device_name(v.get("name")))
        if tag == "handle":
            return resolve_handle(v)
        raise ProtocolError(f"unknown tag {tag!r}")

    return dec(tree, 0)


def _device_name(name: Any) -> str:
    if not isinstance(name, str):
        raise ProtocolError("malformed device")
    kind, _, index = name.partition(":")
    if kind not in DEVICE_TYPES or (index and not (index.isdigit() and len(index) <= 4)):
        raise ProtocolError(f"unknown device {name[:40]!r}")
    return name


def _list(v: dict, key: str) -> list:
    items = v.get(key)
    if not isinstance(items, list):
        raise ProtocolError(f"malformed {v.get('$t')}")
    return items


def _shape_and_buffer(v: dict, buffers: list[bytes]) -> tuple[str, list[int], bytes | None]:
    dtype, shape, index = v.get("dtype"), v.get("shape"), v.get("buf")
    if dtype not in DTYPES:
        raise ProtocolError(f"unsupported dtype {dtype!r}")
    if (
        not isinstance(shape, list)
        or len(shape) > 64
        or not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2**48 for s in shape)
    ):
        raise ProtocolError("malformed shape")
    if index is None:
        return dtype, shape, None
    if not isinstance(index, int) or not 0 <= index < len(buffers):
        raise ProtocolError("bad buffer index")
    raw = buffers[index]
    if len(raw) != math.prod(shape) * DTYPES[dtype]:
        raise ProtocolError("buffer size does not match shape")
    return dtype, shape, raw


def _decode_tensor(v: dict, buffers: list[bytes]) -> Any:
    import torch

    dtype, shape, raw = _shape_and_buffer(v, buffers)
    device = _device_name(v.get("device", "cpu"))
    if raw is None:  # a meta tensor: only its shape and dtype exist
        if device != "meta":
            raise ProtocolError("tensor without data")
        return torch.empty(shape, dtype=getattr(torch, dtype), device="meta")
    if not raw:
        t = torch.empty(shape, dtype=getattr(torch, dtype))
    else:
        t = torch.frombuffer(bytearray(raw), dtype=getattr(torch, dtype)).reshape(shape)
    return t.to(device) if device not in ("cpu", "meta") else t


def _decode_ndarray(v: dict, buffers: list[bytes]) -> Any:
    import numpy as np

    dtype, shape, raw = _shape_and_buffer(v, buffers)
    if raw is None or dtype == "bfloat16":
        raise ProtocolError("malformed ndarray")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


# ---------------------------------------------------------------- framing


def frame_bytes(msg: Any, buffers: list[bytes] = ()) -> bytes:
    """One whole frame: magic, header length, JSON header, buffers."""
    header = json.dumps(
        {"msg": msg, "buffers": [len(b) for b in buffers]}, allow_nan=False, separators=(",", ":")
    ).encode()
    return b"".join([MAGIC, struct.pack(">I", len(header)), header, *buffers])


def write_frame(fd: int, msg: Any, buffers: list[bytes] = ()) -> None:
    """Write a frame to a blocking fd (the worker's side)."""
    view = memoryview(frame_bytes(msg, buffers))
    while view:
        n = os.write(fd, view)
        view = view[n:]


class FrameReader:
    """Incremental frame parser: feed bytes, take complete frames."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> None:
        self._buf += data

    def take(self) -> tuple[Any, list[bytes]] | None:
        if len(self._buf) < 8:
            return None
        if self._buf[:4] != MAGIC:
            raise ProtocolError("bad frame magic")
        (hlen,) = struct.unpack(">I", self._buf[4:8])
        if hlen > MAX_HEADER:
            raise ProtocolError("header too large")
        if len(self._buf) < 8 + hlen:
            return None
        try:
            header = json.loads(bytes(self._buf[8 : 8 + hlen]))
        except (ValueError, RecursionError) as exc:  # RecursionError: "[[[[..." nested too deep
            raise ProtocolError(f"bad header: {str(exc)[:200]}") from None
        sizes = header.get("buffers") if isinstance(header, dict) else None
        if not isinstance(sizes, list) or not all(
            isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in sizes
        ):
            raise ProtocolError("bad buffer list")
        if sum(sizes) > MAX_BUFFERS:
            raise ProtocolError("buffers too large")
        end = 8 + hlen + sum(sizes)
        if len(self._buf) < end:
            return None
        buffers, pos = [], 8 + hlen
        for size in sizes:
            buffers.append(bytes(self._buf[pos : pos + size]))
            pos += size
        del self._buf[:end]
        return header.get("msg"), buffers

    def pending_size(self) -> int:
        return len(self._buf)
