"""Building a run from its options and config: environments, the agent's core and
learner, the Reverb server and its tables, actors (`setup`), and the replay's memory
checked before any of it starts (`memory`).

May import `runs`, `environments` and `acting`.
"""
