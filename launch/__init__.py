"""The wiring of a run, in rooms by job, each a sub-package whose docstring says what
it may import; imports between rooms point one way (`tests/test_structure.py`):

    runs, environments  <  acting  <  building  <  policies  <  evaluation
                        <  learning  <  runners  <  command_line

`tools` (evaluate, record, plot, benchmark) may import any room and no room imports it.
Here, at the top, stay only the entry points users type: `run.py` and the tools'
scripts (`python launch/evaluate.py`, each a `runpy` shim), `cli.py` (the installed
`reverb-agents` command) and `api.py` (the Python API, which users import as
`from reverb_agents import train, load_policy`). Those names are here too, loaded
through that package's lazy loader on first use: importing `launch.policies.load` or
the console's filter must not start TensorFlow's wiring, and the rooms import this
package.
"""

_API = ('train', 'Result', 'load_policy')


def __getattr__(name):
    if name in _API:
        import reverb_agents  # noqa: PLC0415  (its loader filters TensorFlow's start-up lines)
        return getattr(reverb_agents, name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
