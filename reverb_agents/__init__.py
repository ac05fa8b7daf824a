"""reverb-agents: IMPALA/CLEAR, ACER and SAC on TensorFlow 2, Sonnet and one Reverb server.

The checkout's folders are installed under this one name (setup.py's
`package_dir`): `reverb_agents.agents` (the agents), `reverb_agents.networks`,
`reverb_agents.replay` and `reverb_agents.launch` (the wiring and the tools).
The Python API is here, loaded on first use so that `import reverb_agents`
starts no TensorFlow:

    from reverb_agents import train, load_policy, tune

That first use imports TensorFlow with its native start-up lines (CUDA
factories, oneDNN, CPU features, TF-TRT) filtered from the process's
stderr while it loads (`launch.runs.console.native_noise_filtered`); everything
else on stderr, then and later, passes.
"""

import importlib

__version__ = '0.1.0'

_API = {**{name: 'reverb_agents.launch.api' for name in ('train', 'Result', 'tune', 'TuneResult')},
        **{name: 'reverb_agents.launch.policies.load' for name in ('load_policy', 'Policy')},
        **{name: 'reverb_agents.launch.learning.callbacks' for name in (
            'Callback', 'CheckpointSaved', 'EarlyStopping', 'EvaluationResult', 'StopTraining',
            'TrainingProgress')}}
__all__ = sorted(_API)


def __getattr__(name):
    if name in _API:
        from reverb_agents.launch.runs import console  # imports nothing heavy
        with console.native_noise_filtered():
            module = importlib.import_module(_API[name])
        return getattr(module, name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
