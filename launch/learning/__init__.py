"""The learner's side of a run: batches from the agent's data plan (`data`), actions
every N steps or seconds (`triggers`), the Python API's callbacks (`callbacks`),
experiment trackers behind them (`trackers`: MLflow) and the loop that ties them to a
learner (`learner_loop`).

May import every room below it: `runs`, `environments`, `acting`, `building`,
`policies`, `evaluation`.
"""
