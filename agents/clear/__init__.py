"""CLEAR / IMPALA (Rolnick et al. 2019; Espeholt et al. 2018): config, losses, learner
and its contract (`agent.py`)."""
