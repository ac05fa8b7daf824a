"""The terms any learner may add to its algorithm: declared by its config, composed once.

| term | declared by (sub-config) | what it adds | metrics |
| --- | --- | --- | --- |
| prior KL (`prior_kl`) | `prior` (`--prior_actor`, `--prior_kl_weight`) | `prior_kl_weight * KL(pi || prior)` at every learned step | `loss/prior_kl` |
| behavioural cloning (`cloning`) | `signals` (`--bc_demos`, `--bc_strength` annealed over `--bc_steps`, `--bc_pretrain_steps`) | the cloning loss of demonstrations; pre-training on them before any actor acts | `bc/loss`, `bc/strength` |
| reward signals (`agents.signals`) | `signals` (`--intrinsic`) | intrinsic rewards `[T, B, n]` for the algorithm's targets; one update of each signal's model | `curiosity/*`, `gail/*` |
| critic pre-training (`critic_pretrain`) | `critic_pretrain` (`--critic_pretrain_steps`) | the first learner steps fit the baseline to Monte-Carlo returns, with an optimiser of their own | `critic_pretrain/*` |

How a learner gets them (`agents.learner_base.LearnerBase`): `attach_extras` builds a
`LearnerExtras` from whichever of these sub-configs the config has; the base's `step`
runs critic pre-training while it is due and the learner's `learn` after it; the base's
`pretrain` runs cloning's pre-training. The learner's `learn` asks
`extras.signal_rewards` where its targets take intrinsic rewards, and adds every loss
term with one `extras.added_to` inside its tape. A new agent declares the sub-configs
and makes those two calls; nothing here names an agent.
"""

from reverb_agents.agents.extras.composed import LearnerExtras
from reverb_agents.agents.extras.critic_pretrain import (
    CRITIC_PRETRAIN, CriticPretrainConfig, CriticPretraining)

__all__ = ['CRITIC_PRETRAIN', 'CriticPretrainConfig', 'CriticPretraining', 'LearnerExtras']
