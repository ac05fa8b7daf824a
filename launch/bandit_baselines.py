"""`python launch/bandit_baselines.py` in a checkout: runs `launch/tools/bandit_baselines.py`."""
import runpy

if __name__ == '__main__':
    runpy.run_module('reverb_agents.launch.tools.bandit_baselines', run_name='__main__')
