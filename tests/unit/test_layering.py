"""The package's layers, computed from the source: no cycle between parts, every
import points down the order below, and the dashboard loads neither the ELF reader
nor a sampler (it is handed frozen snapshots).

The order is DESIGN.md's list as the code has it: ``target`` sits below
``symbolize`` (the symbolizer opens the target's files through /proc/PID/root),
``frames`` (a raw sample to frame ids: unwinding, symbolizing, kernel and Python
frames) sits above ``sampling``, whose samples it takes, and below ``engine``, which
routes samples to it; ``profile`` and ``capture`` sit below ``engine`` (the engine
builds both).
Leaf utilities every layer may use (errors, records, interrupts, files, collector,
frozen, and the C extensions _symrows, _cfiwalk, _frozen and _perfsamples, which
import nothing of livesym) come first. Imports under ``if TYPE_CHECKING:`` are not run-time arrows.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "livesym"

ORDER = (
    "errors", "__version__", "_symrows", "_cfiwalk", "_frozen", "_perfsamples", "frozen",
    "collector", "files",
    "interrupts", "printable", "priority",
    "addr.kinds", "records", "addr", "elf", "target", "symbolize", "unwind", "sampling",
    "frames", "profile", "capture", "engine", "export", "ui", "sample_targets",
    "commands", "cli", "entry", "__main__",
)  # fmt: skip


def part_of(module: str) -> str:
    """``livesym.symbolize.process`` -> ``symbolize``; ``livesym.cli`` -> ``cli``. The
    address kinds are a part of their own, below ``records`` (DESIGN.md: records import
    only ``addr.kinds``), while the rest of ``addr`` builds on records."""
    if module == "livesym.addr.kinds":
        return "addr.kinds"
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else "livesym"


def run_time_imports(tree: ast.Module) -> list[str]:
    """The livesym modules (or names of the package) a module imports when it runs."""
    typing_only = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }
    found = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "livesym":
                found += [f"livesym.{a.name}" for a in node.names]
            elif node.module.startswith("livesym."):
                found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("livesym.")]
    return found


def part_graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        module = ".".join(relative.parts).removesuffix(".__init__")
        source = part_of(module)
        for imported in run_time_imports(ast.parse(path.read_text())):
            target = part_of(imported)
            if target != source:
                edges[source].add(target)
    return edges


def test_no_part_imports_one_above_it_so_there_is_no_cycle():
    edges = part_graph()
    unknown = {p for p in edges} | {p for targets in edges.values() for p in targets}
    assert unknown <= set(ORDER), f"parts missing from ORDER: {sorted(unknown - set(ORDER))}"
    upward = sorted(
        (source, target)
        for source, targets in edges.items()
        for target in targets
        if ORDER.index(target) > ORDER.index(source)
    )
    assert upward == [], f"imports that point up the layers: {upward}"


def test_records_import_nothing_of_livesym_but_the_address_kinds():
    tree = ast.parse((PACKAGE / "records.py").read_text())
    assert run_time_imports(tree) == ["livesym.addr.kinds"]
    kinds = ast.parse((PACKAGE / "addr" / "kinds.py").read_text())
    assert run_time_imports(kinds) == []


def test_the_dashboard_loads_neither_the_elf_reader_nor_a_sampler():
    # (nor the unwinder, nor the step from a raw sample to frames: it is handed snapshots)
    code = (
        "import sys, livesym.ui.app; "
        "print('\\n'.join(m for m in sys.modules if m.startswith(('livesym.elf', "
        "'livesym.sampling', 'livesym.symbolize', 'livesym.unwind', 'livesym.frames', "
        "'elftools'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    assert done.stdout.split() == []


def test_the_hub_never_asks_which_kind_of_session_it_runs():
    # A replay is a sampler and a side like any other: once built, the Engine names
    # neither the replay's classes nor the live ones, and never compares its source.
    tree = ast.parse((PACKAGE / "engine" / "hub.py").read_text())
    engine = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Engine")
    methods = [
        n for n in engine.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        and n.name not in ("__init__", "for_capture")  # the constructors pick the parts
    ]  # fmt: skip
    assert len(methods) > 20
    names = {n.id for m in methods for n in ast.walk(m) if isinstance(n, ast.Name)}
    assert not names & {"CaptureSampler", "RecordedSide", "LiveSide", "TargetProcess"}
    compared = [
        ast.unparse(n) for m in methods for n in ast.walk(m)
        if isinstance(n, ast.Compare) and "source" in ast.unparse(n)
    ]  # fmt: skip
    assert compared == []
    # ... and the check can see such a branch where there is one: _side_for picks a side.
    picker = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_side_for")
    assert {"CaptureSampler"} <= {n.id for n in ast.walk(picker) if isinstance(n, ast.Name)}


def module_graph() -> dict[str, set[str]]:
    """Module -> the livesym modules it imports when it runs, function-local imports
    included (``from livesym.x import y``: the module ``livesym.x.y`` where that is a
    module, else ``livesym.x``)."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        modules[".".join(relative.parts).removesuffix(".__init__")] = path
    edges: dict[str, set[str]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text())
        found: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.startswith("livesym"):
                    for alias in node.names:
                        sub = f"{node.module}.{alias.name}"
                        found.add(sub if sub in modules else node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("livesym")}
        edges[module] = {m for m in found if m in modules and m != module}
    return edges


def test_no_module_imports_itself_round_a_cycle_even_inside_a_function():
    edges = module_graph()
    # depth-first, colouring each module: a module met again while still open is a cycle
    state: dict[str, int] = {}  # 1: open, 2: done
    cycles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(edges.get(module, ())):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target) :], module, target])
            elif target not in state:
                visit(target, [*path, module])
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [])
    assert cycles == [], cycles
