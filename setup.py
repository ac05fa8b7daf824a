"""Installs the agent library as one import name, `reverb_agents`: the checkout's folders
`agents`, `networks`, `replay` and `launch` become `reverb_agents.agents`, ... (no
top-level `agents` to collide with other distributions), with the presets and their
recorded demonstrations as package data and the `reverb-agents` command.

The stack is pinned because dm-reverb 0.14.0 is built against TensorFlow 2.15.
Reverb is required *without* its `[tensorflow]` extra (that extra pins TF 2.14).
"""
from setuptools import find_packages, setup

NAMESPACE = "reverb_agents"
FOLDERS = ("agents", "networks", "replay", "launch")
PACKAGES = [NAMESPACE] + [
    f"{NAMESPACE}.{package}"
    for package in find_packages(include=[f"{folder}*" for folder in FOLDERS])]
PACKAGE_DIR = {NAMESPACE: NAMESPACE, **{f"{NAMESPACE}.{folder}": folder for folder in FOLDERS}}

RAY = ["ray==2.60.0"]
# MinAtar/<Game>-v0|v1 (launch/environments/suites.py)
MINATAR = ["minatar==1.0.15"]
# ALE/<Game>-v5 with its bundled ROMs; gymnasium's AtariPreprocessing resizes with OpenCV
# (4.12 and later need numpy 2)
ATARI = ["ale-py==0.12.1", "opencv-python-headless>=4.8,<4.12"]
# gymnasium's MuJoCo environments (HalfCheetah-v5, Hopper-v5, ...); the results were
# measured with MuJoCo 3.17; gymnasium's MuJoCo module imports imageio and packaging
MUJOCO = ["mujoco>=3.2,<4", "imageio", "packaging"]
# mkdocs.yml's site, with the API reference read from docstrings (docs/reference.md)
DOCS = ["mkdocs>=1.5,<2", "mkdocstrings[python]>=0.26"]
# reverb-agents tune (launch/tuning/): Optuna and its SQLite storage; leaves the pins alone
TUNE = ["optuna>=4"]
# --tracker=mlflow (launch/learning/trackers.py): MLflow's newest release alone would pull
# protobuf 7, which TensorFlow 2.15 cannot import; the pin keeps the stack's protobuf
MLFLOW = ["mlflow>=2.10", "protobuf>=3.20,<5"]

setup(
    name="reverb-agents",
    version="0.1.0",
    description="IMPALA/CLEAR, ACER and SAC on TensorFlow 2, Sonnet and one Reverb server.",
    python_requires=">=3.9,<3.12",
    packages=PACKAGES,
    package_dir=PACKAGE_DIR,
    package_data={f"{NAMESPACE}.launch": ["presets/*.flags", "presets/demos/*.npz"]},
    entry_points={"console_scripts": ["reverb-agents = reverb_agents.launch.cli:main"]},
    install_requires=[
        "tensorflow==2.15.1",
        "dm-reverb==0.14.0",
        "tensorflow-probability==0.23.0",
        "dm-sonnet==2.0.2",
        "gymnasium>=1.0,<2",
        "numpy<2",
        "absl-py",
        # launch/plot.py (learning and continual-learning curves)
        "matplotlib",
        # launch/runs/console.py (the progress bar)
        "tqdm",
        # launch/acting/actor.py (numpy's BLAS threads in an acting process)
        "threadpoolctl",
    ],
    extras_require={
        # the tests exercise every launcher (Ray's included) and every environment suite
        # ... and the documentation site builds (tests/test_docs.py)
        "test": (["pytest>=7", "pytest-xdist>=3"] + RAY + MINATAR + ATARI + MUJOCO + DOCS + TUNE
                 + MLFLOW),
        # launch/runners/ray_launcher.py (--launcher=ray): the version that installs with the pinned stack
        "ray": RAY,
        "tune": TUNE,
        "mlflow": MLFLOW,
        "minatar": MINATAR,
        "atari": ATARI,
        "mujoco": MUJOCO,
        # launch/evaluate.py --video_dir (gymnasium's RecordVideo and classic-control rendering)
        "video": ["moviepy", "pygame"],
        # the documentation site (mkdocs.yml): mkdocs build --strict
        "docs": DOCS,
    },
)
