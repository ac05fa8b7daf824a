"""ACER (Wang et al. 2017): config, losses, learner and its contract (`agent.py`)."""
