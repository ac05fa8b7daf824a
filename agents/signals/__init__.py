"""Reward signals and demonstrations: what a learner adds to the environment's reward.

By job: `config` (`SignalsConfig`, the `signals` sub-config; no TensorFlow), `losses`
(the pure losses and targets), `models` (ICM, the GAIL discriminator), `demos` (the
demonstrations a learner samples, behavioural cloning's loss), `signals`
(`RewardSignals`: the models, their optimisers and their step in the learner).

ML-Agents trains on a set of *reward signals*, each one component of the
reward with its own strength and discount. Here (CLEAR and SAC):

- `extrinsic`: the environment's reward as the agent transforms it, times
  `extrinsic_strength`, discounted by the agent's own gamma;
- `curiosity`: ICM (Pathak et al. 2017). An encoder phi, an inverse model
  (the action from phi(s), phi(s')) and a forward model (phi(s') from phi(s)
  and the action); the reward is the forward model's error
  0.5 * ||f(phi(s), a) - phi(s')||^2, times `curiosity_strength` (annealed
  linearly to 0 over `curiosity_steps` learner steps, constant with 0);
- `gail`: GAIL (Ho & Ermon 2016). A discriminator D(s[, a]), the probability
  that a step is a demonstration's, trained on demonstration steps against the
  policy's with a gradient penalty; the reward is -log(1 - D), times
  `gail_strength`.

Intrinsic rewards are computed at learning time from the batch's (s, a, s'),
by the models as they are before this step updates them, so they stay
current for replayed data too. Each component has its own value output and
its own discount; the learner's targets are per component and its policy
follows the sum of the components' advantages (ML-Agents' value heads per
signal). The models train inside the learner's `tf.function` step with their
own Adam optimisers.

Whether a termination ends a signal's return is per signal (`curiosity_episodic`
off, RND's non-episodic returns, which run on into the next episode:
`losses.across_episode_ends`; `gail_episodic` on); `curiosity_clip` bounds
a step's curiosity reward by a multiple of its running RMS (taken over the
bounded rewards, so one unpredictable transition, a wall hit in MountainCar,
neither dominates the return nor mutes curiosity for hundreds of updates);
`curiosity_normalize` divides the curiosity reward by that RMS; `gail_reward='logit'` is
AIRL's log D - log(1 - D). Why each exists: docs/reward-signals.md.

Behavioural cloning (`bc_demos`, `bc_strength`, `bc_steps`,
`bc_pretrain_steps`): the cloning loss of demonstrated actions under the
policy (`cloning_losses`: -log pi for discrete leaves, the squared error of
the mode for continuous ones), added to the learner's loss with a weight annealed
linearly to 0 over `bc_steps` learner steps (constant with 0), and/or
`bc_pretrain_steps` steps on the demonstrations alone before any actor acts.

Everything here belongs to the learner (its checkpoint holds the models and
their optimisers); the acting core, the actors and the exported policy never
see it. Demonstration files are `replay.demos`' format.
"""
