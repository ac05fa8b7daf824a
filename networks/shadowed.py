"""An acting core that steps a shadow copy of itself beside it.

ACER's average network, as chainerrl runs it while acting
(`--average_network_state=acted`): a copy with variables of its own, which no
optimiser trains (the learner moves them, as a moving average), stepped on the
same inputs as the core so that its recurrent state is its own, carried since
the episode began. The wiring needs nothing of its own for it: the shadow's
variables are among the core's `variables`, so the learner publishes them and
the actors fetch them with the core's, and its state is half of the core's,
so the actors store it with every sequence. The outputs are the core's own.
"""

from typing import Any, List, Tuple

import tensorflow as tf

from reverb_agents.networks.cores import ActorCriticCore, AgentOutput, CoreInputs


class ShadowedCore(ActorCriticCore):
    """`ActorCriticCore(*args, **kwargs)` and a copy of it, `shadow`, built from the same
    arguments. State: (the core's own, the shadow's); outputs: the core's own.

    `trainable_variables` are the core's own (what an optimiser trains);
    `variables` hold the shadow's too (published, checkpointed, exported), and
    `own_variables` leave them out, in the order of `shadow.variables`.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.shadow = ActorCriticCore(*args, **{**kwargs, 'name': 'shadow'})

    def _shadow_refs(self) -> set:
        return {v.ref() for v in self.shadow.variables}

    @property
    def own_variables(self) -> List[tf.Variable]:
        """The core's variables but the shadow's, paired with `shadow.variables`."""
        shadow = self._shadow_refs()
        return [v for v in self.variables if v.ref() not in shadow]

    @property
    def trainable_variables(self) -> Tuple[tf.Variable, ...]:
        shadow = self._shadow_refs()
        return tuple(v for v in super().trainable_variables if v.ref() not in shadow)

    def create_variables(self) -> None:
        super().create_variables()
        self.shadow.create_variables()  # its advantage head, where it has one

    def initial_state(self, batch_size: int, **unused) -> Any:
        return super().initial_state(batch_size), self.shadow.initial_state(batch_size)

    def __call__(self, inputs: CoreInputs, prev_state: Any) -> Tuple[AgentOutput, Any]:
        """One step of both: inputs `[B, ...]`, state (own, shadow's) -> (the core's
        outputs `[B, ...]`, (own, shadow's) next state)."""
        outputs, own = super().__call__(inputs, prev_state[0])
        _, shadow = self.shadow(inputs, prev_state[1])
        return outputs, (own, shadow)

    def unroll(self, inputs: CoreInputs, initial_state: Any) -> Tuple[AgentOutput, Any]:
        """Both over sequences `[T, B, ...]` -> (the core's outputs, (own, shadow's) final
        state)."""
        outputs, own = self.unroll_own(inputs, initial_state[0])
        _, shadow = self.shadow.unroll(inputs, initial_state[1])
        return outputs, (own, shadow)

    def unroll_own(self, inputs: CoreInputs, initial_state: Any) -> Tuple[AgentOutput, Any]:
        """The core alone, from its own state (`initial_state`'s first half)."""
        return super().unroll(inputs, initial_state)
