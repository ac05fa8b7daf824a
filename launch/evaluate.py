"""`python launch/evaluate.py` in a checkout: runs `launch/tools/evaluate.py`."""
import runpy

if __name__ == '__main__':
    runpy.run_module('reverb_agents.launch.tools.evaluate', run_name='__main__')
