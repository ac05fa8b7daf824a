"""`python launch/benchmark_ray.py` in a checkout: runs `launch/tools/benchmark_ray.py`."""
import runpy

if __name__ == '__main__':
    runpy.run_module('reverb_agents.launch.tools.benchmark_ray', run_name='__main__')
