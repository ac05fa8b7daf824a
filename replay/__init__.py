"""Replay: the Reverb tables, item layouts, writers and datasets of trajectories,
batch mixing strategies and the weights served to actors."""
