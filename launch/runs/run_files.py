"""Reading what a run writes, without the writers (`launch/runs/metrics.py`, `continual.py`,
`rundir.py`), which import TensorFlow: `launch/tools/plot.py` reads runs with this alone."""

import csv
import json
from typing import Any, Dict, List


def read_progress(path: str) -> List[Dict[str, float]]:
    """The rows of a `progress.csv`, numbers as floats (empty cells left out)."""
    with open(path, newline='') as f:
        return [{k: float(v) for k, v in row.items() if v not in ('', None)}
                for row in csv.DictReader(f)]


def read_continual(path: str) -> List[Dict[str, Any]]:
    """The rows of a `continual.csv`: env_steps int, task str, returns float."""
    with open(path, newline='') as f:
        return [{'env_steps': int(row['env_steps']), 'task': row['task'],
                 'return_mean': float(row['return_mean']),
                 'return_std': float(row['return_std'])}
                for row in csv.DictReader(f)]


def flat_config(config: Dict[str, Any]) -> Dict[str, Any]:
    """A config dict with sub-configs' fields at the top (their flag names), values as JSON
    reads them back (tuples as lists)."""
    flat = {}
    for key, value in json.loads(json.dumps(config)).items():
        if isinstance(value, dict):
            flat.update(flat_config(value))
        else:
            flat[key] = value
    return flat
