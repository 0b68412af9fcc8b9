#!/usr/bin/env python3
"""The CUDA libraries this machine's executables load, against the versions the GPU kit was built
with: run by gpu_run.sh with the executables' LD_LIBRARY_PATH, before any test.

Each library is opened by the soname the executables link (so the one the loader would pick) and
asked for its version: cudaDriverGetVersion (the CUDA version the driver supports; 0 without a
driver) and cudaRuntimeGetVersion from cudart, cublasLtGetVersion, cudnnGetVersion, nvrtcVersion.
A library of an older major.minor version than the build's headers may lack what the build calls
or answer differently: cuDNN's documentation (Compatibility, "cuDNN API Compatibility") promises
that a minor release runs applications built against the same or an earlier minor release, and
that patch releases of one minor release are interchangeable; a CUDA 13 runtime needs a driver for
CUDA 13. So patch levels are not compared. Prints one line per library and exits 1 with one line
per library that is older, naming the file it loaded; a machine without a driver is reported, not
failed (the GPU tests skip there).

BUILD_VERSIONS has lines "NAME VERSION" in each library's own encoding: driver and cudart
1000 * major + 10 * minor (13000), cublasLt 10000 * major + 100 * minor + patch (130100), cudnn
10000 * major + 100 * minor + patch (91900), nvrtc 1000 * major + 10 * minor (13000).
CUDA_VERSIONS_FAKE="cudnn=91000,driver=12080" replaces what the libraries answer, to check this
script on a machine without those libraries.

Usage: cuda_versions.py BUILD_VERSIONS
"""
import ctypes
import os
import sys

SONAMES = {"cudart": "libcudart.so.13", "cublasLt": "libcublasLt.so.13", "cudnn": "libcudnn.so.9",
           "nvrtc": "libnvrtc.so.13"}


def major_minor(name, v):
    """The version without its patch level."""
    return v // 100 if name in ("cublasLt", "cudnn") else v // 10


def readable(name, v):
    if v is None:
        return "?"
    if name in ("driver", "cudart", "nvrtc"):
        return f"{v // 1000}.{v % 1000 // 10}" if v else "none"
    return f"{v // 10000}.{v % 10000 // 100}.{v % 100}"


def loaded_path(soname):
    """The file the loader mapped for soname in this process."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if os.path.basename(path).startswith(soname.split(".so")[0] + ".so"):
                return os.path.realpath(path)
    return "?"


def query():
    found, where = {}, {}
    rt = ctypes.CDLL(SONAMES["cudart"])
    v = ctypes.c_int(0)
    found["driver"] = v.value if rt.cudaDriverGetVersion(ctypes.byref(v)) == 0 else 0
    found["cudart"] = v.value if rt.cudaRuntimeGetVersion(ctypes.byref(v)) == 0 else None
    lt = ctypes.CDLL(SONAMES["cublasLt"])
    lt.cublasLtGetVersion.restype = ctypes.c_size_t
    found["cublasLt"] = lt.cublasLtGetVersion()
    dnn = ctypes.CDLL(SONAMES["cudnn"])
    dnn.cudnnGetVersion.restype = ctypes.c_size_t
    found["cudnn"] = dnn.cudnnGetVersion()
    nv = ctypes.CDLL(SONAMES["nvrtc"])
    major, minor = ctypes.c_int(0), ctypes.c_int(0)
    found["nvrtc"] = major.value * 1000 + minor.value * 10 if nv.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) == 0 else None
    for name, soname in SONAMES.items():
        where[name] = loaded_path(soname)
    where["driver"] = loaded_path("libcuda.so.1") if found["driver"] else "no driver"
    return found, where


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    built = {}
    for line in open(sys.argv[1]):
        if line.strip():
            name, version = line.split()
            built[name] = int(version)
    fake = os.environ.get("CUDA_VERSIONS_FAKE", "")
    if fake:
        found = {name: None for name in built}
        where = {name: "(CUDA_VERSIONS_FAKE)" for name in built}
        for item in fake.split(","):
            name, version = item.split("=")
            found[name] = int(version)
    else:
        found, where = query()
    older = []
    for name in ("driver", "cudart", "cublasLt", "cudnn", "nvrtc"):
        b, f = built.get(name), found.get(name)
        ok = f is not None and b is not None and (major_minor(name, f) >= major_minor(name, b) or (name == "driver" and f == 0))
        print(f"   {name:9} {readable(name, f):>8} (built with {readable(name, b)})  {where.get(name, '?')}"
              f"{'' if ok else '  OLDER'}")
        if not ok:
            older.append(f"{name} {readable(name, f)} at {where.get(name, '?')} is older than the {readable(name, b)} "
                         "the GPU kit was built with" + (": put a newer one in a folder searched before it (see the search path above)"
                                                         if name != "driver" else ": this machine's driver is too old"))
    for o in older:
        print(f"FAIL: {o}")
    sys.exit(1 if older else 0)


if __name__ == "__main__":
    main()
