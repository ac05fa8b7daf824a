"""Evaluation: greedy episodes with a policy (`episodes`), evaluation on a schedule
during training with the best policy kept (`periodic`), and a task sequence's
continual-learning measurements (`continual`).

May import `runs`, `environments`, `acting`, `building` and `policies`.
"""
