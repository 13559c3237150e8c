"""The targets of the research runs (configs/grokking.ini, mqar.ini, induction.ini) and the step
at which an evaluation curve first reaches each: shared by the PyTorch replica
(scripts/research_torch.py) and the benchmark (scripts/bench_table.py), which reads gradlab's
metrics.csv. A curve is a list of evaluations, each a dict with metrics.csv's column names
(step, eval_loss, token_accuracy, exact_match, train_accuracy, second_copy_loss, ...); values may
be numbers or metrics.csv's strings. Standard library only.
"""

import operator

# Per task: (name, metrics.csv column, comparison, threshold).
TARGETS = {
    # grokking: the training set memorised, then the held-out pairs (one answer token each, so
    # held-out exact match is held-out accuracy; the run stops at 0.99).
    "modular": [("train accuracy 100%", "train_accuracy", ">=", 1.0),
                ("held-out 99%", "exact_match", ">=", 0.99)],
    # MQAR: every query's answer counted, then every query of a sequence right (the stop).
    "mqar": [("answer accuracy 99%", "token_accuracy", ">=", 0.99),
             ("exact match 99%", "exact_match", ">=", 0.99)],
    # induction: no stop; the second copy's loss (a uniform guess over 64 symbols: 4.16).
    "induction": [("second-copy loss < 1", "second_copy_loss", "<", 1.0)],
}
# The column whose last value a task's row reports beside its targets.
FINAL = {"modular": "exact_match", "mqar": "exact_match", "induction": "second_copy_loss"}

COMPARE = {">=": operator.ge, "<": operator.lt}


def steps_to_targets(task, curve):
    """{target name: the step of the first evaluation that reaches it, or None}."""
    reached = {}
    for name, column, op, threshold in TARGETS.get(task, []):
        reached[name] = None
        for row in curve:
            value = row.get(column)
            if value not in (None, "") and COMPARE[op](float(value), threshold):
                reached[name] = int(row["step"])
                break
    return reached
