"""The learner's side of a run, shared by the in-process run and the learner process.

`LearnerRun` builds the learner, resumes it from the run's latest checkpoint (or
lets it pre-train, `setup.pretrain`), and learns. The loop takes the next batch,
runs the learner's step, and hands the result to its triggers (`Every`): publish
weights, TensorBoard summaries (non-finite losses stop the run), the progress
display, `progress.csv` rows, checkpoints. Evaluations run on their env-step
schedule (`launch/evaluation/continual.py`, `launch/evaluation/periodic.py`). It stops at the
first of: the env-step budget, the target return, `should_stop`, a callback
(`events`, `launch/learning/callbacks.py`).
`finish` checkpoints, evaluates (not after an interrupt), exports and writes
`summary.json`.
"""

import contextlib
import dataclasses
import math
import os
import threading
import time
from typing import Any, Callable, ContextManager, Dict, Optional

import tensorflow as tf
from absl import logging

from reverb_agents.launch.learning import callbacks, data
from reverb_agents.launch.runs import checkpoint_pairs, console, rundir
from reverb_agents.launch.evaluation import (continual, episodes as evaluation,
                                             periodic as periodic_evaluation)
from reverb_agents.launch.policies import export
from reverb_agents.launch.runs import metrics as metrics_lib
from reverb_agents.launch.learning import triggers as triggers_lib
from reverb_agents.launch.acting.actor import EpisodeStats
from reverb_agents.launch.building.setup import RunSetup, make_envs, make_learner, pretrain
from reverb_agents.launch.learning.triggers import TARGET_WINDOW, Every, Progress
from reverb_agents.replay.connection import SERVER_ERRORS
from reverb_agents.replay.priorities import PriorityUpdater
from reverb_agents.replay.variables import VariablePublisher

DISPLAY_INTERVAL_S = 0.5  # seconds between refreshes of the progress display


class LearnerRun:
    """Networks, checkpoints, the loop and the summary of one learner.

    The caller says how many env steps the actors took (`env_steps`: a
    callable, steps since this run started) and when to stop.
    """

    def __init__(self, setup: RunSetup, pair_replay: bool = False):
        """`pair_replay`: checkpoints pair the replay's (`launch/runs/checkpoint_pairs.py`)."""
        self.setup, options = setup, setup.options
        rundir.check_logdir(options.logdir)
        rundir.check_same_run(options.logdir, options.agent, options.env)
        self.learner = make_learner(setup)
        self.core = self.learner.core
        self.env_steps_counter = tf.Variable(0, dtype=tf.int64, trainable=False, name='env_steps')
        self.checkpoints = checkpoint_pairs.Checkpoints(
            tf.train.Checkpoint(learner=self.learner, env_steps=self.env_steps_counter),
            options.logdir, paired=pair_replay)
        restored = self.checkpoints.restore()
        if restored:
            console.status(f'Resumed from {restored} at learner step {self.learner_steps}, '
                           f'env step {int(self.env_steps_counter.numpy())}')
        pretrained = pretrain(self.learner)  # what is left of it after a restore
        # Written only once the checkpoint (if any) matched: a refused resume changes nothing.
        os.makedirs(options.logdir, exist_ok=True)
        rundir.write_run_config(options.logdir, options.agent, options.env, setup.config,
                                options.env_options, options.seed)
        self.start_env_steps = int(self.env_steps_counter.numpy())
        self.start_learner_steps = self.learner_steps
        self.published = list(self.core.variables)
        self.priorities = None  # prioritized replay's writes (`make_publisher`)
        self._last_metrics, self._env_steps = {}, lambda: 0
        self._batches = None  # the last data stream, kept open until `close_data`
        self.events = None  # the Python API's callbacks (`run`)
        self.wall_time, self.steps_this_run, self.reached_target = 0.0, 0, False
        # A task sequence evaluates every task on a schedule (`launch/evaluation/continual.py`).
        self.continual = (continual.ContinualEvaluation(options, setup.action_space)
                          if options.is_sequence else None)
        if self.continual is not None and self.continual.last_point is None:
            with self._final_policy():  # the untrained policy, before any actor
                self.continual.evaluate(self.core, 0)
        self.periodic = (periodic_evaluation.PeriodicEvaluation(
            options, setup.action_space, setup.observation_space, self._make_eval_envs)
            if not options.is_sequence and options.eval_every_steps else None)
        if pretrained and self.periodic is not None:  # before any actor
            with self._final_policy():
                self.periodic.evaluate_at(self.core, self.start_env_steps)
        self.progress_csv = metrics_lib.ProgressCSV(options.logdir, not options.deterministic)

    def make_publisher(self, client) -> VariablePublisher:
        """Publishes the weights; under prioritized replay the learner also writes
        priorities through `client`, and new items enter at the largest so far."""
        if self.setup.plan.priority_exponent is not None:
            self.priorities = PriorityUpdater(client)
        return VariablePublisher(client, self.published, new_item_priority=(
            self.priorities and (lambda: self.priorities.max_priority)))

    def _make_eval_envs(self, num_envs: int, seed: int):
        return make_envs(self.setup.options, self.setup.config, num_envs, seed, evaluation=True)

    @property
    def learner_steps(self) -> int:
        return int(self.learner.num_steps.numpy())

    def total_env_steps(self) -> int:
        return self.start_env_steps + self._env_steps()

    def _finite_values(self, metrics) -> Dict[str, float]:
        """The scalar metrics' values; raises (before anything is saved) if any is NaN
        or Inf. Other entries (`action/<name>` histograms of the batch) are not checked."""
        values = {k: float(v.numpy()) for k, v in metrics.items() if v.shape.rank == 0}
        if not all(math.isfinite(v) for v in values.values()):
            raise rundir.TrainingError(
                f'non-finite loss at learner step {self.learner_steps}: {values}; '
                f'the last good checkpoint is kept in {self.checkpoints.manager.directory}')
        return values

    def save(self, quiet: bool = False) -> None:
        """Checkpoints the learner (and its replay, `Checkpoints.write_replay`)."""
        self._finite_values(self._last_metrics)  # never checkpoint weights a NaN step produced
        self.env_steps_counter.assign(self.total_env_steps())
        path = self.checkpoints.save(self.learner_steps)
        if path and not quiet:
            console.status(f'checkpoint at env step {self.total_env_steps():,} '
                           f'(learner step {self.learner_steps:,}): {path}')
        if path and self.events is not None:
            self.events.checkpoint(self.total_env_steps(), self.learner_steps, path)

    def _summaries(self, stats: EpisodeStats) -> Callable[[Progress], None]:
        writer = metrics_lib.SummaryWriter(
            self.setup.options.logdir, lambda: self.learner.trainable_variables,
            metrics_lib.run_hparams(self.setup.options, self.setup.config))

        def write(progress: Progress) -> None:
            # Per-episode writes cost ~2 ms each here; aggregate since the last write.
            writer.write(progress.step, progress.env_steps, self._finite_values(progress.metrics),
                         {k: v for k, v in progress.metrics.items() if v.shape.rank != 0},
                         stats.pop_new(), stats.info.pop())

        return write

    def _final_policy(self) -> ContextManager[None]:
        """The policy every evaluation scores and the export saves, in the core for a
        block: the learner's `final_policy` (an average of its weights) when it keeps
        one, else the learned weights. Actors hold weights of their own, fetched from
        Reverb, and the publisher reads the core on this thread only, between blocks."""
        return self.learner.final_policy() or contextlib.nullcontext()

    def _evaluate_due(self) -> None:
        """A scheduled evaluation (every task of a sequence, or `eval_every_steps`), of
        the policy the run would end with (`_final_policy`)."""
        evaluator = self.continual if self.continual is not None else self.periodic
        env_steps = self.total_env_steps()
        if evaluator is not None and evaluator.due(env_steps) is not None:
            with self._final_policy():
                evaluator.evaluate_due(self.core, env_steps)

    def _greedy_return(self) -> float:  # `--target_greedy`'s check, seeds `seed + 30000` on
        o = self.setup.options
        with self._final_policy():
            return evaluation.evaluate(self.core, self.setup.action_space, o.env,
                                       o.eval_episodes, o.seed + 30_000, epsilon=o.eval_epsilon,
                                       make_envs=self._make_eval_envs)[0]

    def run(self, open_batches: Callable[[], data.Batches], publish: Callable[[], None],
            env_steps: Callable[[], int], stats: EpisodeStats, should_stop: Callable[[], bool],
            on_server_error: Optional[Callable[[Exception], None]] = None,
            events: Optional[callbacks.RunEvents] = None) -> None:
        """Learns until the env-step budget, the target return, `should_stop()` or
        a callback of `events` (`launch/learning/callbacks.py`) says stop. `open_batches()` opens
        the learner's data stream (again after a data timeout); `on_server_error(e)`, when
        given, waits for a lost Reverb server to come back (raising if it does not);
        the stream is then reopened and the weights published again.
        """
        # Long: the loop's order (step, triggers, stop checks, recovery) reads as one sequence.
        options = self.setup.options
        self._env_steps = env_steps
        self.events = events
        if events is not None and self.periodic is not None:
            self.periodic.listener = events.evaluation
        display = console.ProgressDisplay(options.num_steps, self.total_env_steps(),
                                          options.log_interval_s)
        self._progress_row = progress_row = triggers_lib.write_progress_row(stats,
                                                                           self.progress_csv)
        # Rows and summaries by time and by env steps too, and at the end of each phase.
        curves = [Every(self._summaries(stats), seconds=options.summary_interval_s,
                        env_steps=options.curve_env_steps),
                  Every(progress_row, options.progress_row_steps, options.log_interval_s,
                        options.curve_env_steps)]
        triggers = [
            Every(lambda progress: publish(), steps=options.publish_period), *curves,
            Every(triggers_lib.show_progress(stats, display, self._env_steps),
                  seconds=DISPLAY_INTERVAL_S),
            Every(lambda _: self.save(), options.checkpoint_steps, options.checkpoint_interval_s),
        ]
        target_reached = triggers_lib.TargetCheck(
            options.target_return, self._greedy_return if options.target_greedy else None)
        learn = data.make_learn(self.learner,
                                metrics_lib.action_names(self.setup.action_space.space),
                                self.priorities)
        batches = open_batches()
        start = time.time()
        try:
            while not (should_stop() or self.total_env_steps() >= options.num_steps):
                self.learner.set_progress(self.total_env_steps() / options.num_steps)
                phase = self.learner.phase()
                try:
                    metrics = learn(batches)
                except StopIteration:
                    # The actor died (the caller raises its error), or it stopped at the
                    # budget before this batch was complete.
                    if should_stop() or self.total_env_steps() >= options.num_steps:
                        break
                    logging.warning("no data for %.0f s; reopening the learner's datasets",
                                    data.DATA_TIMEOUT_MS / 1000)
                    batches = open_batches()
                    continue
                except SERVER_ERRORS as e:
                    if on_server_error is None:
                        raise
                    batches = None
                    on_server_error(e)
                    batches = open_batches()
                    publish()
                    continue
                self._last_metrics = metrics
                self.steps_this_run += 1
                now = time.time()
                progress = Progress(self.start_learner_steps + self.steps_this_run,
                                    self.steps_this_run, self.total_env_steps(), metrics,
                                    now - start)
                for trigger in triggers:
                    trigger(progress, now)
                if self.learner.phase() != phase:  # its metrics written at least once
                    for trigger in curves:
                        trigger.force(progress, now)
                self._evaluate_due()
                self.reached_target = target_reached(stats)
                if self.reached_target or (events and events.progress(progress, now, stats)):
                    break
        finally:
            display.close(self.total_env_steps())  # the final count: 100% at the budget
            self.wall_time = time.time() - start
            # Dropping the stream now could wait for samples the server's rate
            # limiter holds back (up to the data timeout, more than once): see
            # `close_data`.
            self._batches = batches

    def close_data(self) -> None:
        """Drops the learner's data stream on a daemon thread, without waiting: one whose
        sample request the rate limiter holds waits out the data timeout when destroyed,
        even after an in-process server stopped (SAC: 10-55 s)."""
        stream, self._batches = [self._batches], None
        threading.Thread(target=stream.clear, name='close_data', daemon=True).start()

    def finish(self, stats: EpisodeStats, interrupted: bool = False) -> Dict[str, Any]:
        """Checkpoints, evaluates, exports (`--export`); returns the summary (summary.json).

        `interrupted` (Ctrl-C): no evaluation, so the run ends within seconds
        (`eval_*` are null, `eval_episodes` 0); the summary says `interrupted`.
        """
        # Long: the end of a run in order: checkpoint, evaluation, export, summary, each guarded.
        options, setup = self.setup.options, self.setup
        if self.steps_this_run:  # the run's last row, its actors stopped: the summary's count
            self._progress_row(Progress(self.learner_steps, self.steps_this_run,
                                        self.total_env_steps(), self._last_metrics,
                                        self.wall_time))
        self.save(quiet=True)
        eval_mean = eval_std = None
        regret, sequence, learned = {}, {}, {}
        eval_episodes = 0 if interrupted else options.eval_episodes
        # The weights evaluated and exported, when the learner's are not its last ones
        # (an average of them, `agents.policy_average`).
        final_policy = self.learner.final_policy()

        def final_evaluation():
            return evaluation.final_evaluation(
                self.core, setup.action_space, options.env, eval_episodes, options.seed + 10_000,
                options.eval_epsilon, self._make_eval_envs)

        if final_policy is not None and eval_episodes and self.continual is None:
            # The learned weights on the same episodes, beside the average's (a pair).
            console.status(f'final evaluation of the learned weights: {eval_episodes} '
                           'greedy episodes')
            learned_mean, learned_std, _ = final_evaluation()
            learned = {'eval_return_learned_mean': learned_mean,
                       'eval_return_learned_std': learned_std}
        with final_policy or contextlib.nullcontext():
            if self.continual is not None:
                if eval_episodes:  # the end of the sequence, unless already evaluated
                    self.continual.evaluate_due(self.core, self.total_env_steps())
                sequence = self.continual.summary()
                eval_mean, eval_std = (sequence.pop('eval_return_mean'),
                                       sequence.pop('eval_return_std'))
            elif eval_episodes:
                console.status(f'final evaluation: {eval_episodes} greedy episodes'
                               + (f' (epsilon {options.eval_epsilon})' if options.eval_epsilon
                                  else '')
                               + (' of the averaged weights' if final_policy else ''))
                eval_mean, eval_std, regret = final_evaluation()
                if regret:  # a bandit: regret, greedy and sampled
                    console.status(f'regret per episode: greedy {regret["eval_regret_mean"]:.2f}, '
                                   f'sampled {regret["eval_regret_sampled_mean"]:.2f}')
                if self.periodic is not None:
                    self.periodic.record(self.core, self.total_env_steps(), eval_mean, eval_std,
                                         final=True)
            saved_model = os.path.join(options.logdir, 'saved_model') if options.export else None
            if saved_model:
                console.status(f'exporting the policy to {saved_model}')
                saved_model = export.export_run_policy(self.core, setup.action_space,
                                                       setup.observation_space, options)
        mean_return, _, _ = stats.recent(TARGET_WINDOW)
        best = self.periodic.summary() if self.periodic is not None else {}
        wall_time = max(self.wall_time, 1e-9)
        summary = {
            'agent': options.agent,
            'env': options.env,
            'env_steps': self.total_env_steps(),
            'agent_steps': self.start_env_steps + stats.agent_steps
            if options.step_mul == 1 else stats.agent_steps,
            'learner_steps': self.learner_steps,
            'wall_time_s': self.wall_time,
            'env_steps_per_s': self._env_steps() / wall_time,
            'learner_steps_per_s': self.steps_this_run / wall_time,
            'train_return_last20': mean_return if math.isfinite(mean_return) else None,
            'reached_target': self.reached_target,
            'eval_return_mean': eval_mean,
            'eval_return_std': eval_std,
            'eval_episodes': eval_episodes,
            'eval_epsilon': options.eval_epsilon,
            'saved_model': saved_model,
            'interrupted': interrupted, 'deterministic': options.deterministic,
            'seed': options.seed, 'launcher': options.launcher,
            **best, **regret, **sequence, **learned,
            'config': dataclasses.asdict(setup.config),
        }
        path = rundir.write_summary(options.logdir, summary)
        if interrupted:
            console.status(f'interrupted at learner step {self.learner_steps}, env step '
                           f'{self.total_env_steps()}: checkpoint '
                           f'{self.checkpoints.manager.latest_checkpoint}, policy {saved_model}, '
                           f'summary {path}')
        return summary
