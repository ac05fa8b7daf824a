"""Networks: torsos, memories, heads and the actor-critic cores built from them
(TensorFlow and Sonnet), a numpy mirror for acting, and users' own networks."""
