"""`--launcher=ray` on a real Ray cluster of two nodes on this machine
(`ray.cluster_utils.Cluster`): the replay server and the learner on the head,
the actors pinned by a custom resource to the second node; CLEAR learns
CartPole through it while an actor's process is killed; clusters and requests
it cannot run are one error line. The run's torso is a Keras model of a user's module
(`--torso=network_examples.my_networks:mlp`, docs/networks.md), which every role imports."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from reverb_agents.launch.runners import launcher
from tests import forked

ray = pytest.importorskip('ray', reason="the ray extra is not installed (pip install -e '.[ray]')")
from ray.cluster_utils import Cluster  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PRESET = os.path.join(ROOT, 'launch', 'presets', 'clear_cartpole_ray.flags')
# A role's first line: '(RoleHost pid=P) INFO:absl:actor 0 on node NODE_ID (IP)'.
ROLE_NODE = re.compile(r'pid=(\d+)\).*INFO:absl:(actor \d+|learner|replay) on node (\w+)')


@pytest.fixture(scope='module')
def cluster():
    """A head node (2 CPUs and `learner_node`: the replay server and the learner) and a
    second node whose `actor_node` resource only actors ask for."""
    cluster = Cluster(initialize_head=True,
                      head_node_args={'num_cpus': 2, 'resources': {'learner_node': 1}})
    worker = cluster.add_node(num_cpus=2, resources={'actor_node': 2})
    cluster.wait_for_nodes()
    yield cluster, worker.node_id
    cluster.shutdown()


def _driver(args, logdir):
    return subprocess.Popen(
        [sys.executable, os.path.join(ROOT, 'launch', 'run.py'), f'--logdir={logdir}', *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        # Ray folds lines that differ only in numbers ('actor 0 on node ...' and 'actor 1
        # on node ...' printed within seconds of each other) into one unless told not to.
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', PYTHONPATH=ROOT, RAY_DEDUP_LOGS='0'))


def test_clear_learns_cartpole_on_two_nodes_and_survives_a_killed_actor(cluster, tmp_path):
    cluster, actor_node = cluster
    logdir = str(tmp_path / 'run')
    # Stopped at a target (training mean and a greedy evaluation at 400, twenty times
    # a random policy's return), not the preset's whole budget, nor 475: the point is
    # that learning goes through the cluster, and the last stretch to 475 is CartPole's
    # slowest. The final evaluation below must stay far above random. The feed-forward
    # core of clear_cartpole_475_ff (16 environments in all, 3 of 4 rows replayed) gets
    # there in about a quarter of the LSTM's env steps.
    process = _driver([f'--flagfile={PRESET}', f'--ray_address={cluster.address}',
                       '--actor_resources=actor_node=1', '--learner_resources=learner_node=1',
                       '--log_interval_s=1', '--target_return=400', '--lstm_size=0',
                       '--num_envs=8', '--replay_fraction=0.75',
                       '--torso=network_examples.my_networks:mlp'], logdir)
    nodes, killed = {}, []

    def watch(line):
        match = ROLE_NODE.search(line)
        if match:
            nodes.setdefault(match.group(2), []).append((int(match.group(1)), match.group(3)))
        # Once the learner is learning, kill actor 0's process (once).
        if not killed and 'learner steps' in line and 'actor 0' in nodes:
            killed.append(nodes['actor 0'][0][0])
            os.kill(killed[0], signal.SIGKILL)

    output = forked.Output(process.stdout, on_line=watch)
    try:
        process.wait(timeout=420)  # a hang guard: under the full suite the run takes minutes
    finally:
        if process.poll() is None:
            process.kill()
    output.wait_end(10)
    text = output.text()
    assert process.returncode == 0, text[-4000:]
    with open(os.path.join(logdir, 'summary.json')) as f:
        summary = json.load(f)
    assert summary['launcher'] == 'ray'
    with open(os.path.join(logdir, 'run_config.json')) as f:
        assert json.load(f)['config']['network']['torso'] == 'network_examples.my_networks:mlp'
    assert summary['eval_return_mean'] >= 300, text[-4000:]
    # Placement: replay server and learner together on the head, actors on the other node.
    head = {nodes['replay'][0][1], nodes['learner'][0][1]}
    assert len(head) == 1 and actor_node not in head, nodes
    assert {node for k in (0, 1) for _, node in nodes[f'actor {k}']} == {actor_node}, nodes
    # The killed actor came back as a new process.
    assert killed, text[-4000:]
    assert any(pid != killed[0] for pid, _ in nodes['actor 0']), (killed, nodes)


@pytest.mark.parametrize('args,message', [
    (['--num_actors=8'], 'too small for the replay server, the learner and 8 actors: they '
                         'need CPU 10 (it has 4)'),
    (['--learner_gpus=1'], 'they need GPU 1 (it has 0)'),
    (['--actor_resources=tpu_node=1'], 'they need tpu_node 2 (it has 0)'),
    # Enough in total, but the learner's node is the only one with actor_node, and the
    # replay server and the learner take both of its CPUs.
    (['--num_actors=1', '--actor_cpus=1.5', '--actor_resources=actor_node=1',
      '--learner_resources=actor_node=1'], 'do not fit on the nodes that have their '
                                          'resources once the replay server and the learner '
                                          'took theirs: room for 0'),
])
def test_a_cluster_that_cannot_run_the_roles_is_one_error_line(args, message, cluster, run_cli):
    cluster, _ = cluster
    started = time.monotonic()
    result = run_cli(['--agent=clear', '--launcher=ray', f'--ray_address={cluster.address}',
                      '--num_actors=2', *args], timeout=120)  # a case's own count comes later
    assert result.returncode == 1, result.stderr[-3000:]
    assert len(result.errors) == 1 and message in result.errors[0], result.stderr[-3000:]
    assert time.monotonic() - started < 60


def test_an_address_that_does_not_answer_is_one_error_line_within_30_s(run_cli):
    port = launcher.free_port()
    started = time.monotonic()
    result = run_cli(['--launcher=ray', f'--ray_address=127.0.0.1:{port}'], timeout=60)
    assert time.monotonic() - started < 30
    assert result.returncode == 1
    assert len(result.errors) == 1, result.stderr[-3000:]
    assert f'no Ray cluster answers at 127.0.0.1:{port}' in result.errors[0]


@pytest.mark.skipif(not tf.config.list_physical_devices('GPU'),
                    reason='no GPU on this machine: the learner-on-GPU check needs one')
def test_the_learner_step_runs_on_the_gpu(tmp_path):
    from reverb_agents.agents import configs, registry
    from reverb_agents.launch.runners import ray_launcher
    from reverb_agents.launch.runs.options import RunOptions
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False)
    try:
        config = configs.from_flat(registry.get('clear').config_class, {})
        options = RunOptions(agent='clear', logdir=str(tmp_path), launcher='ray')
        host = ray.remote(ray_launcher.RoleHost)
        learner = host.options(num_gpus=1).remote('learner', options, config, True)
        actor = host.options(num_gpus=0).remote('actor 0', options, config, False)
        assert any('GPU' in d for d in ray.get(learner.devices.remote()))
        assert not any('GPU' in d for d in ray.get(actor.devices.remote()))
        placed = ray.get(learner.step_device.remote())
        assert 'GPU' in placed, placed
    finally:
        ray.shutdown()
