"""The command line: flags from the agents' configs (`config_flags`), the run's flags and
presets resolved to options and config (`run_flags`), `--help` (`help`) and the train
command (`train`, which `python launch/run.py` and `reverb-agents train` run).

May import every room below it: `runs` up to `runners`.
"""
