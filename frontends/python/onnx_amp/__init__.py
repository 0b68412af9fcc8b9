"""onnx-amp from Python: the same C++ libraries as amp-rewrite, amp-run and amp-train, bound with
pybind11 (the extension module onnx_amp._onnx_amp). Nothing is computed here: these functions
turn Python arguments into the commands' settings and the results into Python values.

    import onnx_amp
    model16, report = onnx_amp.rewrite("model.onnx", dtype="fp16")          # amp-rewrite
    outputs = onnx_amp.run(model16, {"input": x})                           # amp-run
    trainer = onnx_amp.Trainer("model.train.onnx", optimizer="adamw", lr=1e-3, dtype="bf16")
    loss = trainer.step({"input": x, "labels": y})                          # amp-train, one step

`model` is an onnx.ModelProto or a path to an .onnx file (by path, external data is read in
place, memory-mapped, and models past protobuf's 2 GB work). Errors are onnx_amp.InputError (a
ValueError) for bad input and onnx_amp.Error (a RuntimeError) otherwise, carrying the one line the
commands print (file, node and op). The GIL is released while C++ runs; Ctrl-C stops a call
between its steps. For drop-in replacements of onnxconverter-common see onnx_amp.float16 and
onnx_amp.auto_mixed_precision.
"""
import json
import os
import warnings

import onnx

from . import _onnx_amp as _core

Error = _core.Error
InputError = _core.InputError

__all__ = ["rewrite", "run", "Runner", "Trainer", "plot_training", "Error", "InputError"]


def _source(model):
    """(path or serialized bytes, the name messages give it, the folder its external data is in)."""
    if isinstance(model, onnx.ModelProto):
        return model.SerializeToString(), "<onnx.ModelProto>", os.getcwd()
    if isinstance(model, (bytes, bytearray)):
        return bytes(model), "<bytes>", os.getcwd()
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model), "", ""
    raise TypeError("model must be an onnx.ModelProto or a path, not %s" % type(model).__name__)


def _names(value, what):
    """A list of strings from a list, a tuple or one comma-separated string."""
    if value is None:
        return []
    if isinstance(value, str):
        return [v for v in value.split(",") if v]
    if not all(isinstance(v, str) for v in value):
        raise TypeError("%s must be strings" % what)
    return list(value)


def rewrite(model, dtype=None, keep_io_types=None, allow=None, deny=None, infer=None, clear=None, block_nodes=None,
            weights=None, config=None, output=None, block_node_names=None, keep_fp32_ops=None, calibrate=None,
            max_error=None, metric="max-relative", write_unmet=False, cast_placement=None,
            min_magnitude=None):
    """Rewrites a model to mixed precision as `amp-rewrite` does; returns (onnx.ModelProto, report).

    dtype          "fp16" (default) or "bf16"
    keep_io_types  graph inputs and outputs keep their types (default True)
    allow, deny, infer, clear
                   op list edits, as --allow etc.: "Op" puts an op on the list, "-Op" takes it off
    block_nodes    regular expressions of node names to keep in fp32 (--block-node)
    weights        "keep" (default: fp32 weights cast where used) or "lowp" (stored in dtype)
    cast_placement "compute" (default): a data-movement op (Transpose, Reshape...) next to an fp32 op
                   runs in fp32, so each Cast sits beside an op that computes and ONNX Runtime's CPU
                   provider, which computes fp16 ops in fp32, removes it; "consumer": Casts at the
                   consuming op, as torch.autocast casts (data movement in 16 bits)
    min_magnitude  non-zero constants stored in dtype with a smaller magnitude become +-min_magnitude
                   (onnxconverter-common's min_positive_val); default 0: round as IEEE does
    config         a JSON file of the same settings (--config); keyword arguments win over it
    output         write the rewrite there, as amp-rewrite -o does (external data beside it when
                   the weights came that way or pass 2 GB); the ModelProto returned then refers to
                   that data (onnx.load(output, load_external_data=False))
    block_node_names  node names to keep in fp32, matched exactly
    keep_fp32_ops  op types to keep in fp32 wherever they are (each is taken off its list)
    calibrate      a dict of input arrays (amp-rewrite --calibrate): the nodes whose 16-bit results
                   break accuracy on them stay fp32 - the fewest, cheapest first, that bring every
                   output within max_error of fp32 (relative to max |fp32|; default: twice the
                   error of rounding only the inputs and weights), measured with the CPU backend's
                   GPU-faithful 16-bit arithmetic. metric "top1" judges top-1 disagreement instead.
                   Each kept node's measurements are in the report's nodes[] and "calibration".
                   A max_error below that floor raises InputError unless write_unmet=True.

    The report is the JSON amp-rewrite --report writes, as Python data: every node's precision and
    the rule and neighbour behind it, casts, clamped constants, pass timings. Ops amp-run has no
    kernel for are warned about (warnings.warn), as amp-rewrite prints them.
    """
    data, name, base_dir = _source(model)
    blob, report, notes = _core.rewrite(
        data, name, base_dir, dtype or "", keep_io_types, weights or "", _names(allow, "allow"), _names(deny, "deny"),
        _names(infer, "infer"), _names(clear, "clear"), _names(block_nodes, "block_nodes"),
        _names(block_node_names, "block_node_names"), _names(keep_fp32_ops, "keep_fp32_ops"),
        os.fspath(config) if config else "", os.fspath(output) if output else "", calibrate, max_error, metric,
        bool(write_unmet), cast_placement or "", min_magnitude)
    for note in notes:
        warnings.warn(note, stacklevel=2)
    proto = onnx.load(os.fspath(output), load_external_data=False) if output else onnx.ModelProto.FromString(blob)
    return proto, json.loads(report)


class Runner:
    """A model compiled once for repeated runs, as amp-run compiles it: Runner(model).run(inputs).

    device  "cpu" (default), "cuda" or "auto" (cuda when a GPU is usable, else cpu)
    threads CPU threads (0: all cores); seed: random ops (Dropout in training mode); tf32: let fp32
            products and convolutions use TF32 on the GPU
    """

    def __init__(self, model, device="cpu", threads=0, seed=0, tf32=False):
        self._impl = _core.Runner(*_source(model), device, threads, seed, tf32)

    def run(self, inputs):
        """inputs: {graph input name: numpy array} -> {graph output name: numpy array}, in graph order.

        Arrays go to the backend without a copy on the way (a non-contiguous one is made
        contiguous first); outputs come back without one. numpy has no bfloat16: a bfloat16 input
        takes float32 (rounded to nearest even) or uint16 bits, a bfloat16 output comes back as
        float32 (exact). Outputs holding NaN or inf are named in a warning on stderr, as amp-run
        names them."""
        return self._impl.run(inputs)

    @property
    def inputs(self):
        """[(name, type)] of the graph inputs a run must be fed, e.g. ("input", "float[N,3,224,224]")."""
        return self._impl.inputs

    @property
    def device(self):
        """The backend that runs the model: "cpu" or "cuda"."""
        return self._impl.device


def run(model, inputs, device="cpu", threads=0, seed=0, tf32=False):
    """Runs a model once on {name: numpy array}, as amp-run does; returns {output name: array}.
    See Runner for the arguments; Runner keeps the compiled model for more runs."""
    return Runner(model, device=device, threads=threads, seed=seed, tf32=tf32).run(inputs)


class Trainer:
    """Trains a model one batch at a time, as amp-train does (the same training step: losses
    match amp-train's bit for bit on the same batches).

    model        an inference or training-mode export (torch.onnx.export with
                 training=TrainingMode.TRAINING keeps BatchNorm's batch statistics), or a step
                 saved by export(..., training_graph=True) / amp-train --save-training-graph
    loss         "cross_entropy" (default), "mse", "bce_with_logits", or None: the model's own
                 scalar output; target: the output it reads (default the only one); labels: the
                 batch key of the labels (default "labels")
    optimizer    "sgd" (default), "adam" or "adamw", with lr, momentum, nesterov, weight_decay;
                 clip_norm: clip the global gradient norm
    dtype        "bf16" (default), "fp16" or "fp32": the forward and backward's type; weights,
                 optimizer state and the update stay fp32 (master weights)
    loss_scale   None (dynamic for fp16, none otherwise), "dynamic", or a number (static)
    schedule     "constant" (default), "cosine" or "linear" over total_steps, after warmup steps
    freeze       regular expression of parameter names not to train
    device       "cpu", "cuda" or "auto"; seed: dropout masks; threads: CPU threads; tf32
    evaluation   build the evaluation model (eval mode, the same loss) for evaluate()

    Batches are dicts of numpy arrays keyed by graph input name plus the labels, sample axis
    first; arrays of another int or float type are converted to the input's, as amp-train
    converts its data. A step with inf/NaN gradients is skipped (nothing applied) and counted:
    see skipped_steps, last_step_skipped, loss_scale and history.
    """

    def __init__(self, model, loss="cross_entropy", optimizer="sgd", lr=0.01, momentum=0.0, nesterov=False,
                 weight_decay=0.0, clip_norm=0.0, dtype="bf16", loss_scale=None, schedule="constant", warmup=0,
                 total_steps=None, target=None, labels=None, freeze=None, device="cpu", seed=0, threads=0,
                 tf32=False, evaluation=True):
        data, name, base_dir = _source(model)
        self._name = name or os.path.basename(data)
        self._impl = _core.Trainer(
            data, name, base_dir, loss or "", target or "", labels or "", optimizer, float(lr), float(momentum),
            bool(nesterov), float(weight_decay), float(clip_norm), dtype, "" if loss_scale is None else str(loss_scale),
            schedule, int(warmup), int(total_steps or 0), freeze or "", device, int(seed), int(threads), bool(tf32),
            bool(evaluation))

    def step(self, batch, lr=None):
        """One optimizer step on one batch: returns its loss (before the update). lr overrides the
        schedule's rate for this step."""
        return self._impl.step(batch, lr)

    def evaluate(self, batches):
        """The evaluation model (eval mode, the same loss and precision) on one batch or an
        iterable of batches: {"loss": mean per sample, "accuracy": for classifiers (else None),
        "samples", "non_finite_samples"}. Recorded in history for plot()."""
        return self._impl.evaluate(batches)

    def state_dict(self):
        """{"state": {name: array} (fp32 master weights, optimizer moments, loss scale and its
        counter, BatchNorm statistics), "steps", "skipped_steps", "backend_runs"}."""
        return self._impl.state_dict()

    def load_state_dict(self, state):
        """Restores a state_dict(): training continues exactly as it would have (dropout masks
        included: the step is compiled again to continue their stream when it must)."""
        self._impl.load_state_dict(state)

    def export(self, path, training_graph=False):
        """Writes the trained model, in eval mode and fp32 as given (amp-train --save); with
        training_graph, the whole training step as ONNX with training_info and the trained state
        (amp-train --save-training-graph), which Trainer and amp-train can continue from."""
        self._impl.export(os.fspath(path), bool(training_graph))

    def plot(self, path, title=None, label=None):
        """Draws the losses (each step and their running mean), evaluations, skipped steps and the
        loss scale as an SVG (amp-train --plot's picture)."""
        self._impl.plot(os.fspath(path), title or self._name, label or "run")

    @property
    def history(self):
        """[{"step", "loss", "loss_scale" (None without scaling), "skipped"}] per step."""
        return self._impl.history

    @property
    def steps(self):
        return self._impl.steps

    @property
    def skipped_steps(self):
        return self._impl.skipped_steps

    @property
    def last_step_skipped(self):
        return self._impl.last_step_skipped

    @property
    def loss_scale(self):
        """The current loss scale (None without loss scaling)."""
        return self._impl.loss_scale

    @property
    def lr(self):
        """The schedule's learning rate for the next step."""
        return self._impl.lr

    @property
    def state_names(self):
        return self._impl.state_names

    @property
    def device(self):
        return self._impl.device


def plot_training(path, runs, title="training"):
    """Several trainers in one picture ({label: Trainer}), as amp-train --compare-fp32 draws two."""
    _core.plot_training(os.fspath(path), title, [(label, t._impl) for label, t in runs.items()])
