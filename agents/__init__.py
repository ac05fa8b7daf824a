"""The agents: one sub-package each (`clear`, `acer`, `sac`) that imports no other, on the
shared contract (`contract`), learner base (`learner_base`), configs (`configs`), the
terms any learner may add (`extras`, `signals`) and the registry that names them.
"""
