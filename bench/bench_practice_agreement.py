"""Practice vs official agreement over EVERY buggy variant of every lesson's catalog (issue 30).

The learner release grades with the hidden graders' checks answered from a recording of
reference values (autograder/engine/recording.py). For each lesson this grades every buggy
variant of tests/lessons/lessonNN_variants.py twice, officially (the live reference, the suite's
seed) and in practice (the graders as the release ships them, with a current recording, at the
practice seed), and prints:

- the agreement table: per lesson, how many variants get the same next step (the TODO to fix
  first) and the same diagnosis (every check that failed officially and that practice could
  judge failed there with the same catalog keys and pictures; no check failed in practice only),
  and, over the checks that failed officially, how many practice told the same, told
  differently, or judged only officially;
- the inventory: per lesson, the checks the recording answered in every grading, in some
  (a reference call on the learner's own values: answered when those values are right), in
  none, and the checks with an official-only part (test_official_*.py, never shipped);
- per variant, the checks that failed officially and that practice judged only officially
  (what the inventory does not allow), and every disagreement, one line each, so that each can
  be explained or fixed.

With --correct, every correct-but-different variant is graded in practice too: a check that
fails there is a practice-only failure (practice must never fail correct code).

The learner's files keep each TODO's stub comments above its code, as a learner who filled in
the stubs has them; --stripped grades the variants as the catalogs write them, without those
comments (a learner who deleted them): in a learner's repository no stubs are made from
solutions, so blame (engine/blame.py) then has less to go on than officially.

Run from the repository root:  python bench/bench_practice_agreement.py [--lesson 03] [--correct]
                                      [--stripped] [--out bench/results/practice-agreement.txt]
About 6 s per variant on 2 cores (two gradings), plus one recording per lesson whose committed
recording is not current. Exit status 1 when any variant disagrees. A bench command, not CI:
tests/lessons/test_practice_agreement.py grades each lesson's PRACTICE_SAMPLE only.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

CHECK_MARK = re.compile(r"""@pytest\.mark\.check\(\s*["']([^"']+)["']""")


def official_only_parts(lesson) -> list[str]:
    """Check ids with a part in a test_official_*.py file of the lesson's graders."""
    from autograder.engine.grading import GRADERS_ROOT

    found = set()
    for path in sorted((GRADERS_ROOT / lesson.graders).glob("test_official_*.py")):
        found.update(CHECK_MARK.findall(path.read_text(encoding="utf-8")))
    return sorted(found)


def percent(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f} %)" if whole else "-"


def bench_lesson(course, lesson, scratch: Path, with_correct: bool, comments: bool, out) -> dict:
    from support import agreement

    row = {"lesson": lesson.id, "variants": 0, "step": 0, "diagnosis": 0, "checks": Counter()}
    inventory = agreement.Inventory(lesson.id)
    lines: list[str] = []
    unanswered: list[str] = []  # official failures practice judged only officially
    start = time.perf_counter()
    release = agreement.release_graders(course, lesson, scratch / "release")
    if release is None:
        row["note"] = "no recording (graders import reference.py, or the solutions fail them)"
        return row | {
            "inventory": inventory,
            "lines": lines,
            "unanswered": unanswered,
            "seconds": time.perf_counter() - start,
        }
    for variant in agreement.catalog(lesson).BUGGY:
        told = agreement.grade_both(course, lesson, variant, release, scratch / "buggy", comments=comments)
        inventory.add(told.practice)
        row["variants"] += 1
        row["step"] += told.same_step
        verdicts = Counter(told.checks.values())
        row["checks"] += verdicts
        if not (verdicts[agreement.DIFFERENT] or verdicts[agreement.PRACTICE_ONLY]):
            row["diagnosis"] += 1
        for line in told.disagreements:
            lines.append(f"{lesson.id}:{variant.name}: {line}")
        skipped = [check for check, verdict in told.checks.items() if verdict == agreement.OFFICIAL_ONLY]
        if skipped:
            unanswered.append(f"{lesson.id}:{variant.name}: {', '.join(skipped)}")
        print(
            f"  {lesson.id}:{variant.name}: step {'same' if told.same_step else 'DIFFERENT'}, "
            + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items())),
            file=out,
            flush=True,
        )
    if with_correct:
        from autograder.engine.grading import grade

        row["correct"], row["correct_ok"] = 0, 0
        for variant in agreement.catalog(lesson).CORRECT:
            files = agreement.learner_files(lesson, variant, comments=comments)
            mine = agreement.learner_repository(course, lesson, files, scratch / "correct" / variant.name)
            with agreement.graders_at(release):
                result = grade(mine, [mine.lesson(lesson.id)]).lessons[0]
            told = agreement.story(mine, mine.lesson(lesson.id), result)
            inventory.add(told)
            failing = [check for check, said in told.checks.items() if said.failing]
            row["correct"] += 1
            row["correct_ok"] += not failing
            for check in failing:
                lines.append(
                    f"{lesson.id}:{variant.name} (correct): practice fails {check} {list(told.checks[check].keys)}"
                )
    row.update(inventory=inventory, lines=lines, unanswered=unanswered, seconds=time.perf_counter() - start)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lesson", action="append", help="a lesson id (repeatable); default every lesson")
    parser.add_argument("--correct", action="store_true", help="also grade every correct variant in practice")
    parser.add_argument(
        "--stripped",
        action="store_true",
        help="grade the variants as the catalogs write them (no TODO comments left in the learner's files) "
        "instead of with each TODO's stub comments kept above its code",
    )
    parser.add_argument("--out", type=Path, help="also write the tables and disagreements to this file")
    args = parser.parse_args()
    from autograder.core.manifest import load_course

    course = load_course(ROOT / "course.yml")
    lessons = [course.lesson(i) for i in args.lesson] if args.lesson else list(course.lessons)
    rows = []
    with tempfile.TemporaryDirectory(prefix="agreement-") as scratch:
        for lesson in lessons:
            print(f"lesson {lesson.id}:", flush=True)
            rows.append(
                bench_lesson(
                    course, lesson, Path(scratch) / lesson.id, args.correct, not args.stripped, sys.stdout
                )
            )

    report = []
    form = "as the catalogs write them, no TODO comments" if args.stripped else "TODO comments kept"
    report.append(f"Practice vs official, every buggy variant ({form}; same next step; same diagnosis):")
    header = f"{'lesson':<7}{'buggy':>6}  {'same TODO':<16}{'same diagnosis':<16}"
    header += f"{'failed officially: same / different / official-only':<54}{'practice-only':>14}"
    header += f"{'correct ok':>14}{'time':>8}"
    report.append(header)
    for row in rows:
        c = row["checks"]
        failed = c["same"] + c["different"] + c["official-only"]
        report.append(
            f"{row['lesson']:<7}{row['variants']:>6}  {percent(row['step'], row['variants']):<16}"
            f"{percent(row['diagnosis'], row['variants']):<16}"
            f"{f'{failed}: ' + ' / '.join(str(c[k]) for k in ('same', 'different', 'official-only')):<54}"
            f"{c['practice-only']:>14}"
            f"{(percent(row['correct_ok'], row['correct']) if 'correct' in row else '-'):>14}"
            f"{row['seconds']:>7.0f}s" + (f"  {row['note']}" if "note" in row else "")
        )
    report.append("")
    report.append(
        "Inventory (checks the recording answered in every grading / in some / in none; official-only parts):"
    )
    for row in rows:
        inv = row["inventory"]
        lesson = course.lesson(row["lesson"])
        ids = [spec.id for spec in lesson.checks]
        always = [i for i in ids if i in inv.answerable and i not in inv.official_only]
        some = [i for i in ids if i in inv.sometimes]
        never = [i for i in ids if i in inv.official_only and i not in inv.answerable]
        report.append(
            f"{row['lesson']}: {len(always)} always, {len(some)} sometimes, {len(never)} never of {len(ids)} checks"
        )
        report.append(f"    sometimes: {', '.join(some) or '-'}")
        report.append(f"    never: {', '.join(never) or '-'}")
        report.append(
            f"    official-only parts (test_official_*.py): {', '.join(official_only_parts(lesson)) or '-'}"
        )
    report.append("")
    unanswered = [line for row in rows for line in row["unanswered"]]
    report.append(f"Failed officially, judged only officially in practice ({len(unanswered)} variants):")
    report += [f"  {line}" for line in unanswered] or ["  none"]
    report.append("")
    lines = [line for row in rows for line in row["lines"]]
    report.append(f"Disagreements ({len(lines)}):")
    report += [f"  {line}" for line in lines] or ["  none"]
    text = "\n".join(report)
    print("\n" + text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
