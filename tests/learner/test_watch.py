"""`autograder watch`, driven for real: the command runs in a pseudo-terminal on a copy of the
course, files are edited on disk, re-gradings appear, and Ctrl-C ends it cleanly."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timezone

import pytest
from support.learner_course import (
    Terminal,
    cli_env,
    history_lines,
    make_course,
    solved_text,
    todo_line,
)
from support.processes import alive
from support.project import ROOT

from autograder.core.history import LessonEntry, Record
from autograder.core.manifest import load_course
from autograder.learner.store import LocalStore
from autograder.learner.watch_changes import changed_lessons, edited_todos, read_inputs

# Generous bounds for a loaded machine; the measured times are printed (pytest -s) and are
# what the report quotes. A first grading imports torch in a fresh process.
FIRST_GRADING_S = 180
REGRADE_S = 120


def start_watch(root, *args, **env) -> Terminal:
    return Terminal(
        [sys.executable, "-m", "autograder", "--course", str(root / "course.yml"), "watch", *args],
        cwd=root,
        env=cli_env(TERM="xterm-256color", COLUMNS="110", **env),
    )


def stop_with_ctrl_c(term: Terminal) -> None:
    workers = term.descendants()
    term.send(b"\x03")
    assert term.wait(60) == 0, term.text[-2000:]
    assert term.text.rstrip().endswith("watch terminado. ¡Hasta la próxima!")
    assert "Traceback" not in term.text
    deadline = time.monotonic() + 10
    while alive(workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(workers), "watch left processes behind"


def test_watch_a_lesson_regrades_on_save(tmp_path):
    root = make_course(tmp_path / "course", {"03": "stub"})
    folder = root / "exercises" / "03-atencion-causal"
    term = start_watch(root, "03")
    try:
        started = time.monotonic()
        first = term.read_until(r"Esperando a que guardes algún archivo", FIRST_GRADING_S)
        assert first, term.text[-3000:]
        print(f"\nwatch 03: first grading shown after {time.monotonic() - started:.1f} s")
        assert "Vigilando exercises/03-atencion-causal/" in term.text
        step = (
            "Siguiente: TODO [np-mask] en exercises/03-atencion-causal/attention_numpy.py:"
            f"{todo_line(folder / 'attention_numpy.py', 'np-mask')}"
        )
        assert step in term.text
        assert "0/100 puntos · 0 de 23 comprobaciones · XP 0/50" in term.text

        # The learner finishes the NumPy warm-up and saves.
        mark = len(term.text)
        saved = time.monotonic()
        (folder / "attention_numpy.py").write_text(
            solved_text("03-atencion-causal", "attention_numpy.py"), encoding="utf-8"
        )
        regraded = term.read_until(r"Siguiente: TODO \[mask\][^\n]*\n[\s\S]*Esperando", REGRADE_S, start=mark)
        assert regraded, term.text[mark:]
        print(f"watch 03: re-graded {time.monotonic() - saved:.1f} s after the save")
        after = term.text[mark:]
        assert "cambios en 03-atencion-causal/attention_numpy.py" in after
        assert "30/100 puntos · 6 de 23 comprobaciones" in after
        assert "(+30 puntos desde la corrección anterior)" in after
        assert (
            f"Siguiente: TODO [mask] en exercises/03-atencion-causal/attention.py:"
            f"{todo_line(folder / 'attention.py', 'mask')}"
        ) in after
        assert len(history_lines(root)) == 2, "each grading is recorded"

        # A README is not graded input: saving it starts no grading.
        mark = len(term.text)
        (folder / "README.md").write_text("# notas\n", encoding="utf-8")
        assert term.read_until(r"cambios en", 3, start=mark) is None
        stop_with_ctrl_c(term)
    finally:
        term.close()


def _completed(lesson_id: str) -> Record:
    now = datetime.now(timezone.utc)
    entry = LessonEntry(lesson_id, 100, 100, True, 50, 50, "hidden")
    return Record("cd" * 20, now, now, 50, 50, (entry,))


def test_watch_everything_by_polling_skips_completed_lessons(tmp_path):
    root = make_course(tmp_path / "course", {"01": "solved", "03": "stub"})
    LocalStore(root).append(_completed("01"))  # the learner completed lesson 01 earlier
    term = start_watch(root, "--poll")
    try:
        assert term.read_until(r"Esperando a que guardes algún archivo", FIRST_GRADING_S), term.text[-3000:]
        assert "Vigilancia por sondeo: se miran los archivos cada 300 ms." in term.text
        # It starts on the lesson the learner is on, not on the completed one.
        assert "Lección 03 · Self-attention causal, multi-cabeza" in term.text
        assert "Lección 01 · " not in term.text
        assert len(history_lines(root)) == 2

        mark = len(term.text)
        data = root / "exercises" / "01-tokens-y-lotes" / "data.py"
        data.write_text(data.read_text(encoding="utf-8") + "\n# repaso\n", encoding="utf-8")
        skipped = term.read_until(r"no se vuelve a corregir", REGRADE_S, start=mark)
        assert skipped, term.text[mark:]
        assert (
            "La lección 01 ya está completada: no se vuelve a corregir. Si quieres repasarla, pídelo: "
            "autograder watch 01 (o autograder check 01)."
        ) in term.text[mark:]
        assert len(history_lines(root)) == 2, "a completed lesson is not graded again"

        mark = len(term.text)
        saved = time.monotonic()
        (root / "exercises" / "03-atencion-causal" / "quiz.yml").write_text(
            solved_text("03-atencion-causal", "quiz.yml"), encoding="utf-8"
        )
        assert term.read_until(r"6/100 puntos[\s\S]*Esperando", REGRADE_S, start=mark), term.text[mark:]
        print(f"\nwatch --poll: re-graded {time.monotonic() - saved:.1f} s after the save")
        assert "cambios en 03-atencion-causal/quiz.yml" in term.text[mark:]
        stop_with_ctrl_c(term)
    finally:
        term.close()


def test_notifications_refused_fall_back_to_polling(tmp_path):
    """With no file descriptor left for inotify, watching still works, by polling."""
    (tmp_path / "lesson").mkdir()
    script = textwrap.dedent(f"""
        import resource, sys, time
        from pathlib import Path
        from autograder.learner.watch_changes import iter_changes

        warnings = []
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (5, hard))  # inotify needs descriptors we lack
        changes = iter_changes([Path({str(tmp_path / "lesson")!r})], force_polling=None,
                               on_fallback=warnings.append, timeout_ms=200)
        assert next(changes) == set()  # the watcher is set up (by polling) and nothing changed yet
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        print("fallback:", type(warnings[0]).__name__, warnings[0], flush=True)
        Path({str(tmp_path / "lesson" / "model.py")!r}).write_text("x = 1\\n")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            seen = next(changes)
            if seen:
                print("changed:", sorted(p.name for p in seen), flush=True)
                break
    """)
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
        env=cli_env(),
    )
    assert proc.returncode == 0, proc.stderr
    assert "fallback: WatchfilesRustInternalError" in proc.stdout and "Too many open files" in proc.stdout
    assert "changed: [" in proc.stdout and "'model.py'" in proc.stdout.split("changed: ", 1)[1]


def test_changes_map_to_the_lessons_they_belong_to(tmp_path):
    root = make_course(tmp_path / "course", {"01": "stub", "03": "stub"})
    course = load_course(root / "course.yml")
    ex = root / "exercises"
    paths = {
        ex / "03-atencion-causal" / "attention.py",
        ex / "03-atencion-causal" / "quiz.yml",
        ex / "03-atencion-causal" / "README.md",
        ex / "03-atencion-causal" / "pistas.yml",
        ex / "03-atencion-causal" / "__pycache__" / "attention.cpython-311.pyc",
        ex / "01-tokens-y-lotes" / "data.py",
        ex / "notes.py",
        tmp_path / "elsewhere.py",
    }
    both = [course.lesson("01"), course.lesson("03")]
    assert changed_lessons(course, paths, both) == {"01": ["data.py"], "03": ["attention.py", "quiz.yml"]}
    assert changed_lessons(course, paths, [course.lesson("03")]) == {"03": ["attention.py", "quiz.yml"]}


def test_watch_bad_input(tmp_path):
    root = make_course(tmp_path / "course", {"03": "stub"})
    from support.learner_course import run_cli

    missing = run_cli(root, "watch", "02")
    assert missing.returncode == 2
    assert "La carpeta exercises/02-bigrama de la lección 02 no existe" in missing.stderr
    empty = make_course(tmp_path / "empty", {})
    assert run_cli(empty, "watch").returncode == 2


@pytest.fixture(autouse=True)
def _linux_only():
    if not sys.platform.startswith("linux"):
        pytest.skip("pseudo-terminals and the fd-limit fallback test are exercised on Linux")


def test_watch_says_plus_xp_once_and_keeps_earned_xp_after_a_regression():
    from autograder.core.results import CheckResult, LessonResult, Status
    from autograder.learner.steps import NextStep
    from autograder.learner.watch_render import render_lesson

    done = LessonResult(
        "03",
        "atencion-causal",
        {"es": "Atención"},
        50,
        [CheckResult("mask", "mask", Status.PASSED, 5.0, 5.0)],
    )
    failing = LessonResult(
        "03",
        "atencion-causal",
        {"es": "Atención"},
        50,
        [CheckResult("mask", "mask", Status.FAILED, 0.0, 5.0)],
    )
    after = NextStep("done", None)
    first = render_lesson(done, None, after, None, "es", color=False, width=100)
    again = render_lesson(done, None, after, 5.0, "es", color=False, width=100, earned_before=True)
    assert "+50 XP" in first and "+50 XP" not in again
    regressed = render_lesson(failing, None, after, 5.0, "es", color=False, width=100, earned_before=True)
    assert "XP 50/50" in regressed and "ahora falla" in regressed, regressed
    fresh = render_lesson(failing, None, after, None, "es", color=False, width=100)
    assert "XP 0/50" in fresh and "ahora falla" not in fresh


# --- watch in under a second: the edited TODO first, warm between saves ----------------------

SCORES = "att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))"
# Learner code that says, by failing to import, what an earlier save's code could have left
# behind in its worker: a global of the interpreter, a file in the worker's home.
PROBE = """
import builtins as _builtins, os as _os, pathlib as _pathlib
_mark = _pathlib.Path(_os.environ["HOME"], "probe.txt")
_seen = (getattr(_builtins, "_probe", None), _mark.read_text() if _mark.exists() else None)
_builtins._probe = "{name}"
_mark.write_text("{name}")
raise RuntimeError(f"probe {name} saw {{_seen}}")
"""


def _trace(path) -> list[dict]:
    return (
        [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []
    )


def test_watch_shows_the_edited_todo_first_with_a_warm_zygote_and_a_fresh_worker_per_save(tmp_path):
    root = make_course(tmp_path / "course", {"03": "solved"})
    folder = root / "exercises" / "03-atencion-causal"
    solved = solved_text("03-atencion-causal", "attention.py")
    trace = tmp_path / "trace.jsonl"
    term = start_watch(root, "03", AUTOGRADER_WATCH_TRACE=str(trace))
    try:
        assert term.read_until(r"Esperando a que guardes algún archivo", FIRST_GRADING_S), term.text[-3000:]

        # A mistake in TODO [scaling], whose checks come after TODO [mask]'s and
        # [head-reshape]'s in the graders: its verdict is shown first, before the lesson's.
        mark = len(term.text)
        (folder / "attention.py").write_text(
            solved.replace(SCORES, "att = q @ k.transpose(-2, -1)"), encoding="utf-8"
        )
        assert term.read_until(r"Lección 03[\s\S]*Esperando", REGRADE_S, start=mark), term.text[mark:]
        after = term.text[mark:]
        verdict = after.index("✘ TODO [scaling]")
        assert verdict < after.index("Lección 03 · "), after
        assert verdict < after.index("✘ scaling"), "the TODO's failing check comes with its verdict"
        assert "0 de 1 comprobación" in after[verdict:].splitlines()[0]
        assert "✘ TODO [mask]" not in after and "✔ TODO [mask]" not in after, (
            "only the edited TODO is shown early"
        )
        assert "Lo que falla está arriba: TODO [scaling]." in after, "its message is not repeated"
        assert after.count("Pista:") <= after.count("✘ scaling"), after
        assert "Siguiente: TODO [scaling]" in after
        entry = _trace(trace)[-1]
        assert entry["first"] == ["scaling"] and entry["shown_first"] == ["scaling"]
        assert entry["order"][0] == "scaling", entry["order"]
        assert sorted(entry["order"]) == sorted(
            s.id for s in load_course(root / "course.yml").lesson("03").checks
        )

        # Its fix: the TODO passes, shown first too.
        mark = len(term.text)
        (folder / "attention.py").write_text(solved, encoding="utf-8")
        assert term.read_until(r"100/100 puntos[\s\S]*Esperando", REGRADE_S, start=mark), term.text[mark:]
        after = term.text[mark:]
        assert after.index("✔ TODO [scaling]") < after.index("Lección 03 · "), after

        # Two saves of learner code that tries to leave something for the next one.
        seen = []
        for name in ("one", "two"):
            mark = len(term.text)
            (folder / "attention.py").write_text(solved + PROBE.format(name=name), encoding="utf-8")
            assert term.read_until(rf"probe {name} saw[\s\S]*Esperando", REGRADE_S, start=mark), term.text[
                mark:
            ]
            seen.append(term.text[mark:])
            zygotes = [entry["zygote"] for entry in _trace(trace)]
            assert zygotes[-1] in term.descendants(), "the zygote lives between saves"
        assert "probe one saw (None, None)" in seen[0], seen[0]
        assert "probe two saw (None, None)" in seen[1], (
            "save 1's global or home file reached save 2:\n" + seen[1]
        )

        entries = _trace(trace)
        assert len(entries) == 5
        zygote = entries[0]["zygote"]
        assert zygote is not None and all(entry["zygote"] == zygote for entry in entries), entries
        workers = [set(entry["workers"]) for entry in entries]
        assert all(workers), "every grading had a worker"
        for n, mine in enumerate(workers):
            assert zygote not in mine
            for other in workers[n + 1 :]:
                assert not mine & other, f"a worker served two saves: {entries}"
        stop_with_ctrl_c(term)
    finally:
        term.close()


def test_a_save_maps_to_the_todos_whose_lines_it_changed(tmp_path):
    root = make_course(tmp_path / "course", {"03": "solved"})
    course = load_course(root / "course.yml")
    lesson = course.lesson("03")
    stubs = ROOT / "exercises" / lesson.folder
    before = read_inputs(course, lesson)
    attention = before["attention.py"]

    def edited(**files):
        return edited_todos(lesson, before, {**before, **files}, stubs)

    assert edited() == []
    assert edited(**{"attention.py": attention.replace(SCORES, "att = q @ k.transpose(-2, -1)")}) == [
        "scaling"
    ]
    # A deleted line is placed in the file before the save.
    deleted = "".join(row for row in attention.splitlines(keepends=True) if "torch.tril(" not in row)
    assert deleted != attention and edited(**{"attention.py": deleted}) == ["mask"]
    assert edited(**{"quiz.yml": before["quiz.yml"] + "\n# dudo\n"}) == ["quiz"]
    assert edited(**{"attention.py": "# mis notas\n" + attention}) == [], (
        "a line outside every TODO names none"
    )


def test_grading_first_the_edited_checks_changes_no_result(tmp_path):
    """The engine runs the asked checks first and reports each check once as it ends; the
    results are those of a grading in the usual order (same seed)."""
    from autograder.engine.grading import grade

    root = make_course(tmp_path / "course", {"01": "stub"})
    course = load_course(root / "course.yml")
    lesson = course.lesson("01")
    first = [s.id for s in lesson.checks if s.todo == "targets-shift"]
    ended, workers = [], []
    usual = grade(course, [lesson], seed=7).lessons[0]
    live = grade(
        course,
        [lesson],
        seed=7,
        first={"01": first},
        on_check=lambda les, check: ended.append(check.id),
        on_worker=lambda les, pid: workers.append(pid),
    ).lessons[0]
    assert ended[: len(first)] == first
    assert sorted(ended) == sorted(s.id for s in lesson.checks)
    assert [(c.id, c.status, c.score, c.waits_on) for c in live.checks] == [
        (c.id, c.status, c.score, c.waits_on) for c in usual.checks
    ]
    assert workers and all(isinstance(pid, int) for pid in workers)
