"""Reference conversions for half_test: numpy for fp16, torch for bf16 (numpy has no bfloat16).

Writes three little-endian arrays into OUT_DIR:
  f32_inputs.bin  float32 probes: every 16-bit pattern widened (both formats), every midpoint
                  between neighbours (the ties), the midpoints +-1 ulp, overflow edges, NaNs
  fp16_bits.bin   uint16 numpy float16 of each probe
  bf16_bits.bin   uint16 torch bfloat16 of each probe
  fp16_to_f32.bin float32 numpy widening of all 65536 fp16 patterns
"""
import sys

import numpy as np
import torch

out = sys.argv[1]
bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
f16_values = bits.view(np.float16).astype(np.float32)
bf16_values = (bits.astype(np.uint32) << 16).view(np.float32)

probes = [f16_values, bf16_values]
for vals in (f16_values, bf16_values):
    finite = np.sort(np.unique(vals[np.isfinite(vals)]))
    mids = ((finite[:-1].astype(np.float64) + finite[1:].astype(np.float64)) / 2).astype(np.float32)
    probes += [mids, np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(-np.inf))]
edges = np.array([65504, 65519.996, 65520, 65536, 1e9, -65520, 3.4e38, np.inf, -np.inf, 5.96e-8, 2.98e-8,
                  2.9802322e-08, 1e-45, -0.0, 0.0], dtype=np.float32)
nans = np.array([0x7fc00000, 0x7f800001, 0xffc00001, 0x7fbfffff], dtype=np.uint32).view(np.float32)
rng = np.random.RandomState(0)
rand = (rng.randint(0, 2**32, size=200000, dtype=np.uint64).astype(np.uint32)).view(np.float32)
x = np.concatenate(probes + [edges, nans, rand]).astype(np.float32)

with np.errstate(over="ignore", invalid="ignore"):
    f16 = x.astype(np.float16).view(np.uint16)
bf16 = torch.from_numpy(x.copy()).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)

x.tofile(f"{out}/f32_inputs.bin")
f16.tofile(f"{out}/fp16_bits.bin")
bf16.tofile(f"{out}/bf16_bits.bin")
f16_values.tofile(f"{out}/fp16_to_f32.bin")
