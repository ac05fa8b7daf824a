"""The network settings every agent shares: the `network` sub-config (torso and memory,
built in or the user's own), the observation and value normalisation fields (PopArt),
the previous-reward input, and the checks and core options they make.

An agent's config names these fields itself where its defaults differ (`lstm_size`,
`normalize`, `value_normalization`) and takes their docs and checks from here; the
parts they build are `networks.torsos`, `networks.cores`, `networks.normalizer` and
`networks.popart`. Pure Python: importing it starts no TensorFlow.
"""

import dataclasses
from typing import Any, Dict, Optional, Tuple

from reverb_agents.agents.configs import field, replace, require, require_choice
from reverb_agents.networks import user_spec  # pure Python, no TensorFlow

TORSOS = ('auto', 'mlp', 'nature_cnn', 'impala_resnet', 'simple', 'minatar', 'nature', 'impala')


PREV_REWARD_INPUTS = ('transformed', 'raw')
VALUE_NORMALIZATIONS = ('popart', 'none')
VALUE_NORMALIZATION_DOC = ("'popart': value heads learned in normalised units with running "
                           "target statistics (networks/popart.py), so no reward scale needs "
                           "tuning; 'none': in the reward's units (the seeds)")
NUM_TASKS_DOC = ("the value outputs, each with its own PopArt statistics: 0 = one per task of "
                 "--tasks with PopArt (its multi-task form), else one; 1 = one for all tasks")
POPART_STEP_DOC = "PopArt's statistics step size (beta; exact averages for the first 1/beta steps)"


OBSERVATION_MAPS = ('rms', 'standardize')
OBSERVATION_MAP_DOC = ("how --normalize maps a vector observation with its running statistics: "
                       "'rms' divides each feature by its root mean square, never centring "
                       "(a feature near rest keeps its value); 'standardize': (x - mean) / "
                       "std (ML-Agents; suits a feature with a large offset and a small "
                       "spread)")
NORMALIZE_DOC = ('map vector observations with running statistics (--observation_map); '
                 'other observations (images, dicts) are left as they are')


def normalizes(normalize: bool, observation_space: Any) -> bool:
    """Whether a core normalises `observation_space` under `normalize`: a vector Box
    only (images have their own scale; a dict's leaves are not normalised)."""
    import gymnasium as gym  # configs stay importable without gymnasium's import cost
    return bool(normalize) and isinstance(observation_space, gym.spaces.Box) \
        and len(observation_space.shape) == 1


def normalization_options(config: Any, observation_space: Any) -> Dict[str, Any]:
    """`ActorCriticCore`'s keyword arguments for a config's `normalize`,
    `value_normalization`, `popart_step_size` and `num_tasks` (CLEAR's and ACER's)."""
    return dict(normalize_observations=normalizes(config.normalize, observation_space),
                value_normalization=config.value_normalization == 'popart',
                popart_step_size=config.popart_step_size, num_tasks=max(1, config.num_tasks))


def check_value_normalization(config: Any) -> None:
    """`value_normalization` is a known mode, `popart_step_size` in (0, 1] and
    `num_tasks` >= 0."""
    require_choice('value_normalization', config.value_normalization, VALUE_NORMALIZATIONS)
    require(0.0 < config.popart_step_size <= 1.0,
            f'popart_step_size must be in (0, 1], got {config.popart_step_size}')
    require(config.num_tasks >= 0, f'num_tasks must be >= 0, got {config.num_tasks}')


def for_tasks(config: Any, num_tasks: int) -> Any:
    """A config with `num_tasks` for a run over `num_tasks` tasks (CLEAR's and ACER's
    `Agent.for_tasks`): 0 becomes one per task with PopArt, else 1; 1 and the run's
    number stay; any other value is a ValueError (one line)."""
    if config.num_tasks == 0:  # per task where PopArt has statistics to keep apart
        return replace(config, num_tasks=num_tasks
                       if config.value_normalization == 'popart' else 1)
    if config.num_tasks not in (1, num_tasks):
        raise ValueError(f'num_tasks={config.num_tasks}: give 0 (one value output per '
                         f'task), 1 (one for all) or the number of tasks ({num_tasks})')
    return config
TORSO_DOC = ("'auto' (by the observation: mlp, minatar under 36x36 images, else nature_cnn), "
             "'mlp', 'nature_cnn' ('nature'), 'impala_resnet' ('impala'), 'simple' (ML-Agents) "
             "or 'minatar' (the MinAtar paper's conv 16 3x3)")
PREV_REWARD_DOC = ("the core's previous-reward input: 'transformed' (as the learner sees it, "
                   "as the seeds) or 'raw'")


def reward_input(mode: str, scaling: float,
                 clipping: str = 'none') -> Optional[Tuple[float, str]]:
    """The core's `reward_transform` for a `prev_reward_input` mode (None: raw)."""
    return None if mode == 'raw' else (scaling, clipping)


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """The torso and the memory: built-in by name, or of the user's own as
    `MODULE:FUNCTION` (`networks.user`, docs/networks.md). The sizes of the built-in
    parts (`hidden_sizes`, `lstm_size`) stay in each agent's config, whose defaults
    differ."""
    torso: str = field('auto', TORSO_DOC + '; or MODULE:FUNCTION, a factory '
                       'f(observation_space, **torso_kwargs) of a Keras layer / Sonnet module')
    torso_kwargs: str = field('', 'key=value,... passed to a --torso=MODULE:FUNCTION factory')
    memory: str = field('', "'' (the LSTM of --lstm_size, or none) or MODULE:FUNCTION, a "
                        'factory f(**memory_kwargs) of a Keras RNN cell or an snt.RNNCore, in '
                        "the LSTM's place")
    memory_kwargs: str = field('', 'key=value,... passed to a --memory=MODULE:FUNCTION factory')
    memory_skip: bool = field(False, "the torso's features also go around the memory to the "
                              'heads (concatenated with its output)')
    observation_map: str = field('rms', OBSERVATION_MAP_DOC)
    rescale_actions: bool = field(True, 'Box actions with finite bounds are Gaussians in '
                                  '[-1, 1] units, clipped there and rescaled to the bounds; '
                                  "false: in the Box's own units, clipped to its bounds "
                                  "(SAC's squashed actions are in [-1, 1] either way)")

    def __post_init__(self):
        if user_spec.is_user_network(self.torso):
            user_spec.check_spec('torso', self.torso)
        else:
            require_choice('torso', self.torso, TORSOS)
        require_choice('observation_map', self.observation_map, OBSERVATION_MAPS)
        if self.memory:
            user_spec.check_spec('memory', self.memory)
        user_spec.parse_kwargs('torso_kwargs', self.torso_kwargs)
        user_spec.parse_kwargs('memory_kwargs', self.memory_kwargs)
        require(not self.torso_kwargs or user_spec.is_user_network(self.torso),
                f'--torso_kwargs={self.torso_kwargs} is for a torso of your own '
                f'(--torso=MODULE:FUNCTION), not the built-in {self.torso!r}')
        require(not self.memory_kwargs or bool(self.memory),
                f'--memory_kwargs={self.memory_kwargs} is for a memory of your own '
                f'(--memory=MODULE:FUNCTION)')

    @property
    def users_own(self) -> bool:
        """Whether the torso or the memory is the user's own (`MODULE:FUNCTION`)."""
        return user_spec.is_user_network(self.torso) or bool(self.memory)

    def core_options(self) -> Dict[str, str]:
        """`ActorCriticCore`'s keyword arguments for the torso and the memory."""
        return dict(torso=self.torso, torso_kwargs=self.torso_kwargs, memory=self.memory,
                    memory_kwargs=self.memory_kwargs, memory_skip=self.memory_skip,
                    observation_map=self.observation_map)


def network_with_skip() -> NetworkConfig:
    """The network sub-config of CLEAR and ACER: the torso's features also go around
    the memory to the heads (`memory_skip`)."""
    return NetworkConfig(memory_skip=True)


def check_memory(config: Any) -> None:
    """A user's memory takes the LSTM's place: `lstm_size` must stay at 0 or at the
    agent's default (then unused, `lstm_units`)."""
    default = type(config).__dataclass_fields__['lstm_size'].default
    require(not (config.network.memory and config.lstm_size not in (0, default)),
            f'--memory={config.network.memory} takes the LSTM\'s place: leave --lstm_size at '
            f'0 (got {config.lstm_size})')


def lstm_units(config: Any) -> int:
    """The core's LSTM units: `lstm_size`, or 0 where a user's memory takes its place."""
    return 0 if config.network.memory else config.lstm_size


def recurrent(config: Any) -> bool:
    """Whether an agent config's core has a memory (an LSTM or the user's own)."""
    return config.lstm_size > 0 or bool(config.network.memory)
