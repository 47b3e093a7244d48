"""Every test can fail: each test function asserts something, expects an exception
(pytest.raises, pytest.warns) or calls a helper of the suite that does. A test that only calls
the code under test passes whatever that code returns."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
EXPECTS = {"raises", "warns", "fail", "deprecated_call"}  # pytest.<these> assert for a test

Function = ast.FunctionDef | ast.AsyncFunctionDef


def _functions(tree: ast.AST) -> Iterator[Function]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def _asserts_itself(fn: Function) -> bool:
    for node in ast.walk(fn):
        if isinstance(node, ast.Assert):
            return True
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "pytest"
            and node.attr in EXPECTS
        ):
            return True
    return False


def _calls(fn: Function) -> set[str]:
    """The names `fn` calls, bare (helper()) or as an attribute (dirs.assert_released())."""
    out = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name):
                out.add(f.id)
            elif isinstance(f, ast.Attribute):
                out.add(f.attr)
    return out


def _asserting(functions: list[Function]) -> set[str]:
    """Names of the suite's functions that assert, themselves or through another of them.
    By name across tests/, so a helper in conftest or another module counts where it is used."""
    found = {fn.name for fn in functions if _asserts_itself(fn)}
    while True:
        more = {fn.name for fn in functions if fn.name not in found and _calls(fn) & found}
        if not more:
            return found
        found |= more


def unasserted_tests(root: Path = TESTS) -> list[str]:
    trees = {p: ast.parse(p.read_text()) for p in sorted(root.rglob("*.py"))}
    asserting = _asserting([fn for t in trees.values() for fn in _functions(t)])
    return [
        f"{p.relative_to(root)}:{fn.lineno} {fn.name}"
        for p, t in trees.items()
        if p.name.startswith("test_")
        for fn in _functions(t)
        if fn.name.startswith("test") and not _asserts_itself(fn) and not _calls(fn) & asserting
    ]


def test_every_test_asserts() -> None:
    assert unasserted_tests() == []


def test_the_scan_finds_a_test_without_an_assertion(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text("def check(x):\n    assert x\n")
    (tmp_path / "test_x.py").write_text(
        "import pytest\n"
        "def helper(x):\n    check(x)\n"  # asserts through conftest's check
        "def test_calls_only():\n    int('1')\n"
        "def test_asserts():\n    assert int('1') == 1\n"
        "def test_raises():\n    with pytest.raises(ValueError):\n        int('x')\n"
        "def test_through_helpers():\n    helper(1)\n"
    )
    assert unasserted_tests(tmp_path) == ["test_x.py:4 test_calls_only"]
