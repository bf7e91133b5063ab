"""Pairs of learners compared on a lesson's own code, and which pairs stand out.

The comparison is copydetect's (MIT, https://github.com/blingenf/copydetect): the code is
tokenised with Pygments and filtered (every name becomes V, every function name F, strings S,
comments and whitespace dropped, so renaming variables or re-laying code out changes nothing),
then fingerprinted by winnowing its k-grams (Schleimer, Wilkerson and Aiken, SIGMOD 2003). The
fingerprints of the lesson's exercise stubs are boilerplate: what the stub hands out never
counts as alike. copydetect's own similarity (the share of each side's fingerprinted code found
in the other, and the matching lines) is reported as it is.

A pair's score weighs each shared fingerprint by how rare it is in the cohort's lesson, as a
search engine weighs words: w = ln(N / n), N the learners compared and n those whose code holds
that fingerprint. What every learner writes (the natural way to write a TODO) weighs 0, what only
two learners share weighs most. The score is the mean, over the pair's two sides, of the weight
of the side's fingerprints found in the other over the weight of all its fingerprints: 1 for
identical code (renamed or re-laid out), near 0 for code that shares only what everyone writes.

Short TODOs are alike by nature (there are few ways to write `return x @ w`), and a learner who
wrote the lesson the most common way is alike to many: no fixed score means "copied". A pair is
judged against the lesson's own distribution, in two steps:

    residual = score - max(typical(a), typical(b))
    z = (residual - median) / (1.4826 * MAD)      over all the lesson's pairs

where typical(x) is the median of x's scores with every other learner (how alike x is to
everyone), and median and MAD (the median absolute deviation) are the residuals'. 1.4826 * MAD
estimates the standard deviation of normal data, so z reads like a z-score, and a few copied pairs
move neither the medians nor the MAD. When more than half the residuals are equal (MAD = 0) the
scale is 1.2533 * their mean absolute deviation instead (Iglewicz and Hoaglin, 1993); when that is
0 too, every pair is as alike as its learners are to everyone and none stands out. Defaults: a pair
is flagged at z >= 3.5 (Iglewicz and Hoaglin's cut for outliers; `--z`), and only in a lesson with
at least MIN_PAIRS pairs (`--min-pairs`; fewer pairs make no distribution: the scores are listed,
and shared commits are flagged all the same). A learner with no own code in a lesson (the stubs as
handed out, or no files) is in no pair of it.
"""

from __future__ import annotations

import bisect
import io
import logging
import math
import os
import statistics
from dataclasses import dataclass, field

from autograder.similarity.own_code import OwnCode

# copydetect's k (its "noise threshold", in characters of the filtered code: about 6 to 10
# tokens) and winnowing window. Smaller than its defaults (25, window 1) because the TODOs are
# short: a one-line TODO filters to ~20 characters, and k-grams longer than a statement are lost
# when statements are reordered.
K = 12
WINDOW = 1
Z_THRESHOLD = 3.5
MIN_PAIRS = 6
_MAD_SCALE = 1.4826
_MEAN_AD_SCALE = 1.2533


@dataclass
class Fingerprint:
    own: OwnCode
    print: object | None  # copydetect.CodeFingerprint; None when there is no code to fingerprint

    @property
    def empty(self) -> bool:
        return self.print is None or not self.print.hashes


@dataclass
class Pair:
    lesson: str
    a: str
    b: str
    score: float  # the rarity-weighted share (see the module docstring), what is flagged
    similarity_a: float  # copydetect's: share of a's fingerprinted code found in b
    similarity_b: float
    lines_a: list[int] = field(default_factory=list)  # indexes into a's OwnCode.lines that match
    lines_b: list[int] = field(default_factory=list)
    residual: float = 0.0  # score - the larger of the two learners' typical scores
    z: float | None = None
    flagged_code: bool = False
    shared_commits: list[str] = field(default_factory=list)

    @property
    def flagged(self) -> bool:
        return self.flagged_code or bool(self.shared_commits)


@dataclass
class Distribution:
    pairs: int
    median: float | None  # of the residuals
    scale: float | None  # the z-score's denominator; 0 when every residual is the same
    threshold: float  # the z a pair must reach
    min_pairs: int
    score_median: float | None = None  # of the scores themselves, for the report
    typical: dict[str, float] = field(default_factory=dict)

    @property
    def usable(self) -> bool:
        return self.pairs >= self.min_pairs and bool(self.scale)


def _copydetect():
    # copydetect imports matplotlib.pyplot at import time: never a window, whatever the session.
    os.environ.setdefault("MPLBACKEND", "Agg")
    import copydetect

    root = logging.getLogger()
    if not any(isinstance(f, _QuietCopydetect) for f in root.filters):
        root.addFilter(_QuietCopydetect())
    return copydetect


class _QuietCopydetect(logging.Filter):
    """copydetect warns on the root logger for every file it cannot tokenise; the report says
    what it needs to, so its warnings are dropped (only its own)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "copydetect" not in record.pathname


def fingerprint(own: OwnCode, boilerplate, *, k: int = K, window: int = WINDOW) -> Fingerprint:
    if not own.lines:
        return Fingerprint(own, None)
    cd = _copydetect()
    text = own.text
    found = cd.CodeFingerprint(
        "own.py", k, window, boilerplate=boilerplate, language="python", fp=io.StringIO(text)
    )
    return Fingerprint(own, found)


def boilerplate(stubs: dict[str, str], *, k: int = K, window: int = WINDOW):
    """The fingerprints of the lesson's exercise stubs, all of them (window 1: every k-gram)."""
    import numpy as np

    cd = _copydetect()
    hashes: set[int] = set()
    for text in stubs.values():
        if text.strip():
            hashes |= set(cd.CodeFingerprint("stub.py", k, 1, language="python", fp=io.StringIO(text)).hashes)
    return np.array(sorted(hashes), dtype=np.int64)


def score(
    first: Fingerprint, second: Fingerprint, weights: dict[int, float], totals: dict[str, float]
) -> float:
    """The pair's rarity-weighted share (see the module docstring)."""
    shared = first.print.hashes & second.print.hashes
    if not shared:
        return 0.0
    common = sum(weights[h] for h in shared)
    mine = [totals[side.own.learner] for side in (first, second)]
    return round(min(1.0, sum(common / total for total in mine if total > 0) / 2), 4)


def detail(pair: Pair, first: Fingerprint, second: Fingerprint) -> None:
    """copydetect's own similarity of the pair and the lines that match, on each side."""
    if not first.print.hashes & second.print.hashes:
        return
    _, (sim_a, sim_b), (slices_a, slices_b) = _copydetect().compare_files(first.print, second.print)
    pair.similarity_a, pair.similarity_b = round(min(1.0, float(sim_a)), 4), round(min(1.0, float(sim_b)), 4)
    pair.lines_a = matched_lines(first.own.text, slices_a)
    pair.lines_b = matched_lines(second.own.text, slices_b)


def rarity(prints: list[Fingerprint]) -> dict[int, float]:
    """{fingerprint: ln(N / n)} over the learners compared (see the module docstring)."""
    counts: dict[int, int] = {}
    for found in prints:
        for h in found.print.hashes:
            counts[h] = counts.get(h, 0) + 1
    total = len(prints)
    return {h: math.log(total / n) for h, n in counts.items()}


def matched_lines(text: str, slices) -> list[int]:
    """The indexes of the lines of `text` that a copied slice (character offsets) touches."""
    if len(slices) == 0 or len(slices[0]) == 0:
        return []
    starts, position = [], 0
    for row in text.split("\n"):
        starts.append(position)
        position += len(row) + 1
    found: set[int] = set()
    for start, end in zip(slices[0], slices[1]):
        first = bisect.bisect_right(starts, int(start)) - 1
        last = bisect.bisect_right(starts, max(int(start), int(end) - 1)) - 1
        found.update(range(max(0, first), last + 1))
    count = text.count("\n")
    return sorted(index for index in found if index < count)


@dataclass
class Comparison:
    pairs: list[Pair]
    left_out: list[str]  # learners with no own code in the lesson
    distribution: Distribution


def compare_lesson(
    lesson: str,
    owns: list[OwnCode],
    stubs: dict[str, str],
    *,
    threshold: float = Z_THRESHOLD,
    min_pairs: int = MIN_PAIRS,
    shown: int = 10,
    k: int = K,
    window: int = WINDOW,
) -> Comparison:
    """Every pair of learners with own code in `lesson` scored and judged; copydetect's
    similarity and matching lines worked out for the flagged pairs and the `shown` highest
    others (what the report shows: the pairwise comparison of every pair costs 20 times more)."""
    common = boilerplate(stubs, k=k, window=window)
    prints = [fingerprint(own, common, k=k, window=window) for own in owns]
    compared = [p for p in prints if not p.empty]
    left_out = [p.own.learner for p in prints if p.empty]
    weights = rarity(compared)
    totals = {p.own.learner: sum(weights[h] for h in p.print.hashes) for p in compared}
    pairs, sides = [], {}
    for i, first in enumerate(compared):
        for second in compared[i + 1 :]:
            pair = Pair(
                lesson, first.own.learner, second.own.learner, score(first, second, weights, totals), 0.0, 0.0
            )
            pairs.append(pair)
            sides[(pair.a, pair.b)] = (first, second)
    dist = distribution(pairs, threshold=threshold, min_pairs=min_pairs)
    flag(pairs, dist)
    ranked = sorted(pairs, key=lambda pair: (-pair.score, pair.a, pair.b))
    for pair in [p for p in ranked if p.flagged_code] + [p for p in ranked if not p.flagged_code][:shown]:
        detail(pair, *sides[(pair.a, pair.b)])
    return Comparison(pairs, left_out, dist)


def distribution(
    pairs: list[Pair], *, threshold: float = Z_THRESHOLD, min_pairs: int = MIN_PAIRS
) -> Distribution:
    """The lesson's distribution (see the module docstring); sets each pair's residual."""
    if not pairs:
        return Distribution(0, None, None, threshold, min_pairs)
    rows: dict[str, list[float]] = {}
    for pair in pairs:
        rows.setdefault(pair.a, []).append(pair.score)
        rows.setdefault(pair.b, []).append(pair.score)
    typical = {learner: statistics.median(scores) for learner, scores in rows.items()}
    for pair in pairs:
        pair.residual = round(pair.score - max(typical[pair.a], typical[pair.b]), 4)
    residuals = [pair.residual for pair in pairs]
    median = statistics.median(residuals)
    deviations = [abs(value - median) for value in residuals]
    scale = _MAD_SCALE * statistics.median(deviations)
    if scale == 0:
        scale = _MEAN_AD_SCALE * statistics.fmean(deviations)
    return Distribution(
        len(pairs),
        median,
        scale,
        threshold,
        min_pairs,
        statistics.median(pair.score for pair in pairs),
        typical,
    )


def flag(pairs: list[Pair], dist: Distribution) -> None:
    """Each pair's z, and whether its code stands out (see the module docstring)."""
    for pair in pairs:
        if dist.median is None or not dist.scale:
            pair.z = None if dist.median is None else 0.0
            continue
        pair.z = round((pair.residual - dist.median) / dist.scale, 2)
        pair.flagged_code = dist.usable and pair.z >= dist.threshold
