#!/usr/bin/python3
"""Reference outputs for cpu_kernels_test.cc, computed with numpy and PyTorch (CPU, float32/64).

    kernel_reference.py DIR CASE [CASE ...]

Reads DIR/CASE.in.npz (bf16 arrays as uint16 bits under "<key>.bf16"), computes the case's
outputs as a GPU does for 16-bit tensors -- widen to float32, compute in float32, round once to
the storage type -- and writes DIR/CASE.ref.npz with the outputs "y", "y1", ... in the storage type
of the case's first input (or the type the op makes).
"""
import sys

import numpy as np
import torch
import torch.nn.functional as F

BF16 = ".bf16"


def load(path):
    out, kinds = {}, {}
    with np.load(path) as z:
        for key in z.files:
            a = z[key]
            if key.endswith(BF16):
                key = key[: -len(BF16)]
                a = np.asarray(a.astype(np.uint32) << np.uint32(16)).view(np.float32)  # exact widening
                kinds[key] = "bf16"
            else:
                kinds[key] = str(a.dtype)
            out[key] = a
    return out, kinds


def round_to(x, kind):
    """float32/64 result -> the storage kind, rounding to nearest even once."""
    x = np.asarray(x)
    if kind == "bf16":
        bits = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32).reshape(x.shape)).to(torch.bfloat16).view(torch.int16)
        return (BF16, bits.numpy().view(np.uint16))
    return ("", x.astype(kind))


def f32(a):
    return np.asarray(a, dtype=np.float64 if a.dtype == np.float64 else np.float32)


def t(a):
    return torch.from_numpy(np.ascontiguousarray(f32(a)))


# ONNX's reference of opset 18's reductions max and min: numpy's maximum / minimum (NaN from either side).
EXTREMUM = {"max": np.maximum, "min": np.minimum}


def scatter_nd(x, indices, updates, reduction="none"):
    """ONNX's ScatterND (reduction none, max, min) as numpy indexed assignment, one index tuple at a time."""
    y = x.copy()
    for idx in np.ndindex(indices.shape[:-1]):
        at = tuple(indices[idx])
        y[at] = updates[idx] if reduction == "none" else EXTREMUM[reduction](y[at], updates[idx])
    return y


def scatter_reduce_grad(x, indices, updates, dy, axis, reduction):
    """d/dx and d/dupdates of PyTorch's scatter_reduce (amax / amin, include_self) times dy, by
    autograd. axis None: ScatterND, whose index tuples name rows of x seen as [rows, slice]."""
    shape_x, shape_u = x.shape, updates.shape
    if axis is None:
        k = indices.shape[-1]
        rows = np.ravel_multi_index(tuple(indices[..., j] % shape_x[j] for j in range(k)), shape_x[:k]).reshape(-1)
        lead = int(np.prod(shape_x[:k]))
        x, dy, updates = x.reshape(lead, -1), dy.reshape(lead, -1), updates.reshape(len(rows), -1)
        index, axis = np.broadcast_to(rows[:, None], updates.shape), 0
    else:
        index = indices % shape_x[axis]
    xt, ut = t(x).requires_grad_(), t(updates).requires_grad_()
    y = xt.scatter_reduce(axis, tk(np.ascontiguousarray(index)), ut, reduce="a" + reduction, include_self=True)
    y.backward(t(dy))
    return [xt.grad.numpy().reshape(shape_x), ut.grad.numpy().reshape(shape_u)]


def tk(a):
    """a as a torch tensor of its own dtype (integers stay integers)."""
    return torch.from_numpy(np.ascontiguousarray(a))


def erf(x):
    return torch.erf(t(x)).numpy()


def gelu(x, approximate):
    return torch.nn.functional.gelu(t(x), approximate=approximate).numpy()


def gelu_grad(dy, x, approximate):
    x = t(x).requires_grad_()
    torch.nn.functional.gelu(x, approximate=approximate).backward(t(dy))
    return x.grad.numpy()


def autograd(fn, x, dy):
    """d(fn)/dx times dy, by PyTorch's autograd."""
    x = t(x).requires_grad_()
    fn(x).backward(t(dy))
    return x.grad.numpy()


def bit_shift(shift, x, y):
    """numpy's shift in x's type; a shift by the type's width or more gives 0, written out here (C
    leaves it undefined, and x86 shifts by the amount modulo the width)."""
    width = 8 * x.dtype.itemsize
    return np.where(y >= width, np.zeros_like(x), shift(x, np.minimum(y, width - 1))).astype(x.dtype)


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def layer_norm(x, scale, bias, axis):
    axes = tuple(range(axis % x.ndim, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    inv = 1 / np.sqrt(var + np.float32(1e-5))
    return [(x - mean) * inv * scale + bias, mean, inv]


def batch_norm_train(x, scale, bias, mean, var, momentum=0.9, eps=1e-5):
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    m, v = x.mean(axis=axes), x.var(axis=axes)
    y = (x - m.reshape(shape)) / np.sqrt(v.reshape(shape) + np.float32(eps)) * scale.reshape(shape) + bias.reshape(shape)
    momentum = np.float32(momentum)
    return [y, mean * momentum + m * (1 - momentum), var * momentum + v * (1 - momentum)]


def batch_norm_eval(x, scale, bias, mean, var, eps=1e-5):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + np.float32(eps)) * scale.reshape(shape) + bias.reshape(shape)


def mvn(x, axes):
    """ONNX's MeanVarianceNormalization: (x - mean) / (sqrt(var) + 1e-9), statistics in float64."""
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    std = np.sqrt(((x64 - mean) ** 2).mean(axis=axes, keepdims=True))
    return ((x64 - mean) / (std + 1e-9)).astype(x.dtype)


def sce(scores, labels, weights, ignore_index):
    logp = torch.log_softmax(t(scores), dim=1)
    loss = F.nll_loss(logp, torch.from_numpy(labels), weight=t(weights), ignore_index=ignore_index, reduction="mean")
    return [loss.numpy(), logp.numpy()]


# Case name -> (function of the widened inputs returning output(s), output kind or None for the
# first input's kind). Names match the C++ cases.
CASES = {
    "add_bcast": (lambda i: i["a"] + i["b"], None),
    "sub_bcast": (lambda i: i["a"] - i["b"], None),
    "mul_bcast": (lambda i: i["a"] * i["b"], None),
    "div_bcast": (lambda i: i["a"] / i["b"], None),
    "pow": (lambda i: np.power(i["a"], i["b"]), None),
    "relu": (lambda i: np.maximum(i["x"], 0), None),
    "leakyrelu": (lambda i: np.where(i["x"] >= 0, i["x"], i["x"] * np.float32(0.1)), None),
    "sigmoid": (lambda i: torch.sigmoid(t(i["x"])).numpy(), None),
    "hardsigmoid": (lambda i: np.clip(np.float32(0.2) * i["x"] + np.float32(0.5), 0, 1), None),
    "hardsigmoid_torch": (lambda i: F.hardsigmoid(t(i["x"])).numpy(), None),
    "hardswish": (lambda i: F.hardswish(t(i["x"])).numpy(), None),
    "hardsigmoid_torch_grad": (lambda i: autograd(F.hardsigmoid, i["x"], i["dy"]), None),
    "hardswish_grad": (lambda i: autograd(F.hardswish, i["x"], i["dy"]), None),
    "softsign_grad": (lambda i: autograd(F.softsign, i["x"], i["dy"]), None),
    "celu_grad": (lambda i: autograd(lambda v: F.celu(v, alpha=2.0), i["x"], i["dy"]), None),
    "thresholdedrelu_grad": (lambda i: autograd(lambda v: F.threshold(v, 1.0, 0.0), i["x"], i["dy"]), None),
    "hardshrink_grad": (lambda i: autograd(lambda v: F.hardshrink(v, 0.5), i["x"], i["dy"]), None),
    "softshrink_grad": (lambda i: autograd(lambda v: F.softshrink(v, 0.5), i["x"], i["dy"]), None),
    "sin_grad": (lambda i: autograd(torch.sin, i["x"], i["dy"]), None),
    "cos_grad": (lambda i: autograd(torch.cos, i["x"], i["dy"]), None),
    "tan_grad": (lambda i: autograd(torch.tan, i["x"], i["dy"]), None),
    "asin_grad": (lambda i: autograd(torch.asin, i["x"], i["dy"]), None),
    "acos_grad": (lambda i: autograd(torch.acos, i["x"], i["dy"]), None),
    "atan_grad": (lambda i: autograd(torch.atan, i["x"], i["dy"]), None),
    "sinh_grad": (lambda i: autograd(torch.sinh, i["x"], i["dy"]), None),
    "cosh_grad": (lambda i: autograd(torch.cosh, i["x"], i["dy"]), None),
    "asinh_grad": (lambda i: autograd(torch.asinh, i["x"], i["dy"]), None),
    "acosh_grad": (lambda i: autograd(torch.acosh, i["x"], i["dy"]), None),
    "atanh_grad": (lambda i: autograd(torch.atanh, i["x"], i["dy"]), None),
    "tanh": (lambda i: np.tanh(i["x"]), None),
    "round": (lambda i: np.round(i["x"]), None),
    "sin": (lambda i: torch.sin(t(i["x"])).numpy(), None),
    "cos": (lambda i: torch.cos(t(i["x"])).numpy(), None),
    "tan": (lambda i: torch.tan(t(i["x"])).numpy(), None),
    "asin": (lambda i: torch.asin(t(i["x"])).numpy(), None),
    "acos": (lambda i: torch.acos(t(i["x"])).numpy(), None),
    "atan": (lambda i: torch.atan(t(i["x"])).numpy(), None),
    "sinh": (lambda i: torch.sinh(t(i["x"])).numpy(), None),
    "cosh": (lambda i: torch.cosh(t(i["x"])).numpy(), None),
    "asinh": (lambda i: torch.asinh(t(i["x"])).numpy(), None),
    "acosh": (lambda i: torch.acosh(t(i["x"])).numpy(), None),
    "atanh": (lambda i: torch.atanh(t(i["x"])).numpy(), None),
    "softsign": (lambda i: F.softsign(t(i["x"])).numpy(), None),
    "celu": (lambda i: F.celu(t(i["x"]), alpha=2.0).numpy(), None),
    "thresholdedrelu": (lambda i: np.where(i["x"] > np.float32(0.5), i["x"], 0), None),
    "shrink": (lambda i: np.where(i["x"] < -np.float32(0.75), i["x"] + np.float32(0.25),
                                  np.where(i["x"] > np.float32(0.75), i["x"] - np.float32(0.25), 0)), None),
    "softshrink": (lambda i: F.softshrink(t(i["x"]), 0.5).numpy(), None),
    "round_special": (lambda i: torch.round(t(i["x"])).numpy(), None),
    "sin_special": (lambda i: torch.sin(t(i["x"])).numpy(), None),
    "atan_special": (lambda i: torch.atan(t(i["x"])).numpy(), None),
    "softsign_special": (lambda i: F.softsign(t(i["x"])).numpy(), None),
    "celu_special": (lambda i: F.celu(t(i["x"])).numpy(), None),
    "thresholdedrelu_special": (lambda i: np.where(i["x"] > 1, i["x"], 0), None),
    "shrink_special": (lambda i: np.where(i["x"] < -0.5, i["x"], np.where(i["x"] > 0.5, i["x"], 0)), None),
    "isnan_special": (lambda i: torch.isnan(t(i["x"])).numpy(), "bool"),
    "isinf_special": (lambda i: torch.isinf(t(i["x"])).numpy(), "bool"),
    "isposinf_special": (lambda i: torch.isposinf(t(i["x"])).numpy(), "bool"),
    "isneginf_special": (lambda i: torch.isneginf(t(i["x"])).numpy(), "bool"),
    "sign": (lambda i: torch.sign(t(i["x"])).numpy(), None),
    "softplus": (lambda i: F.softplus(t(i["x"])).numpy(), None),
    "elu": (lambda i: F.elu(t(i["x"])).numpy(), None),
    "elu_half": (lambda i: F.elu(t(i["x"]), alpha=0.5).numpy(), None),
    "selu": (lambda i: F.selu(t(i["x"])).numpy(), None),
    # ONNX pads [b0, b1, b2, b3, e0, e1, e2, e3] over [N, C, H, W]; F.pad takes (W, H) pairs, last axis first.
    "pad_constant": (lambda i: F.pad(t(i["x"]), (2, 1, 1, 2), mode="constant", value=float(i["value"])).numpy(), None),
    "pad_reflect": (lambda i: F.pad(t(i["x"]), (2, 4, 1, 2), mode="reflect").numpy(), None),
    "pad_edge": (lambda i: F.pad(t(i["x"]), (2, 1, 3, 2), mode="replicate").numpy(), None),
    "pad_crop": (lambda i: F.pad(t(i["x"]), (2, -2, -1, 1)).numpy(), None),
    "resize_nearest_x2": (lambda i: F.interpolate(t(i["x"]), scale_factor=2, mode="nearest").numpy(), None),
    "resize_nearest_size": (lambda i: F.interpolate(t(i["x"]), size=(7, 9), mode="nearest").numpy(), None),
    "resize_bilinear_x2": (lambda i: F.interpolate(t(i["x"]), scale_factor=2, mode="bilinear", align_corners=False).numpy(),
                           None),
    "resize_bilinear_down": (lambda i: F.interpolate(t(i["x"]), size=(3, 4), mode="bilinear", align_corners=False).numpy(),
                             None),
    "resize_bilinear_corners": (lambda i: F.interpolate(t(i["x"]), size=(9, 11), mode="bilinear",
                                                        align_corners=True).numpy(), None),
    "scatternd_rows": (lambda i: scatter_nd(i["x"], i["i"], i["u"]), None),
    "scatternd_elements": (lambda i: scatter_nd(i["x"], i["i"], i["u"]), None),
    "einsum_scores": (lambda i: torch.einsum("B G H I D, B G H J D -> B G H I J", t(i["a"]), t(i["b"])).numpy(), None),
    "einsum_weighted": (lambda i: torch.einsum("BGHIJ,BGHJD->BGHID", t(i["a"]), t(i["b"])).numpy(), None),
    "einsum_three": (lambda i: torch.einsum("ij,jk,k->i", t(i["a"]), t(i["b"]), t(i["c"])).numpy(), None),
    "einsum_transpose": (lambda i: torch.einsum("abc->cab", t(i["a"])).numpy(), None),
    "remainder": (lambda i: torch.remainder(tk(i["a"]), tk(i["b"])).numpy(), None),
    "fmod": (lambda i: torch.fmod(tk(i["a"]), tk(i["b"])).numpy(), None),
    "erf": (lambda i: erf(i["x"]), None),
    "exp": (lambda i: np.exp(i["x"]), None),
    "gelu_none": (lambda i: gelu(i["x"], "none"), None),
    "gelu_tanh": (lambda i: gelu(i["x"], "tanh"), None),
    "gelu_grad_none": (lambda i: gelu_grad(i["dy"], i["x"], "none"), None),
    "gelu_grad_tanh": (lambda i: gelu_grad(i["dy"], i["x"], "tanh"), None),
    "log": (lambda i: np.log(i["x"]), None),
    "sqrt": (lambda i: np.sqrt(i["x"]), None),
    "reciprocal": (lambda i: 1 / i["x"], None),
    "neg": (lambda i: -i["x"], None),
    "abs": (lambda i: np.abs(i["x"]), None),
    "min3": (lambda i: np.minimum(np.minimum(i["a"], i["b"]), i["c"]), None),
    "max3": (lambda i: np.maximum(np.maximum(i["a"], i["b"]), i["c"]), None),
    "where": (lambda i: np.where(i["c"], i["a"], i["b"]), None),
    "clip": (lambda i: np.clip(i["x"], i["lo"], i["hi"]), None),
    "less": (lambda i: i["a"] < i["b"], "bool"),
    "mean3": (lambda i: (i["a"] + i["b"] + i["c"]) / np.asarray(3, i["a"].dtype), None),
    "mean1": (lambda i: i["a"], None),
    "castlike_to_float": (lambda i: i["x"], "float32"),
    "castlike_to_double": (lambda i: i["x"].astype(np.float64), "float64"),
    "castlike_to_float16": (lambda i: i["x"], "float16"),
    "castlike_to_bfloat16": (lambda i: i["x"], "bf16"),
    "shrink_int": (lambda i: np.where(i["x"] < -1.5, i["x"] + np.float32(1.0),
                                      np.where(i["x"] > 1.5, i["x"] - np.float32(1.0), 0)), None),
    "bitshift_LEFT": (lambda i: bit_shift(np.left_shift, i["a"], i["b"]), None),
    "bitshift_RIGHT": (lambda i: bit_shift(np.right_shift, i["a"], i["b"]), None),
    "bitwise_and": (lambda i: np.bitwise_and(i["a"], i["b"]), None),
    "bitwise_or": (lambda i: np.bitwise_or(i["a"], i["b"]), None),
    "bitwise_xor": (lambda i: np.bitwise_xor(i["a"], i["b"]), None),
    "bitwise_not": (lambda i: np.invert(i["x"]), None),
    "relu_special": (lambda i: torch.relu(t(i["x"])).numpy(), None),
    "abs_special": (lambda i: torch.abs(t(i["x"])).numpy(), None),
    "sigmoid_special": (lambda i: torch.sigmoid(t(i["x"])).numpy(), None),
    "neg_special": (lambda i: torch.neg(t(i["x"])).numpy(), None),
    "max_special": (lambda i: torch.maximum(t(i["a"]), t(i["b"])).numpy(), None),
    "min_special": (lambda i: torch.minimum(t(i["a"]), t(i["b"])).numpy(), None),
    "clip_special": (lambda i: torch.clamp(t(i["x"]), t(i["lo"]), t(i["hi"])).numpy(), None),
    "leakyrelu_special": (lambda i: F.leaky_relu(t(i["x"]), float(np.float32(0.1))).numpy(), None),  # the float attribute
    "hardsigmoid_special": (lambda i: F.hardsigmoid(t(i["x"])).numpy(), None),
    "hardswish_special": (lambda i: F.hardswish(t(i["x"])).numpy(), None),
    "maxpool_special": (lambda i: F.max_pool2d(t(i["x"]), 3, stride=2, padding=1).numpy(), None),
    "reduce_max_special": (lambda i: torch.amax(t(i["x"]), dim=1, keepdim=True).numpy(), None),
    "reduce_min_special": (lambda i: torch.amin(t(i["x"]), dim=1, keepdim=True).numpy(), None),
    "reduce_sum_special": (lambda i: torch.sum(t(i["x"]), dim=1, keepdim=True).numpy(), None),
    "softmax_special": (lambda i: torch.softmax(t(i["x"]), dim=-1).numpy(), None),
    "greater_special": (lambda i: torch.gt(t(i["a"]), t(i["b"])).numpy(), "bool"),
    "where_special": (lambda i: torch.where(torch.from_numpy(i["c"]), t(i["a"]), t(i["b"])).numpy(), None),
    "cast_to_f16": (lambda i: i["x"], "float16"),
    "cast_to_bf16": (lambda i: i["x"], "bf16"),
    "cast_to_f32": (lambda i: i["x"], "float32"),
    # float64 -> float16 in one rounding (numpy's astype), not via float32.
    "cast_f64_to_f16": (lambda i: i["x"], "float16"),
    "matmul": (lambda i: np.matmul(i["a"], i["b"]), None),
    "matmul_vec": (lambda i: np.matmul(i["a"], i["b"]), None),
    "matmul_linear": (lambda i: np.matmul(i["a"], i["b"]), None),
    "matmul_heads": (lambda i: np.matmul(i["a"], i["b"]), None),
    "gemm": (lambda i: np.float32(0.5) * (i["a"] @ i["b"].T) + np.float32(2.0) * i["c"], None),
    "conv": (lambda i: F.conv2d(t(i["x"]), t(i["w"]), t(i["b"]), stride=(2, 1), padding=(1, 2), dilation=(1, 2),
                                groups=2).numpy(), None),
    "conv_1x1": (lambda i: F.conv2d(t(i["x"]), t(i["w"])).numpy(), None),
    "conv_grad": (lambda i: conv_grad(i), None),
    "conv_grad_3d": (lambda i: conv_grad(i, F.conv3d, stride=(1, 2, 1), padding=(1, 0, 1)), None),
    "conv_grad_crop": (lambda i: conv_grad(i, stride=2), None),
    "conv_grad_crop_3x3": (lambda i: conv_grad(i, stride=2, groups=2), None),
    "conv_crop": (lambda i: F.conv2d(t(i["x"]), t(i["w"]), stride=2).numpy(), None),
    "conv_1d": (lambda i: F.conv1d(t(i["x"]), t(i["w"]), t(i["b"]), padding=1).numpy(), None),
    "maxpool": (lambda i: F.max_pool2d(t(i["x"]), 3, stride=2, padding=1).numpy(), None),
    "avgpool": (lambda i: F.avg_pool2d(t(i["x"]), 3, stride=2, padding=1, count_include_pad=False).numpy(), None),
    "global_avgpool": (lambda i: i["x"].mean(axis=(2, 3), keepdims=True), None),
    "global_maxpool": (lambda i: torch.amax(t(i["x"]), dim=(2, 3), keepdim=True).numpy(), None),
    "batchnorm_train": (lambda i: batch_norm_train(i["x"], i["s"], i["b"], i["m"], i["v"]), None),
    "batchnorm_eval": (lambda i: batch_norm_eval(i["x"], i["s"], i["b"], i["m"], i["v"]), None),
    "layernorm": (lambda i: layer_norm(i["x"], i["s"], i["b"], -1), "stats"),
    # epsilon is a float attribute: its float32 value
    "instancenorm": (lambda i: F.instance_norm(t(i["x"]), weight=t(i["s"]), bias=t(i["b"]),
                                               eps=float(np.float32(1e-3))).numpy(), None),
    "mvn": (lambda i: mvn(i["x"], (0, 2, 3)), None),
    "mvn_axes": (lambda i: mvn(i["x"], (1, 3)), None),
    "softmax": (lambda i: softmax(i["x"], 1), None),
    "logsoftmax": (lambda i: torch.log_softmax(t(i["x"]), dim=-1).numpy(), None),
    "reduce_sum_02": (lambda i: i["x"].sum(axis=(0, 2), keepdims=True), None),
    "reduce_mean_last": (lambda i: i["x"].mean(axis=-1, keepdims=False), None),
    "reduce_max_1": (lambda i: i["x"].max(axis=1, keepdims=True), None),
    "sce": (lambda i: sce(i["x"], i["labels"], i["w"], 1), None),
    "transpose": (lambda i: np.transpose(i["x"], (2, 0, 1)), None),
}


def conv_grad(i, conv=F.conv2d, **window):
    """dX, dW, dB of conv(x, w, b) for the upstream gradient dy, by torch autograd."""
    x = t(i["x"]).clone().requires_grad_(True)
    w = t(i["w"]).clone().requires_grad_(True)
    b = torch.zeros(w.shape[0], dtype=x.dtype, requires_grad=True)
    window = window or dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2)
    y = conv(x, w, b, **window)
    dx, dw, db = torch.autograd.grad(y, (x, w, b), t(i["dy"]))
    return [dx.numpy(), dw.numpy(), db.numpy()]


def pool_grad(i, pool, **window):
    """dX of pool(x) for the upstream gradient dy, by torch autograd."""
    return autograd(lambda x: pool(x, **window), i["x"], i["dy"])


def conv_transpose(i, stride, pads, output_padding=None, dilation=None, groups=1):
    """ONNX ConvTranspose with begin/end pads: torch's unpadded transposed convolution, cropped."""
    x, w = t(i["x"]), t(i["w"])
    n = x.dim() - 2
    fn = [F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d][n - 1]
    y = fn(x, w, t(i["b"]) if "b" in i else None, stride=stride, output_padding=output_padding or [0] * n,
           groups=groups, dilation=dilation or [1] * n)
    crop = tuple(slice(pads[d], y.shape[2 + d] - pads[d + n]) for d in range(n))
    return y[(slice(None), slice(None)) + crop].numpy()


CASES.update({
    "maxpool_grad": (lambda i: pool_grad(i, F.max_pool2d, kernel_size=3, stride=2, padding=1), None),
    "maxpool_grad_dilated": (lambda i: pool_grad(i, F.max_pool2d, kernel_size=(2, 3), stride=(1, 2), padding=(1, 1),
                                                 dilation=(2, 1), ceil_mode=True), None),
    "maxpool_grad_1d": (lambda i: pool_grad(i, F.max_pool1d, kernel_size=3, stride=2, padding=1), None),
    "maxpool_grad_3d": (lambda i: pool_grad(i, F.max_pool3d, kernel_size=2, stride=(1, 2, 2)), None),
    "avgpool_grad": (lambda i: pool_grad(i, F.avg_pool2d, kernel_size=3, stride=2, padding=1, count_include_pad=False), None),
    "avgpool_grad_count_pad": (lambda i: pool_grad(i, F.avg_pool2d, kernel_size=3, stride=2, padding=1,
                                                   count_include_pad=True, ceil_mode=True), None),
    "convt": (lambda i: conv_transpose(i, (2, 1), (1, 0, 0, 1), (1, 0), (1, 2), 2), None),
    "convt_1d": (lambda i: conv_transpose(i, (3,), (1, 2)), None),
    "convt_3d": (lambda i: conv_transpose(i, (2, 1, 2), (0, 1, 0, 0, 0, 1)), None),
    "convt_same_upper": (lambda i: conv_transpose(i, (2, 2), (0, 0, 1, 1)), None),
})


# ---- the ops third-party exporters' models brought (issue 31)

KIND = None  # the storage kind of the case being computed (main sets it): the recurrent layers round to it


def stored(x):
    """x as the case's tensor type holds it, widened back (the recurrent state after each step)."""
    x = np.asarray(x)
    if KIND == "bf16":
        return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(torch.bfloat16).float().numpy()
    return x.astype(KIND).astype(x.dtype)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def recurrent(i, cell):
    """ONNX's LSTM (gates i, o, f, c), GRU (z, r, h; linear_before_reset 1) and RNN (tanh), both
    directions, with sequence_lens, initial states, and default activations, written from the
    operator's text; the state rounded to the tensor type after each step."""
    x, w, r, b, lens, h0 = i["x"], i["w"], i["r"], i["b"], i["lens"], i["h0"]
    seq, batch, _ = x.shape
    dirs, hidden = h0.shape[0], h0.shape[2]
    gates = w.shape[1] // hidden
    y = np.zeros((seq, dirs, batch, hidden), x.dtype)
    yh = np.zeros((dirs, batch, hidden), x.dtype)
    yc = np.zeros((dirs, batch, hidden), x.dtype)
    for d in range(dirs):
        wb, rb = b[d, :gates * hidden], b[d, gates * hidden:]
        for n in range(batch):
            h = h0[d, n].copy()
            c = i["c0"][d, n].copy() if "c0" in i else None
            steps = range(int(lens[n]))
            for t in (reversed(steps) if d == 1 else steps):
                xg = w[d] @ x[t, n] + wb
                hg = r[d] @ h + rb
                H = hidden
                if cell == "lstm":
                    ig, og, fg = sigmoid(xg[:H] + hg[:H]), sigmoid(xg[H:2 * H] + hg[H:2 * H]), sigmoid(xg[2 * H:3 * H] + hg[2 * H:3 * H])
                    c = stored(fg * c + ig * np.tanh(xg[3 * H:] + hg[3 * H:]))
                    h = stored(og * np.tanh(c))
                elif cell == "gru":
                    z, rg = sigmoid(xg[:H] + hg[:H]), sigmoid(xg[H:2 * H] + hg[H:2 * H])
                    cand = np.tanh(xg[2 * H:] + rg * hg[2 * H:])
                    h = stored((1 - z) * cand + z * h)
                else:
                    h = stored(np.tanh(xg + hg))
                y[t, d, n] = h
            yh[d, n] = h
            if c is not None:
                yc[d, n] = c
    return [y, yh, yc] if cell == "lstm" else [y, yh]


def one_hot(indices, depth, values):
    """ONNX's OneHot on axis 1: negative indices count from the end; out of range gives all off."""
    y = np.full((indices.shape[0], depth) + indices.shape[1:], values[0], values.dtype)
    for n, k in np.ndindex(indices.shape):
        j = int(indices[n, k])
        if -depth <= j < depth:
            y[n, j % depth, k] = values[1]
    return y


CASES.update({
    "sum3": (lambda i: (i["a"] + i["b"]) + i["c"], None),
    "prelu": (lambda i: F.prelu(t(i["x"]), t(i["slope"]).reshape(-1)).numpy(), None),
    "reduce_prod": (lambda i: torch.prod(t(i["x"]), dim=1, keepdim=True).numpy(), None),
    # alpha is a float attribute: its float32 value, not 1e-2 in double
    "lrn": (lambda i: F.local_response_norm(t(i["x"]), 5, alpha=float(np.float32(1e-2)), beta=0.75, k=2.0).numpy(), None),
    "quantize": (lambda i: np.clip(np.rint(i["x"] / i["scale"].reshape(1, 3, 1)) + i["zp"].reshape(1, 3, 1), -128, 127),
                 "int8"),
    "dequantize": (lambda i: ((i["x"].astype(np.int64) - i["zp"].reshape(1, 3, 1)).astype(np.float32)
                              * i["scale"].reshape(1, 3, 1)), "float32"),
    "onehot": (lambda i: one_hot(i["i"], 4, i["v"]), "float32"),
    "lstm": (lambda i: recurrent(i, "lstm"), None),
    "gru": (lambda i: recurrent(i, "gru"), None),
    "rnn": (lambda i: recurrent(i, "rnn"), None),
})

CASES.update({
    "reduce_l1_1": (lambda i: torch.linalg.vector_norm(t(i["x"]), 1, dim=1, keepdim=True).numpy(), None),
    "reduce_l2_02": (lambda i: torch.linalg.vector_norm(t(i["x"]), 2, dim=(0, 2)).numpy(), None),
    "reduce_logsum_last": (lambda i: torch.log(torch.sum(t(i["x"]), dim=-1)).numpy(), None),
    "reduce_logsumexp_1": (lambda i: torch.logsumexp(t(i["x"]), dim=1, keepdim=True).numpy(), None),
    "reduce_logsumexp_02": (lambda i: torch.logsumexp(t(i["x"]), dim=(0, 2)).numpy(), None),
    "reduce_sumsquare_all": (lambda i: torch.sum(t(i["x"]) ** 2).reshape(1, 1, 1).numpy(), None),
    "reduce_l1_int": (lambda i: np.abs(i["x"]).sum(axis=1, keepdims=True), None),
    "reduce_l2_int": (lambda i: np.sqrt((i["x"] ** 2).sum(axis=(0, 2))).astype(np.int64), None),
    "reduce_sumsquare_int": (lambda i: (i["x"] ** 2).sum(axis=-1, keepdims=True), None),
})


def int_matmul(a, azp, b, bzp):
    """(A - a_zp) @ (B - b_zp) in int64 (exact), zero points per tensor, per row of A, per column of B."""
    azp = azp.astype(np.int64).reshape(-1, 1) if azp.size > 1 else azp.astype(np.int64)
    return np.matmul(a.astype(np.int64) - azp, b.astype(np.int64) - bzp.astype(np.int64))


def int_conv(x, xzp, w, wzp, pads, **conv):
    """Conv of the zero-point-shifted integers in float64 (exact), padded with 0 after the shift
    (pads as ONNX orders them: the begins of H and W, then their ends)."""
    wzp = wzp.astype(np.int64).reshape(-1, 1, 1, 1) if wzp.size > 1 else wzp.astype(np.int64)
    xs = torch.from_numpy((x.astype(np.int64) - xzp.astype(np.int64)).astype(np.float64))
    xs = F.pad(xs, (pads[1], pads[3], pads[0], pads[2]))
    ws = torch.from_numpy((w.astype(np.int64) - wzp).astype(np.float64))
    return np.rint(F.conv2d(xs, ws, **conv).numpy()).astype(np.int64)


def requantize(acc, multiplier, yzp):
    """ONNX: saturate(rint(acc * multiplier) + y_zero_point), the multiplier in float32."""
    info = np.iinfo(yzp.dtype)
    y = np.rint(acc.astype(np.float64) * multiplier.astype(np.float32).astype(np.float64)) + yzp.astype(np.float64)
    return np.clip(y, info.min, info.max).astype(yzp.dtype)


def qlinear_matmul(i):
    acc = int_matmul(i["a"], i["azp"], i["b"], i["bzp"])
    a_scale = i["as"].reshape(-1, 1) if i["as"].size > 1 else i["as"]
    return requantize(acc, (a_scale * i["bs"] / i["ys"]).astype(np.float32), i["yzp"])


def qlinear_conv(i):
    acc = int_conv(i["x"], i["xzp"], i["w"], i["wzp"], (1, 1, 1, 1), dilation=(1, 2), groups=2)
    acc = acc + i["bias"].astype(np.int64).reshape(1, -1, 1, 1)
    return requantize(acc, (i["xs"] * i["ws"].reshape(1, -1, 1, 1) / i["ys"]).astype(np.float32), i["yzp"])


def dynamic_quantize_linear(x):
    """ONNX's DynamicQuantizeLinear formula, in float32, every round half to even."""
    x = x.astype(np.float32)
    lo, hi = np.minimum(np.float32(0), x.min()), np.maximum(np.float32(0), x.max())
    scale = np.float32(np.float32(1) if hi == lo else hi - lo) / np.float32(255)
    zp = np.rint(np.clip(np.float32(0) - lo / scale, 0, 255)).astype(np.uint8)
    y = np.clip(np.rint(x / scale) + zp.astype(np.float32), 0, 255).astype(np.uint8)
    return [y, np.asarray(scale, dtype=np.float32), np.asarray(zp, dtype=np.uint8)]


CASES.update({
    "matmulinteger_u8": (lambda i: int_matmul(i["a"], i["azp"], i["b"], i["bzp"]), "int32"),
    "matmulinteger_s8": (lambda i: int_matmul(i["a"], i["azp"], i["b"], i["bzp"]), "int32"),
    "qlinearmatmul_u8": (qlinear_matmul, "typed"),
    "qlinearmatmul_s8": (qlinear_matmul, "typed"),
    "convinteger_u8": (lambda i: int_conv(i["x"], i["xzp"], i["w"], i["wzp"], (1, 0, 1, 2), stride=(2, 1)), "int32"),
    "qlinearconv_s8": (qlinear_conv, "typed"),
    "dynamicquantizelinear": (lambda i: dynamic_quantize_linear(i["x"]), "typed"),
    "dynamicquantizelinear_positive": (lambda i: dynamic_quantize_linear(i["x"]), "typed"),
    "dynamicquantizelinear_zeros": (lambda i: dynamic_quantize_linear(i["x"]), "typed"),
})

def cumsum(x, axis, exclusive, reverse):
    """ONNX's CumSum: numpy's sequential running sums, shifted by one when exclusive."""
    if reverse:
        x = np.flip(x, axis)
    y = np.cumsum(x, axis=axis, dtype=x.dtype)
    if exclusive:
        y = np.concatenate([np.zeros_like(np.take(y, [0], axis=axis)), np.take(y, range(x.shape[axis] - 1), axis=axis)], axis)
    return np.flip(y, axis) if reverse else y


def scatter_elements(x, indices, updates, axis, reduction="none"):
    """ONNX's ScatterElements (opset 18: max and min too), one index at a time in order (a repeated
    index keeps the last write)."""
    y = x.copy()
    for p in np.ndindex(indices.shape):
        q = list(p)
        q[axis] = int(indices[p]) % x.shape[axis]
        q = tuple(q)
        if reduction == "add":
            y[q] = stored(y[q] + updates[p])
        elif reduction == "mul":
            y[q] = stored(y[q] * updates[p])
        elif reduction in EXTREMUM:
            y[q] = EXTREMUM[reduction](y[q], updates[p])
        else:
            y[q] = updates[p]
    return y


def depth_to_space(x, b, mode):
    n, c, h, w = x.shape
    if mode == "CRD":  # torch's pixel_shuffle
        return F.pixel_shuffle(tk(x), b).numpy()
    y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    return y.reshape(n, c // (b * b), h * b, w * b)


def space_to_depth(x, b):
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return y.reshape(n, c * b * b, h // b, w // b)


def top_k(x, k, axis, largest=True):
    """Values and int64 indices of the k best along axis; equal values by lower index (a stable sort)."""
    key = x.astype(np.float64)
    order = np.argsort(-key if largest else key, axis=axis, kind="stable")
    idx = np.take(order, range(k), axis=axis)
    return [np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)]


def gather_nd(x, indices, batch_dims=0):
    """ONNX's GatherND by its definition: per batch, each index tuple picks a slice."""
    b = batch_dims
    batch = int(np.prod(x.shape[:b], dtype=np.int64))
    xs = x.reshape((batch,) + x.shape[b:])
    ix = indices.reshape((batch, -1, indices.shape[-1]))
    out = np.stack([np.stack([xs[n][tuple(t)] for t in ix[n]]) for n in range(batch)])
    return out.reshape(indices.shape[:-1] + x.shape[b + indices.shape[-1]:])


CASES.update({
    "tile": (lambda i: np.tile(i["x"], tuple(i["r"])), None),
    "cumsum": (lambda i: cumsum(i["x"], -2, False, False), None),
    "cumsum_exclusive": (lambda i: cumsum(i["x"], -2, True, False), None),
    "cumsum_reverse": (lambda i: cumsum(i["x"], -2, False, True), None),
    "cumsum_exclusive_reverse": (lambda i: cumsum(i["x"], -2, True, True), None),
    "gather_elements": (lambda i: torch.gather(tk(i["x"]), 1, tk(i["i"] % 5)).numpy(), None),
    "scatter_elements": (lambda i: scatter_elements(i["x"], i["i"], i["u"], 0), None),
    "scatter_elements_add": (lambda i: scatter_elements(i["x"], i["i"], i["u"], 0, "add"), None),
    "scatter_elements_mul": (lambda i: scatter_elements(i["x"], i["i"], i["u"], 0, "mul"), None),
    "scatter_elements_max": (lambda i: scatter_elements(i["x"], i["i"], i["u"], 1, "max"), None),
    "scatter_elements_min": (lambda i: scatter_elements(i["x"], i["i"], i["u"], 0, "min"), None),
    "scatter_elements_max_nan": (lambda i: scatter_elements(i["x"], i["i"], i["u"], 1, "max"), None),
    "scatter_nd_max": (lambda i: scatter_nd(i["x"], i["i"], i["u"], "max"), None),
    "scatter_nd_min": (lambda i: scatter_nd(i["x"], i["i"], i["u"], "min"), None),
    "scatter_elements_max_grad": (lambda i: scatter_reduce_grad(i["x"], i["i"], i["u"], i["dy"], 1, "max"), None),
    "scatter_elements_min_grad": (lambda i: scatter_reduce_grad(i["x"], i["i"], i["u"], i["dy"], 0, "min"), None),
    "scatter_nd_max_grad": (lambda i: scatter_reduce_grad(i["x"], i["i"], i["u"], i["dy"], None, "max"), None),
    "scatter_nd_min_grad": (lambda i: scatter_reduce_grad(i["x"], i["i"], i["u"], i["dy"], None, "min"), None),
    "depth_to_space_DCR": (lambda i: depth_to_space(i["x"], 2, "DCR"), None),
    "depth_to_space_CRD": (lambda i: depth_to_space(i["x"], 2, "CRD"), None),
    "space_to_depth": (lambda i: space_to_depth(i["x"], 2), None),
    "top_k": (lambda i: top_k(i["x"], 5, 1), "then_int64"),
    "top_k_smallest": (lambda i: top_k(i["x"], 9, -1, largest=False), "then_int64"),
    "gather_nd": (lambda i: gather_nd(i["x"], i["i"]), None),
    "gather_nd_batch": (lambda i: gather_nd(i["x"], i["i"], 1), None),
    "nonzero": (lambda i: np.array(np.nonzero(i["x"]), dtype=np.int64), "int64"),
    "compress_axis": (lambda i: np.compress(i["c"], i["x"], axis=-2), None),
    "compress_flat": (lambda i: np.compress(i["c"], i["x"]), None),
    "eye_like": (lambda i: np.eye(4, 6, k=-1), None),
    "reverse_sequence_0": (lambda i: reverse_sequence(i["x"], i["lens"], 0), None),
    "reverse_sequence_1": (lambda i: reverse_sequence(i["x"], i["lens"], 1), None),
    "hardmax": (lambda i: hardmax(i["x"], 1), None),
    "max_unpool": (lambda i: max_unpool(i["x"], i["i"], (1, 2, 4, 4)), None),
    "roi_align": (lambda i: roi_align(i, (3, 2), 1.0, 0, True), None),
    "roi_align_unaligned": (lambda i: roi_align(i, (2, 2), 0.5, 2, False), None),
    "unique": (lambda i: unique(i["x"]), "then_int64"),
    "unique_unsorted": (lambda i: unique(i["x"], ordered=False), "then_int64"),
    "unique_axis": (lambda i: unique(i["x"], axis=1), "then_int64"),
    "nms": (lambda i: nms(i["boxes"], i["scores"], int(i["max"][0]), float(i["iou"][0]), float(i["floor"][0])), "int64"),
})


# ai.onnx_amp DeformConv / DeformConvGrad (torchvision.ops.deform_conv2d; groups and offset groups
# follow from the shapes) and Col2Im / Im2Col (torch.nn.functional.fold / unfold).
DEFORM_WINDOWS = {
    "deform_conv": dict(stride=(2, 1), padding=(1, 1), dilation=(1, 2)),
    "deform_conv_plain": dict(),
    "deform_conv_mask": dict(padding=(1, 1)),
}
CASES.update({name: (lambda i, w=w: deform_conv(i, w), None) for name, w in DEFORM_WINDOWS.items()})
CASES.update({name + "_grad": (lambda i, w=w: deform_conv_grad(i, w), None) for name, w in DEFORM_WINDOWS.items()})
CASES.update({
    "col2im": (lambda i: fold(i["x"], (5, 6), (2, 3), dilation=(2, 1), padding=(1, 1), stride=(1, 2)), None),
    "col2im_3d": (lambda i: col2im_loops(i["x"], (4, 3, 5), (2, 2, 3), (2, 1, 1), (1, 0, 1, 0, 1, 1)), None),
    "im2col": (lambda i: F.unfold(t(i["x"]), (2, 3), dilation=(2, 1), padding=(1, 1), stride=(1, 2)).numpy(), None),
})


def deform_conv(i, window):
    import torchvision
    mask = t(i["mask"]) if "mask" in i else None
    bias = t(i["b"]) if "b" in i else None
    return torchvision.ops.deform_conv2d(t(i["x"]), t(i["off"]), t(i["w"]), bias, mask=mask, **window).numpy()


def deform_conv_grad(i, window):
    """dX, dW, doffset, dB[, dmask] of deform_conv2d for the upstream gradient dy, by torch autograd."""
    import torchvision
    x, w, off = (t(i[k]).clone().requires_grad_(True) for k in ("x", "w", "off"))
    b = torch.zeros(w.shape[0], dtype=x.dtype, requires_grad=True)
    mask = t(i["mask"]).clone().requires_grad_(True) if "mask" in i else None
    y = torchvision.ops.deform_conv2d(x, off, w, b, mask=mask, **window)
    wrt = (x, w, off, b) + ((mask,) if mask is not None else ())
    return [g.numpy() for g in torch.autograd.grad(y, wrt, t(i["dy"]))]


def fold(x, image, block, **window):
    """Col2Im by torch's fold; integers through float64 (exact for these sums)."""
    wide = torch.from_numpy(x.astype(np.float64)) if x.dtype.kind == "i" else t(x)
    return F.fold(wide, image, block, **window).numpy()


def col2im_loops(x, image, block, strides, pads):
    """ONNX's Col2Im in any rank, one block element and place at a time (dilations 1)."""
    r = len(image)
    places = [(image[d] + pads[d] + pads[d + r] - block[d]) // strides[d] + 1 for d in range(r)]
    y = np.zeros((x.shape[0], x.shape[1] // int(np.prod(block))) + tuple(image), x.dtype)
    for n, c in np.ndindex(y.shape[:2]):
        for k, kk in enumerate(np.ndindex(*block)):
            for l, ll in enumerate(np.ndindex(*places)):
                pos = tuple(ll[d] * strides[d] - pads[d] + kk[d] for d in range(r))
                if all(0 <= pos[d] < image[d] for d in range(r)):
                    y[(n, c) + pos] += x[n, c * int(np.prod(block)) + k, l]
    return y


def as_reference(a):
    """a in torch: float64 for float32 and float64 cases (the verdict on fp32 is against float64),
    float32 for the 16-bit ones (the emulated reference)."""
    dtype = torch.float64 if KIND in ("float32", "float64") else torch.float32
    return torch.from_numpy(np.ascontiguousarray(a)).to(dtype)


def bicubic(i, align, **size):
    return F.interpolate(as_reference(i["x"]), mode="bicubic", align_corners=align, **size).numpy()


def bicubic_grad(i, align, **size):
    """ResizeGrad (cubic) by F.interpolate's autograd: dX of a forward over an X of the given shape."""
    x = torch.zeros(tuple(int(d) for d in i["shape"]), dtype=as_reference(i["dy"]).dtype, requires_grad=True)
    F.interpolate(x, mode="bicubic", align_corners=align, **size).backward(as_reference(i["dy"]))
    return x.grad.numpy()


def onnx_cubic(i, coord, A, exclude, sizes=None, scales=None):
    """ONNX's own Resize reference (onnx.backend.test.case.node.resize): numpy in float64 for every
    type (rounded once to the 16-bit types, as the kernel's fp64 sums are)."""
    from onnx.backend.test.case.node.resize import cubic_coeffs, interpolate_nd
    x = i["x"].astype(np.float64)
    return interpolate_nd(x, lambda r: cubic_coeffs(r, A), output_size=sizes,
                          scale_factors=None if scales is None else np.array(scales, np.float32).astype(np.float64),
                          coordinate_transformation_mode=coord, exclude_outside=exclude)


CASES.update({
    "resize_bicubic_x2": (lambda i: bicubic(i, False, scale_factor=2), None),
    "resize_bicubic_down": (lambda i: bicubic(i, False, size=(3, 4)), None),
    "resize_bicubic_corners": (lambda i: bicubic(i, True, size=(9, 11)), None),
    "resize_bicubic_x2_grad": (lambda i: bicubic_grad(i, False, scale_factor=2), None),
    "resize_bicubic_down_grad": (lambda i: bicubic_grad(i, False, size=(3, 4)), None),
    "resize_bicubic_corners_grad": (lambda i: bicubic_grad(i, True, size=(9, 11)), None),
    "resize_cubic_3d": (lambda i: onnx_cubic(i, "half_pixel", -0.75, False, sizes=[5, 6, 3]), None),
    "resize_cubic_asymmetric": (lambda i: onnx_cubic(i, "asymmetric", -0.75, False, scales=[1, 1, 1.5, 0.6]), None),
    "resize_cubic_exclude": (lambda i: onnx_cubic(i, "pytorch_half_pixel", -0.5, True, sizes=[1, 2, 7, 3]), None),
})

def grid_sample(i, mode, padding, align):
    x, grid = as_reference(i["x"]), as_reference(i["grid"])
    return F.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=bool(align)).numpy()


def grid_sample_grad(i, mode, padding, align):
    """GridSampleGrad's dX and dGrid by autograd, in float64 for every type: the kernel sums in fp64
    and rounds once."""
    dy, x, grid = [torch.from_numpy(np.ascontiguousarray(i[k])).to(torch.float64) for k in ("dy", "x", "grid")]
    x.requires_grad_()
    grid.requires_grad_()
    F.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=bool(align)).backward(dy)
    return [x.grad.numpy(), grid.grad.numpy()]


for _mode in ("bilinear", "nearest", "bicubic"):
    for _padding in ("zeros", "border", "reflection"):
        for _align in (0, 1):
            _name = "%s_%s_%d" % (_mode, _padding, _align)
            CASES["grid_sample_" + _name] = (lambda i, m=_mode, p=_padding, a=_align: grid_sample(i, m, p, a), None)
            CASES["grid_sample_grad_" + _name] = (lambda i, m=_mode, p=_padding, a=_align: grid_sample_grad(i, m, p, a),
                                                  "then_grid")


def unique(x, ordered=True, axis=None):
    """ONNX's Unique by numpy's: Y, first indices, inverse indices, counts; unsorted: by first appearance."""
    y, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=axis)
    inverse = inverse.reshape(-1)
    if not ordered:
        order = np.argsort(first, kind="stable")
        place = np.empty_like(order)
        place[order] = np.arange(len(order))
        y, first, counts, inverse = np.take(y, order, axis=axis or 0), first[order], counts[order], place[inverse]
    return [y, first.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64)]


def roi_align(i, size, scale, ratio, aligned):
    """ONNX's RoiAlign (mode avg) by torchvision.ops.roi_align; half_pixel is its aligned=True."""
    import torchvision
    boxes = torch.cat([t(i["b"].astype(i["rois"].dtype)).reshape(-1, 1), t(i["rois"])], 1)
    return torchvision.ops.roi_align(t(i["x"]), boxes, size, spatial_scale=scale, sampling_ratio=ratio, aligned=aligned).numpy()


def max_unpool(x, indices, shape):
    """ONNX's MaxUnpool: zeros with x written at its indices into the flattened output."""
    y = np.zeros(int(np.prod(shape)), x.dtype)
    y[indices.reshape(-1)] = x.reshape(-1)
    return y.reshape(shape)


def nms(boxes, scores, limit, iou, floor):
    """ONNX's NonMaxSuppression by torchvision.ops.nms per batch and class, over the boxes scoring
    above floor (corners in either order, as ONNX allows), at most limit per class."""
    import torchvision
    rows = []
    for b in range(boxes.shape[0]):
        corners = np.concatenate([np.minimum(boxes[b, :, :2], boxes[b, :, 2:]), np.maximum(boxes[b, :, :2], boxes[b, :, 2:])], 1)
        for c in range(scores.shape[1]):
            keep = np.nonzero(scores[b, c] > floor)[0]
            chosen = torchvision.ops.nms(t(corners[keep]), t(scores[b, c, keep]), iou).numpy()[:limit]
            rows += [[b, c, int(keep[k])] for k in chosen]
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


def reverse_sequence(x, lens, time_axis):
    """ONNX's ReverseSequence: per batch entry, its first lens[b] time steps reversed."""
    y = np.moveaxis(x.copy(), time_axis, 0)
    src = np.moveaxis(x, time_axis, 0)
    batch_axis = 1
    for b, n in enumerate(lens):
        idx = [slice(None)] * y.ndim
        idx[batch_axis] = b
        idx[0] = slice(0, int(n))
        sel = tuple(idx)
        y[sel] = src[sel][::-1]
    return np.moveaxis(y, 0, time_axis)


def hardmax(x, axis):
    """One-hot of numpy's argmax (the first largest) along axis."""
    idx = np.expand_dims(np.argmax(x, axis=axis), axis)
    y = np.zeros_like(x)
    np.put_along_axis(y, idx, 1, axis=axis)
    return y


def main():
    folder, names = sys.argv[1], sys.argv[2:]
    for name in names:
        inputs, kinds = load("%s/%s.in.npz" % (folder, name))
        base = name.rsplit("@", 1)[0]  # "add_bcast@float16": one reference, several storage types
        fn, out_kind = CASES[base]
        first = next(k for k in kinds.values() if k != "bool")  # Where: the type of X, not of the condition
        global KIND
        KIND = first
        with np.errstate(all="ignore"):
            outs = fn({k: f32(v) if v.dtype != np.bool_ and v.dtype.kind == "f" else v for k, v in inputs.items()})
        if not isinstance(outs, list):
            outs = [outs]
        arrays = {}
        for k, o in enumerate(outs):
            if isinstance(o, torch.Tensor):
                o = o.numpy()
            kind = out_kind or first
            if out_kind == "then_int64":  # TopK, Unique: values in the input's type, then int64 indices
                kind = first if k == 0 else "int64"
            elif out_kind == "then_grid":  # GridSampleGrad: dX in X's type, dGrid in the grid's
                kind = first if k == 0 else kinds["grid"]
            elif out_kind == "typed":  # the integer ops: each output in the type the reference made
                kind = str(np.asarray(o).dtype)
            if out_kind == "stats":  # LayerNorm: Y in the input's type, Mean / InvStdDev in float32 (or 64)
                kind = first if k == 0 else ("float64" if first == "float64" else "float32")
            if kind == "bool":
                arrays["y%s" % (k or "")] = np.asarray(o, dtype=np.bool_)
                continue
            suffix, a = round_to(o, kind)
            arrays["y%s%s" % (k or "", suffix)] = a
        np.savez("%s/%s.ref.npz" % (folder, name), **arrays)


if __name__ == "__main__":
    main()
