"""Trains an agent: `python launch/run.py --agent=clear [--env=CartPole-v1] ...`.

Every field of the agent's config is also a flag (`--agent=X --help` lists X's); the
flags, default presets and their checks are `launch/command_line/run_flags.py`. Bad
input ends with one line on stderr and exit status 1. Ctrl-C checkpoints,
exports and exits with status 130 (`launch/runners/inprocess.py`). The console is
`launch/runs/console.py`'s: native log noise filtered (unless `--verbose`), one
progress display, status lines, a final table. Before anything else, an
in-process or multi-process run moves into a network namespace of its own
with loopback only, so nothing outside it reaches its replay server
(`launch/runners/isolation.py`, `--network_isolation`).
"""

import os
import sys
from typing import Any, Dict, List, Optional

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from reverb_agents.launch.runs import console  # noqa: E402  (import nothing heavy)
from reverb_agents.launch.runners import isolation  # noqa: E402  (import nothing heavy)

_NETWORK = (False, None)  # (isolated, why not): `isolation.start`'s answer
if __name__ == '__main__':
    try:  # first: a new user namespace needs a process of one thread
        _NETWORK = isolation.start(sys.argv)
    except isolation.IsolationError as e:
        print(f'error: {e}', file=sys.stderr)
        sys.exit(1)
    if not console.verbose_requested(sys.argv):
        console.quiet_native_output()  # before TensorFlow prints its CUDA start-up errors

from absl import app, flags, logging  # noqa: E402

from reverb_agents.agents import registry  # noqa: E402
from reverb_agents.launch.command_line import run_flags as command_line  # noqa: E402
from reverb_agents.launch import environments  # noqa: E402
from reverb_agents.launch.runners import inprocess, launcher, ray_launcher, roles  # noqa: E402
from reverb_agents.launch.runs import rundir  # noqa: E402
from reverb_agents.launch.runs import preset_files  # noqa: E402
from reverb_agents.launch.command_line import help as help_lib  # noqa: E402
from reverb_agents.launch.building import setup as setup_lib  # noqa: E402
from reverb_agents.launch.runs.options import RunOptions  # noqa: E402
from reverb_agents.replay import connection  # noqa: E402

ROLES, LAUNCHERS = command_line.ROLES, command_line.LAUNCHERS
command_line.define_flags(flags.FLAGS)
FLAGS = flags.FLAGS
_PRESET: List[Optional[str]] = [None]  # the default preset `parse_flags` applied


def parse_flags(argv: List[str]) -> List[str]:
    """absl's parse with the default preset (`command_line.parse`); a bad flag is one
    `error:` line and exit status 1. `--help` (`--agent=NAME --help`) and `--helpfull`
    print `launch/command_line/help.py`'s help and exit 0."""
    console.freeze_imports()  # `app.run` parses once the imports are done
    help_lib.handle_run_help(FLAGS, argv)
    try:
        rest, _PRESET[0] = command_line.parse(argv, FLAGS)
    except flags.Error as e:
        print(f'error: {e}', file=sys.stderr)
        sys.exit(1)
    return rest


def resolve():
    """The run's (options, config) from the parsed flags (`command_line.resolve`)."""
    return command_line.resolve(command_line.flag_values(FLAGS))


def _start_line(options: RunOptions) -> str:
    preset = _PRESET[0]
    return (f'{"resuming" if FLAGS.resume else "training"} {options.agent} on {options.env} '
            f'for {options.num_steps:,} env steps'
            + (f' (preset {preset_files.preset_name(preset)}; --preset=none for none)'
               if preset else '')
            + f'\nlogdir: {options.logdir}')


def final_table(summary: Dict[str, Any], logdir: str) -> str:
    """The short table printed at the end of a run."""
    rows = []
    if summary.get('eval_return_mean') is not None:
        rows.append(('eval return', f'{summary["eval_return_mean"]:.1f} +- '
                     f'{summary["eval_return_std"]:.1f} ({summary["eval_episodes"]} '
                     f'greedy episodes'
                     + (', averaged weights' if 'eval_return_learned_mean' in summary else '')
                     + ')'))
    if summary.get('eval_return_learned_mean') is not None:
        rows.append(('learned weights', f'{summary["eval_return_learned_mean"]:.1f} +- '
                     f'{summary["eval_return_learned_std"]:.1f} (the same episodes)'))
    if summary.get('best_eval_return') is not None:
        rows.append(('best eval return', f'{summary["best_eval_return"]:.1f} at env step '
                     f'{summary["best_eval_env_steps"]:,}'))
    if summary.get('train_return_last20') is not None:
        rows.append(('train return', f'{summary["train_return_last20"]:.1f} (last 20 '
                     f'episodes)' + (', target reached' if summary.get('reached_target')
                                     else '')))
    rows += [('env steps', f'{summary["env_steps"]:,} in {summary["wall_time_s"]:.1f} s '
              f'({summary["env_steps_per_s"]:,.0f}/s)'),
             ('learner steps', f'{summary["learner_steps"]:,}'),
             ('logdir', logdir),
             ('policy', summary.get('saved_model') or 'not exported'),
             ('curves', f'{os.path.join(logdir, "progress.csv")}; '
                        f'tensorboard --logdir {logdir}')]
    return 'done:\n' + console.table(rows)


def main(argv):
    del argv
    console.set_verbose(FLAGS.verbose)
    # Status lines and the progress display replace absl's INFO lines in one process;
    # a multi-process run's roles and launcher keep them (their output is interleaved).
    quiet = not FLAGS.verbose and not FLAGS.role and FLAGS.launcher == 'inprocess'
    logging.set_verbosity(logging.WARNING if quiet else logging.INFO)
    logdir = FLAGS.logdir
    try:
        options, config = resolve()
        if _NETWORK[0] and (FLAGS.role or FLAGS.launcher == 'ray'):  # `isolation.start` misread
            raise ValueError('--role and --launcher=ray need the network; give '
                             '--network_isolation=off')
        setup_lib.set_intra_op_threads(options.intra_op_threads)
        logdir = options.logdir
        rundir.check_logdir(options.logdir)
        # Roles first: the launcher hands its own flags (a preset's
        # --launcher=multiprocess included) to the roles it starts.
        if FLAGS.role:
            run_role(options, config)
            return
        rundir.check_start(options.logdir, FLAGS.resume, options, config)
        setup_lib.check_networks(options, config)
        console.status(_start_line(options))
        if FLAGS.launcher == 'multiprocess':
            preset = [f'--flagfile={_PRESET[0]}'] if _PRESET[0] else []
            sys.exit(launcher.run(preset + sys.argv[1:] + [f'--logdir={options.logdir}'],
                                  FLAGS.num_actors, FLAGS.replay_port, FLAGS.connect_timeout_s))
        if FLAGS.launcher == 'ray':
            status, summary = ray_launcher.run(
                options, config, FLAGS.num_actors, FLAGS.ray_address, FLAGS.actor_cpus,
                FLAGS.actor_resources, FLAGS.learner_resources, FLAGS.learner_gpus,
                FLAGS.connect_timeout_s,
                FLAGS.reconnect_timeout_s, FLAGS.replay_checkpoint_interval_s)
            if summary:
                console.status(final_table(summary, options.logdir))
            sys.exit(status)
        summary = inprocess.train(options, config)
    except (registry.UnknownAgentError, environments.EnvironmentSetupError, rundir.TrainingError,
            connection.ServerUnavailableError, ValueError) as e:
        print(f'error: {e}', file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        # Ctrl-C before training began, or a second one while saving: whatever was
        # being written may be incomplete; the checkpoints before it stay.
        print(f'interrupted before the run finished saving; complete checkpoints, if any, '
              f'stay in {os.path.join(logdir, rundir.CHECKPOINTS)}', file=sys.stderr,
              flush=True)
        os._exit(130)  # not through teardown: an actor thread or a data stream may still block
    if summary['interrupted']:
        sys.exit(130)  # 128 + SIGINT: the shell's status for a run Ctrl-C ended
    console.status(final_table(summary, options.logdir))


def run_role(options: RunOptions, config) -> None:
    stop = roles.stop_on_signals()
    exposed = FLAGS.role != 'replay' and isolation.trusted_network_line(FLAGS.replay_address)
    if exposed:
        print(exposed, file=sys.stderr, flush=True)
    if FLAGS.role == 'replay':
        roles.run_replay(options, config, FLAGS.replay_port, FLAGS.replay_checkpoint_interval_s,
                         stop)
    elif FLAGS.role == 'learner':
        roles.run_learner(options, config, FLAGS.replay_address, FLAGS.connect_timeout_s,
                          FLAGS.reconnect_timeout_s, stop)
        # Checkpoint, summary and SavedModel are written; exiting through Python's
        # teardown would close a data stream the server may hold blocked for up to
        # the data timeout (see `launch.learning.learner_loop.LearnerRun.close_data`).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    else:
        roles.run_actor(options, config, FLAGS.replay_address, FLAGS.actor_id,
                        FLAGS.connect_timeout_s, FLAGS.reconnect_timeout_s, stop)


if __name__ == '__main__':
    app.run(main, flags_parser=parse_flags)
