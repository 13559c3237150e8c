"""HookedModel: a checkpoint's model with TransformerLens's calls (run_with_cache,
run_with_hooks, hooks(), to_tokens, to_string) over the engine's one implementation."""

import contextlib
import os
import re

import numpy as np

from gradlab import _filters, _native


class HookPoint:
    """What a hook function receives besides the activation: the point's name, and the layer
    and head it belongs to where the name says (head: None for a whole point)."""

    def __init__(self, name):
        self.name = name
        found = re.search(r"blocks\.(\d+)\.", name)
        self.layer = int(found.group(1)) if found else None
        self.head = None

    def __repr__(self):
        return f"HookPoint({self.name!r})"


class ActivationCache(dict):
    """Activations by hook point name (numpy arrays sharing the engine's memory), with the
    residual-stream helpers of TransformerLens that need nothing but the cache."""

    def __init__(self, values, model):
        super().__init__(values)
        self.model = model

    def __getitem__(self, name):
        try:
            return super().__getitem__(name)
        except KeyError:
            raise KeyError(f"{name!r} is not cached; cached: {', '.join(self)}") from None

    def stack_activation(self, suffix):
        """The activations of every block's point `suffix` ("hook_resid_post",
        "attn.hook_pattern"), stacked on a new first axis [L, ...]."""
        layers = self.model.cfg["layers"]
        return np.stack([self[f"blocks.{layer}.{suffix}"] for layer in range(layers)])

    def accumulated_resid(self, layer=None, incl_mid=False):
        """The residual stream before each block and after the last [L + 1, B, T, C] (up to
        `layer` when given); with incl_mid the middle of each block too."""
        layers = self.model.cfg["layers"] if layer is None else layer
        parts = []
        for i in range(layers):
            parts.append(self[f"blocks.{i}.hook_resid_pre"])
            if incl_mid:
                parts.append(self[f"blocks.{i}.hook_resid_mid"])
        if layer is None:
            parts.append(self[f"blocks.{layers - 1}.hook_resid_post"])
        else:
            parts.append(self[f"blocks.{layers}.hook_resid_pre"])
        return np.stack(parts)

    def decompose_resid(self):
        """The residual stream as the sum of its parts [P, B, T, C]: the embeddings, then each
        block's attention output and feed-forward output (where the block has one)."""
        parts = [self["blocks.0.hook_resid_pre"]]
        for i in range(self.model.cfg["layers"]):
            parts.append(self[f"blocks.{i}.hook_attn_out"])
            if f"blocks.{i}.hook_mlp_out" in self:
                parts.append(self[f"blocks.{i}.hook_mlp_out"])
        return np.stack(parts)

    def stack_head_results(self):
        """Every head's output in the residual stream [L * H, B, T, C] (hook_result: cache it)."""
        results = self.stack_activation("attn.hook_result")  # [L, B, T, H, C]
        layers, rows, length, heads, width = results.shape
        return results.transpose(0, 3, 1, 2, 4).reshape(layers * heads, rows, length, width)


class HookedModel:
    """A model gradlab.load opened. model(tokens) gives logits [B, T, V]."""

    def __init__(self, native, path):
        self._native = native
        self._path = path
        self._scoped_hooks = {"fwd": [], "bwd": []}
        self._hook_points = {}  # name -> HookPoint, made once per point

    # --- what the model is ------------------------------------------------------------------
    @property
    def cfg(self):
        """The run's configuration (`gradlab train`'s keys) as a dict."""
        return self._native.cfg

    @property
    def tokenizer(self):
        """A text model's tokenizer (encode, decode), or None for a toy task."""
        return self._native.tokenizer

    def named_parameters(self):
        """Parameter name -> writable numpy view: editing it changes the model."""
        return self._native.named_parameters()

    def named_gradients(self):
        """Parameter name -> the gradient of the loss the last run with backward hooks
        backpropagated (zeros before any); each call gives that run's arrays."""
        return self._native.named_gradients()

    def hook_points(self, tokens=None, source=None):
        """Point name -> (shape, letters), for tokens when given, else for the longest
        sequence the model reads (B = 1)."""
        return self._native.hook_points(tokens, source)

    def to(self, dtype):
        """Converts the parameters to "float32" or "float64" (for gradient checks)."""
        self._native.to(dtype)
        return self

    # --- text ------------------------------------------------------------------------------
    def to_tokens(self, text):
        if self.tokenizer is None:
            raise ValueError("to_tokens: a toy-task model has no tokenizer: give token ids")
        return np.asarray([self.tokenizer.encode(text)], dtype=np.int64)

    def to_string(self, tokens):
        if self.tokenizer is None:
            raise ValueError("to_string: a toy-task model has no tokenizer")
        return self.tokenizer.decode([int(t) for t in np.asarray(tokens).reshape(-1)])

    # --- running ---------------------------------------------------------------------------
    def __call__(self, tokens, return_type="logits", source=None, targets=None):
        return self.run_with_hooks(tokens, fwd_hooks=[], return_type=return_type, source=source,
                                   targets=targets)

    forward = __call__

    def _point_names(self):
        return _native.hook_point_names(self._native)

    def _hook_point(self, name):
        point = self._hook_points.get(name)
        if point is None:
            point = self._hook_points[name] = HookPoint(name)
        return point

    def _resolve(self, hooks):
        """[(filter, fn)] as the engine takes them: ([names or globs], fn(array, name))."""
        return [(_filters.patterns(name_filter, self._point_names),
                 lambda value, name, f=function: f(value, self._hook_point(name)))
                for name_filter, function in hooks]

    def run_with_hooks(self, tokens, fwd_hooks=(), bwd_hooks=(), return_type="logits",
                       source=None, targets=None):
        """The logits (or the loss, return_type="loss") with each forward hook called as
        fn(activation, hook) at the points its filter names; it returns None (the activation,
        edited in place or not) or a replacement of the same shape. With backward hooks, the
        backward pass of the loss follows (the loss return_type="loss" gives), and each is
        called as fn(grad, hook) with the gradient of the loss with respect to its point's
        activation; what it returns (None: the array as it now is) flows on backward."""
        if return_type not in ("logits", "loss"):
            raise ValueError(f"return_type: expected 'logits' or 'loss', got {return_type!r}")
        fwd = self._resolve(self._scoped_hooks["fwd"] + list(fwd_hooks))
        bwd = self._resolve(self._scoped_hooks["bwd"] + list(bwd_hooks))
        loss = return_type == "loss"
        if not fwd and not bwd:
            return self._native.forward(tokens, source, targets, loss)
        return _native.run_with_hooks(self._native, tokens, source, targets, fwd, bwd, loss)

    def run_with_cache(self, tokens, names_filter=None, incl_bwd=False, source=None,
                       targets=None, fwd_hooks=()):
        """(logits, cache): the activations at the points names_filter names (a name, a list,
        a glob or a predicate; every point when None); with incl_bwd also name + "_grad", the
        gradient of the loss (next-token, or `targets`) with respect to each, read after the
        backward hooks of a hooks() block."""
        bwd = self._resolve(self._scoped_hooks["bwd"]) if incl_bwd else []
        logits, values, _ = _native.run_with_cache(
            self._native, tokens, source, targets,
            _filters.patterns(names_filter, self._point_names), incl_bwd,
            self._resolve(self._scoped_hooks["fwd"] + list(fwd_hooks)), bwd)
        return logits, ActivationCache(values, self)

    @contextlib.contextmanager
    def hooks(self, fwd_hooks=(), bwd_hooks=()):
        """Hooks for every run inside the block, removed on leaving it (an exception too). The
        backward hooks make every run_with_hooks and model() inside it run the backward pass of
        its loss, and apply to run_with_cache(incl_bwd=True)."""
        added = {"fwd": list(fwd_hooks), "bwd": list(bwd_hooks)}
        # A filter naming no point fails here, before the block runs.
        _native.check_filters(self._native, [patterns for patterns, _ in
                                             self._resolve(added["fwd"] + added["bwd"])],
                              "hooks")
        for kind, hooks in added.items():
            self._scoped_hooks[kind].extend(hooks)
        try:
            yield self
        finally:
            for kind, hooks in added.items():
                del self._scoped_hooks[kind][len(self._scoped_hooks[kind]) - len(hooks):]

    def generate(self, prompt, max_new_tokens=200, temperature=1.0, top_k=0, seed=0,
                 use_cache=True):
        """Text after prompt (a string, or token ids) as `gradlab sample` writes it."""
        options = _native.SamplingOptions()
        options.tokens, options.temperature, options.top_k = max_new_tokens, temperature, top_k
        options.seed, options.use_cache = seed, use_cache
        text = isinstance(prompt, str)
        ids = self.tokenizer.encode(prompt) if text else [int(t) for t in prompt]
        generated = self._native.generate(ids, options)
        return self.tokenizer.decode(generated) if text else np.asarray(generated)

    def save(self, path, overwrite=False):
        """A checkpoint of the model as it is now (edited parameters included); refuses to
        replace an existing file unless overwrite=True."""
        self._native.save(self._path, os.fspath(path), overwrite)


def load(path):
    """The model of a checkpoint gradlab wrote (any task, decoder-only or encoder-decoder)."""
    path = os.fspath(path)
    return HookedModel(_native.load(path), path)
