"""`--help` of the command-line scripts: their own flags, grouped, one short entry each.

absl's own `--help` prints the main module's doc and that module's flags and
exits 1, and `--helpfull` mixes absl's, TensorFlow's (test, TPU) and every
agent's flags in one list. Here:

- `launch/run.py --help`: the run flags (`launch/command_line/run_flags.py`'s) in two
  groups, run and processes; with `--agent=NAME` also that agent's config
  fields with that agent's doc and default, grouped by the sub-config that
  holds them (agent, replay, optimizer, signals; `GROUPS`). `--no_preset`
  (an alias of `--preset=none`) is not listed.
- the other scripts (`script_parser`): the flags their own module defines
  (and, for `benchmark.py --agent=NAME`, that agent's fields).
- `--helpfull`: every flag absl knows, as absl lists them.

Each entry is `--name=default` and the first sentence of the flag's help,
wrapped to the terminal. Help goes to stdout and exits 0. No TensorFlow is
imported here.
"""

import os
import re
import shutil
import sys
import textwrap
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from absl import flags

from reverb_agents.agents import configs
from reverb_agents.launch.runs import console
from reverb_agents.launch.runs.options import RunOptions

HELP_ARGS = ('--help', '-help', '-h', '--helpshort', '-helpshort', '-?')
HELPFULL_ARGS = ('--helpfull', '-helpfull')
HIDDEN = ('no_preset',)  # `--preset=none`'s alias
# The run flags of multi-process runs; every other run flag is in 'run'.
PROCESS_FLAGS = ('launcher', 'num_actors', 'ray_address', 'actor_cpus', 'actor_resources',
                 'learner_resources', 'learner_gpus', 'role', 'replay_address', 'replay_port',
                 'actor_id', 'connect_timeout_s', 'reconnect_timeout_s',
                 'replay_checkpoint_interval_s')
# Sub-config attribute -> help group; a field outside these sub-configs is 'agent'.
GROUPS = {'replay': 'replay', 'optimizer': 'optimizer', 'signals': 'signals'}
_NAME_COLUMN = 34  # where the help text starts when the name and default fit before it
_AGENT_DEFAULT = re.compile(r'\s*\(default [^()]*(\([^()]*\)[^()]*)*\)\s*$')


def _agents() -> Dict[str, Any]:
    """`registry.AGENTS`, imported when asked for: the agents import TensorFlow, which
    `evaluate.py --help` and `plot.py --help` need not load."""
    from reverb_agents.agents import registry
    return registry.AGENTS


class HelpError(ValueError):
    """A help request naming an unknown agent."""


def wants_help(argv: Sequence[str]) -> bool:
    """True when the arguments after the program name ask for `--help` (or `-h`)."""
    return any(arg in HELP_ARGS for arg in _flag_args(argv))


def wants_helpfull(argv: Sequence[str]) -> bool:
    return any(arg in HELPFULL_ARGS for arg in _flag_args(argv))


def _flag_args(argv: Sequence[str]) -> List[str]:
    args = list(argv[1:])
    return args[:args.index('--')] if '--' in args else args


def requested_agent(argv: Sequence[str]) -> Optional[str]:
    """The `--agent=NAME` (or `--agent NAME`) of the command line, the last one; None if
    none. Raises HelpError for an agent the registry does not know."""
    args, agent = _flag_args(argv), None
    for i, arg in enumerate(args):
        name, eq, value = arg.lstrip('-').partition('=')
        if not arg.startswith('-') or name != 'agent':
            continue
        if not eq:
            value = args[i + 1] if i + 1 < len(args) else ''
        agent = value
    if agent is not None and agent not in _agents():
        raise HelpError(f'unknown agent {agent!r}; choose one of {sorted(_agents())}')
    return agent


def program(argv: Sequence[str]) -> str:
    """How the user ran the script: `python launch/run.py` or `reverb-agents train`."""
    name = argv[0] if argv else 'run.py'
    return f'python {name}' if name.endswith('.py') else name


def show_value(value: Any) -> str:
    """A default as a flag takes it: true/false, comma-separated lists, '' for none."""
    if value is None:
        return ''
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, (list, tuple)):
        return ','.join(show_value(v) for v in value)
    text = str(value)
    return repr(text) if text != text.strip() or ' ' in text else text


def first_sentence(text: str) -> str:
    """The help up to its first full stop that ends a sentence (the rest: `--helpfull`)."""
    text = ' '.join(text.split())
    match = re.search(r'(?<!\.)\.\s+(?=[A-Z])', text)
    return text[:match.start() + 1] if match else text


def _width() -> int:
    columns = shutil.get_terminal_size((100, 24)).columns
    return min(max(columns or 100, 60), 120)


def entry(name: str, default: Any, text: str, width: int) -> str:
    """`  --name=default    help`, the help wrapped under itself."""
    value = show_value(default)
    head = f'  --{name}' + (f'={value}' if value != '' else '')
    indent = ' ' * _NAME_COLUMN
    body = textwrap.wrap(first_sentence(text), max(width - _NAME_COLUMN, 30),
                         break_on_hyphens=False) or ['']
    if len(head) + 2 <= _NAME_COLUMN:
        lines = [head.ljust(_NAME_COLUMN) + body[0]] + [indent + b for b in body[1:]]
    else:
        lines = [head] + [indent + b for b in body]
    return '\n'.join(line.rstrip() for line in lines)


def section(title: str, entries: Sequence[Tuple[str, Any, str]], width: int) -> str:
    return f'{title}:\n' + '\n'.join(entry(n, d, t, width) for n, d, t in entries)


def run_flag_names() -> List[str]:
    """The flags `launch/command_line/run_flags.define_flags` defines (some through other modules:
    `--network_isolation`), the agents' config fields left out, in definition order."""
    # run_flags imports the agents (TensorFlow)
    from reverb_agents.launch.command_line import run_flags as command_line
    fresh = flags.FlagValues()
    command_line.define_flags(fresh)
    fields = {name for agent in _agents().values()
              for name in configs.flat_fields(agent.config_class)}
    return [name for name in fresh if name not in fields]


def run_flag_groups(fv: flags.FlagValues, agent: Optional[str] = None
                    ) -> Dict[str, List[Tuple[str, Any, str]]]:
    """{'run': [(name, default, help)], 'processes': [...]}: `launch/run.py`'s own flags.
    With `agent`, a flag whose default is that agent's (`Agent.run_defaults`) shows it."""
    run_defaults = _agents()[agent].run_defaults if agent else {}
    options = RunOptions(logdir='-')
    groups: Dict[str, List[Tuple[str, Any, str]]] = {'run': [], 'processes': []}
    for name in run_flag_names():
        if name in HIDDEN:
            continue
        flag = fv[name]
        default, text = flag.default, flag.help
        if agent and default is None and _AGENT_DEFAULT.search(text):
            # A per-agent default ('(default 64; sac: 8)'): this agent's, in place of the list.
            default = run_defaults.get(flag.name, getattr(options, flag.name))
            text = _AGENT_DEFAULT.sub('', text)
        if agent and flag.name == 'agent':
            default = agent
        groups['processes' if flag.name in PROCESS_FLAGS else 'run'].append(
            (flag.name, default, text))
    return groups


def agent_field_groups(agent: str) -> Dict[str, List[Tuple[str, Any, str]]]:
    """{'agent': [...], 'replay': [...], 'optimizer': [...], 'signals': [...]}: `agent`'s
    config fields (flat names) with its docs and defaults, in declaration order."""
    config_class = _agents()[agent].config_class
    defaults = configs.flat_defaults(config_class)
    groups: Dict[str, List[Tuple[str, Any, str]]] = {'agent': []}
    groups.update({group: [] for group in GROUPS.values()})
    for name, (config_field, owner) in configs.flat_fields(config_class).items():
        groups[GROUPS.get(owner, 'agent')].append((name, defaults[name], configs.doc(config_field)))
    return {group: entries for group, entries in groups.items() if entries}


def agent_sections(agent: str, width: int) -> List[str]:
    return [section(f'{group} ({agent})', entries, width)
            for group, entries in agent_field_groups(agent).items()]


def _header(prog: str, usage: str, summary: str, width: int) -> str:
    """The usage line and the script's one-line summary, wrapped to `width`."""
    def fill(text: str, indent: str = '') -> str:
        return textwrap.fill(text, width, subsequent_indent=indent, break_long_words=False,
                             break_on_hyphens=False)
    return f'{fill(f"usage: {prog} {usage}", "    ")}\n{fill(summary)}'


def run_help(fv: flags.FlagValues, argv: Sequence[str]) -> str:
    """`launch/run.py --help` (see the module doc). Raises HelpError for an unknown agent."""
    agent, width, prog = requested_agent(argv), _width(), program(argv)
    groups = run_flag_groups(fv, agent)
    parts = [_header(prog, '[--preset=NAME|none] [--agent=NAME] [--env=ID] [--FLAG=VALUE ...]',
                     'Trains an agent. Every field of the agent\'s config is a flag too; the '
                     'command line overrides a preset.', width),
             section('run', groups['run'], width),
             section('processes (--launcher=multiprocess|ray, --role)', groups['processes'],
                     width)]
    if agent:
        parts += agent_sections(agent, width)
    parts.append(_footer(prog, agent is None))
    return '\n\n'.join(parts)


def _footer(prog: str, agent_hint: bool) -> str:
    hint = (f'{prog} --agent=NAME --help: that agent\'s config fields '
            f'({", ".join(sorted(_agents()))})\n' if agent_hint else '')
    return f'{hint}{prog} --helpfull: every flag absl holds, its own (and TensorFlow\'s) included'


def module_flags(fv: flags.FlagValues, own_flag: str) -> List[flags.Flag]:
    """The flags of the module that defines `own_flag`, in definition order (absl's
    `FLAGS` also holds absl's and TensorFlow's)."""
    return fv.get_flags_for_module(fv.find_module_defining_flag(own_flag))


def script_help(fv: flags.FlagValues, argv: Sequence[str], doc: str, own_flag: str,
                usage: str = '[--FLAG=VALUE ...]', agent_fields: bool = False) -> str:
    """A script's `--help`: the first line of its module doc, its usage and its own flags
    (with `agent_fields`, `--agent=NAME`'s config fields too)."""
    agent = requested_agent(argv) if agent_fields else None
    width, prog = _width(), program(argv)
    entries = [(f.name, agent if f.name == 'agent' and agent else f.default, f.help)
               for f in module_flags(fv, own_flag)]
    parts = [_header(prog, usage, doc.strip().splitlines()[0], width),
             section('flags', entries, width)]
    if agent:
        parts += agent_sections(agent, width)
    parts.append(_footer(prog, agent_fields and agent is None))
    return '\n\n'.join(parts)


def print_help_and_exit(make_text: Callable[[], str]) -> None:
    """Prints `make_text()` and exits 0, or its HelpError as one `error:` line, exit 1."""
    try:
        text = make_text()
    except HelpError as e:
        print(f'error: {e}', file=sys.stderr)
        sys.exit(1)
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `--help | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(0)


def helpfull(fv: flags.FlagValues, argv: Sequence[str]) -> str:
    """Every flag `fv` holds, as absl lists them, under the usage line."""
    return f'usage: {program(argv)} [--FLAG=VALUE ...]\n\n{fv.get_help()}'


def script_parser(fv: flags.FlagValues, doc: str, own_flag: str,
                  usage: str = '[--FLAG=VALUE ...]', agent_fields: bool = False
                  ) -> Callable[[List[str]], List[str]]:
    """`app.run`'s `flags_parser` for a script: `--help` and `--helpfull` as above, exit 0;
    a bad flag is one `error:` line and exit 1; returns the arguments left."""
    def parse(argv: List[str]) -> List[str]:
        console.freeze_imports()  # `app.run` parses once the script's imports are done
        if wants_help(argv):
            print_help_and_exit(lambda: script_help(fv, argv, doc, own_flag, usage,
                                                    agent_fields))
        if wants_helpfull(argv):
            print_help_and_exit(lambda: helpfull(fv, argv))
        try:
            return fv(argv)
        except flags.Error as e:
            print(f'error: {e}', file=sys.stderr)
            sys.exit(1)
    return parse


def handle_run_help(fv: flags.FlagValues, argv: Sequence[str]) -> None:
    """`launch/run.py`'s help flags: prints the help and exits when asked for one."""
    if wants_help(argv):
        print_help_and_exit(lambda: run_help(fv, argv))
    if wants_helpfull(argv):
        print_help_and_exit(lambda: helpfull(fv, argv))
