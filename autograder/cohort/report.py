"""A graded cohort, read back from a `grade-all` output folder, and its report for the
instructor: which TODOs and which checks learners fail, as a Markdown table and a PNG chart.

"Not started" on a TODO means the TODO still raises the stub's NotImplementedError, or every
check of it that fails stops at such a TODO (it waits on one, so nothing the learner wrote
there has run yet: on an untouched copy every TODO is not started). "Stuck" means a check of
that TODO fails on the learner's own work. A learner whose lesson does not run at all (a file of
it does not load: a syntax error, a failing import, a crash in top-level code; see
autograder/cohort/causes.py) is named once under "no se ejecuta", with the file and line, and left
out of the rates of the TODOs and checks that failure stopped, rather than counted as stuck on
each of them. The TODO, and the check, most learners are stuck on comes first; quizzes and
informational checks (0 points) are a short section of their own. Learners whose grading
itself failed (a crash, a timeout, a repository that could not be fetched) are listed apart
and left out of the rates; so are the checks that ran out of time, named per learner.

Everything a learner wrote (an error's words, an id) reaches report.md through
autograder/core/neutral.py, inert.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from autograder.cohort.causes import NoRun, distinct, lesson_does_not_run
from autograder.cohort.store import BatchError, Record, Store
from autograder.core import i18n, neutral
from autograder.core.i18n import translate as _t
from autograder.core.manifest import Course, Lesson
from autograder.core.neutral import markdown_inline as _cell
from autograder.core.results import CheckResult, CourseResult, LessonResult, Status, Text
from autograder.render.labels import quiz_blank
from autograder.render.results_json import from_json_dict

_FAILING = (Status.FAILED, Status.ERROR)
# A check that ran out of time says so with one of these (its worker was stopped).
_TIMEOUTS = (
    "engine.timeout",
    "engine.timeout_cpu",
    "engine.timeout_wall",
    "engine.timeout_generic",
    "engine.import_timeout",
)
# At most this many checks named per learner in the list of checks that ran out of time.
MAX_HUNG_NAMED = 6


@dataclass
class Entry:
    record: Record
    result: CourseResult

    @property
    def graded(self) -> bool:
        return self.record.status == "graded"

    def lesson(self, lesson_id: str) -> LessonResult | None:
        return next((lesson for lesson in self.result.lessons if lesson.id == lesson_id), None)

    @cached_property
    def _no_run(self) -> dict[str, dict[str, NoRun]]:
        if not self.graded:
            return {}
        return {
            lesson.id: lesson_does_not_run(lesson, self.result.language) for lesson in self.result.lessons
        }

    def no_run(self, lesson_id: str) -> dict[str, NoRun]:
        """{check id: the import failure that stopped it} for this learner's lesson (causes.py)."""
        return self._no_run.get(lesson_id, {})

    def waiting(self, lesson_id: str) -> dict[str, str]:
        """{check id: the TODO it stops at} for this learner's checks of a lesson that stop at
        work not started: a TODO still the stub (the check's own or another), a missing file
        (the check's TODO, "" for the lesson as a whole), or a failing check that waits on a
        TODO that is still the stub."""
        found = dict(self.record.pending.get(lesson_id, {}))
        pending = {todo for todo in found.values() if todo}
        result = self.lesson(lesson_id)
        for check in result.checks if result is not None else ():
            if check.id not in found and check.status in _FAILING and check.waits_on in pending:
                found[check.id] = str(check.waits_on)
        return found


@dataclass
class Cohort:
    course: Course
    lessons: list[Lesson]
    seed: int
    entries: list[Entry]  # sorted by learner id


def load(course: Course, run: dict, store: Store) -> Cohort:
    entries = []
    for learner in sorted(run["learners"]):
        record, data = store.read_record(learner), store.read_result(learner)
        if record is None or data is None:
            raise BatchError("batch.no_result", folder=str(store.root), id=learner)
        try:
            result = from_json_dict(data)
        except ValueError as exc:
            raise BatchError(
                "batch.bad_result", file=str(store.result_path(learner)), detail=str(exc)
            ) from None
        entries.append(Entry(record, result))
    return Cohort(course, [course.lesson(key) for key in run["lessons"]], int(run["seed"]), entries)


# ------------------------------------------------------------------------------ statistics


@dataclass
class Rate:
    """How many of `total` learners are stuck on (and have not started) a check or a TODO."""

    kind: str  # "check" | "todo" | "quiz" | "informational"
    lesson: str
    id: str
    todo: str | None
    total: int
    stuck: int
    pending: int
    order: int  # position in course.yml, the tie-breaker
    note: str = ""  # a quiz's most failed question: "2" (or "")

    def share(self, count: int) -> float:
        return count / self.total if self.total else 0.0

    def sort_key(self) -> tuple:
        return (-self.share(self.stuck), -self.share(self.pending), self.order)


def _graded_lessons(cohort: Cohort, lesson: Lesson):
    """(entry, its result for `lesson`) of every graded learner that has one."""
    for entry in cohort.entries:
        result = entry.lesson(lesson.id) if entry.graded else None
        if result is not None:
            yield entry, result


def _graded_checks(cohort: Cohort, lesson: Lesson, check_id: str):
    """(entry, its result of the check) of every learner graded on it (a skipped check is not)."""
    for entry, result in _graded_lessons(cohort, lesson):
        check = _check(result, check_id)
        if check is not None and check.status is not Status.SKIPPED:
            yield entry, check


def check_rates(cohort: Cohort) -> list[Rate]:
    """The checks that count (not quizzes, not informational), most stuck first."""
    rates, order = [], 0
    for lesson in cohort.lessons:
        for spec in lesson.checks:
            order += 1
            if spec.informational or lesson.is_quiz_check(spec.id):
                continue
            total = stuck = pending = 0
            for entry, check in _graded_checks(cohort, lesson, spec.id):
                if spec.id in entry.no_run(lesson.id):
                    continue  # named once under "no se ejecuta"
                total += 1
                if spec.id in entry.waiting(lesson.id):
                    pending += 1
                elif check.status in _FAILING:
                    stuck += 1
            rates.append(Rate("check", lesson.id, spec.id, spec.todo, total, stuck, pending, order))
    return sorted(rates, key=Rate.sort_key)


def todo_rates(cohort: Cohort) -> list[Rate]:
    """Every TODO of the graded lessons, most stuck first. A learner has not started a TODO
    that is still the stub, or whose failing checks all wait on a TODO that is; is stuck on
    it when a check of it fails on their own work. A learner whose failing checks of it all stop
    at a file that does not import is left out (named under "no se ejecuta")."""
    rates, order = [], 0
    for lesson in cohort.lessons:
        for todo in lesson.todos:
            order += 1
            total = stuck = pending = 0
            for entry, _ in _graded_lessons(cohort, lesson):
                state = todo_state(entry, lesson, todo.id)
                if state == "no_run":
                    continue
                total += 1
                stuck += state == "stuck"
                pending += state == "pending"
            rates.append(Rate("todo", lesson.id, todo.id, todo.id, total, stuck, pending, order))
    return sorted(rates, key=Rate.sort_key)


def todo_state(entry: Entry, lesson: Lesson, todo: str) -> str | None:
    """ "pending" (not started), "stuck", "no_run" (every failing check of it stopped at a file
    that does not import) or None (done, or nothing of it failing) for one learner's TODO."""
    result = entry.lesson(lesson.id)
    if result is None:
        return None
    waiting = entry.waiting(lesson.id)
    if todo in waiting.values():
        return "pending"
    failing = [c for c in result.checks if c.todo == todo and c.status in _FAILING]
    no_run = entry.no_run(lesson.id)
    judged = [c for c in failing if c.id not in no_run]
    if failing and not judged:
        return "no_run"
    failing = judged
    if any(c.id not in waiting for c in failing):
        return "stuck"
    return "pending" if failing else None  # every failing check of it waits on a TODO not started


def apart_rates(cohort: Cohort) -> list[Rate]:
    """Quizzes (one row per lesson: learners with a wrong answer, learners with every answer
    blank, the most failed question) and informational checks, in course order."""
    rates, order = [], 0
    for lesson in cohort.lessons:
        quiz = [spec.id for spec in lesson.checks if lesson.is_quiz_check(spec.id)]
        order += 1
        if quiz:
            total = stuck = pending = 0
            wrong = {check_id: 0 for check_id in quiz}
            for entry, result in _graded_lessons(cohort, lesson):
                checks = [c for c in (_check(result, i) for i in quiz) if c is not None]
                waiting = entry.waiting(lesson.id)  # a missing quiz file: nothing answered
                blank = [c for c in checks if quiz_blank(c) is not None or c.id in waiting]
                total += 1
                missed = [c for c in checks if c.status in _FAILING and c not in blank]
                for check in missed:
                    wrong[check.id] += 1
                if missed:
                    stuck += 1
                elif checks and len(blank) == len(checks):
                    pending += 1
            worst = max(quiz, key=lambda i: wrong[i])
            note = worst.split("-", 1)[1] if wrong[worst] else ""
            rates.append(Rate("quiz", lesson.id, "quiz", None, total, stuck, pending, order, note))
        for spec in lesson.checks:
            if not spec.informational:
                continue
            total = stuck = pending = 0
            for entry, check in _graded_checks(cohort, lesson, spec.id):
                if spec.id in entry.no_run(lesson.id):
                    continue
                total += 1
                if check.status in _FAILING and (
                    spec.id in entry.waiting(lesson.id) or _own_pending(check, entry.result.language)
                ):
                    pending += 1
                elif check.status in _FAILING:
                    stuck += 1
            rates.append(Rate("informational", lesson.id, spec.id, spec.todo, total, stuck, pending, order))
    return rates


def _said(check: CheckResult, keys: tuple[str, ...], lang: str) -> bool:
    """Whether one of the check's message parts is one of these catalog messages (a results.json
    keeps them as localised text: matched against the catalog's templates)."""
    for part in check.feedback.parts:
        if isinstance(part, Text):
            if part.key in keys:
                return True
            continue
        text = getattr(part, "text", "")
        if any(i18n.recognise(key, lang, text) is not None for key in keys):
            return True
    return False


def _own_pending(check: CheckResult, lang: str) -> bool:
    """An informational check of the learner's own pieces that stopped at a TODO still the stub
    in an earlier lesson (lessonNN.own_pending)."""
    keys = (
        tuple(key for key in i18n.catalog(lang) if key.endswith(".own_pending"))
        if lang in i18n.LANGUAGES
        else ()
    )
    return _said(check, keys, lang)


def not_running(cohort: Cohort) -> list[tuple[Entry, str, list[NoRun], int]]:
    """(learner, lesson id, where and why its files do not import, how many checks that stopped)
    for every graded learner's lesson that does not run, by learner then lesson."""
    out = []
    for lesson in cohort.lessons:
        for entry, _ in _graded_lessons(cohort, lesson):
            stopped = entry.no_run(lesson.id)
            if stopped:
                out.append((entry, lesson.id, distinct(stopped.values()), len(stopped)))
    return sorted(out, key=lambda row: (row[0].record.learner, row[1]))


def hung_checks(cohort: Cohort) -> list[tuple[Entry, str, list[str]]]:
    """(learner, lesson id, the checks that ran out of time) for graded learners whose code
    never finished a check (an endless loop, an import that never returns)."""
    out = []
    for lesson in cohort.lessons:
        for entry, result in _graded_lessons(cohort, lesson):
            ids = [
                c.id
                for c in result.checks
                if c.status in _FAILING and _said(c, _TIMEOUTS, entry.result.language)
            ]
            if ids:
                out.append((entry, lesson.id, ids))
    return sorted(out, key=lambda row: (row[0].record.learner, row[1]))


def _check(result: LessonResult, check_id: str) -> CheckResult | None:
    return next((c for c in result.checks if c.id == check_id), None)


# ------------------------------------------------------------------------------ Markdown


def _share(count: int, total: int, lang: str) -> str:
    percent = round(100 * count / total) if total else 0
    return _t("batch.report_share", lang, count=count, percent=percent)


def _code(text: str) -> str:
    """An id (a learner's, a check's, a TODO's) as inert code in a table cell or a list."""
    return neutral.markdown_cell_code(text)


def render_markdown(cohort: Cohort, lang: str, chart: str | None = None) -> str:
    graded = [e for e in cohort.entries if e.graded]
    failed = [e for e in cohort.entries if not e.graded]
    lesson_ids = " ".join(lesson.id for lesson in cohort.lessons)
    out = [
        f"# {_cell(_t('batch.report_title', lang, course=cohort.course.name))}",
        "",
        _cell(
            _t(
                "batch.report_summary",
                lang,
                learners=len(cohort.entries),
                graded=len(graded),
                lessons=lesson_ids,
                seed=cohort.seed,
            )
        ),
        "",
    ]
    out += [
        f"| {_t('batch.report_col_lesson', lang)} | {_t('batch.report_col_completed', lang)} | "
        f"{_t('batch.report_col_mean', lang)} |",
        "|---|---:|---:|",
    ]
    for lesson in cohort.lessons:
        results = [r for r in (e.lesson(lesson.id) for e in graded) if r is not None]
        done = sum(1 for r in results if r.completed)
        shares = [r.score / r.max_score for r in results if r.max_score]
        percent = round(100 * sum(shares) / len(shares)) if shares else 0
        title = i18n.localize(lesson.title, lang)
        out.append(
            f"| {_cell(f'{lesson.id} · {title}')} | {_share(done, len(results), lang)} | "
            f"{_cell(_t('batch.report_percent', lang, percent=percent))} |"
        )

    broken = not_running(cohort)
    if broken:
        out += [
            "",
            f"## {_cell(_t('batch.report_no_run', lang))}",
            "",
            _cell(_t("batch.report_no_run_help", lang)),
            "",
        ]
        for entry, lesson_id, causes, checks in broken:
            # The engine's message names the file and line itself; an older result's, not.
            where = "; ".join(
                _cell(cause.text(lang))
                if cause.says_where
                else f"{_code(cause.where)} · {_cell(cause.text(lang))}"
                for cause in causes
            )
            stopped = _cell(_t("batch.report_no_run_checks", lang, n=checks))
            out.append(
                f"- {_code(entry.record.learner)} · {_cell(_t('batch.report_in_lesson', lang, id=lesson_id))}: "
                f"{where} ({stopped})"
            )

    out += [
        "",
        f"## {_cell(_t('batch.report_todos', lang))}",
        "",
        _cell(_t("batch.report_todos_help", lang)),
        "",
        f"| {_t('batch.report_col_todo', lang)} | {_t('batch.report_col_lesson', lang)} | "
        f"{_t('batch.report_col_stuck', lang)} | {_t('batch.report_col_pending', lang)} |",
        "|---|---|---:|---:|",
    ]
    for rate in todo_rates(cohort):
        out.append(
            f"| {_code(rate.id)} | {rate.lesson} | {_share(rate.stuck, rate.total, lang)} | "
            f"{_share(rate.pending, rate.total, lang)} |"
        )

    # The checks somebody is stuck on, highest failure rate first; the rest in one line.
    rates = check_rates(cohort)
    stuck = [rate for rate in rates if rate.stuck]
    out += [
        "",
        f"## {_cell(_t('batch.report_checks', lang))}",
        "",
        _cell(_t("batch.report_checks_help", lang)),
        "",
    ]
    if stuck:
        out += [
            f"| {_t('batch.report_col_check', lang)} | {_t('batch.report_col_todo', lang)} | "
            f"{_t('batch.report_col_lesson', lang)} | {_t('batch.report_col_failed', lang)} | "
            f"{_t('batch.report_col_pending', lang)} |",
            "|---|---|---|---:|---:|",
        ]
        for rate in stuck:
            todo = _code(rate.todo) if rate.todo else "—"
            out.append(
                f"| {_code(rate.id)} | {todo} | {rate.lesson} | {_share(rate.stuck, rate.total, lang)} | "
                f"{_share(rate.pending, rate.total, lang)} |"
            )
        out.append("")
    if len(stuck) < len(rates):
        rest = "batch.report_checks_rest" if stuck else "batch.report_checks_none"
        out.append(_cell(_t(rest, lang, n=len(rates) - len(stuck))))

    apart = apart_rates(cohort)
    if apart:
        out += [
            "",
            f"## {_cell(_t('batch.report_apart', lang))}",
            "",
            _cell(_t("batch.report_apart_help", lang)),
            "",
            f"| {_t('batch.report_col_check', lang)} | {_t('batch.report_col_lesson', lang)} | "
            f"{_t('batch.report_col_failed', lang)} | {_t('batch.report_col_pending', lang)} |",
            "|---|---|---:|---:|",
        ]
        for rate in apart:
            if rate.kind == "quiz":
                name = _cell(_t("batch.report_quiz", lang))
                if rate.note:
                    name += " · " + _cell(_t("batch.report_quiz_worst", lang, n=rate.note))
            else:
                name = f"{_code(rate.id)} · {_cell(_t('batch.report_informational', lang))}"
            out.append(
                f"| {name} | {rate.lesson} | {_share(rate.stuck, rate.total, lang)} | "
                f"{_share(rate.pending, rate.total, lang)} |"
            )

    hung = hung_checks(cohort)
    if hung:
        out += [
            "",
            f"## {_cell(_t('batch.report_hung', lang))}",
            "",
            _cell(_t("batch.report_hung_help", lang)),
            "",
        ]
        for entry, lesson_id, ids in hung:
            named = ", ".join(_code(check) for check in ids[:MAX_HUNG_NAMED])
            if len(ids) > MAX_HUNG_NAMED:
                named += " " + _cell(_t("batch.report_more", lang, n=len(ids) - MAX_HUNG_NAMED))
            out.append(
                f"- {_code(entry.record.learner)} · {_cell(_t('batch.report_in_lesson', lang, id=lesson_id))}: "
                f"{named}"
            )

    if failed:
        out += ["", f"## {_cell(_t('batch.report_errors', lang))}", ""]
        for entry in failed:
            reason = i18n.localize(entry.record.error_reason(), lang)
            out.append(f"- {_code(entry.record.learner)}: {_cell(reason)}")
    if chart:
        out += ["", f"![{_cell(_t('batch.chart_title', lang))}]({chart})"]
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------ chart


def render_chart(cohort: Cohort, lang: str, path: Path) -> None:
    """A horizontal bar per TODO: the share of learners stuck on it and not started, most
    stuck on top."""
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    rates = todo_rates(cohort)
    labels = [f"{rate.id} ({rate.lesson})" for rate in rates]
    stuck = [100 * rate.stuck / rate.total if rate.total else 0.0 for rate in rates]
    pending = [100 * rate.pending / rate.total if rate.total else 0.0 for rate in rates]
    figure, axes = plt.subplots(figsize=(8, 1.6 + 0.32 * max(1, len(rates))), dpi=100)
    try:
        rows = list(range(len(rates)))[::-1]  # the first rate at the top
        axes.barh(rows, stuck, color="#c0392b", label=_t("batch.report_col_stuck", lang))
        axes.barh(rows, pending, left=stuck, color="#bdc3c7", label=_t("batch.report_col_pending", lang))
        axes.set_yticks(rows, labels)
        axes.set_xlim(0, 100)
        axes.set_xlabel(_t("batch.chart_axis", lang))
        axes.set_title(_t("batch.chart_title", lang))
        axes.legend(loc="lower right")
        axes.grid(axis="x", alpha=0.3)
        figure.tight_layout()
        # No software version in the file, so that the same cohort gives the same bytes.
        figure.savefig(path, format="png", metadata={"Software": None})
    finally:
        plt.close(figure)
