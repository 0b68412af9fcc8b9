#!/usr/bin/python3
"""How close to float64 any fp32 training can get on a zoo model: the floor under the zoo's bounds.

    /usr/bin/python3 tests/zoo/fp32_floor.py [--size 64] MODEL...

For each MODEL, built and batched as zoo_reference.py builds them (seed 0, batch 4), one Markdown
row with the error of the first step's gradient (largest difference of any parameter's gradient
over the largest gradient element, zoo_check's sgd measure; every run takes float64's own
ReLU/Clip/MaxPool decisions, zoo_reference.Decisions, so no kink flips) and of the eval forward
(BatchNorm calibrated as zoo_reference.export_eval does; max|diff| over max|output|), each against
torch float64, for three ways of computing:

  torch fp32         torch's own fp32 run;
  fp32 storage       every op computed in float64 and its result rounded to fp32, and every
                     gradient reaching an op's result rounded to fp32 too: what an fp32
                     implementation with exact arithmetic inside each op would get, the floor for
                     any trainer that keeps its activations and gradients in fp32;
  + fp32 convs       the same, with the convolutions (forward and backward) computed by torch in
                     fp32: what the convolutions' fp32 accumulation adds.

The zoo's bounds (2e-4 of the largest update, 1e-4 of the largest output) hold for every model
whose floor is below them; the deep ResNets' rows show what keeps them out (README, model zoo).
"""
import argparse
import contextlib
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo_check  # noqa: E402
import zoo_reference as zr  # noqa: E402


class RoundGrad(torch.autograd.Function):
    """Rounds a float64 value to fp32 and the gradient reaching it to fp32."""

    @staticmethod
    def forward(ctx, t):
        return t.float().double()

    @staticmethod
    def backward(ctx, g):
        return g.float().double()


class InFp32(torch.autograd.Function):
    """fn(*tensors) computed by torch in fp32, forward and backward, as float64 values."""

    @staticmethod
    def forward(ctx, fn, *ts):
        ctx.ins = [t.detach().float().requires_grad_(t.requires_grad) if isinstance(t, torch.Tensor) else t
                   for t in ts]
        with torch.enable_grad():
            ctx.out = fn(*ctx.ins)
        return ctx.out.detach().double()

    @staticmethod
    def backward(ctx, g):
        need = [t for t in ctx.ins if isinstance(t, torch.Tensor) and t.requires_grad]
        got = iter(torch.autograd.grad(ctx.out, need, g.float(), allow_unused=True)) if need else iter(())
        grads = [None]  # fn
        for t in ctx.ins:
            v = next(got) if isinstance(t, torch.Tensor) and t.requires_grad else None
            grads.append(None if v is None else v.double())
        return tuple(grads)


class Fp32Storage(torch.overrides.TorchFunctionMode):
    """Every torch function's float64 result rounded to fp32 (RoundGrad), in-place ones in place;
    with fp32_convs, F.conv2d computed in fp32 (InFp32)."""

    def __init__(self, fp32_convs=False):
        super().__init__()
        self.fp32_convs = fp32_convs

    def round(self, r):
        if isinstance(r, torch.Tensor) and r.dtype == torch.float64:
            return RoundGrad.apply(r) if r.requires_grad else r.float().double()
        if isinstance(r, (tuple, list)) and not hasattr(r, "_fields"):
            return type(r)(self.round(v) for v in r)
        return r

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.conv2d and self.fp32_convs:
            a = list(args) + [None] * (7 - len(args))
            x, w, b = a[0], a[1], kwargs.get("bias", a[2])
            rest = [kwargs.get(k, a[i] if a[i] is not None else d)
                    for k, i, d in (("stride", 3, 1), ("padding", 4, 0), ("dilation", 5, 1), ("groups", 6, 1))]
            if b is None:
                return self.round(InFp32.apply(lambda X, W: F.conv2d(X, W, None, *rest), x, w))
            return self.round(InFp32.apply(lambda X, W, B: F.conv2d(X, W, B, *rest), x, w, b))
        r = func(*args, **kwargs)
        if args and r is args[0] and isinstance(r, torch.Tensor) and r.dtype == torch.float64:
            with torch.no_grad():
                r.copy_(r.float().double())
            return r
        return self.round(r)


class Record(zr.Decisions):
    """float64's own inputs to every ReLU/Clip/MaxPool call, for Decisions to replay."""

    def __init__(self):
        super().__init__(None)
        self.inputs = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is F.max_pool2d or func in self.KINKS or func is F.hardtanh:
            self.inputs.append(args[0].detach().double().numpy().copy())
        return super().__torch_function__(func, types, args, kwargs)


def floor(name, size):
    torch.manual_seed(0)
    model = zr.build(name)
    model.train()
    init = {k: v.detach().clone() for k, v in model.state_dict().items()}
    x, y = [t[:4] for t in zr.make_data(name, 4, size, torch.Generator().manual_seed(1))]

    model.double()
    record = Record()
    with torch.no_grad(), record:
        model(x.double())

    def gradient(dtype, mode=None):
        model.load_state_dict(init)
        model.to(dtype)
        model.zero_grad()
        with (mode or contextlib.nullcontext()), zr.Decisions(record.inputs):
            loss = zr.loss_of(model(x.to(dtype)), y)
        loss.backward()
        return {k: p.grad.double().clone() for k, p in model.named_parameters()}

    g64 = gradient(torch.float64)
    largest = max(float(v.abs().max()) for v in g64.values())
    grad = [max(float((g[k] - g64[k]).abs().max()) for k in g64) / largest
            for g in (gradient(torch.float32), gradient(torch.float64, Fp32Storage()),
                      gradient(torch.float64, Fp32Storage(fp32_convs=True)))]

    # The eval forward, BatchNorm statistics calibrated as zoo_reference.export_eval does.
    model.load_state_dict(init)
    model.float()
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None
    with torch.no_grad():
        if norms:
            model.train()
            model(torch.randn(zr.CALIBRATION, 3, size, size, generator=torch.Generator().manual_seed(2)))
        model.eval()
        o32 = model(x).double()
        model.double()
        o64 = model(x.double())
        with Fp32Storage():
            o_storage = model(x.double())
        with Fp32Storage(fp32_convs=True):
            o_convs = model(x.double())
    scale = float(o64.abs().max())
    forward = [float((o - o64).abs().max()) / scale for o in (o32, o_storage, o_convs)]
    return grad, forward


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("models", nargs="+")
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    print("| model | gradient: torch fp32 | fp32 storage | + fp32 convs | forward: torch fp32 | fp32 storage | + fp32 convs |")
    print("|---|---|---|---|---|---|---|")
    for name in a.models:
        size = max(a.size, zoo_check.MIN_SIZE.get(name, 0))
        grad, forward = floor(name, size)
        print("| %s%s | %s |" % (name, "" if size == 64 else " (%d×%d)" % (size, size),
                                 " | ".join("%.1e" % v for v in grad + forward)), flush=True)


if __name__ == "__main__":
    main()
