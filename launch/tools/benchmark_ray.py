"""Scaling of `--launcher=ray` with the number of actors; prints JSON.

    python launch/benchmark_ray.py --num_actors=1,2,4 [--ray_address=auto] [--num_steps=N]
        [-- any launch/run.py flags, e.g. --flagfile=launch/presets/clear_cartpole_ray.flags]

For each actor count it runs `launch/run.py --launcher=ray` (the default
flagfile: `clear_cartpole_ray.flags`) for `--num_steps` env steps, one after
the other, each in a fresh log directory, and reports the run's own
`summary.json` rates: `env_steps_per_s` (every actor's real environment
steps over the training loop's wall time, start-up excluded) and
`learner_steps_per_s`. `--repeats` runs per count, medians reported.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile

from absl import app, flags

from reverb_agents.launch.command_line import help as help_lib  # no TensorFlow

LAUNCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # holds run.py, presets/
flags.DEFINE_list('num_actors', ['1', '2', '4'], 'actor counts to measure')
flags.DEFINE_string('ray_address', '', "'' (a local Ray instance per run), 'auto' or host:port")
flags.DEFINE_integer('num_steps', 200_000, 'env steps per run')
flags.DEFINE_integer('repeats', 1, 'runs per actor count (medians reported)')
flags.DEFINE_string('flagfile_run', os.path.join(LAUNCH, 'presets',
                                                 'clear_cartpole_ray.flags'),
                    'the flagfile of every run')
FLAGS = flags.FLAGS


def one_run(num_actors: int, extra: list) -> dict:
    with tempfile.TemporaryDirectory(prefix='benchmark_ray_') as logdir:
        args = [sys.executable, os.path.join(LAUNCH, 'run.py'),
                f'--flagfile={FLAGS.flagfile_run}', f'--num_actors={num_actors}',
                f'--num_steps={FLAGS.num_steps}', '--eval_episodes=1',
                f'--logdir={logdir}/run', *extra]
        if FLAGS.ray_address:
            args.append(f'--ray_address={FLAGS.ray_address}')
        result = subprocess.run(args, capture_output=True, text=True)
        if result.returncode != 0:
            raise SystemExit(f'error: the run with {num_actors} actors failed: '
                             + result.stderr.strip().splitlines()[-1])
        with open(os.path.join(logdir, 'run', 'summary.json')) as f:
            return json.load(f)


def main(argv):
    extra = argv[1:]
    rows = []
    for count in (int(n) for n in FLAGS.num_actors):
        summaries = [one_run(count, extra) for _ in range(FLAGS.repeats)]
        rows.append({
            'num_actors': count,
            'env_steps_per_s': statistics.median(s['env_steps_per_s'] for s in summaries),
            'learner_steps_per_s': statistics.median(s['learner_steps_per_s'] for s in summaries),
            'runs': [{k: s[k] for k in ('env_steps_per_s', 'learner_steps_per_s', 'env_steps',
                                        'wall_time_s')} for s in summaries],
        })
    print(json.dumps({'launcher': 'ray', 'cpus': os.cpu_count(), 'num_steps': FLAGS.num_steps,
                      'flagfile': FLAGS.flagfile_run, 'results': rows}, indent=2))


if __name__ == '__main__':
    app.run(main, flags_parser=help_lib.script_parser(
        FLAGS, __doc__, 'num_actors', '[--num_actors=1,2,4] [--FLAG=VALUE ...] [-- RUN FLAGS]'))
