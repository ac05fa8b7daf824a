"""The `signals` sub-config of CLEAR and SAC (`agents.signals`): which reward signals
are on, their strengths, discounts and models' sizes, and behavioural cloning. Plain
Python: importing a config loads no TensorFlow."""

import dataclasses
from typing import Tuple

from reverb_agents.agents.configs import field, require

SIGNALS = ('curiosity', 'gail')  # the intrinsic signals, in component order after extrinsic
CURIOSITY_METRICS = ('curiosity/forward_loss', 'curiosity/inverse_loss', 'curiosity/reward')
GAIL_METRICS = ('gail/loss', 'gail/gradient_penalty', 'gail/reward', 'gail/demo_estimate',
                'gail/policy_estimate')
BC_METRICS = ('bc/loss', 'bc/strength')
GAIL_REWARDS = ('positive', 'logit')


@dataclasses.dataclass(frozen=True)
class SignalsConfig:
    extrinsic_strength: float = field(
        1.0, "weight of the environment's reward (0: learn from the other signals alone)")
    curiosity_strength: float = field(0.0, 'weight of the ICM curiosity reward (0: off)')
    curiosity_gamma: float = field(0.99, "the curiosity reward's discount")
    curiosity_encoding_size: int = field(64, "size of ICM's state encoding phi(s)")
    curiosity_learning_rate: float = field(3e-4, "Adam step size of ICM's models")
    curiosity_episodic: bool = field(
        False, "an episode's termination ends the curiosity return (ML-Agents); off: it "
        "runs on into the next episode (RND's non-episodic returns; SAC: as at a time limit)")
    curiosity_steps: int = field(0, 'learner steps over which curiosity_strength anneals '
                                 'linearly to 0 (0: constant)')
    curiosity_normalize: bool = field(
        False, 'divide the curiosity reward by a running RMS of it (as RND), so the strength '
        'is in units of typical novelty and stays meaningful as ICM learns')
    curiosity_clip: float = field(
        5.0, "a step's curiosity reward is at most this many running RMS of the (bounded) "
        'rewards before it (0: unbounded)')
    gail_strength: float = field(0.0, 'weight of the GAIL reward -log(1 - D) (0: off)')
    gail_gamma: float = field(0.99, "the GAIL reward's discount")
    gail_demos: str = field('', "demonstrations file (launch/record.py) for GAIL's "
                            "discriminator")
    gail_use_actions: bool = field(False, 'the discriminator sees (s, a) instead of s')
    gail_reward: str = field(
        'positive', "'positive': -log(1 - D) (GAIL's, always > 0: it also rewards merely "
        "surviving); 'logit': log D - log(1 - D) (AIRL's, < 0 where steps look like the "
        "policy's, no survival bias)")
    gail_episodic: bool = field(
        True, "an episode's termination ends the GAIL return (GAIL, ML-Agents); off: it "
        "bootstraps across it as across a time limit")
    gail_learning_rate: float = field(3e-4, "Adam step size of GAIL's discriminator")
    gail_gradient_penalty: float = field(10.0, "weight of the discriminator's gradient penalty")
    bc_demos: str = field('', 'demonstrations file (launch/record.py) for behavioural cloning')
    bc_strength: float = field(0.0, 'weight of the behavioural-cloning loss on demo batches')
    bc_steps: int = field(0, 'learner steps over which bc_strength anneals linearly to 0 '
                          '(0: constant)')
    bc_pretrain_steps: int = field(0, 'policy pre-training steps on the demonstrations alone, '
                                   'before any actor acts')
    signal_hidden_size: int = field(128, 'hidden units of the ICM and GAIL networks')

    def __post_init__(self):
        for name in ('extrinsic_strength', 'curiosity_strength', 'gail_strength',
                     'bc_strength'):
            value = getattr(self, name)
            require(value >= 0, f'{name} must be >= 0 (a signal strength), got {value}')
        require(self.gail_reward in GAIL_REWARDS,
                f'gail_reward must be one of {GAIL_REWARDS}, got {self.gail_reward!r}')
        for name in ('curiosity_gamma', 'gail_gamma'):
            value = getattr(self, name)
            require(0.0 <= value <= 1.0, f'{name} must be in [0, 1], got {value}')
        for name in ('curiosity_encoding_size', 'curiosity_learning_rate', 'gail_learning_rate',
                     'signal_hidden_size'):
            value = getattr(self, name)
            require(value > 0, f'{name} must be positive, got {value}')
        for name in ('gail_gradient_penalty', 'curiosity_steps', 'bc_steps',
                     'bc_pretrain_steps', 'curiosity_clip'):
            value = getattr(self, name)
            require(value >= 0, f'{name} must be >= 0, got {value}')
        require(bool(self.gail_strength) == bool(self.gail_demos),
                '--gail_strength > 0 needs --gail_demos=FILE, and --gail_demos needs '
                f'--gail_strength > 0 (got {self.gail_strength}, {self.gail_demos!r})')
        uses_bc = bool(self.bc_strength) or bool(self.bc_pretrain_steps)
        require(uses_bc == bool(self.bc_demos),
                '--bc_strength > 0 or --bc_pretrain_steps > 0 needs --bc_demos=FILE, and '
                '--bc_demos needs one of them')
        require(self.extrinsic_strength > 0 or self.intrinsic,
                'every reward signal is off: set --extrinsic_strength > 0, '
                '--curiosity_strength > 0 or --gail_strength > 0')

    @property
    def intrinsic(self) -> Tuple[str, ...]:
        """The intrinsic signals that are on, in component order (`SIGNALS`)."""
        return tuple(name for name in SIGNALS if getattr(self, f'{name}_strength') > 0)

    @property
    def uses_bc(self) -> bool:
        return bool(self.bc_demos)

    @property
    def gammas(self) -> Tuple[float, ...]:
        """The intrinsic components' discounts."""
        return tuple(getattr(self, f'{name}_gamma') for name in self.intrinsic)

    @property
    def episodic(self) -> Tuple[bool, ...]:
        """Whether a termination ends each intrinsic component's return."""
        return tuple(getattr(self, f'{name}_episodic') for name in self.intrinsic)

    @property
    def demo_files(self) -> Tuple[str, ...]:
        """The demonstration files the learner reads (checked against the environment)."""
        return tuple(path for path in (self.gail_demos, self.bc_demos) if path)

    def metric_names(self) -> Tuple[str, ...]:
        """The TensorBoard names the signals add to a learner step's metrics."""
        names = ()
        if 'curiosity' in self.intrinsic:
            names += CURIOSITY_METRICS
        if 'gail' in self.intrinsic:
            names += GAIL_METRICS
        if self.bc_strength:
            names += BC_METRICS
        return names
