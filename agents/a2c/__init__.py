"""A2C (Mnih et al. 2016, synchronous): the smallest agent on the shared contract, a
newcomer's model of how one is added: a config, pure losses, a learner and its
contract (`agent.py`), registered by one line in `agents/registry.py`."""
