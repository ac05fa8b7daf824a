"""Ours against Stable-Baselines3, alternated in one sitting: prints (and writes) JSON.

    python benchmarks/side_by_side.py --peer_python=peer_venv/bin/python \
        --output=side_by_side.json

The peer runs in its own virtualenv (`benchmarks/peer_sb3.py` says how to make
it); ours with this interpreter. Each figure alternates our command and the
peer's, repeat by repeat (seed by seed), so both see the same load on the
shared machine; the JSON holds every run, the medians and their ratios
(ours / peer for a time, ours / peer for a rate: say which in the key).

Figures (`--figures`, default all):

- `sac_updates`: SAC learner updates/s, batch 256, 256x256 actor and twin
  critics: ours fed from Reverb and from memory (`launch/benchmark.py
  --flagfile=launch/presets/benchmark_sac_pendulum.flags`), the peer's
  `model.train` on its replay buffer;
- `sac_pendulum`: SAC on Pendulum-v1 for 5,000 env steps (`sac_pendulum_5k`
  preset; the peer at the same learning rate, batch, networks and warm-up):
  training wall and deterministic evaluation per seed, and our learner's
  updates/s in the run against the learner alone (`sac_updates`' Reverb rate);
- `sac_pendulum_fast`: the same with `sac_pendulum_5k_fast` (128x128, 3-step
  targets), against the peer as above and the peer with those settings too;
- `cartpole`: CartPole-v1 until the last 20 training episodes average >= 475:
  ours `clear_cartpole_475` (LSTM) and `clear_cartpole_475_ff` (feed-forward),
  the peer PPO with RL Zoo's hyperparameters; wall to the stop and a greedy
  evaluation there (ours stops only once a greedy evaluation agrees,
  `--target_greedy`);
- `actor`: CLEAR's actor (64 environments, LSTM, into Reverb) against the
  vector environment alone (`launch/benchmark.py`, 64 envs).

No timing is asserted anywhere: this file's JSON is the record
(docs/benchmarks.md).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEER = os.path.join(ROOT, 'benchmarks', 'peer_sb3.py')
FIGURES = ('sac_updates', 'sac_pendulum', 'sac_pendulum_fast', 'cartpole', 'actor')


def _json_out(command):
    """Runs `command` in the repository; the JSON object its stdout ends with (from
    the first '{' on: the commands print one object, after any log lines)."""
    out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return json.loads(out[out.index('{'):])


def ours_run(preset, seed, *extra):
    """`launch/run.py --flagfile=launch/presets/<preset>.flags --seed=S`: its summary."""
    with tempfile.TemporaryDirectory() as logdir:
        subprocess.run([sys.executable, 'launch/run.py',
                        f'--flagfile=launch/presets/{preset}.flags', f'--seed={seed}',
                        f'--logdir={logdir}/run', *extra],
                       cwd=ROOT, capture_output=True, check=True)
        with open(os.path.join(logdir, 'run', 'summary.json')) as f:
            summary = json.load(f)
    keys = ('env_steps', 'learner_steps', 'wall_time_s', 'learner_steps_per_s',
            'train_return_last20', 'reached_target', 'eval_return_mean', 'eval_return_std')
    return {'seed': seed, **{k: summary[k] for k in keys}}


def benchmark(preset, *extra):
    return _json_out([sys.executable, 'launch/benchmark.py',
                      f'--flagfile=launch/presets/{preset}.flags', *extra])


def median(runs, key):
    return statistics.median(r[key] for r in runs)


def sac_updates(peer, repeats, seeds):
    ours, theirs = [], []
    for _ in range(repeats):
        b = benchmark('benchmark_sac_pendulum')
        ours.append({k: b[k] for k in ('learner_steps_per_s', 'learner_in_memory_steps_per_s',
                                       'reverb_feed_cost', 'intra_op_threads')})
        theirs.append(_json_out([peer, PEER, 'sac_updates']))
    result = {'ours': ours, 'peer': theirs,
              'ours_updates_per_s': median(ours, 'learner_steps_per_s'),
              'ours_in_memory_updates_per_s': median(ours, 'learner_in_memory_steps_per_s'),
              'peer_updates_per_s': median(theirs, 'updates_per_s')}
    result['ratio_updates_per_s'] = result['ours_updates_per_s'] / result['peer_updates_per_s']
    return result


def _sac_pendulum(preset, seeds, peers):
    """Our `preset` against each peer configuration (name -> peer command), seed by
    seed: walls, evaluations, and the ratio of the median walls to each peer's."""
    ours, theirs = [], {name: [] for name in peers}
    for seed in seeds:
        ours.append(ours_run(preset, seed))
        for name, command in peers.items():
            theirs[name].append(_json_out([*command, 'sac_pendulum', f'--seed={seed}']))
    result = {'preset': preset, 'ours': ours, 'ours_wall_s': median(ours, 'wall_time_s'),
              'ours_learner_steps_per_s': median(ours, 'learner_steps_per_s'),
              'ours_seeds_at_least_-200': sum(r['eval_return_mean'] >= -200 for r in ours)}
    for name, runs in theirs.items():
        wall = median(runs, 'wall_time_s')
        result.update({name: runs, f'{name}_wall_s': wall,
                       f'{name}_seeds_at_least_-200': sum(r['eval_return_mean'] >= -200
                                                          for r in runs),
                       f'ratio_wall_to_{name}': result['ours_wall_s'] / wall})
    return result


def sac_pendulum(peer, repeats, seeds):
    return _sac_pendulum('sac_pendulum_5k', seeds, {'peer': [peer, PEER]})


def sac_pendulum_fast(peer, repeats, seeds):
    return _sac_pendulum('sac_pendulum_5k_fast', seeds, {
        'peer': [peer, PEER],
        'peer_same_settings': [peer, PEER, '--net=128,128', '--n_steps=3']})


def cartpole(peer, repeats, seeds):
    runs = {'clear_cartpole_475': [], 'clear_cartpole_475_ff': [], 'peer': []}
    for seed in seeds:
        for preset in ('clear_cartpole_475', 'clear_cartpole_475_ff'):
            runs[preset].append(ours_run(preset, seed))
        runs['peer'].append(_json_out([peer, PEER, 'ppo_cartpole', f'--seed={seed}']))
    result = {'runs': runs, 'peer_wall_s': median(runs['peer'], 'wall_time_s')}
    for name, r in runs.items():
        result[f'{name}_greedy_at_least_475'] = sum(x['eval_return_mean'] >= 475 for x in r)
        if name != 'peer':
            result[f'{name}_wall_s'] = median(r, 'wall_time_s')
            result[f'{name}_ratio_wall'] = result[f'{name}_wall_s'] / result['peer_wall_s']
    return result


def actor(peer, repeats, seeds):
    b = benchmark('benchmark_clear_cartpole', '--num_envs=64', f'--repeats={repeats}')
    keys = ('raw_env_steps_per_s', 'raw_sync_env_steps_per_s', 'actor_env_steps_per_s')
    result = {k: b[k] for k in keys}
    result['runs'] = {k: b['runs'][k] for k in keys}
    result['ratio_actor_to_raw'] = b['actor_env_steps_per_s'] / b['raw_env_steps_per_s']
    result['ratio_actor_to_raw_sync'] = b['actor_env_steps_per_s'] / b['raw_sync_env_steps_per_s']
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--peer_python', required=True,
                        help="the peer virtualenv's python (Stable-Baselines3, torch)")
    parser.add_argument('--figures', default=','.join(FIGURES),
                        help=f'comma-separated, of {", ".join(FIGURES)}')
    parser.add_argument('--seeds', default='0,1,2', help='seeds of the learning figures')
    parser.add_argument('--repeats', type=int, default=3, help='repeats of the rate figures')
    parser.add_argument('--output', default='', help='also write the JSON here')
    args = parser.parse_args()
    figures = [f for f in args.figures.split(',') if f]
    unknown = sorted(set(figures) - set(FIGURES))
    if unknown:
        sys.exit(f'error: unknown figures {unknown}; choose from {list(FIGURES)}')
    if not os.path.exists(args.peer_python):
        sys.exit(f'error: --peer_python={args.peer_python} does not exist (see '
                 'benchmarks/peer_sb3.py for the virtualenv)')
    seeds = [int(s) for s in args.seeds.split(',')]
    result = {}
    for figure in figures:
        result[figure] = globals()[figure](args.peer_python, args.repeats, seeds)
        print(f'{figure}: done', file=sys.stderr)
    text = json.dumps(result, indent=2)
    print(text)
    if args.output:
        with open(args.output, 'w') as f:
            f.write(text + '\n')


if __name__ == '__main__':
    main()
