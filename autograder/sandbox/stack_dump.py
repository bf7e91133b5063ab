"""Reading a worker's stack from what faulthandler wrote into its log when a check ran out of
time (Sandbox.sample_stack): the frames of the thread that served the grader's request,
bounded in number and size. Advisory text only: the learner's code could write a dump of its
own into the log, and nothing read here ever awards a point.
"""

from __future__ import annotations

import re

__all__ = ["MAX_SAMPLED_FRAMES", "stack_in_dump"]

MAX_SAMPLED_FRAMES = 100
_DUMP_HEADER = re.compile(
    r"^(Current thread|Thread) 0x[0-9a-fA-F]+ \(most recent call first\):$|^Stack \(most recent call first\):$"
)
_DUMP_FRAME = re.compile(r'^  File "(.*)", line (\d+) in (.*)$')


def stack_in_dump(text: str) -> list[dict] | None:
    """The frames (innermost first) of the thread that served the grader's request, from what
    faulthandler wrote (`text`, which may hold other output around it); None when no whole
    dump is there yet. The serving thread is the one whose stack holds the worker's `serve`
    loop, else the thread faulthandler calls current."""
    threads: list[tuple[bool, list[dict]]] = []
    current: list[dict] | None = None
    for line in text.split("\n"):
        line = line.rstrip("\r")
        header = _DUMP_HEADER.match(line)
        if header:
            current = []
            threads.append((line.startswith(("Current", "Stack")), current))
            continue
        frame = _DUMP_FRAME.match(line) if current is not None else None
        if frame:
            if len(current) < MAX_SAMPLED_FRAMES:
                current.append({"filename": frame[1][:500], "lineno": int(frame[2]), "name": frame[3][:200]})
        else:
            current = None
    threads = [(is_current, frames) for is_current, frames in threads if frames]
    if not threads:
        return None
    serving = [frames for _, frames in threads if any(f["name"] == "serve" for f in frames)]
    if serving:
        return serving[-1]
    return next((frames for is_current, frames in reversed(threads) if is_current), threads[-1][1])
