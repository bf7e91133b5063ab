"""The wake-ups: how the app tells the workers that a submission is waiting.

Huey carries them (SqliteHuey in the data folder by default, RedisHuey for a redis:// URL: one
API, embedded or at scale). The queue holds no submission and decides nothing: its one task,
`wake`, makes a worker thread drain the store (autograder/service/store.py: claim, grade,
complete, until nothing is claimable), and a timer beside the consumer reaps expired leases and
wakes the workers while anything is queued. So a wake-up lost (the queue's file deleted, Redis
restarted, the app killed between recording and waking) costs latency, never a submission: the
store is the record and the timer finds what waits there.

    make_queue(url, data_dir)   the Huey instance, with `wake` registered (the app and the
                                workers make it alike)
    wake(queue)                 enqueue a wake-up (the app, after recording a submission)
    consume(queue, drain, ...)  the workers' side: Huey's consumer, `workers` threads, each
                                running `drain(stop)` per wake-up, and the timer
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from pathlib import Path

import huey

QUEUE_NAME = "autograder"
QUEUE_FILE = "queue.db"  # in the data folder, beside the store's database by default
POLL_MAX_S = 0.5  # SqliteHuey has no blocking read: an idle worker thread polls at most this far apart

# The worker process's drain and the consumer's stop flag, set by `consume`; the app's process
# enqueues only.
_running: tuple[Callable[[threading.Event], None], threading.Event] | None = None
_wake_tasks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # {queue: its `wake` task}


def _wake() -> None:
    if _running is not None:
        drain, stop = _running
        drain(stop)


def make_queue(url: str | None, data_dir: Path) -> huey.Huey:
    """SqliteHuey in `data_dir`/queue.db (url None or "sqlite:///path"), RedisHuey for a
    redis://, rediss:// or unix:// URL; `wake` registered on it."""
    if url and url.startswith(("redis://", "rediss://", "unix://")):
        queue = huey.RedisHuey(QUEUE_NAME, url=url, results=False)
    elif not url or url.startswith("sqlite:///"):
        path = Path(url[len("sqlite:///") :]) if url else Path(data_dir) / QUEUE_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        queue = huey.SqliteHuey(QUEUE_NAME, filename=str(path), results=False)
    else:
        raise ValueError(f"queue URL {url!r}: expected redis://, rediss://, unix:// or sqlite:///PATH")
    _wake_tasks[queue] = queue.task(name="wake")(_wake)
    return queue


def wake(queue: huey.Huey) -> None:
    """Enqueue a wake-up. Never required for correctness (the timer finds what waits)."""
    queue.enqueue(_wake_tasks[queue].s())


def consume(
    queue: huey.Huey,
    drain: Callable[[threading.Event], None],
    *,
    workers: int,
    tick_s: float,
    tick: Callable[[], bool],
) -> None:
    """Run Huey's consumer in this process until SIGINT or SIGTERM (blocking; the main thread):
    `workers` threads, each calling `drain(stop)` for a wake-up (`stop` is set when the consumer
    stops: a drain ends after its current submission). Every `tick_s` seconds, and once at the
    start, `tick()` runs (reap, say what waits): when it returns True, each worker thread is
    woken (as many wake-ups as are not already waiting)."""
    global _running
    consumer = queue.create_consumer(
        workers=max(1, workers),
        worker_type="thread",
        periodic=False,  # Huey's periodic tasks tick by the minute; the timer below is ours
        initial_delay=0.05,
        backoff=1.5,
        max_delay=POLL_MAX_S,
        check_worker_health=True,
    )
    logging.getLogger("huey").setLevel(logging.WARNING)  # a line per wake-up says nothing
    stop = consumer.stop_flag  # set as soon as the consumer is told to stop
    _running = (drain, stop)

    def timer() -> None:
        while not stop.is_set():
            try:
                if tick():
                    for _ in range(max(1, workers) - queue.pending_count()):
                        wake(queue)
            except Exception:  # a database or queue hiccup: the next tick tries again
                logging.getLogger(__name__).exception("timer")
            stop.wait(tick_s)

    ticker = threading.Thread(target=timer, name="autograder-timer", daemon=True)
    ticker.start()
    try:
        consumer.run()
    finally:
        stop.set()
        ticker.join(timeout=5)
        _running = None
