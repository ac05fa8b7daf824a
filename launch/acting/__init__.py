"""Acting: a batch of environments stepped by one policy call (`policy`), and the
actor loop that writes their trajectories to Reverb (`actor`).

May import `runs` and `environments`.
"""
