"""gradlab.tasks: the built-in tasks' batches as numpy arrays, as a run trains on them."""

from gradlab import _config, _native


class Task:
    """The batches of a task for a model of the run's kind: tokens [B, T], targets [B, T]
    (-100 where none counts), loss_mask [B, T] (and source [B, S] for model="seq2seq")."""

    def __init__(self, native):
        self._native = native

    @property
    def vocab_size(self):
        return self._native.vocab_size

    def batch(self, step):
        """The training batch of optimizer step `step` (1, 2, ...)."""
        return self._native.batch(step)

    def heldout(self):
        """The fixed held-out set every evaluation scores."""
        return self._native.heldout()


def make(name, **options):
    """A task by `gradlab train`'s name ("copy", "induction", ...) with its options
    (length=16, symbols=64, batch_size=8, eval_size=32, seed=0, model="decoder", ...)."""
    return Task(_native.TaskBatches(_config.settings({"task": name, **options})))
