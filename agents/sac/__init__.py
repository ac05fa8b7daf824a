"""SAC (Haarnoja et al. 2018): config, losses, learner and its contract (`agent.py`)."""
