"""The mutation operators: what a mutant may change in a TODO region, one small edit each.

Each operator looks at one node of the libcst tree of a finished lesson file (markers
stripped) and yields replacement nodes; bench/mutation/mutants.py applies it only to the nodes
that lie wholly inside a TODO region and keeps the mutants that still compile and differ from
the original. An operator never reads the graders.

Sources. The classic operators follow the two Python mutation testers' published operator
lists, read for this harness (names and behaviour only; no code of theirs is used here):

- mutmut (github.com/boxed/mutmut, src/mutmut/mutation/mutators.py): number (n -> n+1),
  string ("XX" + s + "XX", lower/upper), name (True <-> False, deepcopy -> copy), assignment
  (a = b -> a = None), augmented assignment (a += b -> a = b), unary operator removal (not x,
  ~x -> x), dict keyword arguments renamed, argument removal (each argument -> None, each
  argument dropped), string method swaps (lower/upper, lstrip/rstrip, find/rfind,
  index/rindex, split/rsplit, ...), lambda body -> None, keyword swaps (is <-> is not, in <->
  not in, break -> return, continue -> break), operator swaps (+ <-> -, * <-> /, // -> /,
  % -> /, ** -> *, << <-> >>, & <-> |, ^ -> &, the augmented forms, < <-> <=, > <-> >=,
  == <-> !=, and <-> or), match: drop a case.
- cosmic-ray (github.com/sixty-north/cosmic-ray, src/cosmic_ray/operators/): binary operator
  replacement (every ordered pair of + - * / // % ** >> << | & ^), comparison operator
  replacement (every ordered pair of == != < <= > >= is, is not, restricted when the right side
  is None or a number), unary operator replacement (+ - ~ not, and deletion), boolean replacer
  (True <-> False, and <-> or, add `not` to an if/while/assert/ternary condition), break <->
  continue, exception replacer (an except clause's type -> one never raised), number replacer
  (n -> n+1, n-1), remove decorator, remove named argument (drop each keyword argument), zero
  iteration for loop (for x in y -> for x in []), and the variable replacer/inserter plugins.

What this harness takes from them (name here <- theirs):

    arith          <- both's binary operator swaps: mutmut's map plus @ -> * and / -> //
                      (cosmic-ray's every-pair product would be 11 mutants per operator)
    compare        <- mutmut's boundary swaps (< <-> <=, > <-> >=, == <-> !=, is <-> is not,
                      in <-> not in) plus cosmic-ray's direction flips (< -> >, <= -> >=)
    bool-op        <- and <-> or (both)
    unary          <- cosmic-ray's unary replacement: -x -> x, +x -> -x, ~x -> x; mutmut's
                      `not x` -> x
    negate-cond    <- cosmic-ray's AddNot: if/while/ternary/comprehension condition -> not (...)
    number         <- both: n -> n+1, n-1 (cosmic-ray), and 0, 1 (this harness)
    keyword        <- True <-> False (both); None -> 0 (this harness: a falsy value that is not None)
    return-none    <- mutmut's assignment -> None, kept for `return x` -> `return None` only
    string         <- mutmut's "XX" + s + "XX"; "-inf" <-> "inf" (this field: the mask's fill)
    aug-assign     <- mutmut: a += b -> a = b, += <-> -=, *= <-> /=
    for-zero       <- cosmic-ray's zero iteration loop, for statements and comprehensions
    break-continue <- both: break <-> continue
    remove-kwarg   <- cosmic-ray's remove named argument (generator=, keepdim=, dtype=, device=...)
    call-swap      <- mutmut's string method swaps, widened to this field's look-alike pairs
                      (min/max, argmax/argmin, tril/triu, sum/mean, softmax/log_softmax,
                      stack/cat, cos/sin, zeros/ones, rand/randn, any/all, eval -> train,
                      sorted -> list)

Added for this field (issue 31), each a mistake learners of this course make:

    axis           dim=/axis= arguments (and .size()/.unsqueeze()/.squeeze() positions):
                   -1 -> -2, 0, 1; v >= 0 -> v+1, v-1, -1
    slice          slicing bounds: :U -> :U-1, drop U, U: (and L: -> :L, L+1:, drop L);
                   a one-element list index [i] -> i (keeps or loses a dimension)
    transpose      transpose(a, b) -> both shifted by one either way; .transpose()/.permute()/
                   .t() dropped; .T/.mT dropped
    view           view/reshape arguments: each adjacent pair swapped; .contiguous() dropped
    config         config reads swapped for constants or other fields: x.dropout -> 0.0, 0.1;
                   x.n_head <-> x.n_layer; x.block_size -> T; size names swapped where both are
                   bound in the function (T <-> block_size/bs, T <-> B, C <-> hs,
                   block_size <-> batch_size, T_past -> T)
    inplace        masked_fill <-> masked_fill_, add <-> add_, ... (out-of-place <-> in-place)
    dtype          dtype=torch.long -> torch.float, bool -> float/long, float -> float64/long,
                   float64 -> float32; .to(...), .float(), .long(), .double(), .int(), .bool(),
                   .item(), int(x), float(x) dropped
    stmt-drop      a simple statement -> pass (a forgotten line)
    stmt-dup       a call statement, or an assignment that reads its own target, run twice
    swap-args      f(a, b) -> f(b, a) (adjacent positional arguments), tuple/list elements
                   swapped (q, k, v = ... -> k, q, v = ...; torch.cat((past, new)) order)
    swap-operands  a - b -> b - a for the operators that do not commute (- / // % ** @ << >>)
    normalise      a text normalised before it is read: the one name handed to set/sorted/
                   enumerate/list, or iterated by a loop over characters (target c, ch, char),
                   gets .strip() or .lower() (issue 31's kinds: edges holding whitespace found
                   nowhere else, unknown characters that have a lower-case form)
    detach         a submodule's output or input cut from autograd: self.f(a) -> self.f(a).detach(),
                   self.f(a.detach()) (issue 31's kind: a pre-norm whose gradient never reaches x)

Issue 31's other named kinds come from the operators above: generator=None is remove-kwarg's
`generator=` dropped, a dropout probability written as a constant is config's x.dropout -> 0.0/0.1.

Left out, and why. The operators below make no mutant in any region of this course, or only
mutants that are dead on arrival (every grading would kill them at the first call, telling
nothing about a grader) or equivalent by construction; each one would cost grading time:

- mutmut's "argument -> None" and "drop a positional argument": in these regions nearly every
  call needs all its positional arguments, so the mutant raises TypeError at once;
  remove-kwarg keeps the informative half (optional keyword arguments).
- mutmut's assignment `a = b -> a = None`: the next line that uses `a` raises; stmt-drop and
  return-none cover the informative cases.
- cosmic-ray's every-pair binary and comparison products: 11 and 7 mutants per site, mostly
  duplicates in effect of the two kept per site.
- transpose(a, b) -> transpose(b, a): always equivalent (a transpose is symmetric).
- view -> reshape: equivalent wherever view succeeds.
- a device argument -> "cpu": equivalent on the CPU machines that grade; remove-kwarg already
  drops device= (which the graders can only see where another device exists).
- exception replacer, remove decorator, lambda, match, dict keyword rename, variable
  inserter/replacer: no try/except, decorator, lambda, match or dict(...) call in any region;
  the variable replacer is covered in its useful form by `config`'s size-name swaps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import ExpressionContext

__all__ = ["OPERATORS", "Context", "Operator", "by_name"]


class Context:
    """What an operator may ask about a node besides the node itself: its parent, whether a
    name or attribute is read (not assigned), and the names bound in its function."""

    def __init__(self, parents: dict, contexts: dict, bound: Callable[[cst.CSTNode], frozenset[str]]):
        self._parents, self._contexts, self._bound = parents, contexts, bound

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._parents.get(node)

    def is_load(self, node: cst.CSTNode) -> bool:
        return self._contexts.get(node) is ExpressionContext.LOAD

    def bound(self, node: cst.CSTNode) -> frozenset[str]:
        """Names bound in the function around `node` (its parameters and every name it
        assigns), empty outside a function."""
        return self._bound(node)


@dataclass(frozen=True)
class Operator:
    name: str  # the mutant id's operator part
    family: str  # "classic" (mutmut / cosmic-ray) or "field" (this course's kinds)
    summary: str
    nodes: tuple[type, ...]  # the node types it looks at
    mutate: Callable[[cst.CSTNode, Context], Iterable[cst.CSTNode | cst.FlattenSentinel]]


def _expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _int_value(node: cst.BaseExpression) -> int | None:
    """The value of an integer literal, possibly negated (`-1`), else None."""
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    if (
        isinstance(node, cst.UnaryOperation)
        and isinstance(node.operator, cst.Minus)
        and isinstance(node.expression, cst.Integer)
    ):
        return -int(node.expression.evaluated_value)
    return None


def _literal(value: int | float) -> cst.BaseExpression:
    text = repr(value)
    return _expr(f"({text})" if value < 0 or text.startswith("-") else text)


def _method(call: cst.Call) -> str | None:
    """The name of what is called: `x.name(...)` or `name(...)`."""
    if isinstance(call.func, cst.Attribute):
        return call.func.attr.value
    if isinstance(call.func, cst.Name):
        return call.func.value
    return None


def _rename_call(call: cst.Call, name: str) -> cst.Call:
    if isinstance(call.func, cst.Attribute):
        return call.with_changes(func=call.func.with_changes(attr=cst.Name(name)))
    return call.with_changes(func=cst.Name(name))


def _positional(call: cst.Call) -> list[int]:
    return [i for i, arg in enumerate(call.args) if arg.keyword is None and not arg.star]


def _swap_items(items: list, i: int, j: int) -> list:
    """items with the values of i and j swapped, each keeping its own comma and spacing."""
    out = list(items)
    a, b = items[i], items[j]
    out[i], out[j] = a.with_changes(value=b.value), b.with_changes(value=a.value)
    return out


def _with_arg(call: cst.Call, index: int, value: cst.BaseExpression) -> cst.Call:
    args = list(call.args)
    args[index] = args[index].with_changes(value=value)
    return call.with_changes(args=args)


# --- classic --------------------------------------------------------------------------------------

_ARITH = {
    cst.Add: (cst.Subtract,),
    cst.Subtract: (cst.Add,),
    cst.Multiply: (cst.Divide,),
    cst.Divide: (cst.Multiply, cst.FloorDivide),
    cst.FloorDivide: (cst.Divide,),
    cst.Modulo: (cst.Divide,),
    cst.Power: (cst.Multiply,),
    cst.MatrixMultiply: (cst.Multiply,),
    cst.LeftShift: (cst.RightShift,),
    cst.RightShift: (cst.LeftShift,),
    cst.BitAnd: (cst.BitOr,),
    cst.BitOr: (cst.BitAnd,),
    cst.BitXor: (cst.BitAnd,),
}


def _arith(node: cst.BinaryOperation, ctx: Context) -> Iterator[cst.CSTNode]:
    for new in _ARITH.get(type(node.operator), ()):
        op = node.operator
        yield node.with_changes(
            operator=new(whitespace_before=op.whitespace_before, whitespace_after=op.whitespace_after)
        )


_COMPARE = {
    cst.LessThan: (cst.LessThanEqual, cst.GreaterThan),
    cst.LessThanEqual: (cst.LessThan, cst.GreaterThanEqual),
    cst.GreaterThan: (cst.GreaterThanEqual, cst.LessThan),
    cst.GreaterThanEqual: (cst.GreaterThan, cst.LessThanEqual),
    cst.Equal: (cst.NotEqual,),
    cst.NotEqual: (cst.Equal,),
    cst.Is: (cst.IsNot,),
    cst.IsNot: (cst.Is,),
    cst.In: (cst.NotIn,),
    cst.NotIn: (cst.In,),
}


def _compare(node: cst.Comparison, ctx: Context) -> Iterator[cst.CSTNode]:
    for index, target in enumerate(node.comparisons):
        for new in _COMPARE.get(type(target.operator), ()):
            op = target.operator
            replacement = new(whitespace_before=op.whitespace_before, whitespace_after=op.whitespace_after)
            targets = list(node.comparisons)
            targets[index] = target.with_changes(operator=replacement)
            yield node.with_changes(comparisons=targets)


def _bool_op(node: cst.BooleanOperation, ctx: Context) -> Iterator[cst.CSTNode]:
    op = node.operator
    new = cst.Or if isinstance(op, cst.And) else cst.And
    yield node.with_changes(
        operator=new(whitespace_before=op.whitespace_before, whitespace_after=op.whitespace_after)
    )


def _unary(node: cst.UnaryOperation, ctx: Context) -> Iterator[cst.CSTNode]:
    if isinstance(node.operator, (cst.Minus, cst.Not, cst.BitInvert)):
        yield node.expression.with_changes(lpar=node.lpar, rpar=node.rpar) if node.lpar else node.expression
    elif isinstance(node.operator, cst.Plus):
        yield node.with_changes(operator=cst.Minus())


# A comparison whose operator has an exact negation: `compare` already makes `not (...)`'s mutant.
_NEGATABLE = (cst.Equal, cst.NotEqual, cst.Is, cst.IsNot, cst.In, cst.NotIn)


def _negate_cond(node: cst.CSTNode, ctx: Context) -> Iterator[cst.CSTNode]:
    test = node.test
    if (
        isinstance(test, cst.Comparison)
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, _NEGATABLE)
    ):
        return
    negated = cst.UnaryOperation(
        operator=cst.Not(), expression=test.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    )
    yield node.with_changes(test=negated)


def _number(node: cst.BaseNumber, ctx: Context) -> Iterator[cst.CSTNode]:
    if _is_axis_argument(node, ctx):
        return  # `axis` and `transpose` choose the other axes (n+1 on a dim duplicates them)
    if isinstance(node, cst.Integer):
        value = int(node.evaluated_value)
        candidates: list[int | float] = [value + 1, value - 1, 0, 1]
    elif isinstance(node, cst.Float):
        value = float(node.evaluated_value)
        # n +- 1 on a large constant (-1e9 as a mask's fill) changes nothing a check can see
        candidates = [0.0, 1.0] if abs(value) >= 1e6 else [value + 1, value - 1, 0.0, 1.0]
    else:
        return
    seen = {value}
    for candidate in candidates:
        if candidate not in seen:
            seen.add(candidate)
            yield _literal(candidate)


def _is_axis_argument(node: cst.CSTNode, ctx: Context) -> bool:
    """Whether the literal `node` (maybe under a unary minus) is a dim argument `axis` or
    `transpose` mutates: dim=/axis=, or a positional argument of .transpose/.permute or the
    first one of .size/.unsqueeze/.squeeze."""
    parent = ctx.parent(node)
    if isinstance(parent, cst.UnaryOperation):
        node, parent = parent, ctx.parent(parent)
    if not isinstance(parent, cst.Arg):
        return False
    if parent.keyword is not None:
        return parent.keyword.value in _DIM_KEYWORDS
    call = ctx.parent(parent)
    if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute):
        return False
    name = call.func.attr.value
    return name in ("transpose", "permute") or (name in _DIM_METHODS and call.args[0] is parent)


def _keyword(node: cst.Name, ctx: Context) -> Iterator[cst.CSTNode]:
    if node.value == "True":
        yield cst.Name("False")
    elif node.value == "False":
        yield cst.Name("True")
    elif node.value == "None":
        yield cst.Integer("0")


def _return_none(node: cst.Return, ctx: Context) -> Iterator[cst.CSTNode]:
    if node.value is not None and not (isinstance(node.value, cst.Name) and node.value.value == "None"):
        yield node.with_changes(value=cst.Name("None"), whitespace_after_return=cst.SimpleWhitespace(" "))


def _string(node: cst.SimpleString, ctx: Context) -> Iterator[cst.CSTNode]:
    quote = node.quote
    if len(quote) == 3:  # docstrings and long text: nothing a check reads
        return
    prefix, body = node.prefix, node.raw_value
    if body in ("-inf", "inf"):
        yield node.with_changes(value=f"{prefix}{quote}{'inf' if body == '-inf' else '-inf'}{quote}")
    yield node.with_changes(value=f"{prefix}{quote}XX{body}XX{quote}")


def _aug_assign(node: cst.AugAssign, ctx: Context) -> Iterator[cst.CSTNode]:
    yield cst.Assign(targets=[cst.AssignTarget(node.target)], value=node.value, semicolon=node.semicolon)
    swap = {
        cst.AddAssign: cst.SubtractAssign,
        cst.SubtractAssign: cst.AddAssign,
        cst.MultiplyAssign: cst.DivideAssign,
        cst.DivideAssign: cst.MultiplyAssign,
    }.get(type(node.operator))
    if swap is not None:
        yield node.with_changes(operator=swap())


def _for_zero(node: cst.CSTNode, ctx: Context) -> Iterator[cst.CSTNode]:
    yield node.with_changes(iter=cst.List([]))


def _break_continue(node: cst.CSTNode, ctx: Context) -> Iterator[cst.CSTNode]:
    yield cst.Continue() if isinstance(node, cst.Break) else cst.Break()


def _remove_kwarg(node: cst.Call, ctx: Context) -> Iterator[cst.CSTNode]:
    for index, arg in enumerate(node.args):
        if arg.keyword is not None:
            args = [a for i, a in enumerate(node.args) if i != index]
            if args and index == len(node.args) - 1:  # the new last argument loses its comma
                args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            yield node.with_changes(args=args)


_CALL_SWAPS = {
    "min": ("max",),
    "max": ("min",),
    "argmax": ("argmin",),
    "argmin": ("argmax",),
    "tril": ("triu",),
    "triu": ("tril",),
    "sum": ("mean",),
    "mean": ("sum",),
    "softmax": ("log_softmax",),
    "log_softmax": ("softmax",),
    "stack": ("cat",),
    "cat": ("stack",),
    "cos": ("sin",),
    "sin": ("cos",),
    "zeros": ("ones",),
    "ones": ("zeros",),
    "randn": ("rand",),
    "rand": ("randn",),
    "any": ("all",),
    "all": ("any",),
    "eval": ("train",),
    "sorted": ("list",),
    "lower": ("upper",),
    "upper": ("lower",),
    "lstrip": ("rstrip",),
    "rstrip": ("lstrip",),
    "strip": ("lstrip", "rstrip"),
    "find": ("rfind",),
    "rfind": ("find",),
    "index": ("rindex",),
    "rindex": ("index",),
}


# Swaps that only exist as methods or module functions (builtins have no mean, ...).
_BUILTIN_SWAPS = ("min", "max", "sorted", "any", "all")


def _call_swap(node: cst.Call, ctx: Context) -> Iterator[cst.CSTNode]:
    name = _method(node) or ""
    if isinstance(node.func, cst.Name) and name not in _BUILTIN_SWAPS:
        return
    for new in _CALL_SWAPS.get(name, ()):
        yield _rename_call(node, new)


# --- this field -----------------------------------------------------------------------------------

_DIM_KEYWORDS = ("dim", "axis")
_DIM_METHODS = ("size", "unsqueeze", "squeeze")  # methods whose first positional argument is a dim


def _dim_alternatives(value: int) -> list[int]:
    if value < 0:
        candidates = [value - 1, value + 1 if value + 1 < 0 else None, 0, 1]
    else:
        candidates = [value + 1, value - 1 if value >= 1 else None, -1]
    out = []
    for candidate in candidates:
        if candidate is not None and candidate != value and candidate not in out:
            out.append(candidate)
    return out[:3]


def _axis(node: cst.Call, ctx: Context) -> Iterator[cst.CSTNode]:
    for index, arg in enumerate(node.args):
        is_dim = (arg.keyword is not None and arg.keyword.value in _DIM_KEYWORDS) or (
            arg.keyword is None
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in _DIM_METHODS
            and index == 0
        )
        value = _int_value(arg.value) if is_dim else None
        if value is not None:
            for candidate in _dim_alternatives(value):
                yield _with_arg(node, index, _literal(candidate))


def _slice(node: cst.CSTNode, ctx: Context) -> Iterator[cst.CSTNode]:
    if isinstance(node, cst.SubscriptElement):
        # a one-element list index keeps the dimension: [i] -> i drops it (and back is not tried:
        # an index that drops a dimension is the common form)
        if (
            isinstance(node.slice, cst.Index)
            and isinstance(node.slice.value, cst.List)
            and len(node.slice.value.elements) == 1
        ):
            yield node.with_changes(slice=cst.Index(node.slice.value.elements[0].value))
        return
    lower, upper = node.lower, node.upper
    if node.step is not None:
        return
    if upper is not None:
        yield node.with_changes(upper=_expr(f"{_code(upper)} - 1"))
        yield node.with_changes(upper=None)
        if lower is None:
            yield node.with_changes(lower=upper, upper=None)
    if lower is not None:
        yield node.with_changes(lower=_expr(f"{_code(lower)} + 1"))
        yield node.with_changes(lower=None)
        if upper is None:
            yield node.with_changes(lower=None, upper=lower)


def _transpose(node: cst.CSTNode, ctx: Context) -> Iterator[cst.CSTNode]:
    if isinstance(node, cst.Attribute):
        if node.attr.value in ("T", "mT") and ctx.is_load(node):
            yield node.value
        return
    name = _method(node)
    if not isinstance(node.func, cst.Attribute) or name not in ("transpose", "permute", "t"):
        return
    positional = _positional(node)
    values = [_int_value(node.args[i].value) for i in positional]
    if name == "transpose" and len(values) == 2 and None not in values:
        a, b = values
        for shift in (1, -1):
            moved = (a + shift, b + shift)
            # keep each index on its side of zero: -1 + 1 is 0, a different axis family
            if all((m < 0) == (v < 0) for m, v in zip(moved, values)) and moved != (a, b):
                yield node.with_changes(
                    args=[
                        node.args[positional[0]].with_changes(value=_literal(moved[0])),
                        node.args[positional[1]].with_changes(value=_literal(moved[1])),
                    ]
                )
    yield node.func.value  # the call dropped: x.transpose(1, 2) -> x


def _view(node: cst.Call, ctx: Context) -> Iterator[cst.CSTNode]:
    name = _method(node)
    if not isinstance(node.func, cst.Attribute):
        return
    if name == "contiguous" and not node.args:
        yield node.func.value
    elif name in ("view", "reshape"):
        positional = _positional(node)
        for i, j in zip(positional, positional[1:]):
            if _code(node.args[i].value) != _code(node.args[j].value):
                yield node.with_changes(args=_swap_items(list(node.args), i, j))


_SIZE_SWAPS = {
    "T": ("block_size", "bs", "B"),
    "B": ("T",),
    "C": ("hs",),
    "hs": ("C",),
    "block_size": ("T", "batch_size"),
    "bs": ("T",),
    "batch_size": ("block_size",),
    "T_past": ("T",),
}


def _config(node: cst.CSTNode, ctx: Context) -> Iterator[cst.CSTNode]:
    if not ctx.is_load(node):
        return
    if isinstance(node, cst.Attribute):
        field = node.attr.value
        if field == "dropout":
            yield cst.Float("0.0")
            yield cst.Float("0.1")
        elif field in ("n_head", "n_layer"):
            yield node.with_changes(attr=cst.Name("n_layer" if field == "n_head" else "n_head"))
        elif field == "block_size" and "T" in ctx.bound(node):
            yield cst.Name("T")
        return
    bound = ctx.bound(node)
    if node.value not in bound:  # a global or builtin: not a size of this function
        return
    picked = [name for name in _SIZE_SWAPS.get(node.value, ()) if name in bound]
    # T -> block_size or bs (whichever the function has), and T -> B
    if node.value == "T" and "block_size" in picked and "bs" in picked:
        picked.remove("bs")
    for name in picked:
        yield cst.Name(name)


_INPLACE = (
    "masked_fill",
    "add",
    "sub",
    "mul",
    "div",
    "clamp",
    "fill",
    "exp",
    "tril",
    "triu",
    "unsqueeze",
    "squeeze",
    "relu",
    "normal",
    "uniform",
    "zero",
)


def _inplace(node: cst.Call, ctx: Context) -> Iterator[cst.CSTNode]:
    name = _method(node)
    if not isinstance(node.func, cst.Attribute) or name is None:
        return
    if name.endswith("_") and not name.endswith("__") and name[:-1] in _INPLACE:
        yield _rename_call(node, name[:-1])
    elif name in _INPLACE and name != "zero":
        yield _rename_call(node, name + "_")


_DTYPES = {
    "long": ("float",),
    "int64": ("float",),
    "int": ("float",),
    "bool": ("float", "long"),
    "float": ("float64", "long"),
    "float32": ("float64", "long"),
    "float64": ("float32",),
    "double": ("float32",),
}
_CASTS = ("to", "float", "long", "double", "int", "bool", "half", "item")


def _dtype(node: cst.Call, ctx: Context) -> Iterator[cst.CSTNode]:
    for index, arg in enumerate(node.args):
        if arg.keyword is not None and arg.keyword.value == "dtype" and isinstance(arg.value, cst.Attribute):
            for new in _DTYPES.get(arg.value.attr.value, ()):
                yield _with_arg(node, index, arg.value.with_changes(attr=cst.Name(new)))
    name = _method(node)
    if isinstance(node.func, cst.Attribute) and name in _CASTS:
        yield node.func.value
    elif (
        isinstance(node.func, cst.Name)
        and name in ("int", "float")
        and len(node.args) == 1
        and not isinstance(node.args[0].value, cst.BaseString)  # float("-inf") is a constant
    ):
        yield node.args[0].value


def _stmt_drop(node: cst.SimpleStatementLine, ctx: Context) -> Iterator[cst.CSTNode]:
    if any(isinstance(s, (cst.Pass, cst.Return)) for s in node.body):
        return  # a dropped return is return-none's mutant
    yield node.with_changes(body=[cst.Pass()])


def _stmt_dup(node: cst.SimpleStatementLine, ctx: Context) -> Iterator[cst.FlattenSentinel]:
    if len(node.body) != 1:
        return
    small = node.body[0]
    again = node.with_changes(leading_lines=[])
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        yield cst.FlattenSentinel([node, again])
    elif isinstance(small, (cst.Assign, cst.AugAssign)):
        targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
        written = {n.value for t in targets for n in _names(t)}
        read = {n.value for n in _names(small.value)}
        if isinstance(small, cst.AugAssign) or written & read:
            yield cst.FlattenSentinel([node, again])


_TEXT_READERS = ("set", "sorted", "enumerate", "list")
_CHARACTER_TARGETS = ("c", "ch", "char", "character")


def _normalise(node: cst.CSTNode, ctx: Context) -> Iterator[cst.CSTNode]:
    if isinstance(node, cst.Call):
        if _method(node) in _TEXT_READERS and isinstance(node.func, cst.Name) and len(node.args) == 1:
            value = node.args[0].value
            if isinstance(value, cst.Name):
                for how in ("strip", "lower"):
                    yield _with_arg(node, 0, _called(value, how))
        return
    target, iterable = node.target, node.iter
    names = [n.value for n in _names(target)]
    if isinstance(iterable, cst.Name) and any(name in _CHARACTER_TARGETS for name in names):
        for how in ("strip", "lower"):
            yield node.with_changes(iter=_called(iterable, how))


def _called(value: cst.BaseExpression, method: str) -> cst.Call:
    """`value.method()`, parenthesised where `value` would otherwise bind wrongly (a + b)."""
    if not isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) and not value.lpar:
        value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(func=cst.Attribute(value=value, attr=cst.Name(method)))


# nn.Module's own methods called on self: what they return is not a tensor the learner computed.
_MODULE_METHODS = frozenset(
    {"register_buffer", "register_parameter", "apply", "parameters", "named_parameters", "modules",
     "named_modules", "children", "buffers", "state_dict", "load_state_dict", "train", "eval", "to"}
)  # fmt: skip


def _is_submodule_call(node: cst.Call) -> bool:
    func = node.func
    return (
        isinstance(func, cst.Attribute)
        and isinstance(func.value, cst.Name)
        and func.value.value == "self"
        and func.attr.value not in _MODULE_METHODS
    )


def _detach(node: cst.Call, ctx: Context) -> Iterator[cst.CSTNode]:
    if not _is_submodule_call(node):
        return
    yield _called(node, "detach")
    for index in _positional(node):
        value = node.args[index].value
        if not isinstance(value, (cst.BaseString, cst.BaseNumber)):
            yield _with_arg(node, index, _called(value, "detach"))


def _names(node: cst.CSTNode) -> list[cst.Name]:
    found: list[cst.Name] = []

    class _Collect(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            found.append(name)

        def visit_Attribute(self, attribute: cst.Attribute) -> bool:
            attribute.value.visit(self)  # `self.x`: x is an attribute, not a name
            return False

    node.visit(_Collect())
    return found


_OWN_SWAPS = ("view", "reshape", "transpose", "permute")


def _swap_args(node: cst.CSTNode, ctx: Context) -> Iterator[cst.CSTNode]:
    if isinstance(node, cst.Call):
        if _method(node) in _OWN_SWAPS:
            return
        positional = _positional(node)
        for i, j in zip(positional, positional[1:]):
            if _code(node.args[i].value) != _code(node.args[j].value):
                yield node.with_changes(args=_swap_items(list(node.args), i, j))
        return
    elements = list(node.elements)
    for i in range(len(elements) - 1):
        a, b = elements[i], elements[i + 1]
        if isinstance(a, cst.StarredElement) or isinstance(b, cst.StarredElement):
            continue
        if _code(a.value) != _code(b.value):
            yield node.with_changes(elements=_swap_items(elements, i, i + 1))


_NON_COMMUTING = (
    cst.Subtract,
    cst.Divide,
    cst.FloorDivide,
    cst.Modulo,
    cst.Power,
    cst.MatrixMultiply,
    cst.LeftShift,
    cst.RightShift,
)


def _swap_operands(node: cst.BinaryOperation, ctx: Context) -> Iterator[cst.CSTNode]:
    if isinstance(node.operator, _NON_COMMUTING) and _code(node.left) != _code(node.right):
        yield node.with_changes(left=_grouped(node.right), right=_grouped(node.left))


def _grouped(node: cst.BaseExpression) -> cst.BaseExpression:
    """`node` in parentheses when it is an operation without them, so that moving it to the
    other side of an operator keeps it one operand (a * b / c -> c / (a * b))."""
    operations = (cst.BinaryOperation, cst.BooleanOperation, cst.Comparison, cst.UnaryOperation, cst.IfExp)
    if isinstance(node, operations) and not node.lpar:
        return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return node


# The order matters: a mutant two operators make alike is kept under the first one's name, so
# this field's operators come first (dim=-1 -> dim=1 is `axis`, not `unary`).
OPERATORS: tuple[Operator, ...] = (
    Operator("axis", "field", "dim/axis arguments moved to another axis", (cst.Call,), _axis),
    Operator(
        "slice",
        "field",
        "slicing bounds moved or dropped; [i] -> i",
        (cst.Slice, cst.SubscriptElement),
        _slice,
    ),
    Operator(
        "transpose",
        "field",
        "transposes shifted or dropped, .T dropped",
        (cst.Call, cst.Attribute),
        _transpose,
    ),
    Operator("view", "field", "view/reshape arguments swapped, .contiguous() dropped", (cst.Call,), _view),
    Operator(
        "config",
        "field",
        "config reads -> constants or other fields; size names swapped",
        (cst.Attribute, cst.Name),
        _config,
    ),
    Operator("inplace", "field", "in-place <-> out-of-place", (cst.Call,), _inplace),
    Operator("dtype", "field", "dtype arguments changed, casts dropped", (cst.Call,), _dtype),
    Operator("stmt-drop", "field", "a statement dropped", (cst.SimpleStatementLine,), _stmt_drop),
    Operator("stmt-dup", "field", "a call or self-update run twice", (cst.SimpleStatementLine,), _stmt_dup),
    Operator(
        "swap-args",
        "field",
        "adjacent arguments or elements swapped",
        (cst.Call, cst.Tuple, cst.List),
        _swap_args,
    ),
    Operator(
        "swap-operands",
        "field",
        "operands of a non-commuting operator swapped",
        (cst.BinaryOperation,),
        _swap_operands,
    ),
    Operator(
        "normalise",
        "field",
        "a text read after .strip() or .lower()",
        (cst.Call, cst.For, cst.CompFor),
        _normalise,
    ),
    Operator("detach", "field", "a submodule's output or input detached", (cst.Call,), _detach),
    Operator(
        "remove-kwarg", "classic", "a keyword argument dropped (cosmic-ray)", (cst.Call,), _remove_kwarg
    ),
    Operator(
        "call-swap",
        "classic",
        "a function swapped for its look-alike (mutmut's string methods, widened)",
        (cst.Call,),
        _call_swap,
    ),
    Operator(
        "arith",
        "classic",
        "arithmetic operator replaced (mutmut, cosmic-ray)",
        (cst.BinaryOperation,),
        _arith,
    ),
    Operator(
        "compare", "classic", "comparison operator replaced (mutmut, cosmic-ray)", (cst.Comparison,), _compare
    ),
    Operator("bool-op", "classic", "and <-> or (mutmut, cosmic-ray)", (cst.BooleanOperation,), _bool_op),
    Operator(
        "unary",
        "classic",
        "unary operator dropped or flipped (mutmut, cosmic-ray)",
        (cst.UnaryOperation,),
        _unary,
    ),
    Operator(
        "negate-cond",
        "classic",
        "a condition negated (cosmic-ray's AddNot)",
        (cst.If, cst.While, cst.IfExp, cst.CompIf),
        _negate_cond,
    ),
    Operator(
        "number", "classic", "n -> n+1, n-1, 0, 1 (mutmut, cosmic-ray)", (cst.Integer, cst.Float), _number
    ),
    Operator("keyword", "classic", "True <-> False, None -> 0 (mutmut, cosmic-ray)", (cst.Name,), _keyword),
    Operator("return-none", "classic", "return x -> return None (mutmut)", (cst.Return,), _return_none),
    Operator(
        "string", "classic", "s -> 'XX' + s + 'XX' (mutmut); '-inf' <-> 'inf'", (cst.SimpleString,), _string
    ),
    Operator("aug-assign", "classic", "a += b -> a = b, += <-> -= (mutmut)", (cst.AugAssign,), _aug_assign),
    Operator(
        "for-zero", "classic", "for x in y -> for x in [] (cosmic-ray)", (cst.For, cst.CompFor), _for_zero
    ),
    Operator(
        "break-continue",
        "classic",
        "break <-> continue (mutmut, cosmic-ray)",
        (cst.Break, cst.Continue),
        _break_continue,
    ),
)


def by_name(name: str) -> Operator:
    for operator in OPERATORS:
        if operator.name == name:
            return operator
    raise KeyError(name)
