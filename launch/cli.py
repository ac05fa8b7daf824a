"""`reverb-agents COMMAND [flags]`: the installed command for the scripts in `launch/`.

    reverb-agents train --preset=clear_cartpole     # launch/run.py
    reverb-agents tune --agent=clear --env=ID ...   # launch/tune.py
    reverb-agents evaluate --saved_model=DIR        # launch/tools/evaluate.py
    reverb-agents record|plot|benchmark ...         # launch/tools/record.py, plot.py, ...
    reverb-agents presets                           # the presets' names

Each command runs its script's module as `__main__` (so `reverb-agents train
--help` is `python launch/run.py --help`); the scripts keep working from a
checkout (`python launch/evaluate.py` runs the tool's module the same way).
"""

import runpy
import sys
from typing import List, Optional

COMMANDS = {  # command: (module in reverb_agents.launch, what it does)
    'train': ('command_line.train', 'train an agent (a preset, an environment, any config field)'),
    'tune': ('tuning.tune', "search an agent's settings on an environment (Optuna trials)"),
    'evaluate': ('tools.evaluate', 'play episodes with an exported policy (TensorFlow only)'),
    'record': ('tools.record', "record an exported policy's episodes as demonstrations"),
    'plot': ('tools.plot', 'plot the learning curves of runs (PNG)'),
    'benchmark': ('tools.benchmark', 'measure acting, learning and whole-run throughput (JSON)'),
    'presets': ('', 'list the presets (--preset=NAME of train)'),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f'  {name:<{width}}  {text}' for name, (_, text) in COMMANDS.items()]
    return ('usage: reverb-agents COMMAND [flags]   (reverb-agents COMMAND --help: its flags)\n'
            '\ncommands:\n' + '\n'.join(lines))


def main(argv: Optional[List[str]] = None) -> int:
    """Runs `argv[1]`'s script with the rest of `argv`; returns the exit status."""
    argv = list(sys.argv if argv is None else argv)
    if len(argv) < 2 or argv[1] in ('-h', '--help', 'help'):
        print(usage())
        return 0
    command = argv[1]
    if command not in COMMANDS:
        print(f'error: unknown command {command!r}; choose one of {list(COMMANDS)}',
              file=sys.stderr)
        return 1
    if command == 'presets':
        from reverb_agents.launch.runs import preset_files  # no TensorFlow
        print('\n'.join(preset_files.list_presets()))
        return 0
    module = f'reverb_agents.launch.{COMMANDS[command][0]}'
    sys.argv = [f'reverb-agents {command}', *argv[2:]]
    try:
        runpy.run_module(module, run_name='__main__')
    except SystemExit as e:  # absl's app.run ends every run with sys.exit
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
