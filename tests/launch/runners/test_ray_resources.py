"""`launch.runners.ray_resources.actor_room`: how many actors fit on a cluster's nodes beside
what is already placed there (the arithmetic; test_ray.py runs it on a real cluster)."""

from reverb_agents.launch.runners import ray_resources

NODES = {'head': {'CPU': 2.0, 'learner_node': 1.0}, 'worker': {'CPU': 2.0, 'actor_node': 2.0}}


def test_actors_fit_where_their_resources_and_free_cpus_are():
    need = {'CPU': 1.0, 'actor_node': 1.0}
    assert ray_resources.actor_room(NODES, {}, need) == 2
    # The replay server and the learner on the head: the worker still has both CPUs.
    assert ray_resources.actor_room(NODES, {'head': {'CPU': 2.0}}, need) == 2
    # ... on the worker: no CPU left where actor_node is.
    assert ray_resources.actor_room(NODES, {'worker': {'CPU': 2.0, 'actor_node': 1.0}},
                                    need) == 0


def test_without_custom_resources_every_node_counts_by_cpus():
    assert ray_resources.actor_room(NODES, {'head': {'CPU': 2.0}}, {'CPU': 1.0}) == 2
    assert ray_resources.actor_room(NODES, {}, {'CPU': 0.5}) == 8
    assert ray_resources.actor_room(NODES, {}, {'CPU': 1.5}) == 2  # one per node
    assert ray_resources.actor_room(NODES, {}, {'CPU': 3.0}) == 0
