"""autograder/render/formats.py: the same results as Gradescope's results.json. (GitHub
Classroom's runner result went with GitHub Classroom; tests/test_cli.py checks that asking for it
is a clear usage error.)"""

import json
from pathlib import Path

import pytest
import yaml

from autograder.core import i18n
from autograder.core.results import Block, CheckResult, CourseResult, Feedback, LessonResult, Status, message
from autograder.render import formats
from autograder.render.formats import render_gradescope, to_gradescope

MESSAGES = Path(i18n.__file__).resolve().parents[1] / "messages"
SEED = 1234

PRACTICE_ES = (
    "Nota de práctica: esta corrección usó solo los tests de práctica, no los evaluadores ocultos "
    "del curso; no es la nota definitiva."
)
SKIPPED_ES = "Comprobación omitida en esta máquina: no cuenta para la nota (0 de 0 puntos)."
SKIPPED_EN = "Check skipped on this machine: it does not count towards the grade (0 of 0 points)."


def lesson03() -> LessonResult:
    return LessonResult(
        id="03",
        slug="atencion-causal",
        title={"es": "Self-attention causal", "en": "Causal self-attention"},
        xp_max=50,
        checks=[
            CheckResult("np-mask", "np-mask", Status.PASSED, 6.0, 6.0, duration=0.4),
            CheckResult(
                "future-leak",
                "mask",
                Status.FAILED,
                0.0,
                6.0,
                Feedback((message("engine.assertion", detail="fuga"), Block("i\\j 0 1\n  0 X ."))),
                duration=0.9,
            ),
            CheckResult(
                "heads-merge",
                "contiguous-view",
                Status.ERROR,
                0.0,
                6.0,
                Feedback.of(message("engine.timeout", seconds=10)),
                duration=10.2,
            ),
            CheckResult("quiz-1", None, Status.PASSED, 1.5, 1.5),
            CheckResult(
                "gpu-parity",
                None,
                Status.SKIPPED,
                0.0,
                0.0,
                Feedback.of(message("engine.skipped", reason="CUDA no disponible")),
            ),
        ],
    )


def lesson04(mode: str = "practice") -> LessonResult:
    return LessonResult(
        id="04",
        slug="bloque",
        title={"es": "El bloque", "en": "The block"},
        xp_max=60,
        checks=[
            CheckResult("block-shapes", "block", Status.PASSED, 5.0, 5.0, duration=1.1),
            CheckResult("gpu-parity", None, Status.SKIPPED, 0.0, 0.0),  # no reason given
        ],
        mode=mode,
    )


def make_result(*lessons: LessonResult) -> CourseResult:
    return CourseResult("Transformers desde cero", "es", SEED, list(lessons) or [lesson03(), lesson04()])


def only(*checks: CheckResult) -> CourseResult:
    return make_result(LessonResult("01", "uno", {"es": "Uno", "en": "One"}, 10, list(checks)))


# --- Gradescope -----------------------------------------------------------------------------


def test_gradescope_structure_and_values():
    result = make_result()
    data = to_gradescope(result, "es")
    assert list(data) == [
        "score",
        "execution_time",
        "output",
        "output_format",
        "test_output_format",
        "test_name_format",
        "visibility",
        "stdout_visibility",
        "extra_data",
        "tests",
    ]
    assert data["score"] == 12.5 == result.score
    assert data["execution_time"] == 13 and type(data["execution_time"]) is int  # 12.6 s, rounded
    assert (data["visibility"], data["stdout_visibility"]) == ("visible", "hidden")
    assert data["output_format"] == data["test_output_format"] == data["test_name_format"] == "text"
    assert data["extra_data"] == {
        "course": "Transformers desde cero",
        "language": "es",
        "seed": SEED,
        "practice": True,
        "xp": 60,
        "xp_max": 110,
    }

    tests = data["tests"]
    assert [t["number"] for t in tests] == ["03.1", "03.2", "03.3", "03.4", "03.5", "04.1", "04.2"]
    assert tests[0] == {
        "name": "03 · np-mask · TODO [np-mask]",
        "number": "03.1",
        "score": 6,
        "max_score": 6,
        "status": "passed",
        "output": "",
        "tags": ["np-mask"],
        "visibility": "visible",
    }
    assert type(tests[0]["score"]) is int  # 6, not 6.0
    assert tests[1] == {
        "name": "03 · future-leak · TODO [mask]",
        "number": "03.2",
        "score": 0,
        "max_score": 6,
        "status": "failed",
        "output": "La comprobación falló: fuga\ni\\j 0 1\n  0 X .",
        "tags": ["mask"],
        "visibility": "visible",
    }
    # An ERROR is not a pass: Gradescope shows it failed, with the engine's message.
    assert tests[2]["status"] == "failed" and tests[2]["name"] == "03 · heads-merge · TODO [contiguous-view]"
    assert tests[2]["output"].startswith("Tiempo agotado") and "10 s" in tests[2]["output"]
    assert tests[3] == {
        "name": "03 · quiz-1",
        "number": "03.4",
        "score": 1.5,
        "max_score": 1.5,
        "status": "passed",
        "output": "",
        "visibility": "visible",
    }  # no todo, no tags
    assert tests[4] == {
        "name": "03 · gpu-parity",
        "number": "03.5",
        "score": 0,
        "max_score": 0,
        "output": SKIPPED_ES + "\nOmitida: CUDA no disponible",
        "visibility": "visible",
    }
    assert tests[6]["output"] == SKIPPED_ES  # skipped without a reason still says so


def test_gradescope_skipped_checks_are_never_passed():
    data = to_gradescope(make_result(), "es")
    statuses = [t.get("status") for t in data["tests"]]
    assert statuses == ["passed", "failed", "failed", "passed", None, "passed", None]
    skipped = [t for t in data["tests"] if t["name"].endswith("gpu-parity")]
    assert len(skipped) == 2
    for test in skipped:
        assert "status" not in test and (test["score"], test["max_score"]) == (0, 0)
        assert test["output"].startswith(SKIPPED_ES)


def test_gradescope_totals_match_the_result():
    result = make_result()
    data = to_gradescope(result, "en")
    assert sum(t["score"] for t in data["tests"]) == data["score"] == result.score
    assert sum(t["max_score"] for t in data["tests"]) == result.max_score == 24.5
    passed = [t for t in data["tests"] if t.get("status") == "passed"]
    assert (
        len(passed) == sum(c.status is Status.PASSED for lesson in result.lessons for c in lesson.checks) == 3
    )


def test_gradescope_output_summary_with_practice_note_and_seed():
    lines = to_gradescope(make_result(), "es")["output"].split("\n")
    assert lines[0] == "Transformers desde cero"
    assert "12.5/24.5" in lines[1] and "XP 60/110" in lines[1]
    assert lines[2] == PRACTICE_ES
    assert lines[3] == "Comprobaciones omitidas (no cuentan para la nota): 03 · gpu-parity, 04 · gpu-parity"
    assert lines[4] == i18n.translate("render.seed", "es", seed=SEED) and str(SEED) in lines[4]
    assert len(lines) == 5


def test_gradescope_without_practice_has_no_practice_note():
    result = make_result(lesson03(), lesson04(mode="hidden"))
    assert result.practice is False
    out = to_gradescope(result, "es")["output"]
    assert "práctica" not in out and str(SEED) in out
    assert to_gradescope(result, "es")["extra_data"]["practice"] is False


def test_gradescope_in_english():
    data = to_gradescope(make_result(), "en")
    out = data["output"]
    assert "Practice grade: only the practice tests ran" in out
    assert "Skipped checks (not counted towards the grade): 03 · gpu-parity, 04 · gpu-parity" in out
    assert "12.5/24.5 points" in out
    tests = {t["number"]: t for t in data["tests"]}
    assert tests["03.2"]["output"].startswith("The check failed: fuga")
    assert tests["03.5"]["output"] == SKIPPED_EN + "\nSkipped: CUDA no disponible"
    for spanish in ("Omitida", "puntos", "Semilla", "Nota de práctica"):
        assert spanish not in render_gradescope(make_result(), "en")


def test_gradescope_text_is_deterministic_json():
    text = render_gradescope(make_result(), "es")
    assert text == render_gradescope(make_result(), "es")  # same result -> same text
    assert text.endswith("}\n") and "práctica" in text  # ensure_ascii=False
    assert json.loads(text) == to_gradescope(make_result(), "es")


def test_scores_are_rounded_like_the_json_contract():
    result = only(CheckResult("a", None, Status.FAILED, 1 / 3, 2.0, duration=0.26))
    data = to_gradescope(result, "es")
    assert data["score"] == 0.33 and data["tests"][0]["score"] == 0.33 and data["tests"][0]["max_score"] == 2
    assert data["execution_time"] == 0


def test_unknown_language_is_refused():
    for fn in (to_gradescope, render_gradescope):
        with pytest.raises(ValueError):
            fn(make_result(), "fr")


def test_gradescope_when_everything_was_skipped():
    skipped = CheckResult("gpu", None, Status.SKIPPED, 0, 0, Feedback((Block("CUDA no disponible"),)))
    data = to_gradescope(only(skipped), "en")
    assert data["score"] == 0 and "status" not in data["tests"][0]
    lines = data["output"].split("\n")
    assert "No check was graded on this machine." in lines
    assert "Skipped checks (not counted towards the grade): 01 · gpu" in lines


def test_the_classroom_format_is_gone():
    """GitHub Classroom was retired on 2026-08-28: nothing renders its runner result any more."""
    assert not [name for name in dir(formats) if "classroom" in name.lower()]


# --- catalog --------------------------------------------------------------------------------


def test_formats_catalogs_match():
    es = yaml.safe_load((MESSAGES / "es" / "formats.yml").read_text(encoding="utf-8"))
    en = yaml.safe_load((MESSAGES / "en" / "formats.yml").read_text(encoding="utf-8"))
    assert set(es) == set(en) and all(key.startswith("formats.") for key in es)

    def fields(template: str) -> set[str]:
        import string

        return {name for _, name, _, _ in string.Formatter().parse(template) if name}

    for key in es:
        assert fields(es[key]) == fields(en[key]), key
