#!/bin/sh
# The model zoo against PyTorch (tests/zoo/zoo_check.py): one Markdown table of every model,
# its parameters, each check's result and the seconds it took.
#
#   tests/zoo/run_zoo.sh BUILD [--dtypes] [--amp] [MODEL...]
#
# --dtypes adds the bf16 and fp16 one-step columns (reported, not judged); --amp the eval export's
# forward, the fp16 and bf16 rewrites, memory and fp16/bf16 training (zoo_check.py's AMP_CHECKS).
# Without MODELs: every torchvision 0.14 classification model this harness covers (ZOO below) and
# the transformers built from torch modules (zoo_reference.py EXTRA). Needs /usr/bin/python3 with torch, torchvision, onnx
# (Debian python3-torch, python3-torchvision, python3-onnx) and BUILD/amp-train, BUILD/amp-run.
# Exports go to BUILD/zoo, each model's removed after its checks (zoo_check.py --keep keeps them).
# Exits non-zero when a check fails.
set -eu
if [ $# -lt 1 ]; then
  echo "usage: $0 BUILD [MODEL...]" >&2
  exit 2
fi
build=$1
shift
here=$(dirname "$0")
opts=""
while [ "${1:-}" = "--dtypes" ] || [ "${1:-}" = "--amp" ]; do
  opts="$opts $1"
  shift
done
ZOO="resnet18 resnet34 resnet50 resnext50_32x4d wide_resnet50_2 mobilenet_v2 mobilenet_v3_small mobilenet_v3_large
mnasnet0_5 mnasnet1_0 shufflenet_v2_x0_5 shufflenet_v2_x1_0 squeezenet1_0 squeezenet1_1 googlenet densenet121
efficientnet_b0 efficientnet_b1 efficientnet_v2_s regnet_y_400mf regnet_x_400mf convnext_tiny alexnet
inception_v3 vit_b_16 swin_t maxvit_t mnasnet0_75 mnasnet1_3 shufflenet_v2_x1_5 shufflenet_v2_x2_0 regnet_y_800mf
regnet_x_800mf efficientnet_b2 efficientnet_b3 densenet169 resnet101 tiny_transformer tiny_gpt tiny_attention tiny_encoder"
if [ $# -eq 0 ]; then
  # shellcheck disable=SC2086
  set -- $ZOO
fi
exec /usr/bin/python3 "$here/zoo_check.py" --build "$build" --table $opts "$@"
