"""A run as files and lines: its options, presets, directory, lock, checkpoints, the
metrics it writes, the files it leaves (read back by tools) and what it shows on the
terminal.

Imports nothing else of `launch`: every other room stands on it.
"""
