"""`python launch/run.py` in a checkout: runs `launch/command_line/train.py`."""
import runpy

if __name__ == '__main__':
    runpy.run_module('reverb_agents.launch.command_line.train', run_name='__main__')
