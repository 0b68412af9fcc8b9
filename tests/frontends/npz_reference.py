#!/usr/bin/python3
"""numpy's side of npz_test.cc and amp_run_test.cc.

    npz_reference.py write DIR    # .npz files written by numpy for the C++ reader
    npz_reference.py check FILE   # checks an .npz written by the C++ writer; exit 1 on a mismatch

Both sides build the same arrays: values (k * 7 % 23) - 11 (unsigned: k * 7 % 23) for k = 0.. in
C order, shape (2, 3, 4), one array per dtype; plus a scalar, an empty array and a bf16 array
under the ".bf16" key convention (uint16 bits of 0.5 * value).
"""
import sys

import numpy as np

DTYPES = ["float32", "float16", "float64", "int64", "int32", "int16", "int8", "uint8", "uint16", "uint32",
          "uint64", "bool"]


def values(dtype, shape=(2, 3, 4)):
    k = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    v = k * 7 % 23
    if dtype == "bool":
        return (v % 2).astype(np.bool_)
    if not np.dtype(dtype).kind == "u":
        v = v - 11
    return v.astype(dtype)


def arrays():
    out = {d: values(d) for d in DTYPES}
    out["scalar"] = np.array(3.25, dtype=np.float32)
    out["empty"] = np.zeros((0, 3), dtype=np.float32)
    f = (values("float32") * 0.5).astype(np.float32)
    out["half_steps.bf16"] = (f.view(np.uint32) >> 16).astype(np.uint16)  # exact: few mantissa bits
    return out


def main():
    if sys.argv[1] == "write":
        folder = sys.argv[2]
        np.savez(folder + "/py_stored.npz", **arrays())
        np.savez_compressed(folder + "/py_deflated.npz", **arrays())
        x = np.random.RandomState(0).rand(4, 1, 28, 28).astype(np.float32)
        np.savez(folder + "/fortran.npz", input=np.asfortranarray(x.reshape(4, 28, 28).transpose(2, 1, 0)))
        np.savez(folder + "/float64.npz", input=x.astype(np.float64))
        np.savez(folder + "/wrong_key.npz", image=x)
        np.savez(folder + "/big_endian.npz", input=x.astype(">f4"))
        return
    with np.load(sys.argv[2]) as z:
        want = arrays()
        if sorted(z.files) != sorted(want):
            print("keys", sorted(z.files), "expected", sorted(want))
            sys.exit(1)
        for key, w in want.items():
            got = z[key]
            if got.dtype != w.dtype or got.shape != w.shape or not np.array_equal(got, w):
                print("array", key, got.dtype, got.shape, "expected", w.dtype, w.shape)
                sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
