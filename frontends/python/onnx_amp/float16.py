"""A drop-in for onnxconverter-common's float16 module: change

    from onnxconverter_common import float16

to `from onnx_amp import float16` and convert_float_to_float16 takes the same arguments and returns
a float16 onnx.ModelProto. The conversion is onnx_amp.rewrite's (amp-rewrite's), not a second
implementation: ops are put in float16 by op lists modelled on PyTorch's autocast (products and
convolutions in float16; exp, softmax, reductions, norms and losses kept in float32, so their
results do not overflow to inf or NaN), one Cast per value and type, each beside the op that
computes (a Transpose next to a float32 LayerNorm moves float32, and a linear layer on 3-D tokens
read from a LayerNorm runs on 2-D rows, Flatten before and Reshape after, so ONNX Runtime's CPU
provider, which computes float16 nodes in float32 and removes the Cast pairs that meet, rounds
nowhere there; the values are the same), weights stored in float16 (weights="lowp"), every decision recorded in the node's
doc_string. Where onnxconverter-common's
behaviour is a defect, this one differs:

- the output passes onnx.checker's full check and is topologically sorted, with the keep_io_types
  Casts in place (onnxconverter-common#208, #320, #331);
- inputs an op's schema keeps in float32 or int64 stay so: Resize's scales and sizes get no Cast to
  float16 (onnxruntime#8327, #14827, #17447);
- constants are rounded to nearest even, and only values beyond float16's range are clamped, to
  +-65504 (not to 1e4, onnxconverter-common#295); each clamp is reported (onnx_amp.rewrite's
  report), not silent; non-zero values below min_positive_val become +-min_positive_val first, as
  there (an epsilon does not flush to zero);
- no fp32 -> fp16 -> fp32 round trips are left in (onnxconverter-common#271), and converting a
  converted model again changes nothing (no orphan Casts, onnxconverter-common#276);
- with keep_io_types=False a float32 graph input or output becomes float16 where the graph
  computes it in float16 (an input read only by float16 ops, an output a float16 op makes); one
  that a float32 op reads or makes stays float32 instead of gaining a Cast. Ask the model
  (ModelProto.graph.input) for the types to feed.

Arguments without a meaning here are accepted and ignored, as each says. onnx_amp.rewrite gives
the same conversion with more control (bfloat16, op list edits, keeping weights in float32) and a
report of every decision.
"""
from . import rewrite as _rewrite

__all__ = ["convert_float_to_float16", "convert_float_to_float16_model_path", "DEFAULT_OP_BLOCK_LIST"]

# onnxconverter-common's default op_block_list, for scripts that extend it. It is not the default
# here: op_block_list=None means this project's op lists, which already keep the ops of this list
# that compute in float (TopK, Range, CumSum, NonMaxSuppression, RoiAlign, Resize's scales...) where
# their types must be float32, and run Min, Max, Resize and Upsample in the precision next to them.
DEFAULT_OP_BLOCK_LIST = [
    "ArrayFeatureExtractor", "Binarizer", "CastMap", "CategoryMapper", "DictVectorizer", "FeatureVectorizer",
    "Imputer", "LabelEncoder", "LinearClassifier", "LinearRegressor", "Normalizer", "OneHotEncoder",
    "RandomUniformLike", "SVMClassifier", "SVMRegressor", "Scaler", "TreeEnsembleClassifier",
    "TreeEnsembleRegressor", "ZipMap", "NonMaxSuppression", "TopK", "RoiAlign", "Resize", "Range", "CumSum", "Min",
    "Max", "Upsample",
]


def convert_float_to_float16(model, min_positive_val=1e-7, max_finite_val=1e4, keep_io_types=False,
                             disable_shape_infer=False, op_block_list=None, node_block_list=None,
                             check_fp16_ready=True):
    """Converts a float32 model (an onnx.ModelProto, or here also a path) to float16; returns a new
    onnx.ModelProto (the argument is not modified).

    min_positive_val   non-zero constants stored in float16 with a smaller magnitude become
        +-min_positive_val (as onnxconverter-common does: an epsilon does not flush to zero)
    max_finite_val     ignored: only values beyond +-65504 are clamped, to +-65504
        (onnxconverter-common's default 1e4 clamps valid float16 values)
    keep_io_types      graph inputs and outputs stay float32 (Casts at the boundary)
    disable_shape_infer  ignored: ONNX's shape inference always runs first; the rewrite needs types
    op_block_list      op types to keep in float32 wherever they are; None: this project's op lists
    node_block_list    node names to keep in float32
    check_fp16_ready   ignored: converting a converted model again is harmless here (it changes
        nothing), so there is nothing to refuse
    """
    del max_finite_val, disable_shape_infer, check_fp16_ready  # see the docstring
    converted, _ = _rewrite(model, dtype="fp16", keep_io_types=bool(keep_io_types), weights="lowp",
                            keep_fp32_ops=list(op_block_list or []), block_node_names=list(node_block_list or []),
                            min_magnitude=float(min_positive_val or 0))
    return converted


def convert_float_to_float16_model_path(model_path, min_positive_val=1e-7, max_finite_val=1e4, keep_io_types=False):
    """convert_float_to_float16 of the model at model_path, its external data read in place
    (memory-mapped, not loaded into Python). A result past protobuf's 2 GB cannot be a ModelProto:
    write it with onnx_amp.rewrite(model_path, weights="lowp", output=PATH) instead."""
    return convert_float_to_float16(model_path, min_positive_val, max_finite_val, keep_io_types)
