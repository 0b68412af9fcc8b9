#!/bin/sh
# Fashion-MNIST with amp-train: the models/ CNN trained in fp32 and in fp16 (dynamic loss scaling,
# fp32 master weights) with the same seed and settings, side by side (--compare-fp32), and test
# accuracy after each epoch; the loss curves of both runs are drawn in fashion_mnist_DTYPE.svg,
# beside the metrics. Takes minutes per epoch on a few CPU cores; the CI tests train for a handful
# of steps only.
#
#   models/train_fashion_mnist.sh [BUILD_DIR] [EPOCHS] [DTYPE]     (defaults: build 2 fp16)
set -e
build=${1:-build}
epochs=${2:-2}
dtype=${3:-fp16}
data=/usr/share/datasets/fashion-mnist
here=$(dirname "$0")
"$build/amp-train" "$here/cnn.train.onnx" \
  --data "$data/train-images-idx3-ubyte.gz" --val "$data/t10k-images-idx3-ubyte.gz" \
  --loss cross_entropy --epochs "$epochs" --batch-size 128 \
  --optimizer adamw --lr 0.003 --weight-decay 0.01 --schedule cosine --warmup 50 \
  --dtype "$dtype" --seed 0 --compare-fp32 \
  --metrics "fashion_mnist_$dtype.jsonl" --save "fashion_mnist_cnn_$dtype.onnx"
