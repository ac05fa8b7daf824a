"""`--launcher=ray`: the roles of a run as Ray actors on a Ray cluster.

Ray places and supervises; Reverb stays the data plane. Each role is a
`RoleHost` actor running the very functions `--role=...` processes run
(`launch.runners.roles`), with the run's options and config handed over as objects.
The replay server and the learner share a node (a STRICT_PACK placement
group), actors spread over the cluster; the replay address goes from the
replay actor to the others through the driver. Ray restarts a role whose
process dies and reruns it (actors act again, the replay server reloads its
table checkpoint on the same node and port, the learner resumes from its
checkpoint); a role that raises ends the run with one error line. Ctrl-C in
the driver stops the learner (which checkpoints), the actors, then the
replay server (which checkpoints its tables). Design notes: docs/ray.md.
"""

import os
import socket
import sys
import threading
from typing import Any, Dict, List, Optional, Tuple

from absl import logging

from reverb_agents.launch.runners import isolation, ray_resources, roles
from reverb_agents.launch.runs import rundir
from reverb_agents.launch.runs.options import RunOptions

CONNECT_TIMEOUT_S = 10.0  # an address given with --ray_address must answer within this
PLACEMENT_TIMEOUT_S = 60.0  # the replay server's and the learner's placement group
# A role's process imports TensorFlow before it answers: minutes on a loaded machine.
START_TIMEOUT_S = 600.0
MAX_RESTARTS = 100  # per role actor; a role crashing this often is a bug, not bad luck


RayLaunchError = ray_resources.RayLaunchError


class RoleHost:
    """One role of the run in a Ray actor process (`ray.remote` applied at launch)."""

    def __init__(self, role: str, options: RunOptions, config: Any, use_gpu: bool):
        import tensorflow as tf
        from reverb_agents.launch.building import setup as setup_lib
        self._role, self._options, self._config = role, options, config
        self._stop = threading.Event()
        gpus = tf.config.list_physical_devices('GPU')
        if use_gpu:
            for gpu in gpus:  # share the GPU with nothing, but take only what is used
                tf.config.experimental.set_memory_growth(gpu, True)
        elif gpus:
            tf.config.set_visible_devices([], 'GPU')
        setup_lib.set_intra_op_threads(options.intra_op_threads)
        logging.set_verbosity(logging.INFO)
        import ray
        logging.info('%s on node %s (%s)', role, ray.get_runtime_context().get_node_id(),
                     ray.util.get_node_ip_address())

    def __repr__(self) -> str:  # Ray's prefix of this actor's log lines
        return self._role

    def free_port(self) -> Dict[str, Any]:
        """This node's IP and a port free on it (the replay server's address)."""
        import ray
        with socket.socket() as s:
            s.bind(('', 0))
            port = s.getsockname()[1]
        return {'ip': ray.util.get_node_ip_address(), 'port': port}

    def devices(self) -> List[str]:
        """The devices TensorFlow sees in this process."""
        import tensorflow as tf
        return [d.name for d in tf.config.list_logical_devices()]

    def step_device(self) -> str:
        """Runs one learner step of this run's agent on a batch of zeros; the device
        its loss was computed on (a check that the learner uses this process's GPU)."""
        import tensorflow as tf
        from reverb_agents.launch.building import setup as setup_lib
        from reverb_agents.replay import dataset, trajectory
        envs = setup_lib.make_envs(self._options, self._config, 1, 0)
        setup = setup_lib.make_setup(self._options, self._config, envs)
        envs.close()
        rows = setup.layout.items(setup.plan.batch_sequences)
        items = tf.nest.map_structure(tf.constant, trajectory.zeros(setup.signature, (rows,)))
        sequence = dataset._time_major(items, trajectory.envs_per_item(setup.signature))
        batch = dataset.Batch(sequence, tf.zeros([tf.shape(sequence.steps.discount)[1]], tf.bool))
        learner = setup_lib.make_learner(setup)  # held: its compiled step binds it weakly
        metrics = learner.step(batch)
        return next(iter(metrics.values())).device

    def replay(self, port: int, checkpoint_interval_s: float) -> None:
        roles.run_replay(self._options, self._config, port, checkpoint_interval_s, self._stop)

    def learner(self, address: str, connect_timeout_s: float,
                reconnect_timeout_s: float) -> Optional[Dict[str, Any]]:
        return roles.run_learner(self._options, self._config, address, connect_timeout_s,
                                 reconnect_timeout_s, self._stop)

    def actor(self, address: str, actor_id: int, connect_timeout_s: float,
              reconnect_timeout_s: float) -> None:
        roles.run_actor(self._options, self._config, address, actor_id, connect_timeout_s,
                        reconnect_timeout_s, self._stop)

    def stop(self) -> None:
        self._stop.set()


def parse_resources(text: str, flag: str = '--actor_resources') -> Dict[str, float]:
    """'name=1,other=0.5' -> {'name': 1.0, 'other': 0.5} (custom Ray resources)."""
    resources = {}
    for part in filter(None, (p.strip() for p in text.split(','))):
        name, sep, value = part.partition('=')
        try:
            resources[name.strip()] = float(value) if sep else 1.0
        except ValueError:
            raise RayLaunchError(f'{flag} takes name=amount pairs, got {part!r}') from None
    return resources


def check_flags(address: str, actor_cpus: float, actor_resources: str,
                learner_resources: str) -> None:
    """Raises `RayLaunchError` for launcher flags no cluster could run."""
    if address and address != 'auto':
        host, sep, port = address.rpartition(':')
        if not sep or not host or not port.isdigit():
            raise RayLaunchError(f"--ray_address must be 'auto' or host:port, got {address!r}")
    if actor_cpus <= 0:
        raise RayLaunchError(f'--actor_cpus must be positive, got {actor_cpus}')
    parse_resources(actor_resources, '--actor_resources')
    parse_resources(learner_resources, '--learner_resources')


def _check_reachable(address: str) -> None:
    """A clear error, within CONNECT_TIMEOUT_S, when nothing answers at host:port."""
    host, _, port = address.rpartition(':')
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        raise RayLaunchError(f'no Ray cluster answers at {address} ({e}); start one with '
                             f'`ray start --head` or leave --ray_address out') from None


def connect(address: str, num_cpus: float) -> None:
    """ray.init: joins the cluster at `address` ('auto' or host:port), or starts a local
    instance with at least `num_cpus` logical CPUs."""
    import ray
    if address and address != 'auto':
        _check_reachable(address)
    kwargs = dict(log_to_driver=True, include_dashboard=False, configure_logging=False)
    try:
        if address:
            ray.init(address=address, **kwargs)
        else:
            ray.init(num_cpus=max(num_cpus, os.cpu_count() or 1), **kwargs)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise RayLaunchError(f'cannot join the Ray cluster at {address}: '
                             f'{str(e).splitlines()[0]}') from None


def run(options: RunOptions, config: Any, num_actors: int, address: str, actor_cpus: float,
        actor_resources: str, learner_resources: str, learner_gpus: int, connect_timeout_s: float,
        reconnect_timeout_s: float, replay_checkpoint_interval_s: float
        ) -> Tuple[int, Optional[Dict[str, Any]]]:
    """Runs every role on the Ray cluster until the learner ends: (exit status, the
    learner's summary or None). Raises `RayLaunchError` for a cluster or request it
    cannot run."""
    # Long: the Ray run's parts start and stop in order under one try/finally.
    check_flags(address, actor_cpus, actor_resources, learner_resources)
    resources = parse_resources(actor_resources)
    learner_node = parse_resources(learner_resources)
    try:
        import ray
    except ImportError:
        raise RayLaunchError("--launcher=ray needs Ray: pip install -e '.[ray]'") from None
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    connect(address, 2 + num_actors * actor_cpus)
    try:
        if learner_gpus < 0:
            learner_gpus = 1 if ray.cluster_resources().get('GPU', 0) >= 1 else 0
        ray_resources.check_totals(num_actors, actor_cpus, resources, learner_node,
                                   learner_gpus)
        learner_bundle = {'CPU': 1, **learner_node, **({'GPU': learner_gpus} if learner_gpus
                                                       else {})}
        group = placement_group([{'CPU': 1}, learner_bundle], strategy='STRICT_PACK')
        if not group.wait(PLACEMENT_TIMEOUT_S):
            raise RayLaunchError('no node of the Ray cluster can hold the replay server and '
                                 f'the learner together: {dict(learner_bundle, CPU=2)}')
        ray_resources.check_actor_nodes(group, num_actors, actor_cpus, resources)
        host = ray.remote(RoleHost)
        retries = dict(max_restarts=MAX_RESTARTS, max_task_retries=-1, max_concurrency=2)

        def on_bundle(index):
            return PlacementGroupSchedulingStrategy(placement_group=group,
                                                    placement_group_bundle_index=index)

        replay = host.options(num_cpus=1, scheduling_strategy=on_bundle(0), **retries).remote(
            'replay', options, config, False)
        where = ray.get(replay.free_port.remote())
        replay_address = f'{where["ip"]}:{where["port"]}'
        exposed = isolation.trusted_network_line(
            replay_address, "Ray's own ports and the replay server at {} are open",
            any_address=True)
        if exposed:  # Ray's roles talk across the cluster's network; no namespace holds them
            print(exposed, file=sys.stderr, flush=True)
        replay_task = replay.replay.remote(where['port'], replay_checkpoint_interval_s)
        logging.info('replay server at %s; starting the learner and %d actors', replay_address,
                     num_actors)
        learner = host.options(num_cpus=1, num_gpus=learner_gpus,
                               scheduling_strategy=on_bundle(1), **retries).remote(
            'learner', options, config, bool(learner_gpus))
        learner_task = learner.learner.remote(replay_address, connect_timeout_s,
                                              reconnect_timeout_s)
        actors = [host.options(num_cpus=actor_cpus, resources=resources,
                               scheduling_strategy='SPREAD', **retries).remote(
            f'actor {k}', options, config, False) for k in range(num_actors)]
        _check_placed(actors)
        actor_tasks = [a.actor.remote(replay_address, k, connect_timeout_s, reconnect_timeout_s)
                       for k, a in enumerate(actors)]
        return _supervise(learner, learner_task, actors, actor_tasks, replay, replay_task)
    finally:
        ray.shutdown()


def _check_placed(actors: List[Any]) -> None:
    """Raises `RayLaunchError` unless every actor started within START_TIMEOUT_S (their
    nodes were checked beforehand: what is left is a process that cannot start)."""
    import ray
    pending = {actor.devices.remote(): k for k, actor in enumerate(actors)}
    ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=START_TIMEOUT_S)
    missing = sorted(k for ref, k in pending.items() if ref not in ready)
    if missing:
        raise RayLaunchError(
            f'actors {missing} did not start within {START_TIMEOUT_S:.0f} s although their '
            f'nodes have the resources: see the Ray logs of those nodes')


def _supervise(learner, learner_task, actors, actor_tasks, replay, replay_task
               ) -> Tuple[int, Optional[Dict[str, Any]]]:
    """Waits for the learner; stops the roles in order (learner, actors, replay)."""
    import ray
    status, summary = 0, None
    try:
        while True:
            done, _ = ray.wait([learner_task, replay_task] + actor_tasks, timeout=1.0)
            if learner_task in done:
                summary = ray.get(learner_task)  # raises the learner's error, if it failed
                break
            for task in done:  # a role that failed with an error, not a crash
                ray.get(task)
    except KeyboardInterrupt:
        status = 130
        print('stopping: the learner checkpoints, then the actors and the replay server stop',
              file=sys.stderr, flush=True)
        learner.stop.remote()
        _wait(learner_task, 120)
    except ray.exceptions.RayTaskError as e:
        status = 1
        print(f'error: {_describe(e)}; rerun with the same --logdir and --resume to resume '
              f'from the last checkpoint', file=sys.stderr, flush=True)
        learner.stop.remote()
        _wait(learner_task, 120)
    for actor in actors:
        actor.stop.remote()
    for task in actor_tasks:
        _wait(task, 30)
    replay.stop.remote()  # checkpoints its tables
    _wait(replay_task, 120)
    return status, summary


def _describe(error: Exception) -> str:
    cause = getattr(error, 'cause', None) or error
    return f'{type(cause).__name__}: {rundir.describe(cause)}'


def _wait(task, timeout_s: float) -> None:
    import ray
    try:
        ray.get(task, timeout=timeout_s)
    except Exception as e:  # noqa: BLE001 - stopping: report, do not hang
        logging.warning('a role did not stop cleanly: %s', (str(e) or repr(e)).splitlines()[0])
