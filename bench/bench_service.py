"""Benchmark: the grading service's submit-to-verdict latency and its throughput under a burst.

Run from the repository root:

    python bench/bench_service.py [--workers 2] [--repeat 3] [--burst 100] [--learners 40]
                                  [--skip-course] [--skip-burst]

Everything is real but GitHub: `autograder serve` (its app in uvicorn and its workers, over
SQLite in a temporary folder) on 127.0.0.1, a local OIDC issuer (tests/support/oidc_issuer.py)
minting the tokens GitHub would, and the stand-in of GitHub's API (tests/support/fake_github.py:
repositories by id, workflow runs, git's smart HTTP from bare repositories), from which the
workers fetch each learner's commit as they would from github.com. What a learner's job does is
done here directly (a POST with the token, then polls), so the times below are the service's,
without a runner's start-up. Three measurements, in one run:

  1. one lesson (03) on an idle, warm service: from the POST to the verdict, as the job sees it,
     and from pickup (the first poll that answers "grading") to the verdict; against
     `autograder grade 03 --submission` of the same files (a fresh process, as a learner runs it);
  2. the whole course on an idle, warm service (a second service, every lesson), against
     `autograder grade --submission` of the same files;
  3. a burst: `--burst` submissions from `--learners` learners (each learner's commits in turn:
     the solution, correct variants, buggy variants and the stub of lesson 03), every POST sent
     at once, the service grading lesson 03: how long until every submission is final, how many
     were graded and how many superseded by a newer push of the same learner (the service grades
     each learner's newest push), graded per minute, and the median and 95th percentile of the
     latency (from its POST to its final state, as the store records it); against
     `autograder grade-all --jobs WORKERS --lessons 03` of the same submissions, one folder each.

A warm service is one that has graded once since it started (the first grading of a worker
imports torch and starts its grading process). The issue's goal: a warm verdict within 1 s of
pickup for a lesson and 3 s for the course. This is a measurement, never a test: it prints a
table and asserts no time. Shared machines are noisy; compare numbers within one run only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

ORGANIZATION = "curso-tdc"
SERVE_START_S = 180.0
FINAL = ("done", "error", "superseded")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "Bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(f"git {' '.join(args)} failed in {cwd}:\n{done.stderr}")
    return done.stdout.strip()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100), linear between the closest ranks."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = (len(ordered) - 1) * q / 100
    low, high = int(rank), min(int(rank) + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


# --- learners' repositories on the GitHub stand-in -------------------------------------------------


@dataclass
class Learner:
    id: str
    repo: dict
    work: Path
    commits: list[str] = field(default_factory=list)


def make_learner(github, base: Path, index: int) -> Learner:
    name = f"tdc-alumno-{index:02d}"
    repo = github.add_repo(f"{ORGANIZATION}/{name}")
    origin = github.git_root / ORGANIZATION / f"{name}.git"
    origin.parent.mkdir(parents=True, exist_ok=True)
    git(base, "init", "-q", "--bare", "-b", "main", str(origin))
    work = base / "work" / name
    work.mkdir(parents=True)
    git(work, "init", "-q", "-b", "main")
    git(work, "remote", "add", "origin", str(origin))
    return Learner(f"alumno-{index:02d}", repo, work)


def commit(learner: Learner, files: dict[str, str], message: str) -> str:
    """Replace the learner's exercises/ with `files` (paths from the repository root), commit,
    push to main; the new sha."""
    shutil.rmtree(learner.work / "exercises", ignore_errors=True)
    for rel, text in files.items():
        path = learner.work / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    git(learner.work, "add", "-A")
    git(learner.work, "commit", "-q", "--allow-empty", "-m", message)
    git(learner.work, "push", "-q", "-f", "origin", "HEAD:refs/heads/main")
    sha = git(learner.work, "rev-parse", "HEAD")
    learner.commits.append(sha)
    return sha


def write_roster(path: Path, learners: list[Learner]) -> None:
    lines = ["version: 1", f"organization: {ORGANIZATION}", "repository_prefix: tdc-", "learners:"]
    for learner in learners:
        login = learner.repo["name"].removeprefix("tdc-")
        lines += [f"  - id: {learner.id}", f"    github: {login}", f"    repository_id: {learner.repo['id']}"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# --- the service -------------------------------------------------------------------------------------


class Service:
    """`autograder serve` as a subprocess, with its issuer and GitHub."""

    def __init__(
        self, base: Path, issuer, github, roster: Path, workers: int, lessons: tuple[str, ...]
    ) -> None:
        self.base, self.issuer, self.github = base, issuer, github
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data = base / "servicio"
        args = [
            sys.executable, "-m", "autograder", "--course", str(ROOT / "course.yml"), "serve",
            "--roster", str(roster), "--public-url", self.url, "--issuer", issuer.url,
            "--github-api", github.url, "--data", str(self.data), "--port", str(self.port),
            "--workers", str(workers), "--per-hour", "1000",
            "--clone-url", f"{github.url}/git/{{repository}}.git",
            "--allow-scheme", "http", "--allow-host", "127.0.0.1",
        ]  # fmt: skip
        if lessons:
            args += ["--lessons", *lessons]
        from support.fake_github import TOKEN

        env = {**os.environ, "AUTOGRADER_SERVICE_TOKEN": TOKEN}
        env.pop("AUTOGRADER_LANG", None)
        base.mkdir(parents=True, exist_ok=True)
        self.log_path = base / "serve.log"
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(args, cwd=base, stdout=log, stderr=subprocess.STDOUT, env=env)
        end = time.monotonic() + SERVE_START_S
        while True:
            if self.proc.poll() is not None:
                sys.exit(f"autograder serve exited ({self.proc.returncode}):\n{self.log()}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=5):
                    break
            except OSError:
                if time.monotonic() > end:
                    sys.exit(f"autograder serve did not answer within {SERVE_START_S:g} s:\n{self.log()}")
                time.sleep(0.2)
        from autograder.service.store import Store

        self.store = Store(f"sqlite:///{self.data / 'servicio.db'}")

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")[-4000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=60)
        self.store.close()

    def token(self, learner: Learner, sha: str) -> str:
        run = self.github.add_run(learner.repo["full_name"], head_sha=sha, created_at=time.time() - 5)
        return self.issuer.mint(
            aud=self.url,
            repository=learner.repo["full_name"],
            repository_id=str(learner.repo["id"]),
            sha=sha,
            run_id=str(run["id"]),
        )

    def post(self, token: str) -> dict:
        """What the learner's job sends: the token, an empty body."""
        request = urllib.request.Request(
            self.url + "/submissions", data=b"", headers={"Authorization": f"Bearer {token}"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as error:
            sys.exit(f"the service refused a submission ({error.code}): {error.read()[:500]!r}\n{self.log()}")

    def poll(self, url: str) -> dict:
        with urllib.request.urlopen(url, timeout=60) as answer:
            return json.loads(answer.read())


def submit_and_wait(service: Service, learner: Learner, sha: str, *, timeout: float = 900.0) -> dict:
    """One submission on an idle service, followed as closely as the job could (polls every
    50 ms): seconds from the POST to the verdict and from pickup to the verdict, and the verdict."""
    token = service.token(learner, sha)
    started = time.perf_counter()
    accepted = service.post(token)
    picked = None
    while time.perf_counter() - started < timeout:
        answer = service.poll(accepted["poll"])
        now = time.perf_counter()
        if answer["state"] == "grading" and picked is None:
            picked = now
        if answer["state"] in FINAL:
            return {
                "total": now - started,
                "pickup": now - (picked if picked is not None else started),
                "state": answer["state"],
                "score": answer.get("score"),
                "max": answer.get("max"),
            }
        time.sleep(0.05)
    sys.exit(f"no verdict within {timeout:g} s\n{service.log()}")


def timed(cmd: list[str], cwd: Path) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    took = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return took, done.stdout


# --- what the learners submit --------------------------------------------------------------------------


def lesson03_kinds():
    """[(name, files of exercises/03-.../)] cycling through the kinds of submission a cohort makes."""
    from lessons.lesson03_variants import BUGGY, CORRECT
    from support.cohort_factory import stub_files
    from support.variants import solution_files

    from autograder.core.manifest import load_course

    lesson = load_course(ROOT / "course.yml").lesson("03")
    solved = solution_files(lesson)
    kinds = [("solucion", solved), ("stub", stub_files(lesson))]
    kinds += [(f"ok-{v.name}", {**solved, **v.apply(solved)}) for v in CORRECT]
    kinds += [(f"bug-{v.name}", {**solved, **v.apply(solved)}) for v in BUGGY]
    return lesson, kinds


def course_solution() -> dict[str, str]:
    """Every lesson solved, as paths from the repository root."""
    from support.variants import solution_files

    from autograder.core.manifest import load_course

    course = load_course(ROOT / "course.yml")
    return {
        f"exercises/{lesson.folder}/{name}": text
        for lesson in course.lessons
        for name, text in solution_files(lesson).items()
    }


# --- the three measurements ---------------------------------------------------------------------------


def idle(service: Service, learner: Learner, files: dict[str, str], repeat: int, label: str) -> list[dict]:
    commit(learner, files, f"{label}: warm-up")
    warm_up = submit_and_wait(service, learner, learner.commits[-1])
    print(f"  {label}: first grading after start (cold): {warm_up['total']:.2f} s ({warm_up['state']})")
    runs = []
    for index in range(repeat):
        sha = commit(learner, files, f"{label}: {index}")  # a new commit: the same files again
        runs.append(submit_and_wait(service, learner, sha))
    return runs


def burst(service: Service, learners: list[Learner], kinds, lesson, size: int, subs: Path) -> dict:
    """Push `size` commits round-robin over the learners (each a kind of submission), then POST
    every token at once and follow the store until every submission is final."""
    plan = []
    for index in range(size):
        learner = learners[index % len(learners)]
        name, files = kinds[index % len(kinds)]
        rel = {f"exercises/{lesson.folder}/{n}": t for n, t in files.items()}
        sha = commit(learner, rel, f"burst {index}: {name}")
        plan.append((learner, sha))
        folder = subs / f"{learner.id}-{index:03d}" / "exercises" / lesson.folder
        folder.mkdir(parents=True)
        for n, t in files.items():
            (folder / n).write_text(t, encoding="utf-8")
    tokens = [(learner, sha, service.token(learner, sha)) for learner, sha in plan]
    sent: dict[str, float] = {}
    lock = threading.Lock()

    def post(item) -> None:
        learner, sha, token = item
        at = time.perf_counter()
        service.post(token)
        with lock:
            sent[sha] = at

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(post, tokens))
    posted = time.perf_counter() - started
    final_at: dict[str, float] = {}
    shas = {sha for _, sha in plan}
    while len(final_at) < len(shas):
        now = time.perf_counter()
        for submission in service.store.submissions():
            if submission.sha in shas and submission.state in FINAL and submission.sha not in final_at:
                final_at[submission.sha] = now
        if now - started > 3600:
            sys.exit(f"the burst did not drain within an hour\n{service.log()}")
        time.sleep(0.1)
    drained = time.perf_counter() - started
    states = {s.sha: s.state for s in service.store.submissions() if s.sha in shas}
    graded = [sha for sha, state in states.items() if state in ("done", "error")]
    latencies = [final_at[sha] - sent[sha] for sha in graded]
    return {
        "posted_s": posted,
        "drained_s": drained,
        "graded": len(graded),
        "superseded": sum(state == "superseded" for state in states.values()),
        "errors": sum(state == "error" for state in states.values()),
        "median": statistics.median(latencies) if latencies else float("nan"),
        "p95": percentile(latencies, 95),
    }


def idle_rows(label: str, runs: list[dict], cli: str, cli_s: float, goal: str) -> list[tuple[str, str, str]]:
    print(f"  verdicts: {[(r['state'], r['score'], r['max']) for r in runs]}")
    total = statistics.median(r["total"] for r in runs)
    pickup = statistics.median(r["pickup"] for r in runs)
    return [
        (f"{label}, POST to verdict (warm, median of {len(runs)})", f"{total:.2f}", ""),
        (f"{label}, pickup to verdict (warm, median of {len(runs)})", f"{pickup:.2f}", goal),
        (f"{label}, {cli} (a fresh process)", f"{cli_s:.2f}", ""),
    ]


def write_lesson_files(folder: Path, files: dict[str, str], strip: str) -> Path:
    """`files` (paths from the repository root) below `folder`, without the prefix `strip`."""
    for rel, text in files.items():
        path = folder / Path(rel).relative_to(strip)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return folder


def autograder(*args: str) -> list[str]:
    return [sys.executable, "-m", "autograder", *args]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--workers", type=int, default=2, help="the service's grading processes (grade-all's --jobs)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="warm submissions per idle measurement")
    parser.add_argument("--burst", type=int, default=100, help="submissions in the burst")
    parser.add_argument("--learners", type=int, default=40, help="learners the burst comes from")
    parser.add_argument("--skip-course", action="store_true", help="leave out the whole course's measurement")
    parser.add_argument("--skip-burst", action="store_true", help="leave out the burst")
    args = parser.parse_args()

    from support.fake_github import FakeGitHub
    from support.oidc_issuer import LocalIssuer

    lesson, kinds = lesson03_kinds()
    prefix = f"exercises/{lesson.folder}"
    solved03 = {f"{prefix}/{name}": text for name, text in kinds[0][1].items()}
    # Outside any private temporary folder: the service runs git as `nobody` when root.
    base = Path(tempfile.mkdtemp(prefix="bench-service-"))
    os.chmod(base, 0o755)
    rows: list[tuple[str, str, str]] = []
    try:
        with LocalIssuer() as issuer, FakeGitHub() as github:
            github.git_root = base / "git"
            learners = [make_learner(github, base, i) for i in range(max(1, args.learners))]
            roster = base / "roster.yml"
            write_roster(roster, learners)
            subprocess.run(["chmod", "-R", "a+rX", str(base)], check=True)

            print(f"1. lesson 03 on an idle service ({args.workers} workers)")
            service = Service(base / "svc-03", issuer, github, roster, args.workers, ("03",))
            try:
                runs = idle(service, learners[0], solved03, args.repeat, "lesson 03")
            finally:
                service.stop()
            folder = write_lesson_files(base / "grade-03", solved03, prefix)
            cli = min(
                timed(autograder("grade", "03", "--submission", str(folder)), ROOT)[0] for _ in range(2)
            )
            rows += idle_rows("lesson 03", runs, "`autograder grade 03`, best of 2", cli, "goal <= 1 s")

            if not args.skip_course:
                print("2. the whole course on an idle service")
                files = course_solution()
                service = Service(base / "svc-course", issuer, github, roster, args.workers, ())
                try:
                    runs = idle(service, learners[-1], files, args.repeat, "course")
                finally:
                    service.stop()
                folder = write_lesson_files(base / "grade-course", files, "exercises")
                cli = timed(autograder("grade", "--submission", str(folder)), ROOT)[0]
                rows += idle_rows("course", runs, "`autograder grade`", cli, "goal <= 3 s")

            if not args.skip_burst:
                print(f"3. a burst of {args.burst} submissions from {len(learners)} learners (lesson 03)")
                service = Service(base / "svc-burst", issuer, github, roster, args.workers, ("03",))
                subs = base / "burst-submissions"
                try:
                    submit_and_wait(service, learners[0], commit(learners[0], solved03, "burst: warm-up"))
                    got = burst(service, learners, kinds, lesson, args.burst, subs)
                finally:
                    service.stop()
                out = base / "grade-all"
                jobs = str(args.workers)
                took = timed(
                    autograder("grade-all", str(subs), "--out", str(out), "--jobs", jobs, "--lessons", "03"),
                    ROOT,
                )[0]
                states = f"{got['graded']} graded, {got['superseded']} superseded, {got['errors']} errors"
                service_rate = f"{got['graded'] / got['drained_s'] * 60:.1f} graded/min"
                batch_rate = f"{args.burst / took * 60:.1f} graded/min"
                rows += [
                    (f"burst: {args.burst} POSTs answered", f"{got['posted_s']:.2f}", ""),
                    (f"burst: all final ({states})", f"{got['drained_s']:.2f}", service_rate),
                    ("burst: latency of a graded one, median", f"{got['median']:.2f}", ""),
                    ("burst: latency of a graded one, 95th percentile", f"{got['p95']:.2f}", ""),
                    (
                        f"grade-all --jobs {jobs}, the same {args.burst} submissions",
                        f"{took:.2f}",
                        batch_rate,
                    ),
                ]
    finally:
        shutil.rmtree(base, ignore_errors=True)

    width = max(len(row[0]) for row in rows)
    print()
    print(f"{'measurement':<{width}}  {'s':>8}  note")
    for what, seconds, note in rows:
        print(f"{what:<{width}}  {seconds:>8}  {note}")


if __name__ == "__main__":
    main()
