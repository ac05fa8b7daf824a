"""The project's shape: imports point one way, agents stand alone, `launch/` has rooms.

Read from the source with `ast` (no imports run): every project module's
imports of other project modules form a graph that must have no cycle;
`networks` and `replay` import no `agents` or `launch`; `agents` imports no
`launch`; no agent sub-package imports another; no test edits `sys.path`.

`launch/` is in rooms by job, each a sub-package (`launch/runs/`, `acting/`, ...)
whose imports of other rooms point down `ROOMS`' order; the environments import
nothing of the wiring; the tools (`launch/tools/`) may import any room and no library
module imports them, each run from a checkout through a shim at its old path
(`launch/evaluate.py`: a docstring and `runpy`, no import of the tool). At
`launch/`'s top stay only the entry points (`ENTRY_POINTS`, the shims).

Across the library a module does one job, which its docstring's first line says,
and no function is longer than a screen (`SCREEN` lines) without a comment saying why
(`# Long: ...` in it).
"""

import ast
import os
from typing import Dict, List, Set

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ('agents', 'networks', 'replay', 'launch')
NAMESPACE = 'reverb_agents'  # what they are installed and imported under (setup.py)
AGENT_PACKAGES = ('clear', 'acer', 'sac', 'a2c')
ENVIRONMENTS = 'launch.environments'
TOOLS = 'launch.tools'
# launch/'s rooms, lowest first: a room imports only rooms before it (and itself)
ROOMS = (('launch.runs', 'launch.environments'), ('launch.acting',), ('launch.building',),
         ('launch.policies',), ('launch.evaluation',), ('launch.learning',),
         ('launch.runners',), ('launch.command_line',), ('launch.tuning',))
# launch/'s top: what users type or import, above every room
ENTRY_POINTS = ('launch', 'launch.api', 'launch.cli', 'launch.run', 'launch.tune')
SCREEN = 60  # lines of a function, its signature and docstring included


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
    assert {'agents.contract', 'agents.registry', 'launch.command_line.train',
            'launch.building.setup',
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
    assert rooms == {room for floor in ROOMS for room in floor} | {TOOLS}
    # Importing a room (or one environment module) loads no sibling through it.
    assert not any(GRAPH[room] for room in rooms)
    assert {f'{ENVIRONMENTS}.factory', f'{ENVIRONMENTS}.bandits', f'{TOOLS}.evaluate',
            f'{TOOLS}.plot'} <= set(MODULES)


def _room(module: str) -> str:
    return '.'.join(module.split('.')[:2])


def test_launch_holds_rooms_and_entry_points_only():
    top = sorted(m for m in MODULES if _inside(m, 'launch') and m.count('.') <= 1
                 and not MODULES[m].endswith('__init__.py')
                 and m not in ENTRY_POINTS and not _shim_target(MODULES[m]))
    assert not top, f'modules at launch/\'s top that belong in a room: {top}'


def test_rooms_import_one_way():
    floor = {room: i for i, rooms in enumerate(ROOMS) for room in rooms}
    wrong = {}
    for module, targets in GRAPH.items():
        if _room(module) not in floor:
            continue
        up = sorted(t for t in targets if _inside(t, 'launch') and t != 'launch'
                    and (floor.get(_room(t), len(ROOMS)) > floor[_room(module)]
                         or (_room(t) != _room(module)
                             and floor.get(_room(t)) == floor[_room(module)])))
        if up:
            wrong[module] = up
    assert not wrong, f'imports up or across launch/\'s rooms: {wrong}'


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


def test_every_module_says_its_job():
    silent = []
    for module, path in MODULES.items():
        with open(path) as f:
            doc = ast.get_docstring(ast.parse(f.read(), path))
        if not doc or not doc.split('\n', 1)[0].strip():
            silent.append(module)
    assert not silent, f'modules whose docstring does not open with their job: {silent}'


def test_functions_fit_a_screen_or_say_why():
    long = {}
    for module, path in MODULES.items():
        with open(path) as f:
            source = f.read()
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source, path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                body = lines[node.lineno - 1:node.end_lineno]
                if length > SCREEN and not any(line.strip().startswith('# Long: ')
                                               for line in body):
                    long[f'{module}.{node.name}'] = length
    assert not long, f'functions longer than {SCREEN} lines without a "# Long: why": {long}'


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
