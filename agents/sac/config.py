"""SAC's configuration: one frozen dataclass, one line of doc per field.

`batch_size` counts transitions: `batch_size / unroll_length` sequences of
`unroll_length` learned steps each (16 by default; 1 for the feed-forward SAC).

Defaults follow Stable-Baselines3 / the SAC paper for continuous control
(256x256 networks, batch 256, twin critics, learned temperature from alpha = 1)
with rl-zoo's Adam step of 1e-3 and a short random warm-up (small tasks learn in
a few thousand steps; use 3e-4 for MuJoCo-size tasks) and ML-Agents for discrete
branches (target entropy = `discrete_target_entropy_scale * log(n)` per branch).
Three were chosen on the untuned suite (docs/benchmarks.md#sacs-defaults): ALF's
target step of 0.05 (with SB3's 0.005 the critics of discrete tasks lag; 0.005 is
still what reaches MountainCar's sparse goal,
docs/benchmarks.md#sac-at-its-own-budgets), ALF's centred entropy reward
(uncentred, a positive entropy bonus per step makes ending an episode at a goal
cost the bonus of every step after it), and observation normalisation, as
CLEAR's and ACER's.
The actor is recurrent by default, as CLEAR's and ACER's cores are: an LSTM of
64 with the torso's features also passed around it, learned from stored
sequences of 16 steps after 8 of burn-in (R2D2), the critics' TD loss training
it too. No gradient reaches the burn-in, so the memory learns to keep what it
saw at most `unroll_length - 1` steps back: 8 learned steps lost the memory
task's recall 9 steps after its cue, 16 keep it. It learns the partially
observed tasks a feed-forward actor cannot, and the corridor; on the CartPoles
its policy falls late in about one run in three, which costs the one with
observations x 1000 (docs/benchmarks.md#why-the-recurrent-policy-falls-late);
`memory_optimizer`, `memory_critic_scale` and `critic_memory` change how the
critics' loss reaches the memory, each measured there.
It takes 1.5-2.4x the wall per env step; `--lstm_size=0 --burn_in=0
--unroll_length=1` is the feed-forward SAC.
A discrete branch's temperature is SAC's, never below 0.3 of a running scale of
the critics' action gaps: the floor keeps a policy from saturating when the
first goals make those gaps jump (Acrobot), and SAC's own alpha above it keeps
the policy uniform while the gaps are noise (the corridor).
`discrete_policy='critic'` replaces the categorical actor of purely discrete
actions by ALF's policy softmax(min over critics Q / alpha), with no actor.
"""

import dataclasses
import math
from typing import Any, List, Optional, Tuple

from reverb_agents.agents import configs
from reverb_agents.agents import network_config
from reverb_agents.agents import policy_average
from reverb_agents.agents import search
from reverb_agents.agents.configs import field, require, sub_config
from reverb_agents.agents.prior import PriorConfig
from reverb_agents.agents.signals.config import SignalsConfig
from reverb_agents.replay.batches import split_batch


# `discrete_policy`: a learned categorical actor, or the critics' softmax(Q / alpha).
DISCRETE_POLICIES = ('actor', 'critic')
# `temperature_unit`: what a discrete branch's alpha is measured in.
TEMPERATURE_UNITS = ('value', 'action_gap', 'value_with_gap_floor')


def _replay_defaults() -> configs.ReplayConfig:
    return configs.ReplayConfig(replay_size=1_000_000, queue_size=1024)


def _optimizer_defaults() -> configs.OptimizerConfig:
    return configs.OptimizerConfig(learning_rate=1e-3, learning_rate_schedule='constant',
                                   clip_grad_norm=None)


@dataclasses.dataclass(frozen=True)
class SACConfig:
    # Data.
    batch_size: int = field(256, 'transitions per learner step (batch_size / unroll_length '
                            'sequences)',
                            search=search.Choice(64, 128, 256, 512))
    learning_starts: int = field(
        256, 'env steps of uniform random actions, and replayed transitions before learning')
    updates_per_step: float = field(
        1.0, "learner updates per env step; Reverb's SampleToInsertRatio holds it")
    n_step: int = field(1, 'n-step TD targets (feed-forward: sequences of n + 1 steps)',
                        search=search.Choice(1, 3, 5))
    online_fraction: float = field(0.0, 'share of a batch taken fresh from `queue` (0: replay only)')
    replay: configs.ReplayConfig = sub_config(_replay_defaults)
    prior: PriorConfig = sub_config(PriorConfig)  # --prior_actor (agents.prior)
    # Returns.
    discounting: float = field(0.99, 'gamma',
                               search=search.DISCOUNTS)
    reward_scaling: float = field(1.0, 'rewards are multiplied by this')
    use_entropy_reward: bool = field(
        True, 'add -alpha log pi of the next observation to the reward of every step of a target')
    normalize_entropy_reward: bool = field(
        True, "ALF's: subtract a running (adaptive) mean of log pi from the entropy reward, so "
        "that living longer earns no entropy bonus")
    reward_weights: Optional[Tuple[float, ...]] = field(
        None, 'k floats: learn k reward components, act on their weighted sum')
    # Critics.
    num_critic_replicas: int = field(2, 'Q networks; targets use the minimum over them')
    critic_hidden_sizes: Tuple[int, ...] = field(
        (256, 256), "each critic's MLP over [observation, continuous action]")
    target_update_tau: float = field(
        0.05, "target <- tau * online + (1 - tau) * target (ALF's 0.05; SB3's 0.005)",
        search=search.Choice(0.001, 0.005, 0.01, 0.02, 0.05))
    target_update_period: int = field(1, 'learner steps between target updates')
    # Actor.
    # Reward signals (curiosity, GAIL) and behavioural cloning (`agents.signals`).
    signals: SignalsConfig = sub_config(SignalsConfig)
    discrete_policy: str = field(
        'actor', "'actor' (a learned categorical actor, ML-Agents) or 'critic' (softmax(Q / alpha) "
        "of the critics, no actor network, ALF; purely discrete actions, feed-forward)")
    hidden_sizes: Tuple[int, ...] = field((256, 256), "the actor's MLP torso",
                                          search=search.HIDDEN_SIZES)
    lstm_size: int = field(64, 'actor LSTM units; 0 makes SAC feed-forward (then also '
                           '--burn_in=0 --unroll_length=1)')
    burn_in: int = field(8, 'steps that warm up the stored core state before the learned ones '
                         '(R2D2); 0 without a memory')
    unroll_length: int = field(16, 'transitions learned per stored sequence (feed-forward: 1); '
                               'the memory learns to keep what it saw up to this many steps '
                               'less one (burn-in passes no gradient)')
    # One layer of its own keeps a recurrent actor from falling late
    # (docs/benchmarks.md#the-actors-own-layers).
    policy_hidden_sizes: Tuple[int, ...] = field(
        (256,), "the actor's own MLP between its features (the torso's and the LSTM's, which "
        "a recurrent SAC's critics also read and train) and its policy head; only the "
        "actor's loss trains it")
    entropy_penalty: float = field(
        0.0, "Stable Discrete SAC's entropy penalty (Zhou et al. 2022): the actor's loss adds "
        "this times (H_mu - H)^2 per discrete branch, H_mu the entropy of the policy that "
        "acted (from its stored logits); 0: off")
    entropy_anchor: str = field(
        'behaviour', "what --entropy_penalty holds a branch's entropy to: 'behaviour' (the "
        "acting policy's, per row: Stable Discrete SAC's) or 'slow' (a moving average of the "
        "batch's mean entropy, moved by entropy_anchor_tau each update; the penalty is on the "
        "batch's mean, which may then fall only as fast as the average follows)")
    entropy_anchor_tau: float = field(
        0.01, "entropy_anchor='slow': the average's step toward each batch's mean entropy")
    memory_learns_from_critics: bool = field(
        True, "recurrent: the critics' TD loss also trains the actor's LSTM and torso")
    memory_optimizer: bool = field(
        False, "recurrent, memory_learns_from_critics: the critics' gradient on the actor's "
        "torso and LSTM steps through its own Adam, not added to the actor's gradient in one")
    critic_memory: bool = field(
        False, "recurrent: the critics have an LSTM of their own (lstm_size units over their "
        "encoded observations, from zero at each sequence's start, warmed by the burn-in), "
        "trained by their TD loss and seen instead of the actor's memory, which then learns "
        "from the actor's loss alone")
    memory_critic_scale: float = field(
        1.0, "recurrent, memory_learns_from_critics, one Adam: the critics' gradient on the "
        "actor's torso and LSTM is multiplied by this before it joins the actor's")
    # --torso, --memory; the torso's features also go around the memory (--memory_skip):
    network: network_config.NetworkConfig = sub_config(network_config.network_with_skip)
    prev_reward_input: str = field('transformed', network_config.PREV_REWARD_DOC)
    dqda_clipping: Optional[float] = field(
        None, 'clip each element of dQ/da in the actor loss; unset: off')
    normalize: bool = field(
        True, network_config.NORMALIZE_DOC)
    # Temperature (one per continuous group and per discrete branch).
    initial_log_alpha: float = field(0.0, 'log alpha at the start (alpha = 1)')
    init_entcoef: Optional[float] = field(
        None, "ML-Agents' spelling: initial alpha; overrides initial_log_alpha")
    target_entropy: Optional[float] = field(
        None, "overrides every group's default (in code: also a callable(kind, size) -> float)")
    continuous_target_entropy_scale: float = field(
        1.0, 'continuous default: -scale * action dims')
    discrete_target_entropy_scale: float = field(
        0.2, 'discrete default: scale * log(n) per branch (ML-Agents)')
    max_log_alpha: Optional[float] = field(None, 'clip log alpha from above; unset: no clip')
    min_log_alpha: Optional[float] = field(
        None, "clip every group's log alpha from below (a discrete branch's in action gaps "
        "with temperature_unit='action_gap'; see also action_gap_min_log_alpha); unset: no "
        "clip")
    # With the layer above, a floor in action gaps keeps Acrobot's collapsing seeds
    # (docs/benchmarks.md#a-temperature-in-units-of-the-action-gaps); SAC's own alpha
    # above it keeps the policy uniform while the critics' gaps are noise, which walks the
    # corridor (docs/benchmarks.md#the-corridor-and-sacs-own-temperature-over-the-gap-floor).
    temperature_unit: str = field(
        'value_with_gap_floor', "what a discrete branch's alpha is measured in: 'value' "
        "(the critics' units, SAC's), 'action_gap' (alpha times a running scale of the "
        "critics' spread over the branch's actions, which rises at once and falls by "
        "action_gap_tau per update: a jump in the action values then moves the temperature "
        "with it) or 'value_with_gap_floor' (the critics' units, never below "
        "exp(action_gap_min_log_alpha) times that scale); continuous groups are in the "
        "critics' units either way")
    action_gap_tau: float = field(
        0.01, "temperature_unit 'action_gap' or 'value_with_gap_floor': the scale's step "
        "toward a batch's smaller spread")
    action_gap_min_log_alpha: Optional[float] = field(
        -1.2, "temperature_unit 'action_gap' or 'value_with_gap_floor': a floor on each "
        "discrete branch's alpha in action gaps (whatever the rewards' scale; continuous "
        "groups are left as they are); unset: no floor ('action_gap' only)")
    # 30k updates: at least half the floor through CartPole's and the corridor's whole
    # budgets, which a faster fall lost; LunarLander's policy reaches its entropy target
    # (docs/benchmarks.md#a-floor-that-falls-slower).
    action_gap_floor_halflife: Optional[float] = field(
        30_000.0, "temperature_unit='value_with_gap_floor': the gap floor falls as "
        "h / (h + n), n the updates since a batch's spread of the critics' action values "
        "last set a record (halved h updates after it, then as 1 / n): once the critics have "
        "settled, a policy the floor holds soft can reach its entropy target; 0: the floor "
        "stays")
    # Optimisers. `optimizer` is the critics'; actor and temperatures
    # share its schedule, betas and epsilon with their own step sizes.
    optimizer: configs.OptimizerConfig = sub_config(_optimizer_defaults)
    # Slower steps keep the policy from breaking for a few hundred updates at a time, but
    # 1e-4 lost Acrobot within SAC's 10k and 3e-4 lost as many seeds across the suite as
    # it mended (docs/benchmarks.md#a-slower-actor).
    actor_learning_rate: float = field(
        1e-3, "actor Adam step size (rl-zoo's Pendulum value; 3e-4 in the paper; also the "
        "critics' steps on a recurrent actor's torso and LSTM)",
        search=search.LogUniform(1e-5, 1e-2))
    alpha_learning_rate: float = field(1e-3, "temperatures' Adam step size")
    # Learning never reads the average: it is the policy of the last ~1 / tau updates
    # instead of the last one, which can be a broken snapshot of it
    # (docs/benchmarks.md#an-average-of-the-actors-weights).
    policy_average_tau: float = field(0.002, policy_average.TAU_DOC)

    def __post_init__(self):
        configs.require_positive(self, 'batch_size', 'n_step', 'unroll_length',
                                 'updates_per_step', 'learning_starts', 'num_critic_replicas',
                                 'target_update_period', 'actor_learning_rate',
                                 'alpha_learning_rate')
        configs.require_fraction(self, 'discounting', 'policy_average_tau')
        network_config.check_memory(self)
        configs.require_choice('prev_reward_input', self.prev_reward_input,
                               network_config.PREV_REWARD_INPUTS)
        configs.require_choice('discrete_policy', self.discrete_policy, DISCRETE_POLICIES)
        configs.require_choice('temperature_unit', self.temperature_unit, TEMPERATURE_UNITS)
        configs.require_sizes('hidden_sizes', self.hidden_sizes)
        configs.require_sizes('critic_hidden_sizes', self.critic_hidden_sizes)
        configs.require_sizes('policy_hidden_sizes', self.policy_hidden_sizes)
        checks = [
            (self.burn_in >= 0 and self.lstm_size >= 0,
             f'burn_in and lstm_size must be >= 0, got {self.burn_in}, {self.lstm_size}'),
            (self.burn_in == 0 or network_config.recurrent(self),
             f'burn_in warms up a memory\'s state, and a feed-forward SAC (lstm_size 0) has '
             f'none: pass --burn_in=0 (and --unroll_length=1, single transitions), got '
             f'burn_in {self.burn_in}'),
            (self.batch_size % self.unroll_length == 0,
             f'batch_size ({self.batch_size}) must be a multiple of unroll_length '
             f'({self.unroll_length}): a batch is whole sequences'),
            (0.0 < self.target_update_tau <= 1.0,
             f'target_update_tau must be in (0, 1], got {self.target_update_tau}'),
            (0.0 <= self.online_fraction < 1.0,
             f'online_fraction must be in [0, 1) (SAC learns from replay), '
             f'got {self.online_fraction}'),
            (self.reward_scaling >= 0, f'reward_scaling must be >= 0, got {self.reward_scaling}'),
            (self.entropy_penalty >= 0, f'entropy_penalty must be >= 0, got {self.entropy_penalty}'),
            (self.entropy_anchor in ('behaviour', 'slow'),
             f"entropy_anchor must be 'behaviour' or 'slow', got {self.entropy_anchor!r}"),
            (0.0 < self.entropy_anchor_tau <= 1.0,
             f'entropy_anchor_tau must be in (0, 1], got {self.entropy_anchor_tau}'),
            (self.init_entcoef is None or self.init_entcoef > 0,
             f'init_entcoef must be positive, got {self.init_entcoef}'),
            (self.dqda_clipping is None or self.dqda_clipping > 0,
             f'dqda_clipping must be positive (unset: off), got {self.dqda_clipping}'),
            (self.reward_weights is None or len(self.reward_weights) >= 1,
             'reward_weights must hold at least one number'),
            (self.replay.replay_size >= self.min_replay_size,
             f'replay_size ({self.replay.replay_size}) must hold learning_starts '
             f'({self.learning_starts} transitions)'),
        ]
        for ok, message in (checks + self._temperature_checks() + self._critic_policy_checks()
                            + self._memory_option_checks()):
            require(ok, message)
        if self.online_fraction > 0:
            num_fresh = split_batch(self.sequences_per_batch, 1.0 - self.online_fraction)[0]
            require(num_fresh <= self.replay.queue_size,
                    f'queue_size ({self.replay.queue_size}) must hold the fresh part of a '
                    f'batch ({num_fresh} sequences)')

    def _critic_policy_checks(self) -> List[Tuple[bool, str]]:
        """(ok, message) pairs: ALF's critic policy (softmax(Q / alpha), no actor) is
        feed-forward, learns scalar rewards, and has no actor for an option to reach."""
        return [
            (self.discrete_policy == 'actor' or not network_config.recurrent(self),
             f"discrete_policy='critic' acts from the critics of the observation alone: it "
             f"needs a feed-forward agent (--lstm_size=0 --burn_in=0 --unroll_length=1), got "
             f"lstm_size {self.lstm_size}"),
            (self.discrete_policy == 'actor' or self.reward_weights is None,
             "discrete_policy='critic' learns scalar rewards only (reward_weights unset), got "
             f"{self.reward_weights}"),
            (self.discrete_policy == 'actor' or not (self.signals.intrinsic
                                                     or self.signals.uses_bc),
             "discrete_policy='critic' has no actor to clone into and learns scalar rewards "
             "only: reward signals and behavioural cloning need discrete_policy='actor'"),
            (self.discrete_policy == 'actor' or not self.prior.prior_actor,
             "discrete_policy='critic' has no actor to keep close to a prior: --prior_actor "
             "needs discrete_policy='actor'"),
            (self.discrete_policy == 'actor' or not (self.policy_hidden_sizes
                                                     or self.tracks_action_gaps),
             "discrete_policy='critic' has no actor to give layers of its own, and acts with "
             "softmax(Q / alpha) in the exported core, which holds no action-gap scale: pass "
             "--policy_hidden_sizes= --temperature_unit=value with it, got "
             f"policy_hidden_sizes {self.policy_hidden_sizes}, temperature_unit "
             f"{self.temperature_unit!r}"),
            (self.discrete_policy == 'actor' or not self.entropy_penalty,
             "discrete_policy='critic' has no actor whose entropy to hold: "
             "--entropy_penalty needs discrete_policy='actor'"),
        ]

    def _temperature_checks(self) -> List[Tuple[bool, str]]:
        """(ok, message) pairs: the action-gap scale's step, the floor the floored unit is
        measured against, and each floor on log alpha under its ceiling."""
        floors = (('min_log_alpha', self.min_log_alpha),
                  ('action_gap_min_log_alpha', self.action_gap_min_log_alpha))
        return [(0.0 < self.action_gap_tau <= 1.0,
                 f'action_gap_tau must be in (0, 1], got {self.action_gap_tau}'),
                (self.temperature_unit != 'value_with_gap_floor'
                 or self.action_gap_min_log_alpha is not None,
                 "temperature_unit='value_with_gap_floor' floors alpha at "
                 "exp(action_gap_min_log_alpha) action gaps: set action_gap_min_log_alpha"),
                (not self.action_gap_floor_halflife or self.action_gap_floor_halflife > 0,
                 "action_gap_floor_halflife is a number of updates after which the gap "
                 "floor of temperature_unit='value_with_gap_floor' has halved (0: it stays), "
                 f"got {self.action_gap_floor_halflife}")] + [
            (floor is None or self.max_log_alpha is None or floor <= self.max_log_alpha,
             f'{name} ({floor}) must not exceed max_log_alpha ({self.max_log_alpha})')
            for name, floor in floors]

    def _memory_option_checks(self) -> List[Tuple[bool, str]]:
        """(ok, message) pairs: each option for how the critics' loss reaches the actor's
        memory needs a memory it reaches, and they exclude each other."""
        recurrent = network_config.recurrent(self)
        return [
            (self.memory_critic_scale > 0,
             f'memory_critic_scale must be positive (--nomemory_learns_from_critics keeps the '
             f'critics out of the memory), got {self.memory_critic_scale}'),
            (not self.critic_memory or self.lstm_size > 0,
             f'critic_memory gives the critics an LSTM of lstm_size units: it needs a '
             f'recurrent SAC with lstm_size > 0, got {self.lstm_size}'),
            (not self.memory_optimizer or (recurrent and self.memory_learns_from_critics
                                           and not self.critic_memory),
             "memory_optimizer steps the critics' gradient on the actor's memory: it needs a "
             "recurrent SAC (lstm_size > 0) with memory_learns_from_critics and no "
             "critic_memory"),
            (self.memory_critic_scale == 1.0 or (recurrent and self.memory_learns_from_critics
                                                 and not self.memory_optimizer
                                                 and not self.critic_memory),
             "memory_critic_scale weighs the critics' gradient on the actor's memory inside the "
             "actor's Adam: it needs a recurrent SAC (lstm_size > 0) with "
             "memory_learns_from_critics, no critic_memory and no memory_optimizer (an Adam of "
             "its own does not see a gradient's scale)"),
        ]

    # Derived sizes (the data plan, `agents/sac/agent.py`, reads them).
    @property
    def sequence_length(self) -> int:
        """burn-in, the learned transitions, and the n steps their targets look ahead."""
        return self.burn_in + self.unroll_length + self.n_step

    @property
    def sequences_per_batch(self) -> int:
        return self.batch_size // self.unroll_length

    @property
    def min_replay_size(self) -> int:
        """Sequences before learning (each holds `unroll_length` new transitions)."""
        return -(-self.learning_starts // self.unroll_length)

    @property
    def samples_per_insert(self) -> float:
        """Replayed sequences sampled per sequence inserted (the update-to-data ratio).

        A sequence brings `unroll_length` env steps per environment; each env
        step asks for `updates_per_step` updates of `round((1 - online_fraction)
        * sequences_per_batch)` replayed sequences.
        """
        replayed = split_batch(self.sequences_per_batch, 1.0 - self.online_fraction)[1]
        return self.updates_per_step * self.unroll_length * replayed

    @property
    def initial_alpha_log(self) -> float:
        return math.log(self.init_entcoef) if self.init_entcoef else self.initial_log_alpha

    @property
    def slow_entropy_anchor(self) -> bool:
        """The entropy penalty is on, held to a slow average (`entropy_anchor='slow'`)."""
        return bool(self.entropy_penalty) and self.entropy_anchor == 'slow'

    @property
    def gap_temperature(self) -> bool:
        """Discrete branches' temperatures are in units of the critics' action gaps."""
        return self.temperature_unit == 'action_gap'

    @property
    def tracks_action_gaps(self) -> bool:
        """Discrete branches' temperatures use a running scale of the critics' action
        gaps: as their unit, or for their floor."""
        return self.temperature_unit != 'value'


def resolve_target_entropy(config: SACConfig, kind: str, size: int) -> float:
    """The entropy target of one temperature group.

    kind 'continuous' (size = action dims) or 'discrete' (size = n of the branch).
    """
    override: Any = config.target_entropy
    if callable(override):
        return float(override(kind, size))
    if override is not None:
        return float(override)
    if kind == 'continuous':
        return -config.continuous_target_entropy_scale * size
    return config.discrete_target_entropy_scale * math.log(size)
