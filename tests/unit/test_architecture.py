"""Dependency rules of the pack, checked on the source (AST only: nothing is imported or run).

Pack code is the root ``__init__.py``, ``install.py``, ``nodes/`` and ``swapline_core/``. The rules:

- swapline_core imports nothing from ComfyUI (comfy, comfy_api, comfy_extras, folder_paths, ...),
  nodes, devtools or tests: the core runs and is tested without ComfyUI.
- nodes reach the core only through relative ``..swapline_core.<module>`` imports, and no pack
  module uses another module's ``_private`` names (import or attribute).
- swapline_core/video does not import diffusion; swapline_core/qa does not import video.stages;
  swapline_core/provenance imports only errors, types, the package root and itself.
- nothing in the pack, bench/ or scripts/ imports tests; the pack never imports devtools or bench.
- no import cycle between core subpackages at module level (run with -s to see the graph).
- no pack module over 500 lines; no function in swapline_core/ or nodes/ over 80 lines unless a
  comment right above it says why.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACK_DIRS = ("nodes", "swapline_core")
PACK_FILES = ("__init__.py", "install.py")
COMFY_MODULES = {"comfy", "comfy_api", "comfy_extras", "comfy_execution", "comfy_config", "folder_paths",
                 "execution", "server", "nodes", "node_helpers", "latent_preview", "app", "utils", "main"}
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80

# Explicit exceptions, each with its reason. Keep empty where possible.
ALLOWED_PRIVATE: set[tuple[str, str]] = set()        # (importing module, "module._name")
ALLOWED_LONG_MODULES: set[str] = set()


@dataclass(frozen=True)
class Import:
    module: str          # importing module, dotted from the repo root ("" for the root __init__)
    target: str          # resolved dotted target ("swapline_core.video.read"; absolute as written)
    names: tuple         # imported names for "from X import a, b"; () for "import X"
    asnames: tuple       # the local name each of ``names`` is bound to
    relative: bool
    top_level: bool      # executed at import time (module body, not a function, not TYPE_CHECKING)
    line: int


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _package(path: Path) -> list[str]:
    name = _module_name(path)
    parts = name.split(".") if name else []
    return parts if path.name == "__init__.py" else parts[:-1]


def _files(*dirs: str, files: tuple = ()) -> list[Path]:
    out = [REPO / f for f in files if (REPO / f).exists()]
    for d in dirs:
        out += sorted(p for p in (REPO / d).rglob("*.py") if "__pycache__" not in p.parts)
    return out


PACK = _files(*PACK_DIRS, files=PACK_FILES)


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def imports_of(path: Path) -> list[Import]:
    tree = ast.parse(path.read_text(), str(path))
    module, pkg = _module_name(path), _package(path)
    out: list[Import] = []

    def visit(node, top: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, False)
            elif isinstance(child, ast.If) and _is_type_checking(child):
                visit(child, False)
            elif isinstance(child, ast.Import):
                for a in child.names:
                    out.append(Import(module, a.name, (), (), False, top, child.lineno))
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = pkg[:len(pkg) - (child.level - 1)] if child.level > 1 else pkg
                    assert child.level - 1 <= len(pkg), f"{path}:{child.lineno} relative import above the repo"
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module
                out.append(Import(module, target, tuple(a.name for a in child.names),
                                  tuple(a.asname or a.name for a in child.names), bool(child.level), top,
                                  child.lineno))
            else:
                visit(child, top)

    visit(tree, True)
    return out


def _where(path: Path, imp: Import) -> str:
    return f"{path.relative_to(REPO)}:{imp.line} {'from ' if imp.names else 'import '}{imp.target}" + (
        f" import {', '.join(imp.names)}" if imp.names else "")


def _under(target: str, prefix: str) -> bool:
    return target == prefix or target.startswith(prefix + ".")


def _all_imports(files):
    for p in files:
        for imp in imports_of(p):
            yield p, imp


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_core_does_not_import_comfyui_nodes_devtools_or_tests():
    bad = [_where(p, i) for p, i in _all_imports(_files("swapline_core"))
           if (not i.relative and i.target.split(".")[0] in COMFY_MODULES | {"devtools", "tests", "bench"})
           or (i.relative and not _under(i.target, "swapline_core"))]
    assert not bad, "swapline_core must stay free of ComfyUI and the dev tooling:\n" + "\n".join(bad)


def test_nodes_reach_the_core_only_by_relative_imports():
    # ComfyUI imports the pack as a package of its own (folder) name: absolute imports of its
    # folders would pick up ComfyUI's nodes.py or fail. install.py is run as a script by
    # ComfyUI-Manager (no package), so it alone imports swapline_core absolutely.
    files = [p for p in PACK if p.name != "install.py" or p.parent != REPO]
    # nodes/prompt_guard.py imports ComfyUI's own top-level nodes.py (NODE_CLASS_MAPPINGS) inside a
    # function that runs in the server process: that `import nodes` is ComfyUI's, not ours.
    allowed = {("nodes/prompt_guard.py", "nodes")}
    bad = [_where(p, i) for p, i in _all_imports(files)
           if not i.relative and i.target.split(".")[0] in {"swapline_core", "nodes", "swapline"}
           and (p.relative_to(REPO).as_posix(), i.target) not in allowed]
    assert not bad, "use relative imports inside the pack (..swapline_core.<module>):\n" + "\n".join(bad)


def test_no_private_names_across_modules():
    pack_modules = {_module_name(p) for p in PACK}
    bad = []
    for p in PACK:
        aliases: dict[str, str] = {}            # local name -> pack module it is bound to
        for i in imports_of(p):
            if not _under(i.target, "swapline_core") and not _under(i.target, "nodes") and i.target:
                continue
            for n, local in zip(i.names, i.asnames):
                full = f"{i.target}.{n}" if i.target else n
                if full in pack_modules:
                    aliases[local] = full
                elif _is_private(n) and (i.module, full) not in ALLOWED_PRIVATE:
                    bad.append(f"{p.relative_to(REPO)}:{i.line} imports {full}")
        for node in ast.walk(ast.parse(p.read_text())):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases and _is_private(node.attr)
                    and aliases[node.value.id] != _module_name(p)):
                bad.append(f"{p.relative_to(REPO)}:{node.lineno} uses {aliases[node.value.id]}.{node.attr}")
    assert not bad, "another module's private names (make them public or move the code):\n" + "\n".join(bad)


def _core_imports(sub: str):
    return [(p, i) for p, i in _all_imports(_files(f"swapline_core/{sub}")) if _under(i.target, "swapline_core")]


def test_video_does_not_import_diffusion():
    bad = [_where(p, i) for p, i in _core_imports("video")
           if _under(i.target, "swapline_core.diffusion")
           or (i.target == "swapline_core" and "diffusion" in i.names)]
    assert not bad, "\n".join(bad)


def test_qa_does_not_import_the_video_stages():
    bad = [_where(p, i) for p, i in _core_imports("qa")
           if _under(i.target, "swapline_core.video.stages")
           or (i.target == "swapline_core.video" and "stages" in i.names)]
    assert not bad, "\n".join(bad)


def test_provenance_imports_only_errors_types_root_and_itself():
    ok = ("swapline_core.errors", "swapline_core.types", "swapline_core.provenance")
    bad = []
    for p, i in _core_imports("provenance"):
        if i.target == "swapline_core":
            if set(i.names) - {"__version__", "errors", "types"}:
                bad.append(_where(p, i))
        elif not any(_under(i.target, o) for o in ok):
            bad.append(_where(p, i))
    assert not bad, "\n".join(bad)


def test_nothing_shipped_or_tooling_imports_tests():
    files = PACK + _files("bench", "scripts", "devtools")
    bad = [_where(p, i) for p, i in _all_imports(files)
           if not i.relative and i.target.split(".")[0] == "tests"]
    bad += [_where(p, i) for p, i in _all_imports(PACK)
            if not i.relative and i.target.split(".")[0] in {"devtools", "bench"}]
    # sys.path tricks are imports in disguise
    for p in files:
        text = p.read_text()
        if '/ "tests")' in text or "/ 'tests')" in text:
            bad.append(f"{p.relative_to(REPO)} puts tests/ on sys.path")
    assert not bad, "\n".join(bad)


CORE_PARTS = {p.stem if p.is_file() else p.name for p in (REPO / "swapline_core").iterdir()
              if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.stem != "__init__")}


def _subpackage(target: str) -> str | None:
    """swapline_core.video.read -> "video"; swapline_core.types -> "types"; the package's own
    __init__ (e.g. __version__) -> "<root>"; outside the core -> None."""
    parts = target.split(".")
    if parts[0] != "swapline_core":
        return None
    return parts[1] if len(parts) > 1 and parts[1] in CORE_PARTS else "<root>"


def core_graph() -> dict[str, set[str]]:
    """Module-level imports between core subpackages (top-level modules count as their own)."""
    graph: dict[str, set[str]] = {}
    for _p, i in _all_imports(_files("swapline_core")):
        if not i.top_level:
            continue
        src = _subpackage(i.module)
        targets = [i.target + "." + n for n in i.names] if i.target == "swapline_core" else [i.target]
        for t in targets:
            dst = _subpackage(t)
            if dst is None or src is None:
                continue
            graph.setdefault(src, set())
            if dst != src:
                graph[src].add(dst)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_no_import_cycles_between_core_subpackages():
    graph = core_graph()
    print("\ncore subpackage imports at module level:")
    for src in sorted(graph):
        print(f"  {src} -> {', '.join(sorted(graph[src])) or '(nothing)'}")
    cycles = _cycles(graph)
    assert not cycles, f"import cycles between core subpackages: {cycles}"


def test_pack_modules_stay_under_500_lines():
    long_ = [f"{p.relative_to(REPO)}: {n} lines" for p in PACK
             if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
             and str(p.relative_to(REPO)) not in ALLOWED_LONG_MODULES]
    assert not long_, "split these by responsibility:\n" + "\n".join(long_)


def test_long_functions_say_why():
    bad = []
    for p in _files(*PACK_DIRS):
        lines = p.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            length = node.end_lineno - node.lineno + 1
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            above = lines[first - 2].strip() if first >= 2 else ""
            if length > MAX_FUNCTION_LINES and not above.startswith("#"):
                bad.append(f"{p.relative_to(REPO)}:{node.lineno} {node.name}: {length} lines")
    assert not bad, ("split these, or put a one-line comment right above saying why they are long:\n"
                     + "\n".join(bad))
