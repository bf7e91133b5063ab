"""Checks of CharTokenizer: the vocabulary (TODO [vocab]) and encode/decode (TODO
[encode-decode]). encode and decode are judged with a correct vocabulary put in place by the
grader, so that each TODO is judged on its own.

Every reference call is on the grader's own texts, so the learner release answers all of them
from its recording; what a known mistake gives (the vocabulary in order of appearance) is
asked for even when the check passes while recording (recording.eager()), so that a learner's
replay can name it."""

from __future__ import annotations

import re

import pytest

from autograder.core.results import message
from autograder.engine import recording
from autograder.engine.checks import fail
from autograder.engine.feedback import truncate
from autograder.sandbox.client import StudentError

from .harness import (
    ACCENTED,
    CORPUS_FILE,
    CORPUS_MAX_BYTES,
    SHORT,
    SHOWN_CHARS,
    attribute,
    construct,
    random_text,
    samples,
    show,
    text_call,
    texts,
    type_name,
    unknown_cases,
    with_any_vocabulary,
    with_vocabulary,
)

ref = recording.reference_of(__package__)


def _called_attr(text: str, name: str):
    return message("lesson01.called_attr", call=text_call(text), attr=name)


# ---------------------------------------------------------------- TODO [vocab]


@pytest.mark.check("vocab")
def test_vocab(submission, check_seed):
    for text in texts(check_seed):
        tok = construct(submission, text)
        called = _called_attr(text, "chars")
        chars = attribute(submission, tok, "chars", called)
        expected = ref.vocabulary(text)
        if recording.eager():
            ref.appearance_order(text)  # _diagnose_chars' candidate, for a failing learner's replay
        if chars != expected:
            fail(
                called,
                message("lesson01.chars_wrong", got=show(chars), expected=show(expected)),
                *_diagnose_chars(chars, text),
            )
        size = attribute(submission, tok, "vocab_size", _called_attr(text, "vocab_size"))
        if isinstance(size, bool) or not isinstance(size, int) or size != len(expected):
            fail(
                _called_attr(text, "vocab_size"),
                message(
                    "lesson01.vocab_size_wrong", got=show(size), expected=len(expected), length=len(text)
                ),
            )


def _diagnose_chars(chars, text: str) -> list:
    """What is wrong with a vocabulary that is not ref.vocabulary(text), most basic first."""
    expected = ref.vocabulary(text)
    if not isinstance(chars, list):
        return [message("lesson01.chars_not_list", got=type_name(chars))]
    if not all(isinstance(ch, str) and len(ch) == 1 for ch in chars):
        return [message("lesson01.chars_not_characters")]
    if len(set(chars)) < len(chars):
        return [message("lesson01.chars_duplicates", count=len(chars) - len(set(chars)))]
    missing = sorted(set(expected) - set(chars))
    extra = sorted(set(chars) - set(expected))
    if (
        missing
        and all(ch.lower() in chars for ch in missing)
        and set(extra) <= {ch.lower() for ch in missing}
    ):
        return [
            message("lesson01.chars_missing", chars=show("".join(missing))),
            message("lesson01.chars_lowercased"),
        ]
    if missing and not extra and all(ch.isspace() for ch in missing) and text.strip() != text:
        edges = text[: len(text) - len(text.lstrip())] + text[len(text.rstrip()) :]
        if set(missing) <= set(edges):
            return [
                message("lesson01.chars_missing", chars=show("".join(missing))),
                message("lesson01.chars_stripped"),
            ]
    parts = []
    if missing:
        parts.append(message("lesson01.chars_missing", chars=show("".join(missing))))
    if extra:
        parts.append(message("lesson01.chars_extra", chars=show("".join(extra))))
    if parts:
        return parts
    if chars == ref.appearance_order(text):
        return [message("lesson01.chars_appearance_order")]
    return [message("lesson01.chars_not_sorted")]


@pytest.mark.check("vocab-maps")
def test_vocab_maps(submission, check_seed):
    for text in texts(check_seed)[1:]:
        tok = construct(submission, text)
        chars = attribute(submission, tok, "chars", _called_attr(text, "chars"))
        if not (
            isinstance(chars, list)
            and all(isinstance(ch, str) for ch in chars)
            and len(set(chars)) == len(chars)
            and set(chars) == set(text)
        ):
            fail(_called_attr(text, "chars"), message("lesson01.maps_need_chars", got=show(chars)))
        called = _called_attr(text, "stoi")
        stoi = attribute(submission, tok, "stoi", called)
        if not isinstance(stoi, dict):
            fail(called, message("lesson01.stoi_not_dict", got=type_name(stoi)))
        if set(stoi) != set(chars):
            missing = "".join(sorted(set(chars) - set(stoi), key=str))
            fail(
                called,
                message(
                    "lesson01.stoi_keys",
                    missing=show(missing),
                    extra=show(sorted(set(stoi) - set(chars), key=str)),
                ),
            )
        for i, ch in enumerate(chars):
            if stoi[ch] != i or isinstance(stoi[ch], bool):
                fail(called, message("lesson01.stoi_wrong", ch=show(ch), got=show(stoi[ch]), i=i))
        called = _called_attr(text, "itos")
        itos = attribute(submission, tok, "itos", called)
        if isinstance(itos, dict):
            ids = set(itos)
        elif isinstance(itos, list):
            ids = set(range(len(itos)))
        else:
            fail(called, message("lesson01.itos_not_dict", got=type_name(itos)))
        if ids != set(range(len(chars))):
            hint = (
                message("lesson01.itos_keys_are_chars")
                if ids and all(isinstance(k, str) for k in ids)
                else None
            )
            fail(
                called,
                message("lesson01.itos_keys", got=show(sorted(ids, key=str)), last=len(chars) - 1),
                hint,
            )
        for i, ch in enumerate(chars):
            if itos[i] != ch:
                back = stoi.get(itos[i]) if isinstance(itos[i], str) else None
                fail(
                    called,
                    message("lesson01.itos_wrong", i=i, got=show(itos[i]), ch=show(ch)),
                    message("lesson01.maps_not_inverse", i=i, back=show(back)) if back is not None else None,
                )


# ---------------------------------------------------------------- TODO [encode-decode]


def _corpus_or_own(submission, seed: int) -> str:
    """The lesson's corpus as the learner has it (read here, never through their code), or a
    long text of the grader's own when the submission has none."""
    raw = submission.read_file(CORPUS_FILE, CORPUS_MAX_BYTES)
    if raw:
        try:
            text = raw[:CORPUS_MAX_BYTES].decode("utf-8")
            if text:
                return text
        except UnicodeDecodeError:
            pass
    return "\n".join(random_text(seed + k, length=400) for k in range(10))


def _encode_call(text: str, s: str):
    return message("lesson01.called_method", call=text_call(text), method="encode", arg=show(s))


def _decode_call(text: str, ids):
    return message("lesson01.called_method", call=text_call(text), method="decode", arg=show(ids))


@pytest.mark.check("encode")
def test_encode(submission, check_seed):
    for text in (ACCENTED, random_text(check_seed)):
        tok = with_vocabulary(submission, text)
        for s in samples(text, check_seed):
            called = _encode_call(text, s)
            ids = submission.call(tok, s, method="encode")
            expected = ref.encode(text, s)
            if not isinstance(ids, list):
                fail(called, message("lesson01.encode_not_list", got=type_name(ids)))
            if ids != expected or any(isinstance(i, bool) or not isinstance(i, int) for i in ids):
                hint = (
                    message("lesson01.encode_length", got=len(ids), expected=len(s))
                    if len(ids) != len(s)
                    else None
                )
                fail(
                    called,
                    message("lesson01.vocabulary_given"),
                    message("lesson01.encode_wrong", got=show(ids), expected=show(expected)),
                    hint,
                )


@pytest.mark.check("decode")
def test_decode(submission, check_seed):
    text = ACCENTED
    tok = with_vocabulary(submission, text)
    for s in samples(text, check_seed):
        ids = ref.encode(text, s)
        _expect_decoded(submission.call(tok, ids, method="decode"), s, _decode_call(text, ids))
    # The whole corpus there and back: every character, line breaks included, must survive.
    # Any one-to-one vocabulary will do for a round trip, so the learner's own corpus (which
    # the release's recording never saw) is judged in practice too.
    corpus = _corpus_or_own(submission, check_seed)
    tok = with_any_vocabulary(submission, corpus)
    ids = submission.call(tok, corpus, method="encode")
    called = message("lesson01.called_roundtrip", call=text_call(corpus), length=len(corpus))
    if not isinstance(ids, list):
        fail(called, message("lesson01.encode_not_list", got=type_name(ids)))
    _expect_decoded(
        submission.call(tok, ids, method="decode"), corpus, called, "lesson01.vocabulary_given_own"
    )


def _expect_decoded(got, expected: str, called, given: str = "lesson01.vocabulary_given") -> None:
    """Fails unless decode gave `expected`; `given` says which vocabulary the grader put in."""
    if got == expected:
        return
    if not isinstance(got, str):
        hint = message("lesson01.decode_list") if isinstance(got, list) else None
        fail(
            called,
            message(given),
            message("lesson01.decode_not_str", got=type_name(got)),
            hint,
        )
    at = next((k for k, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
    hint = None
    for sep in (" ", ",", ", ", "\n"):
        if len(expected) > 1 and got == sep.join(expected):
            hint = message("lesson01.decode_separator", sep=repr(sep))
    fail(
        called,
        message(given),
        message(
            "lesson01.decode_wrong",
            got=show(got),
            expected=show(expected),
            at=at,
            got_len=len(got),
            expected_len=len(expected),
        ),
        hint,
    )


@pytest.mark.check("unknown-char")
def test_unknown_char(submission, check_seed):
    tokenizers = {text: with_vocabulary(submission, text) for text in (SHORT, ACCENTED)}
    for text, s, position, ch in unknown_cases(check_seed):
        tok = tokenizers[text]
        called = _encode_call(text, s)
        try:
            ids = submission.call(tok, s, method="encode")
        except StudentError as err:
            if err.todo_pending is not None:
                raise
            _judge_error(err, called, s, position, ch)
            continue
        hint = None
        if isinstance(ids, list) and len(ids) == len(s) - 1:
            hint = message("lesson01.unknown_skipped")
        elif isinstance(ids, list) and len(ids) == len(s):
            hint = message("lesson01.unknown_mapped", got=show(ids[position]))
        fail(
            called, message("lesson01.unknown_no_error", got=show(ids), ch=show(ch), position=position), hint
        )


def _judge_error(err: StudentError, called, s: str, position: int, ch: str) -> None:
    text = err.message
    raised = message(
        "lesson01.unknown_raised", type=err.type_name, message=truncate(text.strip(), SHOWN_CHARS)
    )
    # Judged like isinstance: a ValueError of the learner's own (a subclass) is a ValueError.
    if not err.is_a("ValueError"):
        hint = "lesson01.unknown_keyerror" if err.is_a("KeyError") else "lesson01.unknown_type"
        fail(called, raised, message(hint, ch=show(ch)))
    if ch not in text:
        fail(called, raised, message("lesson01.unknown_no_char", ch=show(ch)))
    numbers = {int(n) for n in re.findall(r"\d+", text)}
    if position not in numbers:
        if position + 1 in numbers:
            fail(called, raised, message("lesson01.unknown_one_based", got=position + 1, position=position))
        in_bytes = len(s[:position].encode("utf-8"))
        if in_bytes != position and in_bytes in numbers:
            fail(called, raised, message("lesson01.unknown_byte_position", got=in_bytes, position=position))
        fail(called, raised, message("lesson01.unknown_no_position", position=position))
