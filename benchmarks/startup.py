"""Start-up: the wall time of a tiny in-process run per agent, where tracing the
learner step, the batch pipeline and the export is most of the time: prints JSON.

    python benchmarks/startup.py --repeats=3 --output=startup.json
    python benchmarks/startup.py --baseline_root=/path/to/another/checkout

Each run is a fresh interpreter that imports TensorFlow before the clock starts,
then times `launch.runners.inprocess.train` on a small configuration (the tests'
sizes): CLEAR and ACER on CartPole-v1, SAC on Pendulum-v1. With
`--baseline_root`, the same runs on that checkout's code (another commit's
work tree) alternate with this checkout's, repeat by repeat, so both see the
same load on the shared machine; the JSON holds every run, the medians and
their ratios (this checkout / baseline, a time). No timing is asserted
anywhere: the JSON is the record (docs/benchmarks.md#start-up).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Dict, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDERS = ('agents', 'networks', 'replay', 'launch')

# (env, env steps, config values): a first batch, a few updates, an evaluation, an export.
RUNS = {
    'clear': ('CartPole-v1', 1500, dict(lstm_size=8, hidden_sizes=(16,), batch_size=8,
                                        unroll_length=5, min_replay_size=8, queue_size=16)),
    'acer': ('CartPole-v1', 1500, dict(lstm_size=8, hidden_sizes=(16,), batch_size=4,
                                       unroll_length=5, replay_start_size=20, queue_size=16,
                                       advantage_hidden_sizes=(8,))),
    'sac': ('Pendulum-v1', 600, dict(hidden_sizes=(16,), critic_hidden_sizes=(16,),
                                     batch_size=16, learning_starts=256)),
}

TIMED = '''
import json, sys, tempfile, time
import tensorflow as tf  # started before the clock
from reverb_agents.agents import configs, registry
from reverb_agents.launch.runners import inprocess
from reverb_agents.launch.runs.options import RunOptions
agent, env, steps, values = json.loads(sys.argv[1])
values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
config = configs.from_flat(registry.get(agent).config_class, values)
with tempfile.TemporaryDirectory() as logdir:
    started = time.perf_counter()
    inprocess.train(RunOptions(agent=agent, env=env, num_envs=4, num_steps=steps, seed=0,
                               logdir=logdir + '/run', eval_episodes=2,
                               log_interval_s=1000.0), config)
    print(json.dumps({'wall_s': time.perf_counter() - started}))
'''


def overlay(root: str, directory: str) -> str:
    """A `reverb_agents` package in `directory` whose folders are `root`'s: put first on
    PYTHONPATH, it shadows the installed (editable) one."""
    package = os.path.join(directory, 'reverb_agents')
    os.makedirs(package)
    with open(os.path.join(root, 'reverb_agents', '__init__.py')) as f:
        init = f.read()
    with open(os.path.join(package, '__init__.py'), 'w') as f:
        f.write(init)
    for folder in FOLDERS:
        os.symlink(os.path.join(os.path.abspath(root), folder), os.path.join(package, folder))
    return directory


def timed_run(agent: str, pythonpath: Optional[str]) -> float:
    env, steps, values = RUNS[agent]
    environ = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
    if pythonpath:
        environ['PYTHONPATH'] = os.pathsep.join(
            p for p in (pythonpath, os.environ.get('PYTHONPATH')) if p)
    out = subprocess.run([sys.executable, '-c', TIMED, json.dumps([agent, env, steps, values])],
                         capture_output=True, text=True, env=environ, cwd=tempfile.gettempdir())
    if out.returncode:
        raise SystemExit(f'error: the {agent} run failed:\n{out.stderr[-3000:]}')
    return json.loads(out.stdout.strip().splitlines()[-1])['wall_s']


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--agents', default=','.join(RUNS))
    parser.add_argument('--baseline_root', default=None,
                        help='another checkout whose runs alternate with this one\'s')
    parser.add_argument('--output', default=None)
    args = parser.parse_args()
    agents = args.agents.split(',')
    if unknown := sorted(set(agents) - set(RUNS)):
        raise SystemExit(f'error: unknown agents {unknown}; choose from {sorted(RUNS)}')
    if args.baseline_root and not os.path.isdir(os.path.join(args.baseline_root, 'launch')):
        raise SystemExit(f'error: --baseline_root={args.baseline_root} is not a checkout')
    with tempfile.TemporaryDirectory() as directory:
        sides: Dict[str, Optional[str]] = {'this': None}
        if args.baseline_root:
            sides['baseline'] = overlay(args.baseline_root, directory)
        walls = {side: {agent: [] for agent in agents} for side in sides}
        for _ in range(args.repeats):
            for agent in agents:
                for side, pythonpath in sides.items():
                    walls[side][agent].append(timed_run(agent, pythonpath))
    result = {'repeats': args.repeats, 'walls_s': walls,
              'median_wall_s': {side: {a: statistics.median(w) for a, w in per.items()}
                                for side, per in walls.items()}}
    if args.baseline_root:
        medians = result['median_wall_s']
        result['wall_ratio_this_over_baseline'] = {
            a: medians['this'][a] / medians['baseline'][a] for a in agents}
    text = json.dumps(result, indent=2)
    print(text)
    if args.output:
        with open(args.output, 'w') as f:
            f.write(text + '\n')


if __name__ == '__main__':
    main()
