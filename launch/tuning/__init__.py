"""Tuning: `reverb-agents tune`, an Optuna study whose trials are ordinary runs. By job:
`spaces` (the agent's declared search spaces, narrowed, replaced and checked),
`trials` (one trial: `launch/run.py` in a process of its own, its evaluations
reported, stopped when pruned), `study` (storage, sampler, pruner, the objective),
`outputs` (best.flags, the best policy, plots, the table) and `tune` (the command).

May import every room below it: `runs` up to `command_line`. Optuna is imported
when a study starts (the `tune` extra).
"""
