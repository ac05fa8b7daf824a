"""`python launch/record.py` in a checkout: runs `launch/tools/record.py`."""
import runpy

if __name__ == '__main__':
    runpy.run_module('reverb_agents.launch.tools.record', run_name='__main__')
