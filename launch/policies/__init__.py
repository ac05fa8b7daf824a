"""Policies out of a run: SavedModel export (`export`), the signatures of any nest of
spaces (`signatures`) and an exported policy loaded back with TensorFlow alone (`load`).

May import `runs`, `environments`, `acting` and `building`.
"""
