"""`python launch/benchmark.py` in a checkout: runs `launch/tools/benchmark.py`."""
import runpy

if __name__ == '__main__':
    runpy.run_module('reverb_agents.launch.tools.benchmark', run_name='__main__')
