"""The graders' own hooks never show up as the learner's fault: a module without the layer a
hook watches is told which layer is missing (not "your code raised AttributeError"), and a
correct attention written as a loop over heads is read head by head (no internal grader error)."""

from __future__ import annotations

from support.grading import failed
from support.variants import solution_files

from autograder.core.i18n import feedback_text
from autograder.core.results import Status

UNFUSED = """            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, nh, T, T)
            ### END SOLUTION
            ### BEGIN SOLUTION mask
            #: pon -inf en att donde la máscara causal vale 0.
            #: Recorta antes self.mask a las T posiciones reales ([:, :, :T, :T]); mira
            #: Tensor.masked_fill.
            att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
            ### END SOLUTION
            # Cada fila es una distribución sobre las claves: el futuro, con -inf, recibe 0.
            att = F.softmax(att, dim=-1)
            att = self.attn_drop(att)
            y = att @ v  # (B, nh, T, T) @ (B, nh, T, hs) -> (B, nh, T, hs)
"""
PER_HEAD = """            heads = []
            for h in range(self.n_head):
                a = (q[:, h] @ k[:, h].transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, T, T)
                a = a.masked_fill(self.mask[0, 0, :T, :T] == 0, float("-inf"))
                a = self.attn_drop(F.softmax(a, dim=-1))
                heads.append(a @ v[:, h])  # (B, T, hs)
            y = torch.stack(heads, dim=1)  # (B, nh, T, hs)
"""


def test_a_module_without_attn_drop_is_told_the_layer_it_lacks(course, grade_files):
    source = solution_files(course.lesson("03"))["attention.py"]
    lines = [line for line in source.splitlines(True) if "self.attn_drop = " not in line]
    source = "".join(lines).replace("att = self.attn_drop(att)", "att = att")
    assert "attn_drop" not in source
    result = grade_files({"attention.py": source})
    texts = {c.id: feedback_text(c.feedback, "es") for c in failed(result)}
    assert texts, "a missing attn_drop must cost something"
    assert not any("AttributeError" in t or "interno" in t.lower() for t in texts.values()), texts
    assert any("no tiene la capa `attn_drop`" in t for t in texts.values()), texts


def test_a_loop_over_heads_gets_no_internal_grader_error(course, grade_files):
    source = solution_files(course.lesson("03"))["attention.py"]
    plain = source  # markers are stripped: the block is found without them
    unfused = (
        "\n".join(line for line in UNFUSED.splitlines() if "###" not in line and "#:" not in line) + "\n"
    )
    assert plain.count(unfused) == 1, "the solution's unfused block changed: update UNFUSED"
    result = grade_files({"attention.py": plain.replace(unfused, PER_HEAD)})
    errors = {c.id: feedback_text(c.feedback, "en") for c in result.checks if c.status is Status.ERROR}
    assert not errors, errors
    by_id = {c.id: c for c in result.checks}
    for check in (
        "weights-causal",
        "scaling",
        "heads-split",
        "heads-merge",
        "reference-parity",
        "future-leak",
    ):
        assert by_id[check].status is Status.PASSED, (check, feedback_text(by_id[check].feedback, "es"))
