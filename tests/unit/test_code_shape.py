"""Shape rules the code keeps: small functions in the domain and the actor runtime."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 60  # lines, decorators and docstring included


def long_functions(package: str) -> list[str]:
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                length = (node.end_lineno or node.lineno) - first + 1
                if length > LIMIT:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_in_the_domain_or_the_runtime_is_longer_than_sixty_lines():
    assert long_functions("actors") + long_functions("supervisor/runtime") == []
