"""A graded cohort, read back from a `grade-all` output folder, and its report for the
instructor: which checks and which TODOs learners fail, as a Markdown table and a PNG chart.

"Stuck" on a TODO means the learner wrote something there and a check of that TODO still fails;
"not started" means the TODO still raises the stub's NotImplementedError. The TODO most
learners are stuck on comes first. Learners whose grading itself failed (a crash, a timeout, a
repository that could not be fetched) are listed apart and left out of the rates.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import i18n
from .batch_store import BatchError, Record, Store
from .manifest import Course, Lesson
from .render import _md_cell as _cell, _t, from_json_dict
from .results import CourseResult, LessonResult, Status

_FAILING = (Status.FAILED, Status.ERROR)


@dataclass
class Entry:
    record: Record
    result: CourseResult

    @property
    def graded(self) -> bool:
        return self.record.status == "graded"

    def lesson(self, lesson_id: str) -> LessonResult | None:
        return next((lesson for lesson in self.result.lessons if lesson.id == lesson_id), None)


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
            raise BatchError("batch.bad_result", file=str(store.result_path(learner)), detail=str(exc)) from None
        entries.append(Entry(record, result))
    return Cohort(course, [course.lesson(key) for key in run["lessons"]], int(run["seed"]), entries)


# ------------------------------------------------------------------------------ statistics

@dataclass
class Rate:
    """How many of `total` learners are stuck on (and have not started) a check or a TODO."""

    kind: str  # "check" | "todo"
    lesson: str
    id: str
    todo: str | None
    total: int
    stuck: int
    pending: int
    order: int  # position in course.yml, the tie-breaker

    def sort_key(self) -> tuple:
        return (-self.stuck, -self.pending, self.order)


def check_rates(cohort: Cohort) -> list[Rate]:
    rates, order = [], 0
    for lesson in cohort.lessons:
        for spec in lesson.checks:
            order += 1
            total = stuck = pending = 0
            for entry in cohort.entries:
                check = _check(entry, lesson.id, spec.id)
                if not entry.graded or check is None or check.status is Status.SKIPPED:
                    continue
                total += 1
                if spec.id in entry.record.pending.get(lesson.id, {}):
                    pending += 1
                elif check.status in _FAILING:
                    stuck += 1
            rates.append(Rate("check", lesson.id, spec.id, spec.todo, total, stuck, pending, order))
    return sorted(rates, key=Rate.sort_key)


def todo_rates(cohort: Cohort) -> list[Rate]:
    rates, order = [], 0
    for lesson in cohort.lessons:
        for todo in lesson.todos:
            order += 1
            total = stuck = pending = 0
            specs = [spec for spec in lesson.checks if spec.todo == todo.id]
            for entry in cohort.entries:
                result = entry.lesson(lesson.id)
                if not entry.graded or result is None:
                    continue
                total += 1
                waiting = entry.record.pending.get(lesson.id, {})
                if todo.id in waiting.values():
                    pending += 1
                elif any((c := _check(entry, lesson.id, spec.id)) is not None and c.status in _FAILING
                         and spec.id not in waiting for spec in specs):
                    stuck += 1
            rates.append(Rate("todo", lesson.id, todo.id, todo.id, total, stuck, pending, order))
    return sorted(rates, key=Rate.sort_key)


def _check(entry: Entry, lesson_id: str, check_id: str):
    lesson = entry.lesson(lesson_id)
    return None if lesson is None else next((c for c in lesson.checks if c.id == check_id), None)


# ------------------------------------------------------------------------------ Markdown

def _share(count: int, total: int, lang: str) -> str:
    percent = round(100 * count / total) if total else 0
    return _t("batch.report_share", lang, count=count, percent=percent)


def render_markdown(cohort: Cohort, lang: str, chart: str | None = None) -> str:
    graded = [e for e in cohort.entries if e.graded]
    failed = [e for e in cohort.entries if not e.graded]
    lesson_ids = " ".join(lesson.id for lesson in cohort.lessons)
    out = [f"# {_cell(_t('batch.report_title', lang, course=cohort.course.name))}", "",
           _cell(_t("batch.report_summary", lang, learners=len(cohort.entries), graded=len(graded),
                    lessons=lesson_ids, seed=cohort.seed)), ""]
    out += [f"| {_t('batch.report_col_lesson', lang)} | {_t('batch.report_col_completed', lang)} | "
            f"{_t('batch.report_col_mean', lang)} |", "|---|---:|---:|"]
    for lesson in cohort.lessons:
        results = [r for r in (e.lesson(lesson.id) for e in graded) if r is not None]
        done = sum(1 for r in results if r.completed)
        shares = [r.score / r.max_score for r in results if r.max_score]
        percent = round(100 * sum(shares) / len(shares)) if shares else 0
        title = i18n.localize(lesson.title, lang)
        out.append(f"| {_cell(f'{lesson.id} · {title}')} | {_share(done, len(results), lang)} | "
                   f"{_cell(_t('batch.report_percent', lang, percent=percent))} |")

    out += ["", f"## {_cell(_t('batch.report_todos', lang))}", "", _cell(_t("batch.report_todos_help", lang)), "",
            f"| {_t('batch.report_col_todo', lang)} | {_t('batch.report_col_lesson', lang)} | "
            f"{_t('batch.report_col_stuck', lang)} | {_t('batch.report_col_pending', lang)} |",
            "|---|---|---:|---:|"]
    for rate in todo_rates(cohort):
        out.append(f"| `{_cell(rate.id)}` | {rate.lesson} | {_share(rate.stuck, rate.total, lang)} | "
                   f"{_share(rate.pending, rate.total, lang)} |")

    out += ["", f"## {_cell(_t('batch.report_checks', lang))}", "",
            f"| {_t('batch.report_col_check', lang)} | {_t('batch.report_col_todo', lang)} | "
            f"{_t('batch.report_col_lesson', lang)} | {_t('batch.report_col_failed', lang)} | "
            f"{_t('batch.report_col_pending', lang)} |", "|---|---|---|---:|---:|"]
    for rate in check_rates(cohort):
        todo = f"`{_cell(rate.todo)}`" if rate.todo else "—"
        out.append(f"| `{_cell(rate.id)}` | {todo} | {rate.lesson} | {_share(rate.stuck, rate.total, lang)} | "
                   f"{_share(rate.pending, rate.total, lang)} |")

    if failed:
        out += ["", f"## {_cell(_t('batch.report_errors', lang))}", ""]
        for entry in failed:
            reason = i18n.localize(entry.record.error_reason(), lang)
            out.append(f"- `{_cell(entry.record.learner)}`: {_cell(reason)}")
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
