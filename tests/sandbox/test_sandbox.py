"""Unit tests of the trust boundary's two halves: the wire format (autograder.sandbox.protocol) and the
sandbox that serves a submission from a killable, unprivileged worker (autograder.sandbox.client),
against tiny modules written here rather than a lesson's files."""

from __future__ import annotations

import builtins
import json
import math
import os
import pickle
import random
import signal
import struct
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from support.processes import tagged_processes

from autograder.core.i18n import feedback_text
from autograder.sandbox.client import (
    PACKAGE_PARENT,
    Limits,
    Sandbox,
    StudentError,
    WorkerDied,
    copy_submission,
    worker_user,
)
from autograder.sandbox.privileges import process_limit, tasks_of
from autograder.sandbox.protocol import (
    DTYPES,
    MAGIC,
    MAX_HEADER,
    FrameReader,
    Handle,
    ProtocolError,
    decode,
    encode,
    write_frame,
)
from autograder.sandbox.worker import landlock

LINUX = sys.platform.startswith("linux")
SECRET = "ghp_FAKE_SECRET_1234567890"


# ================================================================ protocol


def _no_handles(v):
    raise AssertionError(f"unexpected handle {v}")


def wire(value, make_handle=None, resolve=_no_handles):
    """`value` through the real wire: encode, a frame on a pipe, read back in odd chunks, decode."""
    tree, buffers = encode(value, make_handle)
    r, w = os.pipe()
    writer = threading.Thread(target=lambda: (write_frame(w, tree, buffers), os.close(w)))
    writer.start()
    reader, rng, frame = FrameReader(), random.Random(0), None
    while frame is None:
        chunk = os.read(r, rng.randint(1, 4096))
        assert chunk, "the frame ended early"
        reader.feed(chunk)
        frame = reader.take()
    writer.join()
    assert os.read(r, 1) == b""
    os.close(r)
    msg, bufs = frame
    return decode(msg, bufs, resolve)


def sample(dtype_name: str) -> torch.Tensor:
    dtype = getattr(torch, dtype_name)
    if dtype is torch.bool:
        return torch.arange(12).reshape(3, 4) % 3 == 0
    if dtype is torch.uint8:
        return torch.arange(12, dtype=dtype).reshape(3, 4) * 20
    if dtype.is_floating_point:
        return (torch.arange(12).reshape(3, 4) - 5.5).to(dtype) / 3
    return (torch.arange(12).reshape(3, 4) - 6).to(dtype)


def same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape or a.device != b.device:
        return False
    if a.dtype in (torch.float16, torch.bfloat16):  # bit for bit
        return torch.equal(a.view(torch.int16), b.view(torch.int16))
    return torch.equal(a, b)


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_tensor_round_trip_every_dtype(name):
    t = sample(name)
    cases = [
        t,
        t.T,
        t[:, ::2],
        t.reshape(-1)[0].clone(),
        t[:0],
        torch.empty(0, 3, 0, dtype=t.dtype),
        t.unsqueeze(0).expand(2, 3, 4),
    ]
    if t.dtype.is_floating_point:
        cases.append(t.clone().requires_grad_(True))
    back = wire(cases)
    assert isinstance(back, list) and len(back) == len(cases)
    for sent, got in zip(cases, back):
        assert type(got) is torch.Tensor
        assert same_tensor(got, sent.detach().contiguous()), (name, sent.shape)
        assert not got.requires_grad
    assert back[3].dim() == 0  # 0-d stays 0-d


def test_bfloat16_keeps_values_float32_cannot_hold_exactly():
    t = torch.tensor([1.0078125, -3.0e38, 1e-38, float("nan"), float("inf")], dtype=torch.bfloat16)
    got = wire(t)
    assert got.dtype is torch.bfloat16 and torch.equal(got.view(torch.int16), t.view(torch.int16))


def test_meta_tensor_keeps_shape_and_dtype_only():
    got = wire(torch.empty(2, 3, dtype=torch.float16, device="meta"))
    assert got.device.type == "meta" and got.shape == (2, 3) and got.dtype is torch.float16


@pytest.mark.parametrize("name", sorted(set(DTYPES) - {"bfloat16"}))
def test_ndarray_round_trip_every_dtype(name):
    a = sample(name).numpy() if name != "bool" else (np.arange(12).reshape(3, 4) % 2 == 0)
    a = a.astype(name)
    cases = [a, a.T, a[:, ::2], np.array(a.reshape(-1)[0]), a[:0], np.zeros((0, 2), dtype=name)]
    back = wire(cases)
    for sent, got in zip(cases, back):
        assert type(got) is np.ndarray and got.dtype == sent.dtype and got.shape == sent.shape
        assert np.array_equal(got, sent)
        assert got.flags.writeable  # a copy, not a view on the frame
    assert back[3].ndim == 0


def test_nested_values_and_special_floats_round_trip():
    value = {
        "tuple": (1, 2.5, [None, True, False, "ñandú"], ()),
        3: {"nested": (torch.zeros(2), np.ones(3, dtype=np.float32)), "empty": {}},
        (1, "a"): "tuple key",
        "floats": [float("nan"), float("inf"), float("-inf"), -0.0, 1e-320],
        "big": [2**70, -(2**70), 2**62 - 1],
        "numpy": [np.float32(1.5), np.int64(-7), np.bool_(True), np.float64("nan")],
        "torch": [torch.float16, torch.bfloat16, torch.device("cpu"), torch.Size([2, 3])],
        "ns": SimpleNamespace(n_embd=24, n_head=3, dropout=0.0),
    }
    got = wire(value)
    assert got["tuple"] == (1, 2.5, [None, True, False, "ñandú"], ())
    assert torch.equal(got[3]["nested"][0], torch.zeros(2)) and got[3]["nested"][1].dtype == np.float32
    assert got[3]["empty"] == {} and got[(1, "a")] == "tuple key"
    nan, inf, ninf, nzero, tiny = got["floats"]
    assert math.isnan(nan) and inf == math.inf and ninf == -math.inf
    assert nzero == 0.0 and math.copysign(1, nzero) == -1 and tiny == 1e-320
    assert got["big"] == [2**70, -(2**70), 2**62 - 1]
    f32, i64, b, n = got["numpy"]
    assert (f32, i64, b) == (1.5, -7, True) and math.isnan(n)
    assert got["torch"][:3] == [torch.float16, torch.bfloat16, torch.device("cpu")]
    assert got["torch"][3] == (2, 3)
    assert got["ns"] == SimpleNamespace(n_embd=24, n_head=3, dropout=0.0)


class LyingTensor(torch.Tensor):
    """A subclass that claims another shape and equality with anything."""

    @property
    def shape(self):
        return torch.Size([2, 7, 24])

    def __eq__(self, other):
        return True

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        result = super().__torch_function__(func, types, args, kwargs or {})
        return torch.zeros(2, 7, 24) if func is torch.Tensor.numpy else result


class LyingArray(np.ndarray):
    @property
    def shape(self):
        return (9, 9)

    def tobytes(self, *args):
        return b"\0" * 8 * 81


def test_subclasses_travel_as_their_plain_data():
    """A Parameter, or a learner's own Tensor/ndarray subclass, is data: it arrives as a plain
    tensor/array holding what it really holds, whatever it overrides."""
    real = torch.arange(3.0)
    got = wire(
        [
            torch.nn.Parameter(real.clone()),
            real.clone().as_subclass(LyingTensor),
            np.arange(4.0).view(LyingArray),
        ]
    )
    for value in got[:2]:
        assert type(value) is torch.Tensor and torch.equal(value, real)
    assert type(got[2]) is np.ndarray and np.array_equal(got[2], np.arange(4.0))


def test_handles_stay_opaque():
    table = {}

    def make_handle(obj):
        table[len(table) + 1] = obj
        return {"$t": "handle", "id": len(table), "type": type(obj).__name__, "repr": "<x>"}

    obj = object()
    got = wire(
        {"module": obj, "list": [torch.nn.Linear(2, 2)]},
        make_handle,
        resolve=lambda v: Handle(v["id"], v["type"], v["repr"]),
    )
    assert got["module"] == Handle(1, "object", "<x>") and table[1] is obj
    assert got["list"][0].type == "Linear"
    assert encode(got["module"])[0] == {"$t": "handle", "id": 1}


@pytest.mark.parametrize(
    "value",
    [
        torch.zeros(2, dtype=torch.complex64),
        torch.zeros(2, dtype=torch.uint16),
        np.zeros(2, dtype=object),
        np.zeros(2, dtype=">f4"),
        np.zeros(2, dtype=np.longdouble),
        object(),
        {1, 2},
        b"bytes",
        "DEEP",
    ],
    ids=lambda v: type(v).__name__,
)
def test_encode_refuses_what_is_not_data(value):
    if isinstance(value, str) and value == "DEEP":
        value = []
        for _ in range(100):
            value = [value]
    if isinstance(value, np.ndarray) and value.dtype == np.longdouble and np.longdouble == np.float64:
        pytest.skip("long double is float64 here")
    with pytest.raises(ProtocolError):
        encode(value)


def tensor_tree(**overrides):
    return {"$t": "tensor", "dtype": "float32", "shape": [2, 2], "device": "cpu", "buf": 0, **overrides}


SIXTEEN = [b"\0" * 16]


@pytest.mark.parametrize(
    "tree,buffers",
    [
        ({"$t": "pickle", "data": "gASV"}, []),
        ({"$t": "object", "module": "os", "name": "system", "args": ["true"]}, []),
        ({"$t": "handle2", "id": 1}, []),
        ({"no": "tag"}, []),
        ({"$t": 1}, []),
        (tensor_tree(dtype="complex64"), SIXTEEN),
        (tensor_tree(dtype="object"), SIXTEEN),
        (tensor_tree(dtype="__import__('os').system('touch /tmp/pwned')"), SIXTEEN),
        ({"$t": "dtype", "name": "__class__"}, []),
        ({"$t": "dtype", "name": "load"}, []),
        (tensor_tree(), [b"\0" * 12]),  # buffer/shape mismatch
        (tensor_tree(shape=[2, 3]), SIXTEEN),
        (tensor_tree(buf=1), SIXTEEN),
        (tensor_tree(buf=-1), SIXTEEN),
        (tensor_tree(buf="0"), SIXTEEN),
        (tensor_tree(buf=True), SIXTEEN),
        (tensor_tree(shape=[-2, -2]), SIXTEEN),
        (tensor_tree(shape=[2.0, 2]), SIXTEEN),
        (tensor_tree(shape=[True, 4]), SIXTEEN),
        (tensor_tree(shape="2,2"), SIXTEEN),
        (tensor_tree(shape=[0, 2**47, 2**47, 2**47]), [b""]),
        (tensor_tree(device="xla"), SIXTEEN),
        (tensor_tree(device="cuda:0; rm -rf /"), SIXTEEN),
        (tensor_tree(device=["cpu"]), SIXTEEN),
        (tensor_tree(buf=None), []),  # no data, yet not a meta tensor
        ({"$t": "ndarray", "dtype": "bfloat16", "shape": [2], "buf": 0}, [b"\0" * 4]),
        ({"$t": "ndarray", "dtype": "float32", "shape": [2], "buf": None}, []),
        ({"$t": "device", "name": "cuda:0:1"}, []),
        ({"$t": "device", "name": 3}, []),
        ({"$t": "float", "v": "1e999"}, []),
        ({"$t": "float", "v": "__import__('os')"}, []),
        ({"$t": "bigint", "v": "9" * 5000}, []),
        ({"$t": "bigint", "v": "12a"}, []),
        ({"$t": "bigint", "v": 12}, []),
        ({"$t": "tuple", "items": "abc"}, []),
        ({"$t": "dict", "items": [[1]]}, []),
        ({"$t": "dict", "items": [[{"$t": "tuple", "items": [[1]]}, 2]]}, []),  # unhashable key
        ({"$t": "dict", "items": [[[1, 2], 3]]}, []),
        ({"$t": "namespace", "attrs": [1, 2]}, []),
        (json.loads("[" * 60 + "]" * 60), []),
    ],
)
def test_decode_rejects_malformed_values(tree, buffers):
    with pytest.raises(ProtocolError):
        decode(tree, buffers, lambda v: Handle(int(v["id"]), "?", "?"))


def frame_bytes(header: bytes, *buffers: bytes) -> bytes:
    return MAGIC + struct.pack(">I", len(header)) + header + b"".join(buffers)


@pytest.mark.parametrize(
    "data",
    [
        b"NOPE" + b"\0" * 20,  # bad magic
        b"AGW2" + struct.pack(">I", 2) + b"{}",
        MAGIC + struct.pack(">I", MAX_HEADER + 1),  # oversized header, refused before it arrives
        MAGIC + struct.pack(">I", 2**32 - 1),
        frame_bytes(b'{"msg": 1, "buffers": [600000000]}'),  # buffers too large
        frame_bytes(b'{"msg": 1, "buffers": [300000000, 300000000]}'),
        frame_bytes(b'{"msg": 1, "buffers": [-1]}'),
        frame_bytes(b'{"msg": 1, "buffers": [true]}'),
        frame_bytes(b'{"msg": 1, "buffers": "x"}'),
        frame_bytes(b'{"msg": 1}'),
        frame_bytes(b"[1, 2]"),
        frame_bytes(b'{"msg": NaN-ish garbage'),
        frame_bytes(b"\xff\xfe not json"),
        frame_bytes(b"[" * 200_000 + b"]" * 200_000),  # nested too deep for the JSON parser
    ],
)
def test_frame_reader_rejects_garbage(data):
    reader = FrameReader()
    reader.feed(data)
    with pytest.raises(ProtocolError):
        reader.take()


def test_frame_reader_waits_for_whole_frames():
    r, w = os.pipe()
    write_frame(w, {"a": 1}, [b"xyz", b""])
    write_frame(w, [1, 2])
    os.close(w)
    data = os.read(r, 1 << 16)
    os.close(r)
    reader = FrameReader()
    frames = []
    for i in range(len(data)):
        reader.feed(data[i : i + 1])
        frame = reader.take()
        if frame is not None:
            frames.append(frame)
    assert frames == [({"a": 1}, [b"xyz", b""]), ([1, 2], [])]
    assert reader.pending_size() == 0


def test_decoding_never_runs_code(monkeypatch, tmp_path):
    """A frame full of pickles and dunder names decodes to inert data, and nothing that could
    run code (pickle, torch.load, eval, exec, a new import) is ever called."""
    import subprocess

    calls = []

    def forbid(name):
        def trap(*args, **kwargs):
            calls.append(name)
            raise AssertionError(f"{name} called while decoding")

        return trap

    canary = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {canary}",))

    payload = pickle.dumps(Evil())
    tree = {
        "$t": "dict",
        "items": [
            [
                "pickle",
                {"$t": "tensor", "dtype": "uint8", "shape": [len(payload)], "device": "cpu", "buf": 0},
            ],
            ["array", {"$t": "ndarray", "dtype": "uint8", "shape": [len(payload)], "buf": 0}],
            ["__reduce__", "os.system"],
            [
                "ns",
                {
                    "$t": "namespace",
                    "attrs": {"__class__": "os.system", "__reduce__": payload.hex(), "__getattr__": "eval"},
                },
            ],
            ["big", {"$t": "bigint", "v": "123456789012345678901234567890"}],
        ],
    }
    original_import = builtins.__import__

    def no_new_imports(name, *args, **kwargs):
        if name not in sys.modules:
            calls.append(f"import {name}")
        return original_import(name, *args, **kwargs)

    for owner, name in (
        (pickle, "loads"),
        (pickle, "load"),
        (pickle, "Unpickler"),
        (torch, "load"),
        (builtins, "eval"),
        (builtins, "exec"),
        (builtins, "compile"),
        (os, "system"),
        (subprocess, "Popen"),
    ):
        monkeypatch.setattr(owner, name, forbid(f"{owner.__name__}.{name}"))
    monkeypatch.setattr(builtins, "__import__", no_new_imports)
    r, w = os.pipe()
    write_frame(w, tree, [payload])
    os.close(w)
    reader = FrameReader()
    reader.feed(os.read(r, 1 << 20))
    os.close(r)
    msg, bufs = reader.take()
    got = decode(msg, bufs, _no_handles)
    monkeypatch.undo()
    assert calls == [] and not canary.exists()
    assert bytes(got["pickle"].numpy()) == payload and bytes(got["array"]) == payload
    assert type(got["ns"]) is SimpleNamespace and got["ns"].__class__ is SimpleNamespace
    assert got["__reduce__"] == "os.system" and got["big"] == 123456789012345678901234567890


# ================================================================ copying a submission


def test_copy_submission_skips_links_caches_and_huge_files(tmp_path):
    src = tmp_path / "src"
    (src / "pkg" / "__pycache__").mkdir(parents=True)
    (src / "attention.py").write_text("x = 1\n")
    (src / "pkg" / "helper.py").write_text("y = 2\n")
    (src / "pkg" / "__pycache__" / "helper.cpython-311.pyc").write_bytes(b"\0")
    (src / ".git").mkdir()
    (src / ".git" / "config").write_text("[core]\n")
    (src / "big.bin").write_bytes(b"\0" * (8 * 1024 * 1024 + 1))
    (src / "passwd.py").symlink_to("/etc/passwd")
    (src / "everything").symlink_to("/", target_is_directory=True)
    if hasattr(os, "mkfifo"):
        os.mkfifo(src / "fifo.py")
    dest = tmp_path / "dest"
    copy_submission(src, dest)
    copied = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert copied == ["attention.py", "pkg/helper.py"]
    assert not any(p.is_symlink() for p in dest.rglob("*"))


def test_copy_submission_of_a_missing_folder_is_empty(tmp_path):
    copy_submission(tmp_path / "missing", tmp_path / "dest")
    assert list((tmp_path / "dest").iterdir()) == []


# ================================================================ the sandbox

TINY = r'''
import ctypes, os, signal, subprocess, sys, time

import numpy as np
import torch


def add(a, b):
    return a + b


def echo(x):
    return x


def env():
    return dict(os.environ)


def open_fds():
    """What each of this process's file descriptors points at (the listing's own fd aside)."""
    found = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            found[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            pass
    return found


def read(path):
    try:
        with open(path, "rb") as fh:
            return fh.read().decode(errors="replace")
    except OSError as exc:
        return f"denied: {type(exc).__name__}"


def parent_environ():
    return read(f"/proc/{os.getppid()}/environ")


def identity():
    status = dict(line.split(":", 1) for line in read("/proc/self/status").splitlines() if ":" in line)
    return {"uid": os.getuid(), "euid": os.geteuid(), "groups": os.getgroups(),
            "no_new_privs": status.get("NoNewPrivs", "?").strip(),
            "caps": int(status.get("CapEff", "0").strip(), 16), "cwd": os.getcwd(),
            "home": os.environ.get("HOME")}


def try_write(path):
    try:
        with open(path, "w") as fh:
            fh.write("planted by the worker")
        return "written"
    except OSError as exc:
        return type(exc).__name__


def try_kill(pid):
    try:
        os.kill(pid, 0)
        return "allowed"
    except OSError as exc:
        return type(exc).__name__


def boom():
    raise ValueError("mal")


class Unknown(ValueError):
    pass


def boom_subclass():
    raise Unknown("no está en el vocabulario")


def todo():
    raise NotImplementedError("TODO [mask] pendiente: registra la máscara")


def exit_now(code):
    os._exit(code)


def hang():
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM, signal.SIGHUP, signal.SIGUSR1):
        signal.signal(sig, signal.SIG_IGN)
    while True:
        pass


def garbage():
    os.write(int(sys.argv[2]), b"NOPE, not a frame" * 4)
    time.sleep(30)


def allocate(nbytes):
    return len(bytearray(nbytes))


def grow():
    chunks = []
    while True:  # 64 MiB at a time (calloc'd: address space, not yet memory)
        chunks.append(bytes(64 << 20))


def spawn(marker):
    """A session leader, a double-forked daemon and a plain child, all asleep for 10 minutes."""
    sleeper = [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
               "signal.signal(signal.SIGHUP, signal.SIG_IGN); time.sleep(600)", marker]
    pids = [subprocess.Popen(sleeper, start_new_session=True).pid, subprocess.Popen(sleeper).pid]
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.setsid()
        grandchild = os.fork()
        if grandchild == 0:
            os.execv(sys.executable, sleeper)
        os.write(w, str(grandchild).encode())
        os._exit(0)
    os.waitpid(child, 0)
    pids.append(int(os.read(r, 64)))
    return pids


def flood(files, megabytes, sleep):
    """Fill the home with `files` files of `megabytes` MiB each, then linger."""
    home = os.environ["HOME"]
    for i in range(files):
        with open(os.path.join(home, f"f{i}"), "wb") as fh:
            fh.write(b"x" * (megabytes << 20))
    time.sleep(sleep)
    return "survived"


def fork_many(n, marker):
    started = failed = 0
    for _ in range(n):
        try:
            pid = os.fork()
        except OSError:
            failed += 1
            continue
        if pid == 0:
            os.execv("/bin/sleep", ["sleep", marker])
        started += 1
    return started, failed
'''


def survivors(marker: str) -> list[str]:
    return tagged_processes(marker)


def wait_no_survivors(marker: str, grace: float = 2.0) -> list[str]:
    end = time.monotonic() + grace
    while (found := survivors(marker)) and time.monotonic() < end:
        time.sleep(0.05)
    return found


def sleep_marker() -> str:
    """An argument `sleep` accepts (600.000…) that no other process on the machine has."""
    return f"600.{random.SystemRandom().randrange(10**11, 10**12)}"


# Every sandbox test runs against both ways a worker starts: forked from the warm pool's zygote
# (autograder/sandbox/pool.py; the default on Linux) and executed as a fresh interpreter (elsewhere, or
# whenever the pool is unavailable). Both must keep every promise of the trust boundary.
@pytest.fixture(scope="module", params=["warm-pool", "fresh-worker"])
def box(tmp_path_factory, request):
    folder = tmp_path_factory.mktemp("tiny")
    (folder / "tiny.py").write_text(TINY)
    (folder / "broken.py").write_text("x = 1 / 0\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GITHUB_TOKEN", SECRET)
        mp.setenv("AWS_SECRET_ACCESS_KEY", SECRET + "_aws")
        if request.param == "warm-pool":  # whatever the caller's AUTOGRADER_WARM_POOL
            mp.setenv("AUTOGRADER_WARM_POOL", "1")
        sandbox = Sandbox(folder)
        sandbox.warm_pool = request.param == "warm-pool"
        sandbox.ensure_ready()
        yield sandbox
        sandbox.close()


@pytest.fixture(scope="module", params=["warm-pool", "fresh-worker"])
def open_box(tmp_path_factory, request):
    """A worker without the walls (AUTOGRADER_ISOLATION=off), as on a system that lacks them."""
    folder = tmp_path_factory.mktemp("tiny-open")
    (folder / "tiny.py").write_text(TINY)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AUTOGRADER_ISOLATION", "off")
        sandbox = Sandbox(folder)
        sandbox.warm_pool = request.param == "warm-pool"
        sandbox.ensure_ready()
        mp.undo()
        yield sandbox
        sandbox.close()


def tiny(box: Sandbox, name: str):
    return box.getattr(box.module("tiny"), name)


def test_calls_return_plain_data(box):
    assert box.call(tiny(box, "add"), 2, 3) == 5
    x = torch.randn(2, 3)
    assert torch.equal(box.call(tiny(box, "echo"), x), x)
    got = box.call(tiny(box, "echo"), {"a": (np.arange(3), [1.5, None])})
    assert np.array_equal(got["a"][0], np.arange(3)) and got["a"][1] == [1.5, None]
    handle = box.call(tiny(box, "echo"), tiny(box, "echo"))
    assert isinstance(handle, Handle) and handle.type == "function"


def test_learner_exceptions_are_data(box):
    with pytest.raises(StudentError) as info:
        box.call(tiny(box, "boom"))
    err = info.value
    assert (err.type_name, err.message) == ("ValueError", "mal") and err.frames_in_root()
    assert any(f["name"] == "boom" and f["filename"].endswith("tiny.py") for f in err.frames)
    with pytest.raises(StudentError) as info:
        box.call(tiny(box, "todo"))
    assert info.value.todo_pending == "mask"


def test_learner_exception_types_are_judged_like_isinstance(box):
    with pytest.raises(StudentError) as info:
        box.call(tiny(box, "boom_subclass"))
    err = info.value
    assert err.type_name == "Unknown"
    assert err.is_a("Unknown") and err.is_a("ValueError") and err.is_a("Exception")
    assert not err.is_a("KeyError") and not err.is_a("TypeError")


def test_worker_and_supervisor_environments_hold_no_secret(box):
    env = box.call(tiny(box, "env"))
    assert SECRET not in json.dumps(env)
    assert not any(name in env for name in ("GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY"))
    assert env["HOME"] != os.environ.get("HOME") and env["PYTHONHASHSEED"] == "0"
    # The supervisor is the worker's parent: its environment is readable by a same-user worker.
    assert SECRET not in box.call(tiny(box, "parent_environ"))
    supervisor = Path(f"/proc/{box._proc.pid}/environ").read_bytes()
    assert SECRET.encode() not in supervisor and b"GITHUB_TOKEN" not in supervisor


@pytest.mark.skipif(not LINUX, reason="Linux only")
def test_an_unprivileged_worker_cannot_read_other_environments(box):
    """A grader-like process with the secret in its environment (as the CLI has it)."""
    import subprocess

    if worker_user() is None:
        pytest.skip("the worker runs as the grader's own user: it can read the grader's environment")
    grader = subprocess.Popen(["sleep", "30"], env={**os.environ, "GITHUB_TOKEN": SECRET})
    try:
        seen = box.call(tiny(box, "read"), f"/proc/{grader.pid}/environ")
    finally:
        grader.kill()
        grader.wait()
    assert seen.startswith("denied") and SECRET not in seen


def worker_status(box: Sandbox) -> dict[str, str]:
    """The worker's /proc/PID/status, read from this (trusted) side: the walled-in worker
    itself cannot open /proc."""
    text = Path(f"/proc/{box.worker_pid}/status").read_text()
    return {
        key: value.strip() for key, value in (line.split(":", 1) for line in text.splitlines() if ":" in line)
    }


@pytest.mark.skipif(not LINUX, reason="Linux only")
def test_worker_identity_and_reach(box):
    me = box.call(tiny(box, "identity"))
    status = worker_status(box)
    assert status["NoNewPrivs"] == "1"  # no sudo, no setuid programs
    assert status["Seccomp"] == "2"  # the filter of autograder/sandbox/worker/seccomp.py
    assert int(status["CapEff"], 16) == 0 or worker_user() is None
    assert me["cwd"] == str(box.root)
    assert box.call(tiny(box, "try_write"), str(Path(me["home"]) / "scratch.txt")) == "written"
    if worker_user() is None:
        pytest.skip("the grader does not run as root: the worker runs as the grader's own user")
    uid, gid = worker_user()
    assert (me["uid"], me["euid"], me["groups"]) == (uid, uid, [])
    assert int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0  # never a capability
    marker = f"planted-{os.getpid()}-{random.randrange(10**9)}.txt"
    targets = [
        PACKAGE_PARENT / marker,
        PACKAGE_PARENT / "autograder" / "graders" / marker,
        box.root / marker,
        Path(sys.prefix) / marker,
    ]
    try:
        for target in targets:
            assert box.call(tiny(box, "try_write"), str(target)) == "PermissionError", target
    finally:
        for target in targets:
            target.unlink(missing_ok=True)
    assert box.call(tiny(box, "try_kill"), box._proc.pid) == "PermissionError"  # its supervisor
    assert box.call(tiny(box, "try_kill"), os.getpid()) == "PermissionError"  # the grader
    assert box.call(tiny(box, "read"), f"/proc/{os.getpid()}/environ").startswith("denied")


def test_a_remembered_failure_does_not_grow_at_each_raise(box):
    """A failed import is re-raised to every later check: its traceback must not accumulate
    (pytest formats it for each failed check; a growing one cost seconds per check)."""
    depths = []
    for _ in range(6):
        with pytest.raises(StudentError) as info:
            box.module("broken")
        depths.append(len(info.traceback))
    assert info.value.type_name == "ZeroDivisionError"
    assert len(set(depths[1:])) == 1 and depths[-1] <= depths[0] + 2, depths


def test_exit_is_reported_and_the_next_request_gets_a_fresh_worker(box):
    generation, pid = box.generation, box.worker_pid
    with pytest.raises(WorkerDied) as info:
        box.call(tiny(box, "exit_now"), 5)
    text = feedback_text(info.value.feedback, "es")
    assert "terminó" in text and "5" in text
    assert "exit" in feedback_text(info.value.feedback, "en").lower()
    assert not Path(f"/proc/{pid}").exists()
    with pytest.raises(WorkerDied):  # the rest of this check: the worker's objects are gone
        box.call(tiny(box, "add"), 1, 1)
    box.ensure_ready()  # what the engine does before the next check
    assert box.call(tiny(box, "add"), 1, 1) == 2
    assert box.generation == generation + 1 and box.worker_pid != pid


def test_a_worker_that_stops_reading_cannot_block_a_send(box):
    """A stopped worker never drains its pipe: sending a large tensor must give up at the deadline."""
    box.ensure_ready()
    stop_soon = box.request("call", target=box.module("tiny"), method="__getattribute__", args=["add"])
    assert box.call(stop_soon, 1, 1) == 2
    pid = box.worker_pid
    os.kill(pid, signal.SIGSTOP)  # from outside: the worker is alive but reads nothing
    box.deadline = time.monotonic() + 1.5
    try:
        with pytest.raises(WorkerDied) as info:
            box.call(stop_soon, torch.zeros(4_000_000), 1)  # 16 MB, far beyond a pipe's buffer
    finally:
        box.deadline = None
    assert "Tiempo agotado" in feedback_text(info.value.feedback, "es")
    assert not Path(f"/proc/{pid}").exists()
    box.ensure_ready()
    assert box.call(tiny(box, "add"), 2, 2) == 4


def test_a_hang_that_ignores_signals_is_killed_at_the_deadline(box):
    box.ensure_ready()
    fn = tiny(box, "hang")
    pid = box.worker_pid
    box.deadline = time.monotonic() + 1.5
    started = time.monotonic()
    try:
        with pytest.raises(WorkerDied) as info:
            box.call(fn)
    finally:
        box.deadline = None
    assert time.monotonic() - started < 15
    assert "Tiempo agotado" in feedback_text(info.value.feedback, "es")
    assert not Path(f"/proc/{pid}").exists()
    box.ensure_ready()
    assert box.call(tiny(box, "add"), 2, 2) == 4


def test_garbage_on_the_pipe_kills_the_worker_with_a_clear_message(box):
    with pytest.raises(WorkerDied) as info:
        box.call(tiny(box, "garbage"))
    assert "ilegible" in feedback_text(info.value.feedback, "es")
    box.ensure_ready()
    assert box.call(tiny(box, "add"), 3, 3) == 6


def test_memory_is_limited(box):
    from autograder.sandbox.privileges import cuda_present

    if cuda_present() or os.name != "posix":
        pytest.skip("no address-space limit on a CUDA machine")
    with pytest.raises(StudentError) as info:
        box.call(tiny(box, "allocate"), 50 * 10**9)
    assert info.value.type_name == "MemoryError"
    with pytest.raises(StudentError) as info:
        box.call(tiny(box, "grow"))
    assert info.value.type_name == "MemoryError"
    assert box.call(tiny(box, "allocate"), 10**6) == 10**6  # and it still works


@pytest.mark.skipif(not LINUX, reason="seccomp is Linux only")
def test_a_walled_in_worker_cannot_start_processes(box):
    with pytest.raises(StudentError) as info:
        box.call(tiny(box, "spawn"), "agmark-never")
    assert info.value.type_name == "PermissionError"
    assert tuple(box.call(tiny(box, "fork_many"), 5, sleep_marker())) == (0, 5)


@pytest.mark.skipif(not LINUX, reason="the supervisor watches the home on Linux")
@pytest.mark.parametrize("files, megabytes", [(10, 32), (10_050, 0)], ids=["bytes", "files"])
def test_a_worker_that_floods_its_home_is_stopped(box, files, megabytes):
    with pytest.raises(WorkerDied) as info:
        box.call(tiny(box, "flood"), files, megabytes, 20)
    assert "escribió demasiado" in feedback_text(info.value.feedback, "es")
    assert "wrote too much" in feedback_text(info.value.feedback, "en")
    box.ensure_ready()  # a fresh worker, in an emptied home: the flood does not kill it too
    assert not [name for name in os.listdir(box._tmp / "home") if name.startswith("f")]
    assert box.call(tiny(box, "flood"), 1, 1, 0) == "survived"  # small writes are fine


@pytest.mark.skipif(not LINUX or landlock.abi() < 1, reason="needs Landlock")
def test_a_runtime_folder_that_holds_the_engine_is_opened_around_it(tmp_path):
    """A non-editable install puts the engine (and its graders) inside site-packages: the walls
    open site-packages entry by entry, never the engine's folder."""
    from autograder.sandbox.worker.confine import confine

    site = tmp_path / "site-packages"
    (site / "torchlike").mkdir(parents=True)
    (site / "torchlike" / "ops.py").write_text("ok")
    (site / "autograder" / "graders").mkdir(parents=True)
    (site / "autograder" / "graders" / "key.yml").write_text("answer: b")
    (tmp_path / "root").mkdir()
    (tmp_path / "home").mkdir()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            import ctypes

            ctypes.CDLL(None).prctl(
                38, 1, 0, 0, 0
            )  # no_new_privs, as every worker: Landlock needs it without root
            report = confine(
                {
                    "runtime": [str(site)],
                    "deny": [str(site / "autograder")],
                    "root": str(tmp_path / "root"),
                    "home": str(tmp_path / "home"),
                }
            )
            seen = []
            for path in (site / "torchlike" / "ops.py", site / "autograder" / "graders" / "key.yml"):
                try:
                    seen.append(path.read_text())
                except OSError as exc:
                    seen.append(type(exc).__name__)
            os.write(write_end, json.dumps([report["filesystem"], *seen]).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    data = os.read(read_end, 4096)
    os.close(read_end)
    os.waitpid(pid, 0)
    assert json.loads(data) == [True, "ok", "PermissionError"]


@pytest.mark.skipif(not LINUX, reason="the subreaper is Linux only")
def test_nothing_the_worker_spawned_survives_a_kill(open_box):
    """Without the walls (a system without seccomp), the supervisor still cleans up."""
    box = open_box
    marker = f"agmark-{random.SystemRandom().randrange(10**12)}"
    pids = box.call(tiny(box, "spawn"), marker)
    end = time.monotonic() + 30  # the grandchild may not have exec'd its command line yet
    while len(survivors(marker)) < 3 and time.monotonic() < end:
        time.sleep(0.05)
    assert len(pids) == 3 and len(survivors(marker)) == 3
    box.kill()
    assert wait_no_survivors(marker) == []
    box.ensure_ready()
    assert box.call(tiny(box, "add"), 4, 4) == 8


@pytest.mark.skipif(not LINUX, reason="RLIMIT_NPROC counts threads only on Linux")
def test_process_limit_counts_from_what_the_user_already_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOGRADER_ISOLATION", "off")  # the limit that holds where seccomp cannot
    user = worker_user()
    if user is None and os.geteuid() == 0:
        assert process_limit(8, None) is None  # root: ignored by the kernel anyway
        pytest.skip("the worker runs as root here")
    uid = user[0] if user else os.getuid()
    before = tasks_of(uid)
    assert before is not None
    limit = process_limit(8, user)
    assert before + 8 <= limit <= tasks_of(uid) + 8 + 64  # other processes may come and go
    (tmp_path / "tiny.py").write_text(TINY)
    marker = sleep_marker()
    with Sandbox(tmp_path, Limits(processes=8)) as sandbox:
        started, failed = sandbox.call(sandbox.getattr(sandbox.module("tiny"), "fork_many"), 40, marker)
        assert started <= 8 + 64 and failed >= 40 - 8 - 64 and failed > 0
    assert wait_no_survivors(marker) == []


def test_a_grader_can_build_a_library_object_in_the_worker_but_import_nothing_else(tmp_path):
    """sandbox.library: a torch.Generator made in the worker, passed to the learner's function."""
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "data.py").write_text(
        "import torch\n\ndef draw(generator):\n    return torch.randint(0, 1000, (3,), generator=generator)\n",
        encoding="utf-8",
    )
    with Sandbox(folder) as sandbox:
        torch_handle = sandbox.library("torch")
        first = sandbox.call(sandbox.getattr(torch_handle, "Generator"))
        second = sandbox.call(sandbox.getattr(torch_handle, "Generator"))
        sandbox.call(first, 1234, method="manual_seed")
        sandbox.call(second, 1234, method="manual_seed")
        draw = sandbox.getattr(sandbox.module("data"), "draw")
        assert sandbox.call(draw, first).tolist() == sandbox.call(draw, second).tolist()
        with pytest.raises(StudentError, match="not available to graders"):
            sandbox.library("os")


# ================================================================ the warm pool


@pytest.mark.skipif(not LINUX, reason="the warm pool is Linux only")
def test_the_worker_starts_the_expected_way(box):
    from autograder.sandbox.pool import ForkedSupervisor

    assert isinstance(box._proc, ForkedSupervisor) == box.warm_pool


@pytest.mark.skipif(not LINUX, reason="the warm pool is Linux only")
def test_the_worker_holds_only_its_two_pipes_and_its_log(box):
    fds = {}
    for name in os.listdir(f"/proc/{box.worker_pid}/fd"):
        try:
            fds[int(name)] = os.readlink(f"/proc/{box.worker_pid}/fd/{name}")
        except OSError:
            pass
    kinds = sorted(target.split(":")[0] if ":" in target else "file" for target in fds.values())
    # stdin (/dev/null), stdout and stderr (the log), the request and response pipes: no socket
    # to the zygote, no other sandbox's pipe.
    assert not any(target.startswith("socket:") for target in fds.values()), fds
    assert kinds.count("pipe") == 2, fds
    assert fds[0] == os.devnull and fds[1] == fds[2] and fds[1].endswith(".log")


@pytest.mark.skipif(not LINUX, reason="the warm pool is Linux only")
def test_the_zygote_is_single_threaded_with_a_clean_environment(tmp_path, monkeypatch):
    from autograder.sandbox.pool import WarmPool

    monkeypatch.setenv("GITHUB_TOKEN", SECRET)
    monkeypatch.setenv("AUTOGRADER_WARM_POOL", "1")
    (tmp_path / "m.py").write_text("x = 1\n")
    with Sandbox(tmp_path) as sandbox:
        assert sandbox.getattr(sandbox.module("m"), "x") == 1
        pool = WarmPool._instance
        assert pool is not None and pool.alive()
        zygote = pool.proc.pid
        # fork() copies only the calling thread: a zygote with other threads could hand a
        # worker a lock held forever. And its memory, the workers', holds no secret.
        assert len(os.listdir(f"/proc/{zygote}/task")) == 1
        assert SECRET.encode() not in Path(f"/proc/{zygote}/environ").read_bytes()


@pytest.mark.skipif(not LINUX, reason="the warm pool is Linux only")
def test_a_killed_zygote_costs_nothing_but_time(tmp_path, monkeypatch):
    from autograder.sandbox.pool import WarmPool

    monkeypatch.setenv("AUTOGRADER_WARM_POOL", "1")

    (tmp_path / "m.py").write_text("x = 2\n")
    with Sandbox(tmp_path) as sandbox:
        sandbox.ensure_ready()
    old = WarmPool._instance
    assert old is not None
    os.kill(old.proc.pid, signal.SIGKILL)  # a learner's worker of the same user could do this
    old.proc.wait()
    with Sandbox(tmp_path) as sandbox:
        assert sandbox.getattr(sandbox.module("m"), "x") == 2
    assert WarmPool._instance is not old and WarmPool._instance.alive()  # a new zygote took over


PARAM_VJP_MODULE = """
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.Linear(3, 3)
        self.b = torch.nn.Linear(3, 3)
        self.b.weight.requires_grad_(False)  # frozen: trains nothing, still computes

    def forward(self, x):
        return self.b(torch.tanh(self.a(x))) + x


def frozen():
    return [name for name, p in net.named_parameters() if not p.requires_grad]


net = Net()
"""


def test_param_vjp_gives_the_inputs_and_the_frozen_parameters_gradients(tmp_path):
    """Sandbox.param_vjp's options, against plain autograd here on the same module: input_grad
    adds the gradient reaching the first argument; all_params counts frozen parameters too, and
    leaves them frozen afterwards."""
    (tmp_path / "m.py").write_text(PARAM_VJP_MODULE, encoding="utf-8")
    namespace: dict = {}
    exec(PARAM_VJP_MODULE, namespace)
    here = namespace["net"]
    x, v = torch.randn(2, 3), torch.randn(2, 3)
    leaf = x.clone().requires_grad_(True)
    params = dict(here.named_parameters())
    for p in params.values():
        p.requires_grad_(True)
    expected = torch.autograd.grad(here(leaf), [*params.values(), leaf], v)
    with Sandbox(tmp_path) as sandbox:
        net = sandbox.getattr(sandbox.module("m"), "net")
        plain = sandbox.param_vjp(net, [x], [v])
        full = sandbox.param_vjp(net, [x], [v], input_grad=True, all_params=True)
        still_frozen = sandbox.call(sandbox.getattr(sandbox.module("m"), "frozen"))
    assert "input_grads" not in plain and "b.weight" not in plain["grads"][0]
    assert set(full["grads"][0]) == set(params)
    for (name, _), want in zip(params.items(), expected[:-1]):
        assert torch.allclose(full["grads"][0][name], want, atol=1e-6), name
    assert torch.allclose(full["input_grads"][0], expected[-1], atol=1e-6)
    assert still_frozen == ["b.weight"]
