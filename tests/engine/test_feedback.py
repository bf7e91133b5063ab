"""autograder/engine/feedback.py: what a learner reads when a value is wrong."""

import numpy as np
import pytest
import torch

from autograder.core.i18n import feedback_text, localize
from autograder.core.results import Block, Feedback, Text
from autograder.engine import feedback as F


def keys(fb: Feedback) -> list[str]:
    return [p.key for p in fb.parts if isinstance(p, Text)]


def es(fb: Feedback) -> str:
    return feedback_text(fb, "es")


@pytest.fixture
def x() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)


# --- compare --------------------------------------------------------------------------------


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_close_values_give_none(x, lib):
    wrap = torch.from_numpy if lib == "torch" else np.asarray
    assert F.compare(wrap(x + 1e-7), wrap(x), what="y") is None
    assert F.compare(wrap(x), wrap(x), what="y", atol=0, rtol=0) is None


def test_matching_nan_and_inf_are_close():
    e = np.array([[0.0, -np.inf], [np.nan, 1.0]])
    assert F.compare(e.copy(), e, what="y") is None


def test_numpy_and_torch_float32_are_the_same_dtype(x):
    assert F.compare(torch.from_numpy(x), x, what="y") is None


def test_shape_mismatch_reports_both_shapes():
    fb = F.compare(np.zeros((2, 3)), np.zeros((2, 4)), what="la salida")
    assert keys(fb) == ["feedback.shape_mismatch"]
    assert es(fb) == "Forma incorrecta en la salida: es (2, 3), pero debería ser (2, 4)."


def test_swapped_axes_get_a_transpose_hint(x):
    fb = F.compare(torch.from_numpy(x).transpose(1, 2), torch.from_numpy(x), what="q")
    assert keys(fb) == ["feedback.shape_mismatch", "feedback.shape_swapped"]
    assert "(2, 4, 3, 5)" in es(fb) and "(2, 3, 4, 5)" in es(fb)
    assert "ejes 1 y 2" in es(fb)


def test_other_permutations_get_a_permute_hint(x):
    fb = F.compare(x.transpose(1, 2, 3, 0), x, what="q")
    assert keys(fb) == ["feedback.shape_mismatch", "feedback.shape_permuted"]


def test_same_numel_gets_a_view_hint(x):
    fb = F.compare(x.reshape(6, 20), x, what="q")
    assert keys(fb) == ["feedback.shape_mismatch", "feedback.shape_same_numel"]
    assert "120" in es(fb)


def test_dtype_mismatch(x):
    fb = F.compare(torch.from_numpy(x).double(), torch.from_numpy(x), what="y")
    assert keys(fb) == ["feedback.dtype_mismatch"]
    assert "float64" in es(fb) and "float32" in es(fb)


def test_dtype_and_values_both_reported(x):
    fb = F.compare(x.astype(np.float64) + 1, x, what="y")
    assert keys(fb) == ["feedback.dtype_mismatch", "feedback.values_differ", "feedback.max_error"]


def test_nan_counts_and_first_index(x):
    y = x.copy()
    y[1, 2, 3, 4] = np.nan
    y[0, 1, 0, 0] = np.nan
    fb = F.compare(torch.from_numpy(y), torch.from_numpy(x), what="los pesos")
    assert keys(fb) == ["feedback.nan_present", "feedback.nonfinite_hint"]
    assert "2 de 120" in es(fb)
    assert "[0, 1, 0, 0]" in es(fb)


def test_unexpected_inf(x):
    y = x.copy()
    y[0, 0, 0, 3] = -np.inf
    fb = F.compare(y, x, what="y")
    assert keys(fb) == ["feedback.inf_present", "feedback.nonfinite_hint"]
    assert "[0, 0, 0, 3]" in es(fb) and "-inf" in es(fb)


def test_values_differ_names_the_worst_element(x):
    y = x.copy()
    y[1, 2, 3, 4] += 0.5
    y[0, 0, 0, 0] += 0.01
    fb = F.compare(torch.from_numpy(y), torch.from_numpy(x), what="la salida de forward(x)")
    assert keys(fb) == ["feedback.values_differ", "feedback.max_error"]
    text = es(fb)
    assert "la salida de forward(x)" in text
    assert "2 de 120" in text
    # atol is applied in units of the largest |expected| (here about 2.5)
    assert f"atol={F.fmt_number(1e-5 * float(np.abs(x).max()))}, rtol=1e-5" in text
    assert "El mayor error absoluto es 0.5, en el índice [1, 2, 3, 4]" in text
    assert f"obtienes {F.fmt_number(y[1, 2, 3, 4])} y se esperaba {F.fmt_number(x[1, 2, 3, 4])}" in text


def test_tolerance_is_the_one_given(x):
    x = x / np.abs(x).max()  # values of order 1: atol applies as given
    y = x + 1e-3
    assert F.compare(y, x, what="y", atol=1e-2) is None
    fb = F.compare(y, x, what="y", atol=1e-4, rtol=0)
    assert "atol=0.0001, rtol=0" in es(fb)


def test_atol_grows_with_the_scale_of_the_expected_values():
    """float32 rounding follows the size of the terms: logits reaching 13 may miss an element
    near 0 by 1.25e-5 (a correct KV cache did, on one seed); values of order 1 keep atol."""
    logits = np.array([13.0, -0.0777, 2.0])
    rounded = logits + np.array([0.0, 1.25e-5, 0.0])
    assert F.compare(rounded, logits, what="y") is None
    far = logits + np.array([0.0, 2e-4, 0.0])  # beyond 1e-5 * 13: a real difference
    fb = F.compare(far, logits, what="y")
    assert keys(fb) == ["feedback.values_differ", "feedback.max_error"]
    assert "atol=0.00013, rtol=1e-5" in es(fb)
    small = np.array([0.5, -0.0777, 0.2])
    assert F.compare(small + np.array([0.0, 1.25e-5, 0.0]), small, what="y") is not None
    assert F.tolerance_scale(np.array([np.nan, -np.inf, 0.25])) == 1.0
    assert F.tolerance_scale(np.array([np.inf, -13.0])) == 13.0


def test_minus_1e9_against_minus_inf_is_a_value_difference():
    mask = np.triu(np.full((3, 3), -np.inf), 1)
    fb = F.compare(np.triu(np.full((3, 3), -1e9), 1), mask, what="la máscara")
    assert keys(fb) == ["feedback.values_differ", "feedback.max_error"]
    assert "obtienes -1e9 y se esperaba -inf" in es(fb)


@pytest.mark.parametrize(
    "actual, key, shown",
    [([1.0, 2.0], "feedback.not_a_tensor", "`list`"), ("hola", "feedback.not_a_tensor", "`str`")],
)
def test_not_a_tensor(actual, key, shown):
    fb = F.compare(actual, torch.zeros(2), what="y")
    assert keys(fb) == [key] and shown in es(fb)


def test_not_an_array_and_none():
    assert keys(F.compare((1, 2), np.zeros(2), what="y")) == ["feedback.not_an_array"]
    fb = F.compare(None, np.zeros(2), what="y")
    assert keys(fb) == ["feedback.returned_none"] and "return" in es(fb)


def test_scalars_compare_by_value():
    assert F.compare(15, 15, what="n") is None
    assert F.compare(np.int64(15), 15.0, what="n") is None
    assert F.compare(torch.tensor(15.0), 15, what="n") is None
    fb = F.compare(14, 15, what="el número de aristas")
    assert keys(fb) == ["feedback.scalar_differs"]
    assert es(fb).startswith("Para el número de aristas obtienes 14, pero se esperaba 15")
    assert keys(F.compare("15", 15, what="n")) == ["feedback.not_a_number"]


def test_what_may_be_a_localised_text(x):
    what = {"es": "la salida", "en": "the output"}
    fb = F.compare(x[:1], x, what=what)
    assert "the output" in feedback_text(fb, "en") and "la salida" in es(fb)


def test_bool_masks_compare():
    mask = torch.tril(torch.ones(4, 4, dtype=torch.bool))
    assert F.compare(mask.clone(), mask, what="m") is None
    assert keys(F.compare(~mask, mask, what="m")) == ["feedback.values_differ", "feedback.max_error"]


def test_fmt_number():
    assert F.fmt_number(0.123456) == "0.1235"
    assert F.fmt_number(1e-5) == "1e-5"
    assert F.fmt_number(123456.0) == "1.235e5"
    assert F.fmt_number(3.0) == "3"
    assert F.fmt_number(12345678) == "12345678"
    assert F.fmt_number(np.float32(-0.0)) == "0"
    assert F.fmt_number(float("nan")) == "nan"
    assert F.fmt_number(-np.inf) == "-inf"
    assert F.fmt_number(True) == "True"


# --- attention matrices ---------------------------------------------------------------------


def causal_weights(t: int) -> np.ndarray:
    w = np.tril(np.ones((t, t)))
    return w / w.sum(-1, keepdims=True)


def test_leaking_cells_only_above_the_diagonal():
    w = causal_weights(4)
    assert not F.leaking_cells(w).any()
    w[1, 3] = 0.2
    w[3, 0] = 0.0  # below the diagonal: zero or not, never a leak
    assert F.leaking_cells(w).tolist() == [
        [False, False, False, False],
        [False, False, False, True],
        [False, False, False, False],
        [False, False, False, False],
    ]


def test_leaking_cells_reduces_leading_dims_and_respects_tol():
    w = torch.from_numpy(np.stack([causal_weights(3)] * 4)).reshape(2, 2, 3, 3).clone()
    w[1, 0, 0, 2] = 1e-3
    assert F.leaking_cells(w).shape == (3, 3)
    assert F.leaking_cells(w)[0, 2] and F.leaking_cells(w).sum() == 1
    assert not F.leaking_cells(w, tol=1e-2).any()


def test_heatmap_marks_leaks_and_nan():
    w = causal_weights(4)
    w[0, 2] = 0.5
    w[3, 1] = np.nan
    block = F.heatmap(w, leaks=F.leaking_cells(w))
    assert isinstance(block, Block) and block.kind == "heatmap"
    lines = block.text.splitlines()
    assert lines[0] == "i\\j 0 1 2 3"
    assert lines[1] == "  0 @   X  "  # weight 1 on the diagonal, a leak at j=2
    assert lines[4][-7:] == "- ? - -"
    # The grid is language-neutral; its legend is a catalog message that follows --lang.
    assert block.text == F.heatmap(w, leaks=F.leaking_cells(w), lang="en").text
    legend = F.heatmap_legend()
    assert "X = fuga" in localize(legend, "es") and "X = leak" in localize(legend, "en")


def test_heatmap_without_leaks_has_no_marks():
    body = F.heatmap(causal_weights(5)).text.splitlines()[1:6]
    assert not any("X" in line for line in body)


def test_heatmap_crops_large_matrices():
    t = 20
    w = torch.from_numpy(causal_weights(t))
    w[0, t - 1] = 0.5  # outside the crop
    block = F.heatmap(w, leaks=F.leaking_cells(w), max_size=12)
    lines = block.text.splitlines()
    assert lines[0].split() == ["i\\j"] + [str(j) for j in range(12)]
    assert [line.split()[0] for line in lines[1:13]] == [str(i) for i in range(12)]
    assert "12" in lines[13] and "20×20" in lines[13]
    assert "X" not in "\n".join(lines[1:13])


def test_heatmap_rejects_non_matrices():
    with pytest.raises(ValueError):
        F.heatmap(np.zeros((2, 3, 3)))


# --- tracebacks -----------------------------------------------------------------------------


FRAMES = [
    {"filename": "/srv/autograder/sandbox/worker/run.py", "lineno": 10, "name": "call", "line": "fn(*args)"},
    {"filename": "/tmp/sub-x1/attention.py", "lineno": 57, "name": "forward", "line": "    y = q @ k\n"},
    {"filename": "/tmp/sub-x1/lib/util.py", "lineno": 3, "name": "helper", "line": "return a.t()"},
    {
        "filename": "/usr/lib/python3/site-packages/torch/functional.py",
        "lineno": 99,
        "name": "mm",
        "line": "",
    },
]


def test_student_frames_keeps_the_submission_only():
    frames = F.student_frames(FRAMES, "/tmp/sub-x1/")
    assert [(f["filename"], f["lineno"]) for f in frames] == [("attention.py", 57), ("lib/util.py", 3)]
    assert FRAMES[1]["filename"] == "/tmp/sub-x1/attention.py"  # input untouched


def test_student_frames_not_fooled_by_a_prefix():
    frames = F.student_frames(
        [{"filename": "/tmp/sub-x10/a.py", "lineno": 1, "name": "f", "line": ""}], "/tmp/sub-x1"
    )
    assert frames[0]["filename"] == "/tmp/sub-x10/a.py"  # the last frame, not made relative


def test_student_frames_falls_back_to_the_last_frame():
    assert F.student_frames(FRAMES, "/elsewhere") == [FRAMES[-1]]
    assert F.student_frames([], "/elsewhere") == []


def test_format_traceback_is_compact():
    frames = F.student_frames(FRAMES, "/tmp/sub-x1")
    block = F.format_traceback(frames, "RuntimeError", "mat1 and mat2 shapes cannot be multiplied")
    assert block.kind == "traceback"
    assert block.text == (
        "  attention.py:57 · forward()\n"
        "    y = q @ k\n"
        "  lib/util.py:3 · helper()\n"
        "    return a.t()\n"
        "RuntimeError: mat1 and mat2 shapes cannot be multiplied\n"
    )


def test_format_traceback_truncates_long_messages():
    block = F.format_traceback([], "ValueError", "x" * 5000)
    last = block.text.splitlines()[-1]
    assert last.startswith("ValueError: x") and last.endswith("…")
    assert len(last) <= len("ValueError: ") + F.TRACEBACK_MESSAGE_LIMIT


def test_student_errors_are_trimmed_and_pending_todos_named():
    from autograder.engine.checks import describe_student_error
    from autograder.sandbox.client import StudentError

    fb = describe_student_error(StudentError("RuntimeError", "boom", FRAMES, "/tmp/sub-x1"), "mask", {})
    assert keys(fb) == ["engine.student_raised"]
    assert "/srv/autograder" not in es(fb) and "attention.py:57" in es(fb)
    pending = StudentError("NotImplementedError", "TODO [mask] pendiente: x", FRAMES, "/tmp/sub-x1")
    assert es(describe_student_error(pending, "mask", {"mask": {"es": "la máscara"}})).startswith(
        "TODO [mask] pendiente: la máscara"
    )


# --- text hygiene ---------------------------------------------------------------------------


def test_truncate():
    assert F.truncate("abc", 3) == "abc"
    assert F.truncate("abcdef", 4) == "abc…"
    assert len(F.truncate("a" * 100, 10)) == 10


def test_redact_replaces_every_occurrence_of_long_secrets():
    text = "token=ghp_abcdef123 again ghp_abcdef123, short=abc"
    out = F.redact(text, ["ghp_abcdef123", "abc", ""])
    assert out == "token=*** again ***, short=abc"
    # A secret containing another one is hidden whole.
    assert F.redact("xx supersecret99 xx", ["secret99", "supersecret99"]) == "xx *** xx"


def test_secrets_from_environ():
    env = {
        "GITHUB_TOKEN": "ghp_123456789",
        "my_api_key": "k-abcdef",
        "DB_PASSWORD": "hunter22",
        "SESSION_COOKIE": "c00kie!",
        "AWS_SECRET_ACCESS_KEY": "s3cr3tvalue",
        "AUTH_HEADER": "Bearer xyz",
        "SHORT_TOKEN": "abc",  # too short to redact safely
        "HOME": "/home/learner",
        "PATH": "/usr/bin",
    }
    found = F.secrets_from_environ(env)
    assert set(found) == {"ghp_123456789", "k-abcdef", "hunter22", "c00kie!", "s3cr3tvalue", "Bearer xyz"}
    assert F.redact("push with ghp_123456789 from /home/learner", found) == "push with *** from /home/learner"


# --- numbers side by side never print alike when they differ -----------------------------


@pytest.mark.parametrize(
    "got, expected",
    [(0.1454551, 0.1454553), (np.float32(0.3), 0.30000001), (1e-9 + 1.0, 1.0), (-2.00000001, -2.0)],
)
def test_a_pair_that_differs_prints_differently(got, expected):
    a, e = F.fmt_pair(got, expected)
    assert a != e, (a, e)
    assert float(a) != float(e)


def test_a_pair_that_is_equal_prints_alike_and_short():
    assert F.fmt_pair(0.5, 0.5) == ("0.5", "0.5")
    assert F.fmt_pair(3, 3.0) == ("3", "3")
    assert F.fmt_pair(float("nan"), float("nan")) == ("nan", "nan")


def test_a_scalar_that_differs_past_four_digits_is_shown_with_the_digits_that_differ():
    fb = F.compare(np.float64(0.14545512), np.float64(0.14545519), what="la norma", atol=0, rtol=0)
    text = feedback_text(fb, "es")
    assert "0.1454551" in text and "0.1454552" in text, text
