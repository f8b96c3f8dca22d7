"""The package's modules import one another in one direction only (no circle): _library, config,
patterns, ops below nn, nn below models and patch, everything below __init__."""
import ast
import os

PACKAGE = os.path.join(os.path.dirname(__file__), "..", "sparsevit")


def package_imports(path):
    """Names of the sibling modules a module imports (`from . import x`, `from .x import y`),
    at module level or inside functions."""
    found = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
    return found


def test_the_package_imports_form_no_circle():
    modules = {f[:-3]: package_imports(os.path.join(PACKAGE, f)) for f in os.listdir(PACKAGE) if f.endswith(".py")}
    imports = {m: deps & set(modules) for m, deps in modules.items() if m != "__init__"}
    order = []  # topological: a module after everything it imports
    while imports:
        ready = sorted(m for m, deps in imports.items() if deps <= set(order))
        assert ready, f"import circle among {sorted(imports)}: {({m: sorted(d) for m, d in imports.items()})}"
        order += ready
        for m in ready:
            del imports[m]
    assert order.index("patterns") < order.index("nn")
