"""The command-line tools around a run, which no library module imports: each is a
script (`reverb-agents evaluate|record|plot|benchmark`, or from a checkout
`python launch/<name>.py`, a shim that runs the module here as `__main__`).

- `evaluate`: episodes of an exported SavedModel (TensorFlow, gymnasium, numpy);
- `record`: a SavedModel's episodes written as demonstrations;
- `plot`: learning curves and a task sequence's panels from logdirs (no TensorFlow);
- `benchmark`: acting, learning and whole-run throughput; `benchmark_ray`: the
  scaling of `--launcher=ray` with the actors;
- `bandit_baselines`: the meta-RL bandits' reference regrets.
"""
