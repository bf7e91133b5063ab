"""The trusted side of the worker's walls (autograder/sandbox/worker/confine.py): what to ask for, what
this machine can enforce, and what a result says was enforced.

Every worker is asked to wall itself in (`walls`): read only the Python runtime and its copy of
the submission, write only its home, no network, no signal or trace outside itself, no new
processes; as root, also its own namespaces and an unprivileged user. Each worker reports what
the kernel actually enforced in its first message, before any learner code runs; `summary`
folds those reports into the result's `isolation` field, so an instructor can tell an official
grade (every wall held) from an unprotected one, and the learner is told once, in their
language, what this system could not enforce.

AUTOGRADER_ISOLATION=off turns the walls off (for benchmarks and for tests of what happens on a
system without them); the result then says so.

AUTOGRADER_WORKER=portable (default `auto`: only where the Linux path cannot run, i.e. not Linux
or no os.fork) runs workers on the portable path (autograder/sandbox/portable.py): no walls at
all, resource limits only where the platform has them. Its workers report `portable`, so the
result says "portable": true and lists every wall (and "limits", when they could not be set)
as missing.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import site
import sys
from pathlib import Path
from typing import Any

import autograder
from autograder.core.results import REQUIRED_WALLS

ENV_SWITCH = "AUTOGRADER_ISOLATION"
# What an official grade needs, whoever runs it; `namespaces` and `user` come on top as root.
REQUIRED = REQUIRED_WALLS
EXTRAS = ("ipc", "namespaces", "user")
PACKAGE_DIR = Path(autograder.__file__).resolve().parent
NAMESPACES = ("mnt", "net", "ipc", "pid", "user")


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "on").strip().lower() not in ("0", "off", "false", "no")


@functools.cache
def runtime_paths() -> tuple[str, ...]:
    """The folders a worker reads Python, numpy and torch from: the standard library, the
    site-packages folders, the interpreter's own folder and libraries. Never the course
    checkout that an editable install puts on sys.path: it holds the solutions."""
    found = [Path(os.__file__).parent, Path(sys.executable).resolve().parent]
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
        found += [Path(prefix) / "lib", Path(prefix) / "lib64"]
    try:
        found += [Path(p) for p in site.getsitepackages()]
    except AttributeError:
        pass
    for name in ("torch", "numpy", "pytest", "_pytest", "pluggy", "iniconfig", "packaging"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin and spec.origin not in ("built-in", "frozen"):
            origin = Path(spec.origin).resolve()
            found.append(origin.parent.parent if origin.name == "__init__.py" else origin.parent)
    for entry in sys.path:
        if entry and Path(entry).is_dir() and entry.endswith(("site-packages", "dist-packages")):
            found.append(Path(entry))
    seen, paths = set(), []
    for path in found:
        text = str(path.resolve()) if path.exists() else ""
        if text and text not in seen:
            seen.add(text)
            paths.append(text)
    return tuple(paths)


def deny_paths() -> list[str]:
    """What no worker may read even where it lies inside the runtime: the engine's package
    (hidden graders and reference pieces), the graders folder in use, a course checkout."""
    deny = [PACKAGE_DIR]
    if os.environ.get("AUTOGRADER_GRADERS"):
        deny.append(Path(os.environ["AUTOGRADER_GRADERS"]))
    checkout = PACKAGE_DIR.parent
    if (checkout / "course.yml").exists() or (checkout / "solutions").exists():
        deny.append(checkout)
    return [str(path.resolve()) for path in deny]


@functools.cache
def host_namespaces() -> dict[str, str]:
    """This process's namespaces (/proc/self/ns): a worker in another one has its own."""
    found = {}
    for name in NAMESPACES:
        try:
            found[name] = os.readlink(f"/proc/self/ns/{name}")
        except OSError:
            pass
    return found


def walls(home: Path, *, gpu: bool = False) -> dict[str, Any]:
    """The worker's part of the sandbox config (see autograder/sandbox/worker/confine.py)."""
    return {
        "enabled": enabled(),
        "runtime": list(runtime_paths()),
        "deny": deny_paths(),
        "home": str(home),
        "package": str(PACKAGE_DIR),
        "gpu": gpu,
        "host_ns": host_namespaces(),
        "host_uid": os.getuid(),
    }


# ------------------------------------------------------------------------------ reports


def clean_report(raw: Any) -> dict[str, Any]:
    """A worker's report reduced to known keys of known types (it is still data from another
    process: bounded, never trusted for more than it says)."""
    if not isinstance(raw, dict):
        return {}
    out: dict[str, Any] = {}
    for key in (*REQUIRED, "ipc", "seccomp", "disabled", "portable", "limits"):
        if key in raw:
            out[key] = raw[key] is True
    if isinstance(raw.get("landlock"), int) and not isinstance(raw.get("landlock"), bool):
        out["landlock"] = max(0, min(raw["landlock"], 99))
    if isinstance(raw.get("namespaces"), list):
        out["namespaces"] = sorted({str(n)[:10] for n in raw["namespaces"] if str(n) in NAMESPACES})
    if isinstance(raw.get("user"), str):
        out["user"] = raw["user"][:20]
    return out


def summary(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """The result's `isolation` field from every worker's report: a wall counts as enforced
    only if every worker had it."""
    reports = [clean_report(r) for r in reports]
    if not reports:
        reports = [{}]
    enforced = [wall for wall in (*REQUIRED, "ipc") if all(r.get(wall) for r in reports)]
    namespaces = sorted(set.intersection(*(set(r.get("namespaces", [])) for r in reports)))
    users = {r.get("user", "?") for r in reports}
    if namespaces:
        enforced.append("namespaces")
    if users and all(u == "unprivileged" for u in users):
        enforced.append("user")
    missing = [wall for wall in REQUIRED if wall not in enforced]
    portable = [r for r in reports if r.get("portable")]
    if any(not r.get("limits") for r in portable):
        missing.append("limits")  # a portable worker where the platform has no resource limits
    result = {
        "official": not missing,
        "enforced": enforced,
        "missing": missing,
        "landlock_abi": min((r.get("landlock", 0) for r in reports), default=0),
        "namespaces": namespaces,
        "disabled": any(r.get("disabled") for r in reports),
    }
    if portable:
        result["portable"] = True  # only then: results of the Linux path keep their shape
    return result


# ------------------------------------------------------------------------------ probing


@functools.cache
def probe() -> dict[str, Any]:
    """What a worker here would get, without starting one: a forked child of this process walls
    itself in as a worker does and reports. Used by grade-all before a cohort is graded."""
    from autograder.sandbox import portable

    if portable.selected():
        return summary(
            [{"portable": True, "limits": portable.rlimits_available(), "disabled": not enabled()}]
        )
    if not (sys.platform.startswith("linux") and hasattr(os, "fork")) or not enabled():
        return summary([{"disabled": not enabled()}])
    import json
    import tempfile

    home = tempfile.mkdtemp(prefix="autograder-probe-")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        code = 0
        try:
            os.close(read_end)
            from autograder.sandbox.worker import supervisor
            from autograder.sandbox.worker.confine import confine

            supervisor.seal_worker()
            report = confine({**walls(Path(home)), "root": home})
            os.write(write_end, json.dumps(report).encode())
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    data = b""
    while chunk := os.read(read_end, 65536):
        data += chunk
    os.close(read_end)
    os.waitpid(pid, 0)
    os.rmdir(home)
    try:
        report = json.loads(data or b"{}")
    except ValueError:
        report = {}
    return summary([report])


# ------------------------------------------------------------------------------ the trusted side


def hide_environment() -> None:
    """Linux: make this process non-dumpable, so its /proc files (environ included) belong to
    root and a learner's worker running as our own user cannot read our secrets there."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        pass
