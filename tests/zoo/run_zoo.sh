#!/bin/sh
# The model zoo against PyTorch (tests/zoo/zoo_check.py): one Markdown table of every model,
# its parameters, each check's result and the seconds it took.
#
#   tests/zoo/run_zoo.sh BUILD [--dtypes] [--amp] [--results FILE] [--part N | MODEL...]
#
# --dtypes adds the bf16 and fp16 one-step columns (reported, not judged); --amp the eval export's
# forward, the fp16 and bf16 rewrites, memory, fp16/bf16 training and the CUDA plan
# (zoo_check.py's AMP_CHECKS). --results appends each model's cells to FILE as a JSON line
# (tests/zoo/zoo_table.py FILE... makes the README's table of them). --part N runs the Nth of
# PARTS below: the whole zoo takes about ten hours on 2 cores, so it is run in parts.
# Without MODELs or --part: every model in scope (ZOO below, the four parts). Needs /usr/bin/python3 with torch, torchvision, onnx
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
part=""
while :; do
  case "${1:-}" in
    --dtypes|--amp) opts="$opts $1"; shift ;;
    --results) opts="$opts --results $2"; shift 2 ;;
    --part) part=$2; shift 2 ;;
    *) break ;;
  esac
done
# Every torchvision 0.14 classification model with at most 100M parameters at 10 classes, plus VGG
# (128.8M-139.6M; the issue names it), and the transformers built from torch modules. Out of scope:
#   over 100M parameters: convnext_large (196.2M), efficientnet_v2_l (117.2M), regnet_x_32gf
#     (105.3M), regnet_y_32gf (141.4M), regnet_y_128gf (637.5M), vit_l_16 (303.3M), vit_l_32
#     (305.5M), vit_h_14 (630.8M), wide_resnet101_2 (124.9M);
#   not exportable by torch 1.13: swin_v2_t, swin_v2_s, swin_v2_b ("Exporting the operator
#     'aten::zero' to ONNX opset version 14 is not supported").
# The zoo in four parts of a few hours each on 2 cores (the seconds of the last full run): the
# small and mid-sized CNNs; the large CNNs; the VGGs (15-25 minutes each at 224x224); the
# transformers.
PART1="resnet18 resnet34 resnet50 resnext50_32x4d wide_resnet50_2 mobilenet_v2 mobilenet_v3_small mobilenet_v3_large
mnasnet0_5 mnasnet0_75 mnasnet1_0 mnasnet1_3 shufflenet_v2_x0_5 shufflenet_v2_x1_0 shufflenet_v2_x1_5 shufflenet_v2_x2_0
squeezenet1_0 squeezenet1_1 googlenet inception_v3 densenet121 densenet169 efficientnet_b0 efficientnet_b1
efficientnet_b2 efficientnet_b3 regnet_x_400mf regnet_x_800mf regnet_x_1_6gf regnet_y_400mf regnet_y_800mf
regnet_y_1_6gf convnext_tiny alexnet tiny_unet"
PART2="resnet101 resnet152 resnext101_32x8d resnext101_64x4d densenet161 densenet201 efficientnet_b4 efficientnet_b5
efficientnet_b6 efficientnet_b7 efficientnet_v2_s efficientnet_v2_m regnet_x_3_2gf regnet_x_8gf regnet_x_16gf
regnet_y_3_2gf regnet_y_8gf regnet_y_16gf convnext_small convnext_base"
PART3="vgg11 vgg11_bn vgg13 vgg13_bn vgg16 vgg16_bn vgg19 vgg19_bn"
PART4="tiny_transformer tiny_gpt tiny_attention tiny_encoder swin_t swin_s swin_b vit_b_16 vit_b_32 maxvit_t"
ZOO="$PART1 $PART2 $PART3 $PART4"
if [ -n "$part" ]; then
  case "$part" in
    1) set -- $PART1 ;;
    2) set -- $PART2 ;;
    3) set -- $PART3 ;;
    4) set -- $PART4 ;;
    *) echo "$0: --part takes 1 to 4" >&2; exit 2 ;;
  esac
elif [ $# -eq 0 ]; then
  # shellcheck disable=SC2086
  set -- $ZOO
fi
exec /usr/bin/python3 "$here/zoo_check.py" --build "$build" --table $opts "$@"
