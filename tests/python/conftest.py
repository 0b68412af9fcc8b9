"""What the onnx_amp tests share: the build under test (AMP_BUILD_DIR, which CTest sets; else
build/), its commands, the models/ files, and ONNX Runtime through node (tests/ort).

The package is imported from AMP_BUILD_DIR/python: a test run never picks up another build's
onnx_amp (an installed .pth names one), and fails when this build has none."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("AMP_BUILD_DIR", os.path.join(ROOT, "build")))
MODELS = os.path.join(ROOT, "models")
sys.path.insert(0, os.path.join(BUILD, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))

import onnx_amp  # noqa: E402  (fails the run when this build has no package)

assert os.path.dirname(onnx_amp.__file__) == os.path.join(BUILD, "python", "onnx_amp"), (
    "onnx_amp imported from %s, not from the build under test %s" % (onnx_amp.__file__, BUILD))


def tool(name, *args, env=None):
    """Runs BUILD/name with args: (exit code, stdout, stderr)."""
    r = subprocess.run([os.path.join(BUILD, name)] + [str(a) for a in args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, env=env)
    return r.returncode, r.stdout, r.stderr


def error_line(stderr, command):
    """The message of the "<command>: error: <message>" line a command printed."""
    prefix = command + ": error: "
    lines = [l for l in stderr.splitlines() if l.startswith(prefix)]
    assert len(lines) == 1, stderr
    return lines[0][len(prefix):]


def model(name):
    return os.path.join(MODELS, name)


@pytest.fixture
def work(tmp_path):
    return str(tmp_path)
