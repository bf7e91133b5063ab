"""autograder/github/grades_branch.py against real git: a work repo whose origin is a local bare repo."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from autograder.core.history import LessonEntry, Record, badge, compute_progress, dump_line
from autograder.github.grades_branch import GitStoreError, append_record, commit_time, read_history

ROOT = Path(__file__).resolve().parents[2]
TZ = "Europe/Madrid"
COURSE = "Transformers desde cero"
NOW = datetime(2025, 1, 12, 20, 0, tzinfo=timezone.utc)
BRANCH_FILES = {"history.jsonl", "progress.json", "badge.json", "README.md"}


@pytest.fixture(autouse=True)
def git_env(tmp_path, monkeypatch):
    """No user or system git configuration; an identity for the test's own commits."""
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Learner",
        "GIT_AUTHOR_EMAIL": "learner@example.com",
        "GIT_COMMITTER_NAME": "Learner",
        "GIT_COMMITTER_EMAIL": "learner@example.com",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("GIT_DIR", raising=False)
    return {**os.environ, **env}


def git(cwd: Path, *args: str, date: str | None = None) -> str:
    env = {**os.environ, **({"GIT_COMMITTER_DATE": date, "GIT_AUTHOR_DATE": date} if date else {})}
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"git {args}: {proc.stderr}"
    return proc.stdout.strip()


def commit(repo: Path, name: str, date: str) -> str:
    (repo / name).write_text(name + "\n")
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", f"add {name}", date=date)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def remote(tmp_path) -> Path:
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    return bare


@pytest.fixture
def work(tmp_path, remote) -> Path:
    """The learner's checkout: three commits on main, a day apart, pushed to origin."""
    repo = tmp_path / "work"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    for day in (10, 11, 12):
        commit(repo, f"day{day}.py", f"2025-01-{day}T10:00:00+01:00")
    (repo / "untracked.txt").write_text("the learner's unsaved work\n")
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "origin", "main")
    return repo


def commits(repo: Path) -> list[str]:
    return git(repo, "rev-list", "--reverse", "main").split()


def record_for(repo: Path, sha: str, score: float = 10) -> Record:
    """Lesson 03 graded on that commit: 100 XP when the score is full."""
    xp = 100 if score == 10 else 0
    lessons = (LessonEntry("03", score, 10, score == 10, xp, 100, "hidden"),)
    return Record(sha, commit_time(repo, sha), datetime.now(timezone.utc), xp, 100, lessons)


def append(repo: Path, record: Record, lang: str = "es", **kwargs):
    return append_record(repo, record, tz=TZ, lang=lang, course=COURSE, now=NOW, **kwargs)


def remote_tip(remote: Path) -> str | None:
    proc = subprocess.run(
        ["git", "rev-parse", "--verify", "-q", "refs/heads/grades"],
        cwd=remote,
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.strip() or None


def show(remote: Path, name: str, rev: str = "grades") -> bytes:
    return subprocess.run(
        ["git", "cat-file", "blob", f"{rev}:{name}"], cwd=remote, capture_output=True, check=True
    ).stdout


def snapshot(repo: Path) -> dict:
    """What the learner can see of their checkout: it must not change."""
    return {
        # --no-optional-locks: status must not refresh (rewrite) the index it is checking.
        "status": git(repo, "--no-optional-locks", "status", "--porcelain", "--untracked-files=all"),
        "head": git(repo, "symbolic-ref", "HEAD") + " " + git(repo, "rev-parse", "HEAD"),
        "branches": git(repo, "for-each-ref", "refs/heads", "refs/tags"),
        "index": (repo / ".git" / "index").read_bytes(),
        "files": sorted(
            (p.relative_to(repo).as_posix(), p.read_bytes())
            for p in repo.rglob("*")
            if p.is_file() and ".git" not in p.parts
        ),
    }


def push_branch(tmp_path: Path, remote: Path, files: dict[str, bytes]) -> str:
    """Put a hand-made grades branch on the remote, as a learner editing it could."""
    scratch = tmp_path / "scratch"
    git(tmp_path, "init", "-q", "-b", "grades", str(scratch))
    for name, content in files.items():
        (scratch / name).write_bytes(content)
    git(scratch, "add", ".")
    git(scratch, "commit", "-q", "-m", "by hand")
    git(scratch, "push", "-q", str(remote), "grades")
    return git(scratch, "rev-parse", "HEAD")


# --- tests -----------------------------------------------------------------------------------


def test_commit_time_is_the_committer_date_with_its_offset(work):
    first = commits(work)[0]
    when = commit_time(work, first)
    assert when == datetime(2025, 1, 10, 9, 0, tzinfo=timezone.utc)
    assert when.utcoffset().total_seconds() == 3600
    with pytest.raises(GitStoreError, match="cat-file"):
        commit_time(work, "0" * 40)


def test_the_first_record_creates_an_orphan_branch_and_touches_nothing_local(tmp_path, work, remote):
    # The learner's hooks must not run (nor block the push): they are the learner's code.
    ran = tmp_path / "hook-ran"
    for name in ("pre-push", "reference-transaction"):
        hook = work / ".git" / "hooks" / name
        hook.write_text(
            f"#!{sys.executable}\nimport sys\nopen({str(ran)!r}, 'a').write('{name}\\n')\nsys.exit(1)\n"
        )
        hook.chmod(0o755)
    before = snapshot(work)
    assert read_history(work) == ([], [])
    head = commits(work)[-1]
    record = record_for(work, head)

    result = append(work, record)

    assert result.added and result.pushed_commit == remote_tip(remote) and result.attempts == 1
    assert result.records == [record] and result.problems == []
    assert git(remote, "rev-list", "--parents", "grades") == result.pushed_commit  # a root commit
    assert (
        git(remote, "log", "-1", "--format=%an <%ae>|%cn", "grades")
        == "autograder <autograder@users.noreply.github.com>|autograder"
    )
    assert set(git(remote, "ls-tree", "--name-only", "grades").split()) == BRANCH_FILES
    assert show(remote, "history.jsonl") == dump_line(record).encode()
    unrelated = subprocess.run(
        ["git", "merge-base", "grades", "main"], cwd=remote, capture_output=True, check=False
    )
    assert unrelated.returncode == 1  # no common ancestor with the learner's code
    readme = show(remote, "README.md").decode()
    assert "no la edites a mano" in readme and "do not edit it by hand" in readme
    assert snapshot(work) == before
    assert read_history(work) == ([record], [])
    assert not ran.exists()


def test_the_same_commit_twice_adds_nothing(work, remote):
    record = record_for(work, commits(work)[-1])
    append(work, record)
    tip = remote_tip(remote)
    regraded = record_for(work, record.commit, score=4)  # a re-run with other results
    again = append(work, regraded)
    assert (again.added, again.pushed_commit, again.attempts) == (False, None, 0)
    assert remote_tip(remote) == tip
    assert again.records == [record]
    assert again.progress.lessons[0].passing_now is False  # about this run: it fails now
    assert again.progress.xp == 100  # but the XP earned is kept


def test_history_is_the_old_bytes_plus_one_line_even_when_malformed(tmp_path, work, remote):
    first, second, third = commits(work)
    kept = record_for(work, first, score=5)
    garbage = b"garbage the learner typed\n\xff\xfe\n" + b'{"v": 1, "commit": "nope"}'  # no final newline
    old = dump_line(kept).encode() + garbage
    base = push_branch(tmp_path, remote, {"history.jsonl": old, "notes.txt": b"mine\n", "badge.json": b"{}"})

    result = append(work, record_for(work, second))

    assert result.added and len(result.problems) == 3
    assert [p.split(":")[0] for p in result.problems] == ["line 2", "line 3", "line 4"]
    new = show(remote, "history.jsonl")
    assert new == old + b"\n" + dump_line(result.records[-1]).encode()
    assert git(remote, "rev-parse", "grades^") == base  # built on the tip, not over it
    assert show(remote, "notes.txt") == b"mine\n"  # anything else on the branch is kept
    assert json.loads(show(remote, "badge.json"))["schemaVersion"] == 1  # derived files rewritten

    third_result = append(work, record_for(work, third))
    assert show(remote, "history.jsonl") == new + dump_line(third_result.records[-1]).encode()
    assert [r.commit for r in read_history(work)[0]] == [first, second, third]


def test_derived_files(work, remote):
    first, second, third = commits(work)
    append(work, record_for(work, first, score=3))
    append(work, record_for(work, second, score=10), lang="en")
    result = append(work, record_for(work, third, score=4), lang="en")  # lesson 03 breaks again

    expected = compute_progress(result.records, TZ, now=NOW)
    progress = json.loads(show(remote, "progress.json"))
    assert progress["course"] == COURSE and progress["tz"] == TZ
    assert (progress["xp"], progress["xp_max"], progress["streak"], progress["longest_streak"]) == (
        100,
        100,
        2,
        2,
    )
    assert progress["last_progress_day"] == "2025-01-11" and progress["regressions"] == ["03"]
    assert progress["lessons"] == [
        {
            "id": "03",
            "earned": True,
            "earned_on": "2025-01-11",
            "best_score": 10,
            "max_score": 10,
            "xp": 100,
            "xp_max": 100,
            "passing_now": False,
            "practice": False,
        }
    ]
    assert progress == {"course": COURSE, "tz": TZ, **expected.to_json()}
    assert json.loads(show(remote, "badge.json")) == badge(expected, "en", COURSE)
    assert json.loads(show(remote, "badge.json"))["message"] == "100/100 XP · 2-day streak"


def test_works_from_a_shallow_clone(tmp_path, work, remote):
    first, second, third = commits(work)
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", remote.as_uri(), str(shallow))
    assert git(shallow, "rev-parse", "--is-shallow-repository") == "true"
    before = snapshot(shallow)

    created = append(shallow, record_for(shallow, third))  # creates the branch
    append(work, record_for(work, first))  # another checkout appends
    later = append(shallow, record_for(work, second))  # the shallow one fetches and appends

    assert created.added and later.added
    assert [r.commit for r in read_history(work)[0]] == [third, first, second]
    assert git(remote, "rev-list", "--count", "grades") == "3"
    assert snapshot(shallow) == before
    assert git(shallow, "rev-parse", "--is-shallow-repository") == "true"


def test_a_missing_remote_is_an_error_for_writing_and_empty_for_reading(tmp_path, work):
    lonely = tmp_path / "lonely"
    git(tmp_path, "init", "-q", "-b", "main", str(lonely))
    sha = commit(lonely, "a.py", "2025-01-10T10:00:00+01:00")
    assert read_history(lonely) == ([], [])
    with pytest.raises(GitStoreError, match="no git remote named 'origin'"):
        append(lonely, record_for(lonely, sha))
    # A remote that cannot be reached: git's own explanation is in the message.
    git(lonely, "remote", "add", "origin", str(tmp_path / "gone.git"))
    with pytest.raises(GitStoreError, match="does not appear to be a git repository"):
        append(lonely, record_for(lonely, sha))
    with pytest.raises(GitStoreError, match="ls-remote"):
        read_history(lonely)


def test_a_push_refused_for_another_reason_is_an_error_not_a_retry(work, remote):
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(
        f"#!{sys.executable}\nimport sys\nprint('grades are closed', file=sys.stderr)\nsys.exit(1)\n"
    )
    hook.chmod(0o755)
    started = time.monotonic()
    with pytest.raises(GitStoreError, match="grades are closed"):
        append(work, record_for(work, commits(work)[-1]))
    assert time.monotonic() - started < 5
    assert remote_tip(remote) is None


APPENDER = textwrap.dedent(
    """
    import json, sys, time
    from datetime import datetime, timezone
    from pathlib import Path
    from autograder.github.grades_branch import append_record, commit_time
    from autograder.core.history import LessonEntry, Record

    repo, sha, ready, go = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
    lessons = (LessonEntry("03", 10, 10, True, 100, 100, "hidden"),)
    record = Record(sha, commit_time(repo, sha), datetime.now(timezone.utc), 100, 100, lessons)
    ready.touch()
    while not go.exists():  # everyone starts together, so the pushes really race
        time.sleep(0.002)
    result = append_record(repo, record, tz="Europe/Madrid", lang="es", course="C")
    print(json.dumps({"added": result.added, "attempts": result.attempts, "commit": result.pushed_commit}))
    """
)


def start_appender(
    tmp_path: Path, env: dict, repo: Path, sha: str, name: str, go: Path
) -> tuple[subprocess.Popen, Path]:
    ready = tmp_path / f"{name}.ready"
    env = {**env, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", APPENDER, str(repo), sha, str(ready), str(go)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, ready


def wait_for(predicate, seconds: float = 15) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_concurrent_appends_from_separate_processes_each_land_once(tmp_path, work, remote, git_env):
    # Four CI jobs, each with its own shallow checkout, append different commits at once.
    n = 4
    for i in range(n - len(commits(work))):
        commit(work, f"extra{i}.py", f"2025-01-12T1{i}:30:00+01:00")
    git(work, "push", "-q", "origin", "main")
    shas = commits(work)[-n:]
    go = tmp_path / "go"
    procs = []
    for i, sha in enumerate(shas):
        clone = tmp_path / f"job{i}"
        git(tmp_path, "clone", "-q", "--depth", str(n), remote.as_uri(), str(clone))
        procs.append(start_appender(tmp_path, git_env, clone, sha, f"job{i}", go))
    wait_for(lambda: all(ready.exists() or proc.poll() is not None for proc, ready in procs))
    go.touch()
    outcomes = []
    for proc, _ in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        outcomes.append(json.loads(out))

    assert all(o["added"] for o in outcomes)
    records, problems = read_history(work)
    assert problems == []
    assert sorted(r.commit for r in records) == sorted(shas)  # every record exactly once
    assert git(remote, "rev-list", "--count", "grades") == str(n)  # one linear chain, no loss
    assert (
        git(remote, "rev-list", "--max-parents=0", "grades")
        == git(remote, "rev-list", "--reverse", "grades").split()[0]
    )
    assert sorted(o["commit"] for o in outcomes) == sorted(git(remote, "rev-list", "grades").split())
    print("push attempts:", [o["attempts"] for o in outcomes])


HOLD_ONCE = """#!{python}
import os, sys, time
if os.path.exists({hold!r}):  # only the first run waits
    os.remove({hold!r})
    time.sleep(1.5)
{then}
"""


@pytest.mark.parametrize("where", ["remote pre-receive hook", "before receive-pack starts"])
def test_a_push_that_loses_the_race_is_rebuilt_on_the_new_tip(tmp_path, work, remote, git_env, where):
    # A slow run is held while a fast one pushes; the slow push then fails and must be rebuilt
    # on the new tip. Held in the remote's pre-receive hook, both pushes overlap and the remote
    # refuses the slow one ("cannot lock ref": the ref moved). Held before receive-pack starts
    # (remote.origin.receivepack), the slow push sees the moved branch: "fetch first".
    first, second, third = commits(work)
    append(work, record_for(work, first))
    slow_clone = tmp_path / "slow"
    git(tmp_path, "clone", "-q", remote.as_uri(), str(slow_clone))
    hold = tmp_path / "hold"
    hold.touch()
    if where == "remote pre-receive hook":
        script = remote / "hooks" / "pre-receive"
        script.write_text(HOLD_ONCE.format(python=sys.executable, hold=str(hold), then="sys.stdin.read()"))
    else:
        script = tmp_path / "slow-receive-pack"
        then = 'os.execvp("git", ["git", "receive-pack", *sys.argv[1:]])'
        script.write_text(HOLD_ONCE.format(python=sys.executable, hold=str(hold), then=then))
        git(slow_clone, "config", "remote.origin.receivepack", str(script))
    script.chmod(0o755)
    go = tmp_path / "go"
    go.touch()
    slow, _ = start_appender(tmp_path, git_env, slow_clone, second, "slow", go)
    wait_for(lambda: not hold.exists() or slow.poll() is not None)  # the slow push is held
    fast = append(work, record_for(work, third))
    out, err = slow.communicate(timeout=60)
    assert slow.returncode == 0, err
    slow_result = json.loads(out)

    assert fast.added and fast.attempts == 1
    assert slow_result["added"] and slow_result["attempts"] == 2
    assert [r.commit for r in read_history(work)[0]] == [first, third, second]
    assert git(remote, "rev-parse", "grades^") == fast.pushed_commit
