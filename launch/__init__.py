"""Wiring: setup, learner loop, runners, launchers; `launch.environments`: the
environments a run acts in (they import no wiring); `launch.tools`: the command-line
tools (evaluate, record, plot, benchmark), which nothing imports. The Python API is
`reverb_agents`' (`from reverb_agents import train, load_policy`); its names are here
too, loaded through that package's lazy loader on first use: importing
`launch.policy` or the command line's console filter must not start TensorFlow's
wiring, and the wiring's modules import this package.
"""

_API = ('train', 'Result', 'load_policy')


def __getattr__(name):
    if name in _API:
        import reverb_agents  # noqa: PLC0415  (its loader filters TensorFlow's start-up lines)
        return getattr(reverb_agents, name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
