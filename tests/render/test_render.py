"""autograder/render/: one result model, rendered as JSON (results_json.py), Markdown
(markdown.py) and terminal text (terminal.py)."""

import ast
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from autograder.core import i18n
from autograder.core.results import (
    Block,
    CheckResult,
    CourseResult,
    Feedback,
    LessonResult,
    Status,
    Text,
    message,
)
from autograder.engine import feedback as F
from autograder.engine.checks import describe_student_error
from autograder.render import output
from autograder.render.markdown import render_markdown
from autograder.render.results_json import render_json, to_json_dict
from autograder.render.terminal import render_text
from autograder.sandbox.client import StudentError

MESSAGES = Path(i18n.__file__).resolve().parents[1] / "messages"


def leak_feedback() -> Feedback:
    w = np.tril(np.ones((4, 4)))
    w /= w.sum(-1, keepdims=True)
    w[0, 3] = 0.4
    what = {"es": "los pesos de atención", "en": "the attention weights"}
    return F.compare(w, np.tril(w), what=what) + Feedback(
        (F.heatmap(w, leaks=F.leaking_cells(w)), F.heatmap_legend())
    )


TITLES = {"scaling": {"es": "escala las puntuaciones por 1/sqrt(hs)", "en": "scale the scores by 1/sqrt(hs)"}}


def make_result() -> CourseResult:
    lesson03 = LessonResult(
        id="03",
        slug="atencion-causal",
        title={"es": "Self-attention causal | multi-cabeza", "en": "Causal multi-head self-attention"},
        xp_max=50,
        checks=[
            CheckResult("np-mask", "np-mask", Status.PASSED, 6.0, 6.0),
            CheckResult("future-leak", "mask", Status.FAILED, 0.0, 6.0, leak_feedback()),
            CheckResult(
                "scaling",
                "scaling",
                Status.FAILED,
                0.0,
                6.0,
                describe_student_error(
                    StudentError("NotImplementedError", "TODO [scaling] pendiente: …", [], "/sb"),
                    "scaling",
                    TITLES,
                ),
            ),
            CheckResult(
                "heads-merge",
                "contiguous-view",
                Status.ERROR,
                0.0,
                6.0,
                describe_student_error(
                    StudentError(
                        "RuntimeError",
                        "boom ``` | <b>",
                        [
                            {
                                "filename": "/sb/attention.py",
                                "lineno": 57,
                                "name": "forward",
                                "line": "y = q @ k  # ```",
                            },
                        ],
                        "/sb",
                    ),
                    "contiguous-view",
                    TITLES,
                ),
            ),
            CheckResult("quiz-1", None, Status.PASSED, 1.5, 1.5),
            CheckResult("gpu-parity", None, Status.SKIPPED, 0, 0, Feedback((Block("CUDA no disponible"),))),
        ],
    )
    lesson04 = LessonResult(
        id="04",
        slug="bloque",
        title={"es": "El bloque", "en": "The block"},
        xp_max=60,
        checks=[
            CheckResult("block-shapes", "block", Status.PASSED, 5.0, 5.0),
            CheckResult("gpu-parity", None, Status.SKIPPED, 0.0, 0.0),  # does not block completion
        ],
    )
    return CourseResult(
        course="Transformers desde cero", language="es", seed=1234, lessons=[lesson03, lesson04]
    )


# --- JSON -----------------------------------------------------------------------------------


def test_json_contract_types_and_values():
    data = json.loads(render_json(make_result(), "es"))
    assert set(data) == {
        "course",
        "language",
        "xp",
        "xp_max",
        "score",
        "max_score",
        "seed",
        "practice",
        "isolation",
        "lessons",
    }
    assert data["course"] == "Transformers desde cero" and data["language"] == "es"
    assert (data["xp"], data["xp_max"], data["seed"]) == (60, 110, 1234)
    assert data["score"] == 12.5 and data["max_score"] == 30.5
    for key in ("xp", "xp_max", "seed"):
        assert type(data[key]) is int

    l03, l04 = data["lessons"]
    assert data["practice"] is False
    lesson_keys = {
        "id",
        "slug",
        "title",
        "score",
        "max_score",
        "xp",
        "xp_max",
        "completed",
        "mode",
        "scale",
        "isolation",
        "checks",
    }
    assert set(l03) == set(l04) == lesson_keys
    assert l03["scale"] == l04["scale"] == "points"
    assert (l03["id"], l03["slug"], l03["title"]) == (
        "03",
        "atencion-causal",
        "Self-attention causal | multi-cabeza",
    )
    assert (l03["completed"], l03["xp"]) == (False, 0)
    assert (l04["completed"], l04["xp"]) == (True, 60)  # the skipped check does not count against it
    assert type(l04["score"]) is int and l04["score"] == 5  # 5, not 5.0
    assert type(l04["xp"]) is int and type(l04["completed"]) is bool
    assert (l03["xp_max"], l04["xp_max"], l03["mode"]) == (50, 60, "hidden")

    check_keys = {
        "id",
        "todo",
        "status",
        "score",
        "max_score",
        "informational",
        "raised_in",
        "waits_on",
        "message",
        "feedback",
    }
    for lesson in data["lessons"]:
        for check in lesson["checks"]:
            assert set(check) == check_keys
            assert isinstance(check["id"], str) and isinstance(check["message"], str)
            assert check["todo"] is None or isinstance(check["todo"], str)
            assert check["status"] in {"passed", "failed", "error", "skipped"}
            assert type(check["score"]) in (int, float) and type(check["max_score"]) in (int, float)

    checks = {c["id"]: c for c in l03["checks"]}
    assert checks["np-mask"] == {
        "id": "np-mask",
        "todo": "np-mask",
        "status": "passed",
        "score": 6,
        "max_score": 6,
        "informational": False,
        "raised_in": None,
        "waits_on": None,
        "message": "",
        "feedback": [],
    }
    assert type(checks["np-mask"]["score"]) is int
    assert checks["quiz-1"]["todo"] is None and checks["quiz-1"]["score"] == 1.5
    assert checks["heads-merge"]["status"] == "error"
    assert checks["gpu-parity"]["status"] == "skipped"
    assert "los pesos de atención" in checks["future-leak"]["message"]
    assert "X = fuga" in checks["future-leak"]["message"]  # blocks are part of the message
    assert checks["scaling"]["message"].startswith("TODO [scaling] pendiente")


def test_json_scores_are_rounded_to_two_decimals():
    lesson = LessonResult(
        "01", "x", {"es": "x", "en": "x"}, 10, [CheckResult("a", None, Status.FAILED, 1 / 3, 2.0)]
    )
    data = to_json_dict(CourseResult("c", "es", 0, [lesson]), "en")
    assert data["score"] == 0.33 and data["max_score"] == 2
    assert data["lessons"][0]["checks"][0]["score"] == 0.33


def test_json_in_english_and_text_form():
    text = render_json(make_result(), "en")
    assert text.endswith("}\n") and '\n  "course"' in text
    assert "atención" in render_json(make_result(), "es")  # ensure_ascii=False
    data = json.loads(text)
    assert data["language"] == "en"
    assert data["lessons"][0]["title"] == "Causal multi-head self-attention"
    assert data["lessons"][0]["checks"][1]["message"].startswith("The values of the attention weights")


def test_unknown_language_is_refused():
    with pytest.raises(ValueError):
        to_json_dict(make_result(), "fr")


# --- Markdown -------------------------------------------------------------------------------


def test_markdown_summary_table_and_checks():
    md = render_markdown(make_result(), "es")
    assert md.startswith("# Transformers desde cero\n")
    assert "XP 60/110" in md
    assert "| Lección | Estado | Puntos | XP |" in md
    assert (
        "| Lección 03 · Self-attention causal \\| multi-cabeza | ❌ sin completar | 7.5/25.5 | 0/50 |" in md
    )
    assert "| Lección 04 · El bloque | ✅ completada | 5/5 | 60/60 |" in md
    assert "### ❌ `future-leak` · TODO [mask] · fallida · 0/6" in md
    assert "### ⚠️ `heads-merge` · TODO [contiguous-view]" in md
    assert "TODO [scaling] pendiente" in md
    assert "`np-mask`" not in md and "`block-shapes`" not in md  # passed checks are not repeated
    assert "- ⏭️ `gpu-parity`: CUDA no disponible" in md  # skipped, briefly, with its reason
    assert md.count("`gpu-parity`") == 1  # completed lessons are not detailed
    assert "1234" in md


def test_markdown_blocks_cannot_break_out_of_their_fence():
    md = render_markdown(make_result(), "es")
    start = md.index("````text\n")
    end = md.index("\n````", start + 1)
    fenced = md[start:end]
    assert "y = q @ k  # ```" in fenced  # verbatim inside a longer fence
    assert "&lt;b&gt;" not in fenced
    # The error's own text is said once, above the traceback, as escaped text.
    assert "RuntimeError: boom" not in fenced and "&lt;b&gt;" in md.replace(fenced, "")
    assert "<b>" not in md.replace(fenced, "")


def test_markdown_escapes_html_in_messages():
    check = CheckResult("x", None, Status.FAILED, 0, 1, Feedback.of(Text("nope <script>")))
    md = render_markdown(CourseResult("c", "es", 0, [LessonResult("01", "s", {"es": "t"}, 1, [check])]), "es")
    assert "<script>" not in md and "&lt;script&gt;" in md


def test_markdown_folds_long_messages_in_details():
    md = render_markdown(make_result(), "es")
    # The leak message (two sentences and a heatmap) is short enough to stay open.
    assert "<details>" not in md
    long = Feedback((Block("\n".join(f"línea {i}" for i in range(40)), kind="traceback"),))
    check = CheckResult("long", "mask", Status.FAILED, 0, 1, long)
    md = render_markdown(CourseResult("c", "es", 0, [LessonResult("01", "s", {"es": "t"}, 1, [check])]), "es")
    assert "<details><summary>Ver el mensaje completo" in md
    details = md[md.index("<details>") : md.index("</details>")]
    assert "línea 39" in details


# --- terminal text --------------------------------------------------------------------------


def test_text_plain_snapshot():
    out = render_text(make_result(), "es", color=False)
    lines = out.splitlines()
    assert "\x1b[" not in out
    assert lines[0] == "Transformers desde cero"
    assert (
        "Lección 03 · Self-attention causal | multi-cabeza  7.5/25.5 puntos · XP 0/50 · sin completar"
        in lines
    )
    check_lines = [line for line in lines if line[:3] in ("  ✔", "  ✘", "  !", "  –")]
    assert check_lines[:6] == [
        "  ✔ np-mask · TODO [np-mask]                  6/6",
        "  ✘ future-leak · TODO [mask]                 0/6  fallida",
        "  ✘ Pendiente: TODO [scaling] (escala las puntuaciones por 1/sqrt(hs)) · de él depende 1",
        "  ! heads-merge · TODO [contiguous-view]      0/6  no se pudo terminar",
        "  ✔ quiz-1                                1.5/1.5",
        "  – gpu-parity                                0/0  omitida",
    ]
    assert "      CUDA no disponible" in lines
    assert "Lección 04 · El bloque  5/5 puntos · XP 60/60 · completada" in lines
    assert lines[-2:] == [
        "Total: 12.5/30.5 puntos · XP 60/110",
        "Semilla de esta corrección: 1234 (sirve para repetirla tal cual)",
    ]
    # The message sits indented under the failed check, blocks keep their layout.
    i = lines.index(check_lines[1])
    assert lines[i + 1].startswith("      Los valores de los pesos de atención")
    assert "      i\\j 0 1 2 3" in lines
    assert "        attention.py:57 · forward()" in lines
    assert all(not line.endswith(" ") for line in lines)
    # Plain output is stable.
    assert render_text(make_result(), "es", color=False) == out


def test_text_wraps_messages_to_the_width():
    out = render_text(make_result(), "es", color=False, width=60).splitlines()
    # The one-line summary of pending TODOs wraps under its own text, not under the symbol.
    first = next(n for n, line in enumerate(out) if "Pendiente: TODO [scaling]" in line)
    assert (
        len(out[first]) <= 60 and out[first + 1].startswith("    1/sqrt(hs))") and len(out[first + 1]) <= 60
    )
    full = render_text(make_result(), "es", color=False, width=60, verbose=True)
    pending = [
        line for line in full.splitlines() if "NotImplementedError" in line or "TODO [scaling] pend" in line
    ]
    assert pending and all(len(line) <= 60 for line in pending)


def test_text_in_color_uses_ansi():
    assert "\x1b[" in render_text(make_result(), "es", color=True)


def test_english_labels():
    result = make_result()
    text = render_text(result, "en", color=False)
    assert "Lesson 03 · Causal multi-head self-attention  7.5/25.5 points · XP 0/50 · not completed" in text
    assert "0/6  failed" in text and "completed" in text
    assert "Total: 12.5/30.5 points · XP 60/110" in text
    # Blocks are made at check time, before the language is known: they hold no word of either.
    assert "attention.py:57 · forward()" in text and "57 en forward" not in text
    md = render_markdown(result, "en")
    assert "| Lesson | Status | Points | XP |" in md
    assert "✅ completed" in md and "Skipped checks" in md
    for spanish in ("Lección", "puntos", "fallida", "sin completar", "Semilla"):
        assert spanish not in text and spanish not in md


# --- catalogs -------------------------------------------------------------------------------


def catalog_files(lang: str) -> dict[str, dict]:
    out = {}
    for path in sorted((MESSAGES / lang).glob("*.yml")):
        out[path.name] = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return out


def test_catalogs_have_same_keys():
    es, en = catalog_files("es"), catalog_files("en")
    assert set(es) == set(en), "every catalog file exists in both languages"
    assert {"feedback.yml", "render.yml"} <= set(es)
    for name in es:
        assert set(es[name]) == set(en[name]), f"{name}: keys differ between es and en"
        for key in es[name]:
            assert isinstance(es[name][key], str) and isinstance(en[name][key], str), (name, key)
    # And the merged catalogs load (no key defined twice across files).
    assert set(i18n.catalog("es")) == set(i18n.catalog("en"))


def test_catalog_placeholders_match_between_languages():
    """Every message of every catalog names the same placeholders in Spanish and English."""
    import string

    def fields(template: str) -> set[str]:
        return {name for _, name, _, _ in string.Formatter().parse(template) if name}

    es, en = i18n.catalog("es"), i18n.catalog("en")
    assert len(es) > 1000
    for key in es:
        assert fields(es[key]) == fields(en[key]), key


def test_json_round_trip_renders_the_same_markdown_and_text():
    from autograder.render.results_json import from_json_dict

    original = make_result()
    for lang in ("es", "en"):
        loaded = from_json_dict(json.loads(render_json(original, lang)))
        assert render_markdown(loaded, lang) == render_markdown(original, lang)
        assert render_text(loaded, lang, color=False) == render_text(original, lang, color=False)
        assert to_json_dict(loaded, lang) == to_json_dict(original, lang)


def test_from_json_rejects_a_file_that_is_not_a_result():
    from autograder.render.results_json import from_json_dict

    with pytest.raises(ValueError, match="not a results.json"):
        from_json_dict({"course": "x", "lessons": [{"id": "03"}]})


def test_checks_failing_for_one_cause_are_one_block_and_verbose_shows_them_all():
    from autograder.core.results import RaisedIn

    raised = RaisedIn("head-reshape", "attention.py", 71)

    def crashed(check_id, todo, size):
        parts = [
            message("engine.student_raised", type="RuntimeError", message=f"shape '[{size}, 3]' is invalid"),
            Block("  attention.py:71 · forward()\n    q = q.view(B, nh, T, hs)\n", kind="traceback"),
        ]
        if todo != "head-reshape":
            parts.append(
                message(
                    "engine.raised_in_other_todo",
                    todo=todo,
                    other="head-reshape",
                    file="attention.py",
                    line=71,
                )
            )
        return CheckResult(
            check_id,
            todo,
            Status.FAILED,
            0,
            5,
            Feedback(tuple(parts)),
            raised_in=raised,
            waits_on=None if todo == "head-reshape" else "head-reshape",
        )

    missing = [
        CheckResult(
            f"np-{n}",
            "np-mask",
            Status.FAILED,
            0,
            2,
            Feedback.of(message("engine.missing_file", file="attention_numpy.py")),
        )
        for n in range(3)
    ]
    checks = [
        *missing,
        crashed("mask-buffer", "mask", 2),
        crashed("future-leak", "mask", 8),
        crashed("shapes", "head-reshape", 3),
        CheckResult("quiz-1", None, Status.PASSED, 2, 2),
    ]
    result = CourseResult("c", "es", 1, [LessonResult("03", "atencion-causal", {"es": "t"}, 50, checks)])
    text = render_text(result, "es", color=False, width=200)
    # The error once, led by the check of the TODO whose code raised; the others named.
    assert text.count("Tu código lanzó RuntimeError") == 1
    lines = text.splitlines()
    lead = next(n for n, line in enumerate(lines) if "✘" in line and "TODO [head-reshape]" in line)
    assert lines[lead].lstrip().startswith("✘ shapes")
    assert (
        "Esta misma causa hace fallar 3 comprobaciones (15 puntos); las otras: mask-buffer, future-leak."
        in text
    )
    assert not any(line.lstrip().startswith(("✘ mask-buffer", "✘ future-leak")) for line in lines)
    # The engine's own verdict (a missing file) is one cause too.
    assert text.count("No encuentro el archivo attention_numpy.py") == 1
    assert "Esta misma causa hace fallar 3 comprobaciones (6 puntos); las otras: np-1, np-2." in text
    full = render_text(result, "es", color=False, width=200, verbose=True)
    assert full.count("Tu código lanzó RuntimeError") == 3 and full.count("No encuentro el archivo") == 3
    assert "Esta misma causa" not in full


def _not_started_lesson() -> LessonResult:
    """Lesson 01 as the untouched stub leaves it: three TODOs pending, one check waiting on
    another's pending TODO, the quiz blank, one real failure."""
    titles = {"vocab": "el vocabulario", "split": "la partición", "batch-offsets": "los inicios"}

    def pending(check_id, todo, waits=None):
        parts = [message("engine.todo_pending", todo=waits or todo, title=titles[waits or todo])]
        if waits:
            parts.append(message("engine.waits_for", todo=todo, pending=waits))
        return CheckResult(check_id, todo, Status.FAILED, 0, 5, Feedback(tuple(parts)))

    checks = [
        pending("vocab", "vocab"),
        pending("encode", "vocab"),
        pending("split-order", "split"),
        pending("batch-range", "batch-offsets"),
        pending("targets-shift", "targets-shift", waits="batch-offsets"),
        CheckResult(
            "decode", "vocab", Status.FAILED, 0, 5, Feedback.of(message("engine.assertion", detail="x"))
        ),
        *(
            CheckResult(f"quiz-{n}", None, Status.FAILED, 0, 2, Feedback.of(message("quiz.blank", n=n)))
            for n in (1, 2, 3)
        ),
    ]
    return LessonResult(
        "01", "tokens-y-lotes", {"es": "Tokens y lotes", "en": "Tokens and batches"}, 50, checks
    )


def test_checks_not_started_are_one_line_per_lesson_and_verbose_shows_them_all():
    result = CourseResult("c", "es", 1, [_not_started_lesson()])
    lines = render_text(result, "es", color=False, width=200).splitlines()
    assert lines[3:6] == [
        "  ✘ Pendientes: TODO [vocab], TODO [split], TODO [batch-offsets]; y detrás, sin poder comprobarse aún, "
        "TODO [targets-shift] · de ellos dependen 5 comprobaciones (25 puntos)",
        "  ✘ decode · TODO [vocab]  0/5  fallida",
        "      La comprobación falló: x",
    ]
    assert "  ✘ Quiz: las preguntas 1, 2, 3 están sin responder en quiz.yml (6 puntos)" in lines
    assert not any("pendiente:" in line or "sin responder en quiz.yml." in line for line in lines)
    english = render_text(result, "en", color=False, width=200)
    assert (
        "  ✘ Pending: TODO [vocab], TODO [split], TODO [batch-offsets]; and behind them, not checkable yet, "
        "TODO [targets-shift] · 5 checks depend on them (25 points)" in english.splitlines()
    )
    assert "  ✘ Quiz: questions 1, 2, 3 are unanswered in quiz.yml (6 points)" in english.splitlines()
    # One TODO left: its title is said, as its own message did.
    single = CourseResult(
        "c", "es", 1, [LessonResult("01", "s", {"es": "t"}, 50, _not_started_lesson().checks[:2])]
    )
    assert (
        "  ✘ Pendiente: TODO [vocab] (el vocabulario) · de él dependen 2 comprobaciones (10 puntos)"
        in render_text(single, "es", color=False, width=200).splitlines()
    )
    # Every check in full with --verbose, and in the JSON.
    full = render_text(result, "es", color=False, width=200, verbose=True)
    for check in result.lessons[0].checks:
        assert f"  ✘ {check.id}" in full
    assert full.count("TODO [batch-offsets] pendiente") == 2 and full.count("sin responder en quiz.yml.") == 3
    assert [c["id"] for c in to_json_dict(result, "es")["lessons"][0]["checks"]] == [
        c.id for c in result.lessons[0].checks
    ]


def test_the_next_step_ends_the_text():
    from autograder.core.manifest import load_course
    from autograder.learner.steps import NextStep, step_line

    course = load_course(Path(__file__).resolve().parents[2] / "course.yml")
    lesson = course.lessons[0]
    step = NextStep(
        "todo", lesson, todo="vocab", check="vocab", path="exercises/01-tokens-y-lotes/data.py", line=41
    )
    result = CourseResult("c", "es", 1, [_not_started_lesson()])
    lines = render_text(result, "es", color=False, width=60, step=step_line(step, result, "es")).splitlines()
    # Never wrapped: terminals link a whole path:line.
    assert lines[-2:] == [
        "",
        f"Empieza por: lección {lesson.id}, TODO [vocab] en exercises/01-tokens-y-lotes/data.py:41 "
        f"· autograder watch {lesson.id}",
    ]
    assert (
        render_text(result, "en", color=False, step=step_line(step, result, "en"))
        .splitlines()[-1]
        .startswith(f"Start with: lesson {lesson.id}, TODO [vocab] in exercises/")
    )
    # Once something scores, it is the next step, not the start.
    result.lessons[0].checks[0] = CheckResult("vocab", "vocab", Status.PASSED, 5, 5)
    assert (
        render_text(result, "es", color=False, step=step_line(step, result, "es"))
        .splitlines()[-1]
        .startswith(f"Siguiente: lección {lesson.id}, TODO [vocab] en exercises/01-tokens-y-lotes/data.py:41")
    )
    assert render_text(result, "es", color=False).splitlines()[-1].startswith("Semilla")  # no step, no line


def test_the_untouched_course_is_short_and_ends_with_where_to_start(course):
    """Short output for a fresh start: the stub course's text output (~147 lines before) is at most ~60 lines
    and its last line is the start step; --verbose still shows every check."""
    from autograder.engine.grading import grade
    from autograder.learner.steps import grade_step, step_line

    root = Path(__file__).resolve().parents[2]
    result = grade(course, list(course.lessons), root / "exercises", lang="es", seed=1)
    step = grade_step(course, result, root / "exercises")
    lines = render_text(result, "es", color=False, step=step_line(step, result, "es")).splitlines()
    assert len(lines) <= 60, "\n".join(lines)
    first = course.lessons[0]
    todo = first.todos[0]
    start = f"Empieza por: lección {first.id}, TODO [{todo.id}] en exercises/{first.folder}/{todo.file}:"
    assert lines[-1].startswith(start) and lines[-1].endswith(f" · autograder watch {first.id}"), lines[-1]
    line = int(lines[-1][len(start) :].split(" ")[0])
    assert (
        f"TODO [{todo.id}]"
        in (root / "exercises" / first.folder / todo.file).read_text().splitlines()[line - 1]
    )
    assert sum(line.startswith("Empieza por") for line in lines) == 1
    full = render_text(result, "es", color=False, verbose=True)
    for lesson in result.lessons:
        for check in lesson.checks:
            assert f" {check.id}" in full, check.id
    assert len(full.splitlines()) > 3 * len(lines)
    # A folder that is not the course's exercises/ gets no step: it would name other files.
    assert grade_step(course, result, root / "solutions") is None


def test_every_name_imported_from_output_is_there():
    """render/output.py gathers the formats' names that the rest of the engine and the tests
    import from it, most of them inside functions, where a missing one would only fail when
    that command runs."""
    root = Path(__file__).resolve().parents[2]
    wanted = {}
    for path in [*(root / "autograder").rglob("*.py"), *(root / "tests").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "autograder.render.output":
                for alias in node.names:
                    wanted.setdefault(alias.name, path.relative_to(root))
    assert {"render_text", "render_json", "make_console", "to_json_dict"} <= set(wanted)  # in functions too
    assert not [f"{name} ({path})" for name, path in wanted.items() if not hasattr(output, name)]
    assert set(output.__all__) >= set(wanted)


@pytest.mark.parametrize("lang", ["es", "en"])
def test_a_missing_pid_namespace_is_said_in_one_line_and_the_grade_stays_official(lang):
    """Without root, where the kernel refuses a user namespace, the worker has no PID namespace
    of its own: the seccomp filter still keeps it off other processes (the grade is official),
    and the learner hears which wall is missing, once, in text and Markdown alike."""
    from autograder.core.results import REQUIRED_WALLS
    from autograder.render.labels import isolation_note

    def result(walls):
        lesson = LessonResult(
            "03", "03-atencion-causal", {"es": "Atención", "en": "Attention"}, 50, [], isolation=walls
        )
        return CourseResult("Curso", lang, 1, [lesson])

    base = {
        "official": True,
        "enforced": list(REQUIRED_WALLS),
        "missing": [],
        "landlock_abi": 7,
        "disabled": False,
    }
    line = i18n.translate("render.isolation_no_pid_namespace", lang)
    assert isolation_note(result({**base, "namespaces": []}), lang) == line
    assert isolation_note(result({**base, "namespaces": ["pid", "user"]}), lang) is None
    walled = result({**base, "namespaces": []})
    assert " ".join(render_text(walled, lang).split()).count(line) == 1  # wrapped to the terminal
    assert render_markdown(walled, lang).count(line.split(":")[0]) == 1
