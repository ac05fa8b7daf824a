"""What a Ray cluster must hold for `--launcher=ray`, checked before any role starts,
so that a request it cannot run is one error line rather than actors waiting forever.

Two checks: the cluster's totals (CPUs, GPUs and custom resources for the replay
server, the learner and every actor), then, once the replay server and the learner
are placed together, room for every actor on the nodes that have the actors'
resources. Both count a node's whole resources; other jobs on a shared cluster are
not seen, which is why the launcher still bounds how long actors take to start.
"""

import collections
import math
from typing import Any, Dict


class RayLaunchError(ValueError):
    """A cluster or request `--launcher=ray` cannot run (one error line)."""


def check_totals(num_actors: int, actor_cpus: float, actor_resources: Dict[str, float],
                 learner_resources: Dict[str, float], learner_gpus: int) -> None:
    """Raises `RayLaunchError` unless the cluster's totals hold every role."""
    import ray
    total = ray.cluster_resources()
    needed = collections.Counter({'CPU': 2 + num_actors * actor_cpus, 'GPU': learner_gpus})
    needed.update({name: num_actors * amount for name, amount in actor_resources.items()})
    needed.update(learner_resources)
    short = [f'{name} {amount:g} (it has {total.get(name, 0):g})'
             for name, amount in needed.items() if amount and total.get(name, 0) < amount]
    if short:
        raise RayLaunchError(
            f'the Ray cluster is too small for the replay server, the learner and '
            f'{num_actors} actors: they need ' + ', '.join(short))


def actor_room(nodes: Dict[str, Dict[str, float]], taken: Dict[str, Dict[str, float]],
               need: Dict[str, float]) -> int:
    """How many actors, each needing `need`, fit on `nodes` (node id -> total resources)
    once `taken` (node id -> resources already placed there) is subtracted."""
    room = 0
    for node, total in nodes.items():
        used = taken.get(node, {})
        room += min(math.floor((total.get(name, 0.0) - used.get(name, 0.0)) / amount + 1e-9)
                    for name, amount in need.items() if amount > 0)
    return max(room, 0)


def check_actor_nodes(group: Any, num_actors: int, actor_cpus: float,
                      actor_resources: Dict[str, float]) -> None:
    """Raises `RayLaunchError` unless `num_actors` actors fit on the nodes with their
    resources beside `group` (the placed replay server and learner)."""
    import ray
    from ray.util.placement_group import placement_group_table
    nodes = {n['NodeID']: n['Resources'] for n in ray.nodes() if n.get('Alive')}
    table = placement_group_table(group)
    taken = collections.defaultdict(collections.Counter)
    for index, node in table['bundles_to_node_id'].items():
        taken[node].update(table['bundles'][index])
    need = {'CPU': actor_cpus, **actor_resources}
    room = actor_room(nodes, taken, need)
    if room < num_actors:
        raise RayLaunchError(
            f'{num_actors} actors (each {need}) do not fit on the nodes that have their '
            f'resources once the replay server and the learner took theirs: room for {room} '
            f'(--learner_resources places those two, --actor_resources the actors)')
