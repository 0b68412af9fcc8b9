"""A drop-in for onnxconverter-common's auto_mixed_precision module: change

    from onnxconverter_common import auto_mixed_precision

to `from onnx_amp import auto_mixed_precision` and auto_convert_mixed_precision takes the same
arguments. onnxconverter-common converts every node to float16, then bisects the node list with
ONNX Runtime runs until the outputs pass the check (tens of attempts and minutes on a real model,
onnxmltools#543; it needs the Python onnxruntime package). Here the first attempt is
onnx_amp.rewrite's conversion (float16 where autocast's op lists put it, float32 for exp, softmax,
reductions, norms and losses), which often passes (the README's comparison: at rtol 0.01, atol 0.001
it did on the small transformers and ConvNeXt-T, not on resnet18, mobilenet_v2 or
efficientnet_b0); only when it fails does the same bisection run (frontends/lib/precision_search.h),
over the nodes the rewrite put in float16. Every attempt is run by this project's CPU backend, which
rounds float16 as a GPU does (0.2 to 0.8 s per attempt on the README's ResNet-18, MobileNetV2 and
EfficientNet-B0 exports, against 0.3 to 0.5 s per ONNX Runtime run for onnxconverter-common, which
computes its float16 nodes in float32; the search needs fewer attempts); no onnxruntime is needed.
"""

import onnx

from . import _core, _source

__all__ = ["auto_convert_mixed_precision"]


def auto_convert_mixed_precision(model, feed_dict, validate_fn=None, rtol=None, atol=None, keep_io_types=False):
    """Converts a float32 model to float16, keeping in float32 the fewest nodes for which
    validate_fn(fp32 outputs, float16 outputs) returns True and/or every output passes
    numpy.allclose(fp32, float16, rtol, atol); returns the onnx.ModelProto (weights in float16,
    stored as float16.convert_float_to_float16 stores them with its default min_positive_val 1e-7,
    as onnxconverter-common's search does).

    feed_dict      {input name: numpy array}, float32 arrays for float inputs; without
                   keep_io_types they are rounded to float16 for the inputs that become float16
    rtol, atol     as onnxconverter-common: one given alone gives the other its default (1e-5
                   for rtol, 1e-8 for atol); both None needs validate_fn
    keep_io_types  graph inputs and outputs stay float32
    Raises ValueError when neither check is given, when the float32 model fails its own check, or
    when no conversion passes it (onnx_amp.InputError is a ValueError)."""
    if rtol is None and atol is not None:
        rtol = 1e-5
    if atol is None and rtol is not None:
        atol = 1e-8
    if rtol is None and validate_fn is None:
        raise ValueError("Argument `validate_fn` and `rtol` cannot both be `None`.")
    data, name, base_dir = _source(model)
    blob, kept, attempts = _core.search_fp32_nodes(data, name, base_dir, dict(feed_dict), validate_fn, rtol, atol,
                                                   bool(keep_io_types), "fp16")
    return onnx.ModelProto.FromString(blob)
