"""The tables of a mutation run, from its store alone (bench/mutation/store.py).

    mutation score = killed / (mutants - equivalent)
    blame score    = killed mutants whose failed checks name only the mutated TODO or wait on
                     it (runner.judge's blame_ok), over the killed mutants whose grading finished

"killed" counts every mutant whose lesson was not completed, a grading that did not finish
(timeout, crashed, internal) included; those have no failed checks, so the blame score leaves
them out and the report lists them. "equivalent" counts the survivors the oracle found
equivalent on its probes; a survivor the oracle has not judged (unavailable) counts as a gap
until it has (the score can only go up once it is judged).
"""

from __future__ import annotations

from collections.abc import Iterable

from .runner import KILLED

__all__ = ["render", "summarise"]

WIDTH = 110  # before -> after snippets are cut to fit a line


def summarise(records: Iterable[dict]) -> dict:
    """Counts for one group of lines: mutants, killed, survived, equivalent, gaps, unjudged,
    unfinished, blame_judged, blame_ok, score, blame."""
    rows = list(records)
    killed = [r for r in rows if r.get("status") in KILLED]
    survived = [r for r in rows if r.get("status") == "survived"]
    equivalent = [r for r in survived if _verdict(r) == "equivalent"]
    unjudged = [r for r in survived if _verdict(r) == "unjudged"]
    judged = [r for r in killed if r.get("status") == "killed"]
    ok = [r for r in judged if r.get("blame_ok")]
    live = len(rows) - len(equivalent)
    return {
        "mutants": len(rows),
        "killed": len(killed),
        "survived": len(survived),
        "equivalent": len(equivalent),
        "gaps": len(survived) - len(equivalent) - len(unjudged),
        "unjudged": len(unjudged),
        "unfinished": len(killed) - len(judged),
        "blame_judged": len(judged),
        "blame_ok": len(ok),
        "score": len(killed) / live if live else None,
        "blame": len(ok) / len(judged) if judged else None,
    }


def render(
    records: dict[str, dict],
    *,
    title: str,
    stale: set[str] = frozenset(),
    run_log: list[dict] = (),
    skipped_lines: int = 0,
    todo_order: dict[str, int] | None = None,
) -> str:
    """The report as text: per lesson, per TODO, per operator, then the survivors, the
    misblamed kills and the gradings that did not finish."""
    rows = sorted(records.values(), key=lambda r: _order(r["id"]))
    out = [title, ""]
    wall = sum(float(entry.get("wall_s", 0)) for entry in run_log)
    graded = sum(int(entry.get("mutants", 0)) for entry in run_log)
    rate = f"{60 * graded / wall:.1f} mutants/min" if wall else "-"
    out.append(
        f"{len(rows)} mutants judged; grading wall time over the run log: {wall / 60:.1f} min for "
        f"{graded} gradings ({rate}); grading seconds per mutant (median): {_median(rows):.1f}"
    )
    if stale:
        out.append(
            f"{len(stale)} lines were made under other graders or from another solution text than "
            "today's (stale): rerun the same command to grade them again"
        )
    if skipped_lines:
        out.append(f"{skipped_lines} unreadable lines in results.jsonl were skipped")
    out.append("")

    out.append("Per lesson")
    out += _table(rows, key=lambda r: r["lesson"], label="lesson")
    out.append("")
    out.append("Per TODO")
    out += _table(rows, key=lambda r: f"{r['lesson']} {r['todo']}", label="lesson todo", order=todo_order)
    out.append("")
    out.append("Per operator")
    out += _table(rows, key=lambda r: r["operator"], label="operator", sort=False)
    out.append("")

    survivors = [r for r in rows if r.get("status") == "survived"]
    out.append(f"Survivors ({len(survivors)})")
    for r in survivors:
        out.append(f"  {r['id']}  line {r['line']}  {_change(r)}")
        out.append(f"      oracle: {_verdict_text(r)}")
    out.append("")

    misblamed = [r for r in rows if r.get("status") == "killed" and not r.get("blame_ok")]
    out.append(f"Killed but blamed elsewhere ({len(misblamed)}): failed checks as check[todo](waits on)")
    for r in misblamed:
        checks = ", ".join(
            f"{c['check']}[{c['todo']}]" + (f"(waits {c['waits_on']})" if c.get("waits_on") else "")
            for c in r.get("failed", [])
        )
        out.append(f"  {r['id']}  line {r['line']}  {_change(r)}")
        out.append(f"      {checks}")
    out.append("")

    unfinished = [r for r in rows if r.get("status") in KILLED and r.get("status") != "killed"]
    out.append(f"Gradings that did not finish ({len(unfinished)}): counted as killed, no blame judged")
    for r in unfinished:
        detail = (r.get("detail") or "").strip().splitlines()
        out.append(f"  {r['id']}  {r['status']}  {_change(r)}  {detail[0] if detail else ''}"[: WIDTH + 40])
    traced = [r["id"] for r in rows if r.get("raw_traceback")]
    if traced:
        out.append("")
        out.append(
            f"Checks of the mutated TODO that show a raw traceback ({len(traced)}): {', '.join(traced)}"
        )
    return "\n".join(out).rstrip() + "\n"


def _table(
    rows: list[dict], key, label: str, sort: bool = True, order: dict[str, int] | None = None
) -> list[str]:
    """One row per group (sorted by name, by `order` where it knows the name, or by size when
    `sort` is False), then "all"."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(key(r), []).append(r)
    if order is not None:
        names = sorted(groups, key=lambda name: (order.get(name, len(order)), name))
    else:
        names = sorted(groups) if sort else sorted(groups, key=lambda name: -len(groups[name]))
    header = (
        f"  {label:<28} {'mutants':>7} {'killed':>6} {'surv':>5} {'equiv':>5} {'gaps':>5} "
        f"{'unjdg':>5} {'unfin':>5} {'score':>7} {'blame':>7}"
    )
    lines = [header]
    for name in [*names, "all"]:
        s = summarise(rows if name == "all" else groups[name])
        lines.append(
            f"  {name:<28} {s['mutants']:>7} {s['killed']:>6} {s['survived']:>5} {s['equivalent']:>5} "
            f"{s['gaps']:>5} {s['unjudged']:>5} {s['unfinished']:>5} {_pct(s['score']):>7} {_pct(s['blame']):>7}"
        )
    return lines


def _verdict(r: dict) -> str:
    verdict = r.get("oracle")
    if not isinstance(verdict, dict) or verdict.get("error") == "oracle unavailable":
        return "unjudged"
    return "equivalent" if verdict.get("equivalent") else "gap"


def _verdict_text(r: dict) -> str:
    verdict = r.get("oracle")
    kind = _verdict(r)
    if kind == "unjudged":
        return "not judged (oracle unavailable)" if isinstance(verdict, dict) else "not judged yet"
    if kind == "equivalent":
        return f"equivalent on {verdict.get('probes')} probes"
    what = verdict.get("difference") or verdict.get("error") or "differs"
    return f"GAP: {' '.join(str(what).split())}"[: WIDTH + 40]


def _change(r: dict) -> str:
    before = " ".join(str(r.get("before", "")).split())
    after = " ".join(str(r.get("after", "")).split())
    half = WIDTH // 2 - 4
    cut = lambda text: text if len(text) <= half else text[: half - 3] + "..."  # noqa: E731
    return f"{cut(before)!r} -> {cut(after)!r}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _median(rows: list[dict]) -> float:
    values = sorted(float(r.get("seconds", 0)) for r in rows)
    return values[len(values) // 2] if values else 0.0


def _order(ident: str) -> tuple:
    lesson, todo, operator, n = (ident.split(":") + ["", "", "", "0"])[:4]
    return (lesson, todo, operator, int(n) if n.isdigit() else 0)
