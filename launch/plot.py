"""`python launch/plot.py` in a checkout: runs `launch/tools/plot.py`."""
import runpy

if __name__ == '__main__':
    runpy.run_module('reverb_agents.launch.tools.plot', run_name='__main__')
