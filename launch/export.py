"""`python launch/export.py` in a checkout: runs `launch/policies/export.py`."""
import runpy

if __name__ == '__main__':
    runpy.run_module('reverb_agents.launch.policies.export', run_name='__main__')
