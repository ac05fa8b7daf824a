"""`python launch/tune.py` in a checkout: runs `launch/tuning/tune.py`."""
import runpy

if __name__ == '__main__':
    runpy.run_module('reverb_agents.launch.tuning.tune', run_name='__main__')
