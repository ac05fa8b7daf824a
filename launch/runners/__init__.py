"""Runners: one run in this process (`inprocess`, `deterministic`) or as roles in
processes (`roles`, `role_server`, `launcher`) or on a Ray cluster (`ray_launcher`,
`ray_resources`), with the run's network namespace (`isolation`).

May import every room below it, up to `learning`.
"""
