"""`autograder check` and the "next step" the learner's loop shares, with the real engine.

Gradings are real (hidden graders in sandboxed workers, or the practice tests); the CLI runs
as a learner runs it, on a copy of the course whose lessons are stubbed or solved.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from support.learner_course import ANSI, cli_env, history_lines, make_course, run_cli, todo_line
from support.project import ROOT, SEED

from autograder.core.history import LessonEntry, Record, parse_history
from autograder.core.manifest import load_course
from autograder.course.stubs import revert_region
from autograder.engine.grading import grade
from autograder.learner.steps import (
    NextStep,
    blocking_todo,
    describe_step,
    lesson_next_step,
    locate_step,
)
from autograder.learner.store import LocalStore


def _titles(lesson):
    return {todo.id: todo.title["es"] for todo in lesson.todos}


# --- the next step, from real gradings ----------------------------------------------------------


@pytest.mark.parametrize(
    "region, todo, occurrence",
    [
        # attention.py's regions: 0 mask (__init__), 1 head-reshape, 2 scaling, 3 mask (forward), ...
        (3, "mask", 1),  # the second region of a TODO: point at the one still pending, not the first
        (1, "head-reshape", 0),
    ],
)
def test_next_step_is_the_first_failing_todo_at_its_line(tmp_path, region, todo, occurrence):
    root = make_course(tmp_path / "course", {"03": "solved"})
    course = load_course(root / "course.yml")
    lesson = course.lesson("03")
    attention = root / "exercises" / lesson.folder / "attention.py"
    source = (ROOT / "solutions" / lesson.folder / "attention.py").read_text(encoding="utf-8")
    text = revert_region(source, "attention.py", region, _titles(lesson))
    if occurrence:
        # A learner who finished the first region of the TODO but kept its comment, as most do.
        done = "        bs = cfg.block_size\n"
        text = text.replace(
            done, "        # TODO [mask]: registra la máscara causal como buffer.\n" + done, 1
        )
    attention.write_text(text, encoding="utf-8")

    result = grade(course, [lesson], seed=SEED).lessons[0]
    step = lesson_next_step(course, lesson, result)

    assert step == NextStep(
        "todo",
        lesson,
        todo=todo,
        check=step.check,
        path="exercises/03-atencion-causal/attention.py",
        line=todo_line(attention, todo, occurrence),
    )
    assert describe_step(step, "es")[0] == (
        f"Siguiente: TODO [{todo}] en exercises/03-atencion-causal/attention.py:{step.line}"
    )
    if todo == "head-reshape":
        # Checks of later TODOs cannot run while head-reshape raises; they wait on it, so they
        # never send the learner ahead to a TODO they cannot test yet.
        waiting = [c for c in result.checks if c.todo in ("mask", "scaling") and c.status.value == "failed"]
        assert waiting and all(
            blocking_todo(c, [t.id for t in lesson.todos]) == "head-reshape" for c in waiting
        )


@pytest.mark.parametrize(
    "find, replace, todo",
    [
        # A .view with the heads in the wrong place crashes in head-reshape's own line, although
        # [mask] comes first in the lesson and its checks fail too.
        (
            "q = q.view(B, T, self.n_head, hs).transpose(1, 2)",
            "q = q.view(B, self.n_head, T, hs * 2)",
            "head-reshape",
        ),
        # .view right after .transpose, without .contiguous(): the crash is contiguous-view's.
        (
            "y = y.transpose(1, 2).contiguous().view(B, T, C)",
            "y = y.transpose(1, 2).view(B, T, C)",
            "contiguous-view",
        ),
        # A file that does not load is no TODO's: the step is to fix it, at its line
        # (tests/learner/test_syntax_error_flow.py says it in every mode).
        ("q, k, v = qkv.split(C, dim=2)", "q, k, v = qkv.split(C, dim=2", None),
    ],
)
def test_next_step_is_the_line_that_raised(tmp_path, find, replace, todo):
    root = make_course(tmp_path / "course", {"03": "solved"})
    course = load_course(root / "course.yml")
    lesson = course.lesson("03")
    attention = root / "exercises" / lesson.folder / "attention.py"
    text = attention.read_text(encoding="utf-8")
    assert text.count(find) == 1
    attention.write_text(text.replace(find, replace), encoding="utf-8")
    line = next(
        n
        for n, row in enumerate(attention.read_text(encoding="utf-8").splitlines(), start=1)
        if replace in row
    )

    result = grade(course, [lesson], seed=SEED).lessons[0]
    step = lesson_next_step(course, lesson, result)

    assert (step.kind, step.todo, step.path, step.line) == (
        "todo" if todo else "fix",
        todo,
        "exercises/03-atencion-causal/attention.py",
        line,
    )
    assert describe_step(step, "es")[0] == (
        f"Siguiente: TODO [{todo}] en exercises/03-atencion-causal/attention.py:{line}"
        if todo
        else f"Siguiente: corrige el error de sintaxis en exercises/03-atencion-causal/attention.py:{line}"
    )


def test_locate_step_without_the_todo_comment_names_only_the_file(tmp_path):
    root = make_course(tmp_path / "course", {"03": "solved"})
    course = load_course(root / "course.yml")
    lesson = course.lesson("03")
    # A finished file has no `# TODO [scaling]` comment left: no line rather than a wrong one.
    assert locate_step(course, lesson, "scaling", "scaling") == (
        "exercises/03-atencion-causal/attention.py",
        None,
    )
    assert describe_step(
        NextStep(
            "todo", lesson, todo="scaling", check="scaling", path="exercises/03-atencion-causal/attention.py"
        ),
        "en",
    )[0] == ("Next: TODO [scaling] in exercises/03-atencion-causal/attention.py")
    quiz = root / "exercises" / lesson.folder / "quiz.yml"
    quiz.write_text("# respuestas\npregunta_1: c\npregunta_2:\npregunta_3: b\n", encoding="utf-8")
    assert locate_step(course, lesson, None, "quiz-2") == ("exercises/03-atencion-causal/quiz.yml", 3)


# --- check, on stubs and on solutions -------------------------------------------------------------


def test_check_on_stubs(tmp_path):
    root = make_course(tmp_path / "course", {"03": "stub"})
    course = load_course(root / "course.yml")
    proc = run_cli(root, "check", "03", "--seed", SEED)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert not ANSI.search(out), "redirected output must be plain"
    numpy_file = root / "exercises" / "03-atencion-causal" / "attention_numpy.py"
    xp_max = sum(lesson.xp for lesson in course.lessons)
    expected = [
        "Lección 03 · Self-attention causal, multi-cabeza  0/100 puntos · XP 0/50 · sin completar",
        "Total: 0/100 puntos · XP 0/50",
        "Corregido con las pruebas ocultas del curso.",
        "Siguiente: TODO [np-mask] en exercises/03-atencion-causal/attention_numpy.py:"
        f"{todo_line(numpy_file, 'np-mask')}",
        "  construye la máscara causal aditiva · pista: autograder hint 03 np-mask",
        f"Tu progreso: XP 0/{xp_max} · sin racha · más detalle: autograder progress",
    ]
    lines = out.splitlines()
    assert [line for line in lines if line in expected] == expected
    assert lines[-3].startswith("Siguiente: "), "the next step is how the output ends"

    (record,), problems = parse_history("\n".join(history_lines(root)))
    assert problems == []
    (entry,) = record.lessons
    assert (entry.id, entry.score, entry.completed, entry.mode) == ("03", 0, False, "hidden")
    state = json.loads((root / ".autograder" / "state.json").read_text(encoding="utf-8"))
    assert state["next"]["03"]["step"] == {"kind": "todo", "todo": "np-mask", "check": "np-mask"}
    assert (root / ".autograder" / ".gitignore").read_text(encoding="utf-8").splitlines()[-1] == "*"


def test_check_every_present_lesson_in_english(tmp_path):
    root = make_course(tmp_path / "course", {"01": "solved", "02": "solved", "03": "stub"})
    course = load_course(root / "course.yml")
    proc = run_cli(root, "check", "--lang", "en")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    numpy_file = root / "exercises" / "03-atencion-causal" / "attention_numpy.py"
    expected = [
        "Lesson 01 · Tokens and batches  100/100 points · XP 50/50 · completed",
        "Lesson 02 · Embeddings and the bigram model  100/100 points · XP 50/50 · completed",
        "Lesson 03 · Causal multi-head self-attention  0/100 points · XP 0/50 · not completed",
        "Graded with the course's hidden tests.",
        "Lesson 01 completed! +50 XP",
        "Lesson 02 completed! +50 XP",
        f"Next: TODO [np-mask] in exercises/03-atencion-causal/attention_numpy.py:{todo_line(numpy_file, 'np-mask')}",
        "  build the additive causal mask · hint: autograder hint 03 np-mask",
        f"Your progress: XP 100/{sum(lesson.xp for lesson in course.lessons)} · 1-day streak · "
        "more: autograder progress",
    ]
    assert [line for line in lines if line in expected] == expected
    (record,), _ = parse_history("\n".join(history_lines(root)))
    assert [(e.id, e.completed) for e in record.lessons] == [("01", True), ("02", True), ("03", False)]


def test_xp_is_said_once_and_shown_one_way_after_a_regression(tmp_path):
    """ "+50 XP" the first time a lesson is completed only; after a regression the header keeps
    the earned XP and says the lesson fails now, as the footer and `progress` count it."""
    root = make_course(tmp_path / "course", {"01": "solved"})
    first = run_cli(root, "check", "01")
    assert first.returncode == 0, first.stderr
    assert "¡Lección 01 completada! +50 XP" in first.stdout
    again = run_cli(root, "check", "01")
    assert "+50 XP" not in again.stdout, again.stdout
    data = root / "exercises" / "01-tokens-y-lotes" / "data.py"
    text = data.read_text(encoding="utf-8")
    good = "y = torch.stack([data[i + 1 : i + 1 + block_size] for i in ix])"
    assert text.count(good) == 1
    data.write_text(
        text.replace(good, "y = torch.stack([data[i : i + block_size] for i in ix])"), encoding="utf-8"
    )
    broken = run_cli(root, "check", "01")
    header = next(line for line in broken.stdout.splitlines() if line.startswith("Lección 01"))
    assert "XP 50/50" in header and "ahora falla" in header, header
    assert "XP 50/" in next(line for line in broken.stdout.splitlines() if line.startswith("Tu progreso"))


def test_finishing_the_last_lesson_is_not_finishing_the_course(tmp_path):
    """Lesson 06 done, lessons 01-05 not: the footer sends the learner to the first lesson not
    completed, never "¡Has completado todas las lecciones del curso!"."""
    root = make_course(tmp_path / "course", {"03": "stub", "06": "solved"})
    proc = run_cli(root, "check", "06")
    assert proc.returncode == 0, proc.stderr
    assert "todas las lecciones" not in proc.stdout
    course = load_course(root / "course.yml")
    first = course.lessons[0]
    assert f"Siguiente: lección {first.id} · {first.title['es']}" in proc.stdout, proc.stdout
    # next_step itself: done only when every lesson is completed.
    from autograder.core.results import LessonResult
    from autograder.learner.steps import next_step

    finished = LessonResult("06", "generar", {"es": "x"}, 50, [])
    assert next_step(course, [], completed=[lesson.id for lesson in course.lessons]).kind == "done"
    assert next_step(course, [finished], completed=["01", "02", "03", "04"]).lesson.id == "05"


def test_check_on_the_solution_points_to_the_next_lesson_and_hint_knows_it_is_done(tmp_path):
    root = make_course(tmp_path / "course", {"03": "solved"})
    course = load_course(root / "course.yml")
    proc = run_cli(root, "check", "03")
    assert proc.returncode == 0, proc.stderr
    following = course.lessons[[lesson.id for lesson in course.lessons].index("03") + 1]
    lines = proc.stdout.splitlines()
    assert "Lección 03 · Self-attention causal, multi-cabeza  100/100 puntos · XP 50/50 · completada" in lines
    assert "¡Lección 03 completada! +50 XP" in lines
    assert (
        f"Siguiente: lección {following.id} · {following.title['es']}; su carpeta "
        f"exercises/{following.folder}/ aún no está en tu copia (¿git pull?)"
    ) in lines

    # The next step is remembered with the lesson's files: `hint 03` needs no new grading.
    hint = run_cli(root, "hint", "03")
    assert hint.returncode == 0, hint.stderr
    assert hint.stdout.startswith("La lección 03 está completada: no te queda ningún TODO.")
    assert len(history_lines(root)) == 1


def test_check_in_practice_mode_says_so(tmp_path):
    root = make_course(tmp_path / "course", {"01": "stub"})
    no_graders = tmp_path / "no-graders"
    no_graders.mkdir()
    proc = run_cli(root, "check", "01", env=cli_env(AUTOGRADER_GRADERS=str(no_graders)))
    assert proc.returncode == 0, proc.stderr
    data_file = root / "exercises" / "01-tokens-y-lotes" / "data.py"
    lines = proc.stdout.splitlines()
    assert (
        "Corregido en práctica (nota de práctica): con las comprobaciones del curso y sus valores de "
        "referencia grabados o, en una lección sin grabación, con las pruebas de práctica de tu carpeta. "
        "La nota oficial la pone tu profesor."
    ) in lines
    assert (
        f"Siguiente: TODO [vocab] en exercises/01-tokens-y-lotes/data.py:{todo_line(data_file, 'vocab')}"
        in lines
    )
    (record,), _ = parse_history("\n".join(history_lines(root)))
    assert record.lessons[0].mode == "practice"


# --- bad input loses nothing --------------------------------------------------------------------


def test_check_bad_input(tmp_path):
    root = make_course(tmp_path / "course", {"03": "stub"})
    unknown = run_cli(root, "check", "99")
    assert unknown.returncode == 2 and "no hay ninguna lección `99` en el curso" in unknown.stderr
    missing = run_cli(root, "check", "02")
    assert missing.returncode == 2
    assert "La carpeta exercises/02-bigrama de la lección 02 no existe" in missing.stderr
    empty = make_course(tmp_path / "empty", {})
    nothing = run_cli(empty, "check")
    assert nothing.returncode == 2 and "No hay ninguna lección del curso en exercises" in nothing.stderr
    assert history_lines(root) == [] and history_lines(empty) == []


def _record(score: float, completed: bool) -> Record:
    from datetime import datetime, timezone

    now = datetime.now(timezone.utc)
    entry = LessonEntry("03", score, 100, completed, 50 if completed else 0, 50, "hidden")
    return Record("ab" * 20, now, now, entry.xp, 50, (entry,))


def test_local_history_keeps_a_damaged_line_and_appends_after_it(tmp_path):
    store = LocalStore(tmp_path, warn=lambda text: None)
    store.folder.mkdir()
    store.history.write_bytes(b'{"v": 1, "commit": "broken')  # a line cut short, no newline
    store.append(_record(40, False))
    raw = store.history.read_bytes()
    assert raw.startswith(b'{"v": 1, "commit": "broken\n'), "the damaged line is kept as it was"
    records, problems = store.records()
    assert [r.lessons[0].score for r in records] == [40] and len(problems) == 1 and "line 1" in problems[0]


def test_a_damaged_state_file_is_set_aside_not_overwritten(tmp_path):
    warnings = []
    store = LocalStore(tmp_path, warn=warnings.append)
    store.folder.mkdir()
    store.state_path.write_text("{not json", encoding="utf-8")
    store.update_state("es", lambda state: state["hints"].setdefault("03", {}).update(scaling=2))
    (backup,) = store.folder.glob("state.json.*.broken")
    assert backup.read_text(encoding="utf-8") == "{not json"
    assert json.loads(store.state_path.read_text(encoding="utf-8"))["hints"] == {"03": {"scaling": 2}}
    assert len(warnings) == 1 and re.search(r"estaba dañado .*state\.json\..*\.broken", warnings[0])


def test_state_updates_from_two_processes_are_never_lost(tmp_path):
    """`check` and `watch` may update .autograder/state.json at the same moment: each update
    reads, changes and writes under the state's lock, so neither overwrites the other's."""
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from autograder.learner.store import LocalStore\n"
        "store = LocalStore(Path(sys.argv[1]))\n"
        "def bump(state):\n"
        "    state['hints'][sys.argv[2]] = state['hints'].get(sys.argv[2], 0) + 1\n"
        "for _ in range(60):\n"
        "    store.update_state('es', bump)\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path), name]) for name in ("a", "b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    state = json.loads((tmp_path / ".autograder" / "state.json").read_text(encoding="utf-8"))
    assert state["hints"] == {"a": 60, "b": 60}


def test_a_held_state_lock_is_a_warning_in_the_learners_language(tmp_path, monkeypatch):
    from autograder.core.file_lock import exclusive
    from autograder.learner import store as store_module

    warnings = []
    store = store_module.LocalStore(tmp_path, warn=warnings.append)
    store._ensure_folder()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom pathlib import Path\n"
            "from autograder.core.file_lock import exclusive\n"
            "with exclusive(Path(sys.argv[1])):\n"
            "    print('held', flush=True)\n    time.sleep(30)\n",
            str(store.state_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        monkeypatch.setattr(store_module, "exclusive", lambda path: exclusive(path, timeout=0.3))
        store.update_state("es", lambda state: state["hints"].update(x=1))
    finally:
        holder.kill()
        holder.wait()
    assert len(warnings) == 1 and "otra orden del curso (check o watch)" in warnings[0]
    assert not store.state_path.exists()  # nothing was written over the holder's state
