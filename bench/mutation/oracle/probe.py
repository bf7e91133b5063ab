"""The oracle's child process: run one lesson's probes on one root and save every output.

    python3 -m bench.mutation.oracle.probe --lesson 03 --root DIR --out FILE

`DIR` holds the course's lesson folders by name (DIR/03-atencion-causal/attention.py, ...). The
lesson's folder goes first on sys.path, as the practice tests put it; the lesson files append
the earlier lessons' sibling folders themselves (lessons 04-06), so DIR must hold those too.
Each probe runs with every global seed set from its name (torch, numpy, random), one CPU thread
and grad mode on, so a run is a pure function of the code under DIR. FILE is an .npz (numbers
only, see record.py); FILE + ".progress" names the probe running now, for a timeout's message.

Imports torch, numpy, the lesson's files and this package's probes_NN.py; nothing else of the
project.
"""

from __future__ import annotations

import argparse
import importlib
import os
import random
import sys
import traceback
import zlib
from pathlib import Path

# One thread: results do not depend on how many cores the machine lends, and 2-core CI runs
# stay fair to the other processes. Set before torch is imported.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from bench.mutation.oracle.record import Encoder, save  # noqa: E402


def lesson_folder(root: Path, lesson_id: str) -> Path:
    """root/NN-slug: the one folder of root whose name starts with the lesson's two digits."""
    found = sorted(p for p in Path(root).iterdir() if p.is_dir() and p.name.startswith(f"{lesson_id}-"))
    if len(found) != 1:
        raise FileNotFoundError(
            f"expected one folder {lesson_id}-* under {root}, found {[p.name for p in found]}"
        )
    return found[0]


def seed_of(name: str) -> int:
    return zlib.crc32(name.encode("utf-8")) & 0x7FFFFFFF


class Run:
    """Runs probes one by one and keeps what each gave."""

    def __init__(self, progress: Path) -> None:
        self.encoder = Encoder()
        self.probes: list[dict] = []
        self.progress = progress

    def _mark(self, text: str) -> None:
        self.progress.write_text(text, encoding="utf-8")

    def run(self, name: str, fn, lesson) -> None:
        self._mark(name)
        outputs: list = []
        record = {"name": name, "outputs": outputs, "raises": None}

        class Out(dict):
            """A probe writes out[key] = value; the order of the keys is kept."""

            def __setitem__(s, key, value):  # noqa: N805
                if key in s:
                    raise KeyError(f"probe {name!r} records {key!r} twice")
                super().__setitem__(key, value)
                outputs.append([key, self.encoder.encode(value)])

        _reset_globals(seed_of(name))
        try:
            fn(lesson, Out())
        except BaseException as exc:  # noqa: BLE001 - a lesson's SystemExit is a behaviour too
            if isinstance(exc, KeyboardInterrupt):
                raise
            record["raises"] = {"type": type(exc).__name__, "message": _first_line(exc)}
        finally:
            _restore_patches()
        self.probes.append(record)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else "")[:300]


_PATCHES: list = []


def patch(obj, attr, value) -> None:
    """Replace obj.attr for the rest of the current probe (restored after it)."""
    _PATCHES.append((obj, attr, getattr(obj, attr)))
    setattr(obj, attr, value)


def _restore_patches() -> None:
    while _PATCHES:
        obj, attr, old = _PATCHES.pop()
        setattr(obj, attr, old)


def _reset_globals(seed: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed % (2**32))
    random.seed(seed)
    torch.set_grad_enabled(True)
    torch.set_default_dtype(torch.float32)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lesson", required=True)
    parser.add_argument("--root", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    progress = Path(str(args.out) + ".progress")
    run = Run(progress)
    probes_module = importlib.import_module(f"bench.mutation.oracle.probes_{args.lesson}")
    meta = {"lesson": args.lesson, "probes": run.probes, "import_error": None}
    folder = lesson_folder(args.root.resolve(), args.lesson)
    sys.path.insert(0, str(folder))
    run._mark("(importing the lesson's files)")
    _reset_globals(0)
    try:
        lesson = probes_module.load(folder)
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, KeyboardInterrupt):
            raise
        tail = traceback.format_exception(exc)[-3:]
        meta["import_error"] = {
            "type": type(exc).__name__,
            "message": _first_line(exc),
            "tail": "".join(tail),
        }
    else:
        for name, fn in probes_module.probes():
            run.run(name, fn, lesson)
    # What the run imported of the project besides the lesson: must be nothing (the oracle is
    # apart from the graders; tests/mutation/test_oracle.py checks this list is empty).
    meta["foreign_modules"] = sorted(
        m for m in sys.modules if m.split(".")[0] == "autograder" or "reference" in m.split(".")[0].lower()
    )
    run._mark("(saving)")
    save(args.out, meta, run.encoder.arrays)
    return 0


if __name__ == "__main__":
    sys.exit(main())
