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


def _positions(values, pos_slice, axis=-2):
    """values with TransformerLens's pos_slice taken along the positions axis: None all, an int
    one position (the axis dropped), a tuple a slice(*tuple), a list or array those positions."""
    if pos_slice is None:
        return values
    if isinstance(pos_slice, tuple):
        pos_slice = slice(*pos_slice)
    if isinstance(pos_slice, (int, np.integer, slice)):
        index = [slice(None)] * values.ndim
        index[axis] = pos_slice
        return values[tuple(index)]
    return np.take(values, np.asarray(pos_slice), axis=axis)


class ActivationCache(dict):
    """Activations by hook point name (numpy arrays sharing the engine's memory), with the
    residual-stream helpers of TransformerLens. The decomposition, the frozen norm and the
    unembedding are the engine's (interp/direct_logit_attribution.h); with_fold_ln() gives the
    view in TransformerLens's fold_ln convention."""

    def __init__(self, values, model, fold_ln=False):
        super().__init__(values)
        self.model = model
        self.fold_ln = fold_ln

    def __getitem__(self, name):
        try:
            return super().__getitem__(name)
        except KeyError:
            raise KeyError(f"{name!r} is not cached; cached: {', '.join(self)}") from None

    def with_fold_ln(self):
        """The same activations, read in TransformerLens's fold_ln convention: the final norm's
        weight folded into W_U and its bias into b_U, so that apply_ln only centres and scales
        and no "ln_final_bias" part appears."""
        return ActivationCache(self, self.model, fold_ln=True)

    def _native_model(self):
        return self.model._native

    def _blocks(self):
        return _native.residual_blocks(self._native_model())

    @staticmethod
    def _layer(layer):
        return -1 if layer is None else layer

    def _residual(self, layer, pos_slice=None):
        """The stream whose norm apply_ln freezes: entering block `layer`, or the final norm's."""
        point = _native.residual_point(self._native_model(), self._layer(layer))
        return _positions(self[point], pos_slice)

    def stack_activation(self, suffix):
        """The activations of every block's point `suffix` ("hook_resid_post",
        "attn.hook_pattern"), stacked on a new first axis [L, ...] (the decoder's blocks for the
        encoder-decoder)."""
        return np.stack([self[f"{block}.{suffix}"] for block in self._blocks()])

    def accumulated_resid(self, layer=None, incl_mid=False, apply_ln=False, return_labels=False):
        """The residual stream entering each block and after the last [L + 1, B, T, C] (up to
        the stream entering `layer` when given); with incl_mid the middle of each block too;
        with apply_ln each through the norm before `layer` (the final norm), its scale frozen."""
        blocks = self._blocks()
        end = len(blocks) if layer is None else layer
        parts, labels = [], []
        for i in range(end):
            parts.append(self[f"{blocks[i]}.hook_resid_pre"])
            labels.append(f"{i}_pre")
            if incl_mid:
                parts.append(self[f"{blocks[i]}.hook_resid_mid"])
                labels.append(f"{i}_mid")
        parts.append(self._residual(end))
        labels.append("final_post" if end == len(blocks) else f"{end}_pre")
        stack = np.stack(parts)
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer)
        return (stack, labels) if return_labels else stack

    def decompose_resid(self, layer=None, mode="all", apply_ln=False, pos_slice=None,
                        return_labels=False, incl_embeds=True):
        """The residual stream entering `layer` (the final norm's input when None) as the sum
        of its parts [N, B, T, C]: "embed", "pos_embed", then each block's "<l>_attn_out"
        ("<l>_cross_attn_out") and "<l>_mlp_out"; mode "attn" or "mlp" keeps those alone. With
        apply_ln each part goes through the norm before `layer`, its scale frozen, and the
        norm's bias is a part of its own: the parts then sum to the norm's output."""
        if mode not in ("all", "attn", "mlp"):
            raise ValueError(f"decompose_resid: mode must be 'all', 'attn' or 'mlp', got {mode!r}")
        native = self._native_model()
        labels, stack = _native.decompose_residual(
            native, self, self._layer(layer), False, mode != "mlp", mode != "attn", incl_embeds,
            True)
        if apply_ln:
            labels, stack = _native.normalized_parts(native, labels, stack, self._residual(layer),
                                                     self._layer(layer), self.fold_ln)
        stack = _positions(stack, pos_slice)
        return (stack, labels) if return_labels else stack

    def stack_head_results(self, layer=-1, return_labels=False, apply_ln=False):
        """Each head's output in the residual stream [N, B, T, C], labels "L<l>H<h>" (and
        "L<l>H<h>_cross" for the encoder-decoder's cross-attention): every block's, or those
        before `layer`. With apply_ln through the norm before `layer` (the final norm for -1)."""
        native = self._native_model()
        layer = None if layer == -1 else layer
        labels, stack = _native.decompose_residual(native, self, self._layer(layer), True, True,
                                                   False, False, False)
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer)
        return (stack, labels) if return_labels else stack

    def apply_ln_to_stack(self, residual_stack, layer=None, pos_slice=None):
        """residual_stack [..., B, T, C] through the norm before `layer` (the final norm when
        None) with the scale of the cached stream frozen (its positions pos_slice when the stack
        holds only those): centred (LayerNorm), divided by that scale and, unless fold_ln,
        multiplied by the norm's weight. The norm's bias is not added."""
        return _native.apply_frozen_norm(self._native_model(), np.asarray(residual_stack),
                                         self._residual(layer, pos_slice), self._layer(layer),
                                         self.fold_ln)

    def logit_attrs(self, residual_stack, tokens, incorrect_tokens=None, pos_slice=None):
        """Each part's contribution to the logits of `tokens` (an id, ids [B] or [B, T]), minus
        those of incorrect_tokens when given: residual_stack [..., B, T, C] (after
        apply_ln_to_stack) against the directions of W_U, positions pos_slice. b_U is not
        added: the parts of decompose_resid(apply_ln=True) plus b_U[token] sum to the logit."""
        weight, _ = _native.unembedding(self._native_model(), self.fold_ln)  # [C, V]
        directions = np.moveaxis(weight[:, np.asarray(tokens)], 0, -1)  # [..., C]
        if incorrect_tokens is not None:
            directions = directions - np.moveaxis(weight[:, np.asarray(incorrect_tokens)], 0, -1)
        stack = _positions(np.asarray(residual_stack), pos_slice)
        return (stack * directions).sum(-1)

    def unembed_bias(self):
        """b_U [V] (folded with the final norm's bias under with_fold_ln()), or None."""
        return _native.unembedding(self._native_model(), self.fold_ln)[1]


class HookedModel:
    """A model gradlab.load opened. model(tokens) gives logits [B, T, V]."""

    def __init__(self, native, path):
        self._native = native
        self._path = path
        self._scoped_hooks = {"fwd": [], "bwd": []}
        self._hook_points = {}  # name -> HookPoint, made once per point
        self._open_interventions = 0

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

    @contextlib.contextmanager
    def intervene(self, specs):
        """`gradlab --intervene`'s interventions, one spec or a list of them in the same language
        (docs/hooks.md), in force on every run inside the block: hook points' activations
        changed, parameters replaced. On leaving it (an exception too) the hooks are removed and
        the parameters hold their loaded values again."""
        applied = _native.intervene(self._native, [specs] if isinstance(specs, str) else list(specs))
        self._open_interventions += 1
        try:
            yield self
        finally:
            self._open_interventions -= 1
            applied.close()

    def generate(self, prompt, max_new_tokens=200, temperature=1.0, top_k=0, seed=0,
                 use_cache=True):
        """Text after prompt (a string, or token ids) as `gradlab sample` writes it."""
        options = _native.SamplingOptions()
        options.tokens, options.temperature, options.top_k = max_new_tokens, temperature, top_k
        # An intervention's positions are the window's: the cache runs one new position a pass.
        options.seed, options.use_cache = seed, use_cache and not self._open_interventions
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
