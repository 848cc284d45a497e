"""Benches share the test harness, never the tests: a bench importing a test module would run
(or break with) whatever that module sets up for pytest, and tie the bench to one test's shape.
What both need lives in tests/harness/."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imported_modules(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
            found += [f"{node.module}.{alias.name}" for alias in node.names if node.module == "tests"]
    return found


def test_benches_import_only_the_harness_of_the_tests():
    wrong = [
        f"{path.relative_to(ROOT)}: {module}"
        for path in sorted((ROOT / "bench").glob("*.py"))
        for module in imported_modules(path)
        if module.split(".")[0] == "tests"
        and module != "tests.harness"
        and not module.startswith("tests.harness.")
    ]
    assert wrong == []
