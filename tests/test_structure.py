"""The project's shape: imports point one way, agents stand alone, modules stay small.

Read from the source with `ast` (no imports run): every project module's
imports of other project modules form a graph that must have no cycle;
`networks` and `replay` import no `agents` or `launch`; `agents` imports no
`launch`; no agent sub-package imports another; no `launch` module (sub-packages
included) is longer than ~300 lines; no test edits `sys.path`.

`launch/` has three rooms: the environments (`launch/environments/`), which import
nothing of the wiring; the tools (`launch/tools/`), which no library module
imports, each run from a checkout through a shim at its old path
(`launch/evaluate.py`: a docstring and `runpy`, no import of the tool); and the
wiring, the rest.
"""

import ast
import os
from typing import Dict, List, Set

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ('agents', 'networks', 'replay', 'launch')
NAMESPACE = 'reverb_agents'  # what they are installed and imported under (setup.py)
AGENT_PACKAGES = ('clear', 'acer', 'sac')
MAX_LAUNCH_LINES = 300
ENVIRONMENTS = 'launch.environments'
TOOLS = 'launch.tools'


def _modules() -> Dict[str, str]:
    """Dotted module name -> path, for every module of the project's packages."""
    out = {}
    for package in PACKAGES:
        for parent, _, files in os.walk(os.path.join(ROOT, package)):
            for name in files:
                if name.endswith('.py'):
                    path = os.path.join(parent, name)
                    dotted = os.path.relpath(path, ROOT)[:-3].replace(os.sep, '.')
                    out[dotted.removesuffix('.__init__')] = path
    return out


MODULES = _modules()


def _imports(path: str, module: str) -> Set[str]:
    """The project modules `module` imports (the longest known prefix of each name)."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:  # relative import
                parts = module.split('.')[:-node.level]
                base = '.'.join(parts + ([base] if base else []))
            names += [f'{base}.{alias.name}' for alias in node.names] + [base]
    found = set()
    for name in names:
        parts = name.removeprefix(f'{NAMESPACE}.').split('.')
        for end in range(len(parts), 0, -1):
            candidate = '.'.join(parts[:end])
            if candidate in MODULES and candidate != module:
                found.add(candidate)
                break
    return found


GRAPH = {module: _imports(path, module) for module, path in MODULES.items()}


def test_the_graph_covers_the_project():
    assert {'agents.contract', 'agents.registry', 'launch.run', 'launch.setup',
            'networks.cores', 'replay.layout'} <= set(GRAPH)


def test_no_import_cycle():
    state: Dict[str, int] = {}  # 1: on the current path, 2: done
    cycles: List[List[str]] = []

    def visit(module: str, path: List[str]) -> None:
        state[module] = 1
        for target in sorted(GRAPH[module]):
            if state.get(target) == 1:
                cycles.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target, path + [target])
        state[module] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module, [module])
    assert not cycles, 'import cycles: ' + '; '.join(' -> '.join(c) for c in cycles)


@pytest.mark.parametrize('package,forbidden', [
    ('networks', ('agents', 'launch')),
    ('replay', ('agents', 'launch')),
    ('agents', ('launch',)),
])
def test_dependencies_point_one_way(package, forbidden):
    wrong = {module: sorted(t for t in targets if t.split('.')[0] in forbidden)
             for module, targets in GRAPH.items() if module.split('.')[0] == package}
    assert not {m: t for m, t in wrong.items() if t}


def test_agents_do_not_import_each_other():
    wrong = {}
    for module, targets in GRAPH.items():
        parts = module.split('.')
        if parts[0] == 'agents' and len(parts) > 1 and parts[1] in AGENT_PACKAGES:
            others = sorted(t for t in targets if t.split('.')[0] == 'agents'
                            and len(t.split('.')) > 1 and t.split('.')[1] in AGENT_PACKAGES
                            and t.split('.')[1] != parts[1])
            if others:
                wrong[module] = others
    assert not wrong


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + '.')


def test_the_rooms_exist():
    rooms = {m.rsplit('.', 1)[0] for m in MODULES if _inside(m, 'launch') and m.count('.') == 2}
    assert {ENVIRONMENTS, TOOLS} <= rooms
    # Importing one environment module (suites, bandits) loads no sibling through it.
    assert not GRAPH[ENVIRONMENTS]
    assert {f'{ENVIRONMENTS}.factory', f'{ENVIRONMENTS}.bandits', f'{TOOLS}.evaluate',
            f'{TOOLS}.plot'} <= set(MODULES)


def test_environments_import_nothing_of_the_wiring():
    wrong = {module: sorted(t for t in targets
                            if _inside(t, 'launch') and not _inside(t, ENVIRONMENTS))
             for module, targets in GRAPH.items() if _inside(module, ENVIRONMENTS)}
    assert not {m: t for m, t in wrong.items() if t}


def test_no_library_module_imports_the_tools():
    wrong = {module: sorted(t for t in targets if _inside(t, TOOLS))
             for module, targets in GRAPH.items()}
    assert not {m: t for m, t in wrong.items() if t}


def _shim_target(path: str) -> str:
    """The module a checkout shim runs, or '' when `path` is more than a shim: a
    docstring, `import runpy` and, under `if __name__ == '__main__':`, one
    `runpy.run_module('<module>', run_name='__main__')`."""
    with open(path) as f:
        body = ast.parse(f.read(), path).body
    shape = [type(node) for node in body]
    if shape != [ast.Expr, ast.Import, ast.If] or [a.name for a in body[1].names] != ['runpy']:
        return ''
    guard, calls = body[2].test, body[2].body
    if ast.unparse(guard) != "__name__ == '__main__'" or len(calls) != 1:
        return ''
    call = calls[0].value if isinstance(calls[0], ast.Expr) else None
    if (not isinstance(call, ast.Call) or ast.unparse(call.func) != 'runpy.run_module'
            or len(call.args) != 1 or not isinstance(call.args[0], ast.Constant)
            or [(k.arg, ast.unparse(k.value)) for k in call.keywords]
            != [('run_name', "'__main__'")]):
        return ''
    return call.args[0].value


def test_every_tool_runs_from_its_checkout_path_through_a_shim():
    tools = sorted(m.rsplit('.', 1)[1] for m in MODULES if _inside(m, TOOLS) and m != TOOLS)
    assert tools, 'no tools found'
    targets = {name: _shim_target(MODULES[f'launch.{name}']) if f'launch.{name}' in MODULES
               else 'missing' for name in tools}
    assert targets == {name: f'{NAMESPACE}.{TOOLS}.{name}' for name in tools}


def test_launch_modules_stay_small():
    long = {}
    for module, path in MODULES.items():
        if module.startswith('launch.'):
            with open(path) as f:
                lines = sum(1 for _ in f)
            if lines > MAX_LAUNCH_LINES:
                long[module] = lines
    assert not long


def test_no_test_edits_sys_path():
    here = os.path.dirname(os.path.abspath(__file__))
    offenders = []
    for parent, _, files in os.walk(here):
        for name in files:
            if name.endswith('.py') and name != os.path.basename(__file__):
                with open(os.path.join(parent, name)) as f:
                    if 'sys.path.' in f.read():
                        offenders.append(name)
    assert not offenders
