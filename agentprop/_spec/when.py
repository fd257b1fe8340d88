"""The ``when`` expressions of a decision tree, parsed into a small AST.

On the right of ``==`` / ``!=`` a single bare name is a symbol (a string constant); elsewhere a
name is a variable path. Size limits (:data:`MAX_TOKENS`, :data:`MAX_NESTING`,
:data:`MAX_NUMBER_DIGITS`) bound the cost of any expression; past them it is a
:class:`WhenSyntaxError` naming the limit. The AST nodes are frozen dataclasses;
:func:`evaluate` computes a clause, :func:`variables` lists the paths it reads. The grammar is
in docs/architecture.md.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from agentprop.errors import UnboundVariable, WhenSyntaxError  # noqa: F401 (re-exported: defined in errors.py)

__all__ = [
    "And",
    "Arith",
    "Compare",
    "Expr",
    "Literal",
    "Not",
    "Or",
    "Path",
    "Symbol",
    "UnboundVariable",
    "WhenClause",
    "WhenSyntaxError",
    "atoms",
    "evaluate",
    "parse_when",
    "variables",
]


@dataclass(frozen=True)
class Literal:
    value: int | float | str | bool | None

    def __str__(self) -> str:
        if isinstance(self.value, bool):
            return "true" if self.value else "false"
        if self.value is None:
            return "null"
        if isinstance(self.value, str):
            escaped = self.value.replace("\\", "\\\\").replace("'", "\\'")
            return f"'{escaped}'"
        return str(self.value)


@dataclass(frozen=True)
class Symbol:
    """A bare word on the right of ``==``/``!=``: the string constant ``name``."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Path:
    parts: tuple[str, ...]

    @property
    def dotted(self) -> str:
        return ".".join(self.parts)

    def __str__(self) -> str:
        return self.dotted


@dataclass(frozen=True)
class Arith:
    op: str
    left: Expr
    right: Expr

    def __str__(self) -> str:
        return f"({_operand(self.left)} {self.op} {_operand(self.right)})"


@dataclass(frozen=True)
class Compare:
    op: str
    left: Expr
    right: Expr

    def __str__(self) -> str:
        return f"{_operand(self.left)} {self.op} {_operand(self.right)}"


@dataclass(frozen=True)
class Not:
    item: Expr

    def __str__(self) -> str:
        return f"not ({self.item})"


@dataclass(frozen=True)
class And:
    items: tuple[Expr, ...]

    def __str__(self) -> str:
        return " and ".join(_wrap(i) for i in self.items)


@dataclass(frozen=True)
class Or:
    items: tuple[Expr, ...]

    def __str__(self) -> str:
        return " or ".join(_wrap(i) for i in self.items)


Expr = Literal | Symbol | Path | Arith | Compare | Not | And | Or


def _operand(e: Expr) -> str:
    """An operand of a comparison or arithmetic, parenthesised when it binds looser."""
    return f"({e})" if isinstance(e, (And, Or, Not, Compare)) else str(e)


def _wrap(e: Expr) -> str:
    return f"({e})" if isinstance(e, (And, Or)) else str(e)


@dataclass(frozen=True)
class WhenClause:
    """A parsed ``when``: ``expr is None`` means ``otherwise``."""

    source: str
    expr: Expr | None
    after: str | None = None

    @property
    def is_otherwise(self) -> bool:
        return self.expr is None

    def __str__(self) -> str:
        if self.expr is None:
            return "otherwise"
        return f"{self.expr} after {self.after}" if self.after else str(self.expr)


# ----------------------------------------------------------------------------- tokenizer

MAX_TOKENS = 256
"""Most tokens in one expression (the SpecSuite-Core conditions have at most 15)."""
MAX_NESTING = 32
"""Deepest nesting of parentheses, ``not`` and unary ``-`` (each level is a parser frame)."""
MAX_NUMBER_DIGITS = 100
"""Longest number literal."""

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
  | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<op>==|!=|>=|<=|&&|\|\||[<>+\-*/%().!])
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    """,
    re.VERBOSE,
)

_KEYWORDS = {"and", "or", "not", "true", "false", "null", "none", "otherwise", "after"}


@dataclass(frozen=True)
class _Tok:
    kind: str  # number, string, op, name, kw, end
    text: str
    offset: int


def _tokenize(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise WhenSyntaxError(
                f"unexpected character {text[pos]!r}",
                text,
                pos,
                "a name, a number, a quoted string, an operator (== != > >= < <= + - * / %), "
                "'and', 'or', 'not' or parentheses",
            )
        kind = m.lastgroup or ""
        tok = m.group()
        if kind == "number" and len(tok) > MAX_NUMBER_DIGITS:
            raise WhenSyntaxError(
                f"a number of {len(tok):,} digits (the limit is {MAX_NUMBER_DIGITS} digits)",
                text,
                pos,
                "a number of ordinary size",
            )
        if kind != "ws" and len(out) >= MAX_TOKENS:
            # the parser reports it when it gets there (a nesting error may come first)
            out.append(_Tok("too_long", tok, pos))
            return out
        if kind != "ws":
            if kind == "name" and tok.lower() in _KEYWORDS:
                out.append(_Tok("kw", tok.lower(), pos))
            elif kind == "op" and tok in ("&&", "||", "!"):
                out.append(_Tok("kw", {"&&": "and", "||": "or", "!": "not"}[tok], pos))
            else:
                out.append(_Tok(kind, tok, pos))
        pos = m.end()
    out.append(_Tok("end", "", len(text)))
    return out


# ----------------------------------------------------------------------------- parser

_COMPARE_OPS = ("==", "!=", ">=", "<=", ">", "<")


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokenize(text)
        self.i = 0
        self.depth = 0

    def _enter(self) -> None:
        """One level deeper (parentheses, ``not``, unary ``-``); refused past the limit."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self._fail(
                f"nested too deep: more than {MAX_NESTING} levels of parentheses, `not` and `-` "
                f"(the limit is {MAX_NESTING})",
                "a condition with fewer nested parentheses or negations (`not not x` is `x`)",
            )

    @property
    def tok(self) -> _Tok:
        t = self.toks[self.i]
        if t.kind == "too_long":
            raise WhenSyntaxError(
                f"the condition is too long: more than {MAX_TOKENS} tokens (the "
                f"limit is {MAX_TOKENS})",
                self.text,
                t.offset,
                "a short condition; split a long one over several branches",
            )
        return t

    def _advance(self) -> _Tok:
        t = self.toks[self.i]
        self.i += 1
        return t

    def _fail(self, message: str, expected: str) -> WhenSyntaxError:
        return WhenSyntaxError(message, self.text, self.toks[self.i].offset, expected)

    def _describe(self, t: _Tok) -> str:
        return "the end of the expression" if t.kind == "end" else repr(t.text)

    def clause(self) -> WhenClause:
        if self.tok.kind == "end":
            raise self._fail(
                "empty condition", "a condition such as `intent == cancel_order`, or `otherwise`"
            )
        if self.tok.kind == "kw" and self.tok.text == "otherwise":
            self._advance()
            if self.tok.kind != "end":
                raise self._fail(
                    f"unexpected {self._describe(self.tok)} after 'otherwise'",
                    "'otherwise' alone: it matches when no earlier branch of the node matched",
                )
            return WhenClause(self.text, None, None)
        expr = self.or_()
        after: str | None = None
        if self.tok.kind == "kw" and self.tok.text == "after":
            self._advance()
            if self.tok.kind != "name":
                raise self._fail(
                    f"expected an event name after 'after', found {self._describe(self.tok)}",
                    "`after NAME`, e.g. `intent == unknown after clarify`",
                )
            after = self._advance().text
        if self.tok.kind != "end":
            raise self._fail(
                f"unexpected {self._describe(self.tok)}",
                "'and', 'or', a comparison operator, `after NAME`, or the end of the expression",
            )
        return WhenClause(self.text, expr, after)

    def or_(self) -> Expr:
        items = [self.and_()]
        while self.tok.kind == "kw" and self.tok.text == "or":
            self._advance()
            items.append(self.and_())
        return items[0] if len(items) == 1 else Or(tuple(items))

    def and_(self) -> Expr:
        items = [self.not_()]
        while self.tok.kind == "kw" and self.tok.text == "and":
            self._advance()
            items.append(self.not_())
        return items[0] if len(items) == 1 else And(tuple(items))

    def not_(self) -> Expr:
        if self.tok.kind == "kw" and self.tok.text == "not":
            self._enter()
            self._advance()
            item = self.not_()
            self.depth -= 1
            return Not(item)
        return self.compare()

    def compare(self) -> Expr:
        left = self.sum_()
        if self.tok.kind == "op" and self.tok.text in _COMPARE_OPS:
            op = self._advance().text
            right = self.sum_()
            if op in ("==", "!=") and isinstance(right, Path) and len(right.parts) == 1:
                right = Symbol(right.parts[0])
            if self.tok.kind == "op" and self.tok.text in _COMPARE_OPS:
                raise self._fail(
                    "chained comparisons are not supported",
                    "one comparison per clause; join clauses with 'and'",
                )
            return Compare(op, left, right)
        return left

    def sum_(self) -> Expr:
        left = self.product()
        while self.tok.kind == "op" and self.tok.text in ("+", "-"):
            op = self._advance().text
            left = Arith(op, left, self.product())
        return left

    def product(self) -> Expr:
        left = self.unary()
        while self.tok.kind == "op" and self.tok.text in ("*", "/", "%"):
            op = self._advance().text
            left = Arith(op, left, self.unary())
        return left

    def unary(self) -> Expr:
        if self.tok.kind == "op" and self.tok.text == "-":
            self._enter()
            self._advance()
            inner = self.unary()
            self.depth -= 1
            if (
                isinstance(inner, Literal)
                and isinstance(inner.value, (int, float))
                and not isinstance(inner.value, bool)
            ):
                return Literal(-inner.value)
            return Arith("-", Literal(0), inner)
        return self.atom()

    def atom(self) -> Expr:
        t = self.tok
        if t.kind == "number":
            self._advance()
            return Literal(float(t.text) if any(c in t.text for c in ".eE") else int(t.text))
        if t.kind == "string":
            self._advance()
            body = t.text[1:-1]
            return Literal(re.sub(r"\\(.)", r"\1", body))
        if t.kind == "kw" and t.text in ("true", "false"):
            self._advance()
            return Literal(t.text == "true")
        if t.kind == "kw" and t.text in ("null", "none"):
            self._advance()
            return Literal(None)
        if t.kind == "name":
            parts = [self._advance().text]
            while self.tok.kind == "op" and self.tok.text == ".":
                self._advance()
                if self.tok.kind not in ("name", "kw"):
                    raise self._fail(
                        f"expected a field name after '.', found {self._describe(self.tok)}",
                        "a dotted path such as `plan_rules.can_cancel`",
                    )
                parts.append(self._advance().text)
            return Path(tuple(parts))
        if t.kind == "op" and t.text == "(":
            self._enter()
            self._advance()
            inner = self.or_()
            self.depth -= 1
            if not (self.tok.kind == "op" and self.tok.text == ")"):
                raise self._fail(
                    f"expected ')', found {self._describe(self.tok)}", "a closing parenthesis"
                )
            self._advance()
            return inner
        raise self._fail(
            f"expected a value, found {self._describe(t)}",
            "a name, a dotted path, a number, a quoted string, true/false/null or '('",
        )


def parse_when(text: str) -> WhenClause:
    """Parse one ``when`` expression. Raises :class:`WhenSyntaxError` with the column."""
    if not isinstance(text, str):
        raise WhenSyntaxError(
            f"a condition must be a string, got {type(text).__name__}", str(text), 0, "a string"
        )
    return _Parser(text).clause()


# ----------------------------------------------------------------------------- analysis


def leaves(e: Expr) -> Iterator[Literal | Symbol | Path]:
    """The literals, symbols and variable paths of an expression, left to right."""
    if isinstance(e, (Literal, Symbol, Path)):
        yield e
    elif isinstance(e, (Arith, Compare)):
        yield from leaves(e.left)
        yield from leaves(e.right)
    elif isinstance(e, Not):
        yield from leaves(e.item)
    elif isinstance(e, (And, Or)):
        for i in e.items:
            yield from leaves(i)


def variables(node: WhenClause | Expr) -> list[str]:
    """The dotted variable paths a clause or expression reads, in first-seen order."""
    expr = node.expr if isinstance(node, WhenClause) else node
    if expr is None:
        return []
    return list(dict.fromkeys(leaf.dotted for leaf in leaves(expr) if isinstance(leaf, Path)))


def atoms(node: WhenClause | Expr) -> list[Expr]:
    """The comparisons (and bare boolean paths) joined by and/or/not in an expression."""
    out: list[Expr] = []

    def walk(e: Expr) -> None:
        if isinstance(e, (And, Or)):
            for i in e.items:
                walk(i)
        elif isinstance(e, Not):
            walk(e.item)
        else:
            out.append(e)

    if isinstance(node, WhenClause):
        if node.expr is not None:
            walk(node.expr)
    else:
        walk(node)
    return out


def lookup(env: Mapping[str, Any], path: str) -> Any:
    """Read a dotted path from an environment: a flat key ``"a.b"`` wins over nesting."""
    if path in env:
        return env[path]
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        head = ".".join(parts[:cut])
        if head in env:
            value: Any = env[head]
            for p in parts[cut:]:
                if isinstance(value, Mapping) and p in value:
                    value = value[p]
                else:
                    raise UnboundVariable(path)
            return value
    raise UnboundVariable(path)


def _value(e: Expr, env: Mapping[str, Any]) -> Any:
    if isinstance(e, Literal):
        return e.value
    if isinstance(e, Symbol):
        return e.name
    if isinstance(e, Path):
        return lookup(env, e.dotted)
    if isinstance(e, Arith):
        return arith(e.op, _value(e.left, env), _value(e.right, env))
    return _truth(e, env)


def arith(op: str, a: Any, b: Any) -> Any:
    """``a op b`` for the arithmetic of ``when`` expressions: a division by zero is infinite
    (``a / b > 1000`` holds rather than crashing), a modulo by zero has no value (``None``)."""
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return a / b if b != 0 else math.inf
    return a % b if b != 0 else None


def values_equal(a: Any, b: Any) -> bool:
    # A symbol compares with the string form of a value, so `status == canceled` reads a string
    # field and `user_confirmation == yes` matches "yes". Booleans stay booleans: `true` is a
    # literal, never the symbol "true".
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b if isinstance(a, bool) and isinstance(b, bool) else False
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return bool(a == b)
    return bool(a == b) or (a is not None and b is not None and str(a) == str(b))


def _truth(e: Expr, env: Mapping[str, Any]) -> bool:
    if isinstance(e, And):
        return all(_truth(i, env) for i in e.items)
    if isinstance(e, Or):
        return any(_truth(i, env) for i in e.items)
    if isinstance(e, Not):
        return not _truth(e.item, env)
    if isinstance(e, Compare):
        a, b = _value(e.left, env), _value(e.right, env)
        if e.op == "==":
            return values_equal(a, b)
        if e.op == "!=":
            return not values_equal(a, b)
        if a is None or b is None:
            return False
        try:
            if e.op == ">":
                return bool(a > b)
            if e.op == ">=":
                return bool(a >= b)
            if e.op == "<":
                return bool(a < b)
            return bool(a <= b)
        except TypeError:
            # an ordering between values that have none (a string and a number) does not hold
            return False
    return bool(_value(e, env))


def evaluate(node: WhenClause | Expr, env: Mapping[str, Any]) -> bool:
    """Evaluate a clause against variable values. ``otherwise`` is always true here: the
    first-match-wins rule of a node's branches is applied by the caller. The ``after`` suffix
    does not change the value; it says on which turn the condition is checked."""
    if isinstance(node, WhenClause):
        return True if node.expr is None else _truth(node.expr, env)
    return _truth(node, env)
