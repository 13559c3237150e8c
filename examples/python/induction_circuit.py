"""Find an induction head, knock it out with a hook, and show its attention.
Usage: python3 induction_circuit.py [CHECKPOINT] (without one: trains configs/induction.ini
briefly into a temporary directory)."""
import pathlib
import sys
import tempfile

import numpy as np

import gradlab

if len(sys.argv) > 1:
    checkpoint = sys.argv[1]
else:
    config = pathlib.Path(__file__).resolve().parents[2] / "configs" / "induction.ini"
    out = pathlib.Path(tempfile.mkdtemp()) / "induction"
    checkpoint = gradlab.train(config, out=out, steps=300, eval_every=100)["checkpoint"]
model = gradlab.load(checkpoint)

scores = gradlab.heads(model)
point, head = max(((p, h) for p, s in scores.items() for h in range(len(s["induction"]))),
                  key=lambda ph: scores[ph[0]]["induction"][ph[1]])
print(f"induction head: {point} head {head}, score {scores[point]['induction'][head]:.2f}")

block = np.array([7, 3, 9, 12, 5, 30, 21, 8])
tokens = np.concatenate([[1], block, block])[None, :]  # a start token, a block, the block again
second = slice(len(block) + 1, None)  # the second copy's positions: predictable by induction


def zero_head(z, hook):
    z[:, :, head, :] = 0


z_point = point.replace("hook_pattern", "hook_z")
for name, hooks in [("intact", []), ("head knocked out", [(z_point, zero_head)])]:
    loss = model.run_with_hooks(tokens, fwd_hooks=hooks, return_type="loss")
    print(f"{name}: loss {loss:.3f}")
_, cache = model.run_with_cache(tokens, names_filter=point)
pattern = cache[point][0, head]  # [Tq, Tk]
print("second copy attends to key:", pattern[second].argmax(-1))
