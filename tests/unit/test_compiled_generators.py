"""Generator expressions in the compiled core's modules: only where they are consumed at once.

mypyc compiles a generator expression as a list comprehension (mypyc's documentation,
"Differences from Python"), so in a module of ``native.loader.MODULES`` a generator expression
reads its whole input before the first item: ``next((... for ...))`` builds the list to take one
item, and a generator expression returned or merged reads a whole stream at once (the probe
merge once read a day's 10 M requests before the first event). This test lets one through
only as the argument of a call that reads everything anyway (``sum``, ``tuple``, ...) or
unpacked with ``*``; elsewhere a loop or a generator function says what is meant.
"""

from __future__ import annotations

import ast

import pytest

from native.loader import MODULES, module_path

# Calls that read their argument to its end whatever it is (any and all: mypyc compiles them
# over a generator expression to a loop that stops early, as Python does).
CONSUMING = frozenset({
    "all", "any", "deque", "dict", "extend", "frozenset", "fsum", "join", "list", "max", "min",
    "of", "set", "sorted", "sum", "tuple",
})


def lazy_generator_expressions(source: str) -> list[tuple[int, str]]:
    """(line, what reads it) of every generator expression of ``source`` that is not consumed
    at once by a call of CONSUMING or a ``*``."""
    tree = ast.parse(source)
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.GeneratorExp):
            continue
        parent = parents[node]
        if isinstance(parent, ast.Starred):
            continue
        if isinstance(parent, ast.Call) and node in parent.args:
            func = parent.func
            name = (func.id if isinstance(func, ast.Name)
                    else func.attr if isinstance(func, ast.Attribute) else "")
            if name in CONSUMING:
                continue
            found.append((node.lineno, f"{name}()"))
            continue
        found.append((node.lineno, type(parent).__name__))
    return sorted(found)


@pytest.mark.parametrize("module", MODULES)
def test_compiled_modules_read_generator_expressions_at_once_only(module: str) -> None:
    source = module_path(module).read_text(encoding="utf-8")
    assert lazy_generator_expressions(source) == [], (
        f"{module}: a generator expression that is not consumed at once is a list once "
        "compiled (mypyc); write a loop or a generator function"
    )


def test_the_check_finds_what_it_must() -> None:
    source = (
        "def f(xs, ys):\n"
        "    a = next((x for x in xs if x), None)\n"
        "    b = (x for x in xs)\n"
        "    yield from heapq.merge((x for x in xs), ys)\n"
        "    return (y for y in ys)\n"
        "    total = sum(x for x in xs) + len([*(y for y in ys)])\n"
        "    ok = any(x for x in xs) and tuple(x for x in xs)\n"
        "    call(key=(x for x in xs))\n"
    )
    assert lazy_generator_expressions(source) == [
        (2, "next()"), (3, "Assign"), (4, "merge()"), (5, "Return"), (8, "keyword")]
