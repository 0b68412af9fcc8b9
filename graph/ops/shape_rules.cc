#include "graph/ops/shape_rules.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <utility>

#include "graph/amp_ops.h"
#include "graph/error.h"
#include "graph/graph.h"
#include "graph/ops/conv_transpose.h"
#include "graph/ops/einsum.h"
#include "graph/ops/elementwise_ops.h"
#include "graph/ops/pad.h"
#include "graph/ops/resize.h"
#include "graph/ops/window.h"

namespace amp {

TensorFacts TensorFacts::of(DType t, const std::vector<int64_t>& dims) {
  TensorFacts f;
  f.dtype = t;
  f.shape = Shape::of(dims);
  return f;
}

std::optional<std::vector<int64_t>> TensorFacts::dims() const {
  return shape ? shape->static_dims() : std::nullopt;
}

const TensorFacts& ShapeQuery::input(size_t i) const {
  if (!has(i)) throw InputError("input " + std::to_string(i) + " is missing");
  return *in[i];
}

std::optional<std::vector<int64_t>> ShapeQuery::ints(size_t i) const {
  if (!has(i) || !in[i]->value) return std::nullopt;
  const Tensor& t = *in[i]->value;
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  if (t.dtype == DType::kInt64)
    std::copy(t.as<int64_t>(), t.as<int64_t>() + v.size(), v.begin());
  else if (t.dtype == DType::kInt32)
    std::copy(t.as<int32_t>(), t.as<int32_t>() + v.size(), v.begin());
  else
    throw InputError("expected an int64 or int32 shape input, got " + std::string(dtype_name(t.dtype)));
  return v;
}

namespace {

// ---- pieces the rules share

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}
std::string shape_text(const std::optional<Shape>& s) { return s ? s->str() : "[?]"; }

Dim unknown() { return Dim{}; }
Dim known(int64_t v) { return Dim::fixed(v); }
Shape unknown_dims(size_t rank) { return Shape{std::vector<Dim>(rank)}; }

int64_t rank_of(const TensorFacts& f) { return f.shape ? static_cast<int64_t>(f.shape->rank()) : -1; }

// The product of dims [from, to), when all are known.
std::optional<int64_t> product(const std::vector<Dim>& dims, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t n = 1;
  for (size_t i = from; i < std::min(to, dims.size()); ++i) {
    if (!dims[i].value) return std::nullopt;
    n *= *dims[i].value;
  }
  return n;
}
std::optional<int64_t> numel(const TensorFacts& f) {
  return f.shape ? product(f.shape->dims) : std::nullopt;
}

// An axis in [-rank, rank - 1]: a scalar has none (rules index the dims with it).
int64_t normalize_axis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    throw InputError("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

// Sets output k (when the node has it): the type unless unknown here, and the shape.
void put(ShapeQuery& q, size_t k, DType t, std::optional<Shape> s) {
  if (k >= q.out.size()) return;
  if (t != DType::kUndefined) q.out[k].dtype = t;
  q.out[k].shape = std::move(s);
}
void put_like(ShapeQuery& q, size_t k, const TensorFacts& f) { put(q, k, f.dtype, f.shape); }

// The known element types of inputs [0, n) must agree.
void require_same_types(const ShapeQuery& q, size_t n, const char* what = "inputs") {
  DType first = DType::kUndefined;
  for (size_t i = 0; i < n; ++i) {
    if (!q.has(i) || q.in[i]->dtype == DType::kUndefined) continue;
    if (first == DType::kUndefined) first = q.in[i]->dtype;
    else if (q.in[i]->dtype != first)
      throw InputError(std::string(what) + " have different element types (" + std::string(dtype_name(first)) + " and " +
                       std::string(dtype_name(q.in[i]->dtype)) + ")");
  }
}

// Rules written as a lambda of (query) that reads no attributes.
template <void (*F)(ShapeQuery&)>
ShapeFn plain(const Node&, int64_t) {
  return F;
}

// ---- the elementwise forms (the op table's rows)

ShapeFn elementwise_rule(const Node& n, int64_t) {
  const std::vector<ElemOp> rows = elem_ops_of(n.domain(), n.op_type());
  const ElemForm form = elem_op_info(rows.at(0)).form;
  const DType cast_to = form == ElemForm::kCast ? static_cast<DType>(n.attr_int("to", 0)) : DType::kUndefined;
  return [form, cast_to](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    std::vector<const std::optional<Shape>*> all;
    for (const TensorFacts* f : q.in)
      if (f) all.push_back(&f->shape);
    switch (form) {
      case ElemForm::kMap:
      case ElemForm::kCopy:
        put_like(q, 0, x);
        return;
      case ElemForm::kCast:
        put(q, 0, cast_to, x.shape);
        return;
      case ElemForm::kZip:
      case ElemForm::kFold:
        require_same_types(q, q.in.size());
        put(q, 0, x.dtype, broadcast_shapes(all));
        return;
      case ElemForm::kCompare:
        require_same_types(q, q.in.size());
        put(q, 0, DType::kBool, broadcast_shapes(all));
        return;
      case ElemForm::kPower:
        put(q, 0, x.dtype, broadcast_shapes(all));
        return;
      case ElemForm::kSelect: {
        if (x.dtype != DType::kUndefined && x.dtype != DType::kBool) throw InputError("condition must be bool");
        const TensorFacts &a = q.input(1), &b = q.input(2);
        if (a.dtype != DType::kUndefined && b.dtype != DType::kUndefined && a.dtype != b.dtype)
          throw InputError("X and Y have different element types");
        put(q, 0, a.dtype, broadcast_shapes(all));
        return;
      }
      case ElemForm::kClamp:
        require_same_types(q, q.in.size());
        for (size_t i = 1; i < 3; ++i)
          if (q.has(i) && numel(*q.in[i]) && *numel(*q.in[i]) != 1) throw InputError("min and max must be scalars");
        put_like(q, 0, x);
        return;
      case ElemForm::kLeaf:
        break;
    }
  };
}

// ---- same shape as an input

// Mean: one or more operands of one type, broadcast; BitShift, BitwiseAnd, Or, Xor: two.
void broadcast_same_type(ShapeQuery& q) {
  require_same_types(q, q.in.size());
  std::vector<const std::optional<Shape>*> all;
  for (const TensorFacts* f : q.in)
    if (f) all.push_back(&f->shape);
  put(q, 0, q.input(0).dtype, broadcast_shapes(all));
}

// CastLike(x, target_type): x's shape in target_type's element type.
void cast_like(ShapeQuery& q) { put(q, 0, q.input(1).dtype, q.input(0).shape); }

// IsNaN, IsInf: bool, the input's shape.
void float_class(ShapeQuery& q) { put(q, 0, DType::kBool, q.input(0).shape); }

void dropout(ShapeQuery& q) {
  put_like(q, 0, q.input(0));
  put(q, 1, DType::kBool, q.input(0).shape);
}

ShapeFn softmax_rule(const Node& n, int64_t opset) {
  const int64_t axis = n.attr_int("axis", opset < 13 ? 1 : -1);
  return [axis](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    if (x.shape) normalize_axis(axis, rank_of(x));
    put_like(q, 0, x);
  };
}

ShapeFn layer_norm_rule(const Node& n, int64_t) {
  const int64_t axis_attr = n.attr_int("axis", -1);
  return [axis_attr](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    require_same_types(q, 3, "LayerNormalization inputs");
    put_like(q, 0, x);
    if (!x.shape) return;
    const size_t axis = static_cast<size_t>(normalize_axis(axis_attr, rank_of(x)));
    const std::optional<int64_t> d = product(x.shape->dims, axis);
    for (size_t i = 1; i < 3; ++i)
      if (d && q.has(i) && numel(*q.in[i]) && *numel(*q.in[i]) != *d)
        throw InputError("LayerNormalization Scale and B must have " + std::to_string(*d) + " elements");
    Shape stats = *x.shape;
    std::fill(stats.dims.begin() + static_cast<long>(axis), stats.dims.end(), known(1));
    for (size_t k = 1; k < 3 && k < q.out.size(); ++k) {
      // Mean and InvStdDev: the declared type, else fp32 (fp64 for double inputs).
      const DType t = q.out[k].dtype != DType::kUndefined ? q.out[k].dtype
                      : x.dtype == DType::kDouble       ? DType::kDouble
                                                        : DType::kFloat;
      put(q, k, t, stats);
    }
  };
}

void batch_norm(ShapeQuery& q) {
  const TensorFacts& x = q.input(0);
  if (x.shape && rank_of(x) < 2) throw InputError("BatchNormalization needs [N,C,...], X is " + shape_text(x.shape));
  const Dim c = x.shape ? x.shape->dims[1] : unknown();
  for (size_t i = 1; i < 5 && c.value; ++i)
    if (q.has(i) && numel(*q.in[i]) && numel(*q.in[i]) != c.value)
      throw InputError("BatchNormalization input " + std::to_string(i) + " must have C = " + std::to_string(*c.value) +
                       " elements");
  put_like(q, 0, x);
  for (size_t k = 1; k < 3; ++k)
    if (q.has(k + 2)) put_like(q, k, *q.in[k + 2]);
}

void instance_norm(ShapeQuery& q) {
  const TensorFacts& x = q.input(0);
  if (x.shape && rank_of(x) < 2) throw InputError("InstanceNormalization needs [N,C,...], X is " + shape_text(x.shape));
  require_same_types(q, 3, "InstanceNormalization inputs");
  const Dim c = x.shape ? x.shape->dims[1] : unknown();
  for (size_t i = 1; i < 3 && c.value; ++i)
    if (q.has(i) && numel(*q.in[i]) && numel(*q.in[i]) != c.value)
      throw InputError("InstanceNormalization input " + std::to_string(i) + " must have C = " + std::to_string(*c.value) +
                       " elements");
  put_like(q, 0, x);
}

// MeanVarianceNormalization: Y like X; the axes (default [0, 2, 3]) must lie within X's rank.
ShapeFn mean_variance_norm_rule(const Node& n, int64_t) {
  const std::vector<int64_t> axes = n.attr_ints("axes", {0, 2, 3});
  return [axes](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    if (x.shape)
      for (int64_t a : axes) normalize_axis(a, rank_of(x));
    put_like(q, 0, x);
  };
}

void trilu(ShapeQuery& q) {
  const TensorFacts& x = q.input(0);
  if (x.shape && rank_of(x) < 2) throw InputError("Trilu needs rank >= 2");
  put_like(q, 0, x);
}

// ai.onnx_amp Attention: Q [..., Tq, d], K [..., Tk, d], V [..., Tk, dv] of one type and equal
// leading dims -> Y [..., Tq, dv] of that type and LSE [..., Tq] in fp32 (fp64 for fp64); the
// mask broadcasts to the scores [..., Tq, Tk].
void attention(ShapeQuery& q) {
  require_same_types(q, 3, "Attention's Q, K and V");
  const TensorFacts &query = q.input(0), &key = q.input(1), &value = q.input(2);
  const DType lse = query.dtype == DType::kDouble ? DType::kDouble : DType::kFloat;
  if (q.has(3) && q.input(3).dtype != DType::kUndefined && q.input(3).dtype != DType::kBool &&
      !is_floating(q.input(3).dtype))
    throw InputError("Attention's attn_mask must be bool or floating");
  if (!query.shape) {
    put(q, 0, query.dtype, std::nullopt);
    put(q, 1, lse, std::nullopt);
    return;
  }
  const int64_t r = rank_of(query);
  if (r < 2) throw InputError("Attention needs Q of rank >= 2, got " + shape_text(query.shape));
  auto clash = [](const Dim& a, const Dim& b) { return a.value && b.value && *a.value != *b.value; };
  for (const TensorFacts* f : {&key, &value})
    if (f->shape && rank_of(*f) != r)
      throw InputError("Attention's Q, K and V must have one rank, got " + shape_text(query.shape) + ", " +
                       shape_text(key.shape) + " and " + shape_text(value.shape));
  const std::vector<Dim>& qd = query.shape->dims;
  for (int64_t i = 0; i < r; ++i) {
    const bool leading = i < r - 2;
    const bool mismatch = (key.shape && (leading || i == r - 1) && clash(qd[i], key.shape->dims[i])) ||
                          (value.shape && leading && clash(qd[i], value.shape->dims[i])) ||
                          (key.shape && value.shape && i == r - 2 && clash(key.shape->dims[i], value.shape->dims[i]));
    if (mismatch)
      throw InputError("Attention's Q " + shape_text(query.shape) + ", K " + shape_text(key.shape) + " and V " +
                       shape_text(value.shape) + " do not fit [..., Tq, d], [..., Tk, d], [..., Tk, dv]");
  }
  if (q.has(3) && q.input(3).shape && key.shape) {
    Shape scores = *query.shape;
    scores.dims.back() = key.shape->dims[static_cast<size_t>(r - 2)];
    const std::optional<Shape> scores_shape = scores;
    if (rank_of(q.input(3)) > r) throw InputError("Attention's attn_mask has a higher rank than the scores");
    broadcast_shapes({&q.input(3).shape, &scores_shape});
  }
  Shape y = *query.shape;
  y.dims.back() = value.shape ? value.shape->dims.back() : unknown();
  put(q, 0, query.dtype, y);
  Shape rows = *query.shape;
  rows.dims.pop_back();
  put(q, 1, lse, rows);
}

// ai.onnx_amp AttentionGrad(dY, Q, K, V, Y, LSE, [attn_mask]) -> dQ, dK, dV, [dMask] like Q, K,
// V and the mask.
void attention_grad(ShapeQuery& q) {
  for (size_t k = 0; k < 3; ++k) put_like(q, k, q.input(k + 1));
  if (q.has(6)) put_like(q, 3, q.input(6));
}

// ScatterND: data's type and shape; updates of that type.
void scatter_nd(ShapeQuery& q) {
  const TensorFacts& x = q.input(0);
  if (q.has(2) && q.input(2).dtype != DType::kUndefined && x.dtype != DType::kUndefined && q.input(2).dtype != x.dtype)
    throw InputError("ScatterND updates are " + std::string(dtype_name(q.input(2).dtype)) + " but the data is " +
                     std::string(dtype_name(x.dtype)));
  put_like(q, 0, x);
}

// An index input (Gather*, Scatter*) must be int32 or int64.
void require_index_type(const TensorFacts& idx, const char* op) {
  if (idx.dtype != DType::kUndefined && idx.dtype != DType::kInt64 && idx.dtype != DType::kInt32)
    throw InputError(std::string(op) + " indices must be int32 or int64, not " + std::string(dtype_name(idx.dtype)));
}

// A dim times a known factor (unknown when the dim is), a dim divided by one (checked exact).
Dim scaled(const Dim& d, int64_t f) { return d.value ? known(*d.value * f) : unknown(); }
Dim divided(const Dim& d, int64_t f, const char* op, const char* what) {
  if (!d.value) return unknown();
  if (*d.value % f != 0)
    throw InputError(std::string(op) + ": " + what + " " + std::to_string(*d.value) + " is not divisible by " +
                     std::to_string(f));
  return known(*d.value / f);
}

// ScatterElements: data's type and shape; updates of that type, indices of the updates' rank.
void scatter_elements(ShapeQuery& q) {
  const TensorFacts& x = q.input(0);
  require_index_type(q.input(1), "ScatterElements");
  if (q.has(2) && q.input(2).dtype != DType::kUndefined && x.dtype != DType::kUndefined && q.input(2).dtype != x.dtype)
    throw InputError("ScatterElements updates are " + std::string(dtype_name(q.input(2).dtype)) + " but the data is " +
                     std::string(dtype_name(x.dtype)));
  if (x.shape && q.input(1).shape && x.shape->rank() != q.input(1).shape->rank())
    throw InputError("ScatterElements indices " + shape_text(q.input(1).shape) + " must have the data's rank " +
                     std::to_string(x.shape->rank()));
  put_like(q, 0, x);
}

// GatherElements: the indices' shape (of the data's rank), the data's type.
void gather_elements(ShapeQuery& q) {
  const TensorFacts &x = q.input(0), &idx = q.input(1);
  require_index_type(idx, "GatherElements");
  if (x.shape && idx.shape && x.shape->rank() != idx.shape->rank())
    throw InputError("GatherElements indices " + shape_text(idx.shape) + " must have the data's rank " +
                     std::to_string(x.shape->rank()));
  put(q, 0, x.dtype, idx.shape);
}

// GatherND with batch_dims b: indices' dims but the last (k), then the data's dims after b + k.
ShapeFn gather_nd_rule(const Node& n, int64_t) {
  const int64_t b = n.attr_int("batch_dims", 0);
  return [b](ShapeQuery& q) {
    const TensorFacts &x = q.input(0), &idx = q.input(1);
    if (idx.dtype != DType::kUndefined && idx.dtype != DType::kInt64)
      throw InputError("GatherND indices must be int64, not " + std::string(dtype_name(idx.dtype)));
    if (!x.shape || !idx.shape || idx.shape->rank() == 0 || !idx.shape->dims.back().value)
      return put(q, 0, x.dtype, std::nullopt);
    const int64_t k = *idx.shape->dims.back().value, r = rank_of(x), ir = rank_of(idx);
    if (b < 0 || b >= std::min(r, ir))
      throw InputError("GatherND batch_dims " + std::to_string(b) + " must be below the data's and the indices' ranks");
    if (k < 1 || k > r - b)
      throw InputError("GatherND index tuples of " + std::to_string(k) + " do not fit the data " + shape_text(x.shape) +
                       " after " + std::to_string(b) + " batch dims");
    for (size_t d = 0; d < static_cast<size_t>(b); ++d) {
      const Dim &a = x.shape->dims[d], &c = idx.shape->dims[d];
      if (a.value && c.value && *a.value != *c.value)
        throw InputError("GatherND batch dims of the data " + shape_text(x.shape) + " and the indices " +
                         shape_text(idx.shape) + " differ");
    }
    Shape out;
    out.dims.assign(idx.shape->dims.begin(), idx.shape->dims.end() - 1);
    out.dims.insert(out.dims.end(), x.shape->dims.begin() + static_cast<long>(b + k), x.shape->dims.end());
    put(q, 0, x.dtype, out);
  };
}

// Tile: each dim times its repeat (repeats, input 1, one per dim).
void tile(ShapeQuery& q) {
  const TensorFacts& x = q.input(0);
  if (q.input(1).dtype != DType::kUndefined && q.input(1).dtype != DType::kInt64)
    throw InputError("Tile repeats must be int64, not " + std::string(dtype_name(q.input(1).dtype)));
  if (!x.shape) return put(q, 0, x.dtype, std::nullopt);
  const std::optional<std::vector<int64_t>> repeats = q.ints(1);
  if (!repeats) return put(q, 0, x.dtype, unknown_dims(x.shape->rank()));
  if (repeats->size() != x.shape->rank())
    throw InputError("Tile repeats " + dims_text(*repeats) + " must have one value per dim of " + shape_text(x.shape));
  Shape out = *x.shape;
  for (size_t d = 0; d < repeats->size(); ++d) {
    if ((*repeats)[d] < 0) throw InputError("Tile repeats " + dims_text(*repeats) + " must not be negative");
    out.dims[d] = (*repeats)[d] == 1 ? x.shape->dims[d] : scaled(x.shape->dims[d], (*repeats)[d]);
  }
  put(q, 0, x.dtype, out);
}

// CumSum: its input's type and shape; the axis a single int32 or int64.
void cumsum(ShapeQuery& q) {
  const TensorFacts& axis = q.input(1);
  if (axis.dtype != DType::kUndefined && axis.dtype != DType::kInt64 && axis.dtype != DType::kInt32)
    throw InputError("CumSum's axis must be int32 or int64, not " + std::string(dtype_name(axis.dtype)));
  if (axis.shape && axis.shape->rank() > 1) throw InputError("CumSum's axis must be a scalar, not " + shape_text(axis.shape));
  put_like(q, 0, q.input(0));
}

// DepthToSpace [N, C, H, W] -> [N, C/b², H·b, W·b]; SpaceToDepth the reverse.
template <bool kToSpace>
ShapeFn depth_space_rule(const Node& n, int64_t) {
  const int64_t b = n.attr_int("blocksize", 0);
  const char* op = kToSpace ? "DepthToSpace" : "SpaceToDepth";
  if (b <= 0) throw InputError(std::string(op) + " needs a positive blocksize, got " + std::to_string(b));
  return [b, op](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    if (!x.shape) return put(q, 0, x.dtype, std::nullopt);
    if (x.shape->rank() != 4) throw InputError(std::string(op) + " takes a 4-D input, not " + shape_text(x.shape));
    const std::vector<Dim>& d = x.shape->dims;
    Shape out{{d[0], unknown(), unknown(), unknown()}};
    if (kToSpace) {
      out.dims[1] = divided(d[1], b * b, op, "channels");
      out.dims[2] = scaled(d[2], b);
      out.dims[3] = scaled(d[3], b);
    } else {
      out.dims[1] = scaled(d[1], b * b);
      out.dims[2] = divided(d[2], b, op, "height");
      out.dims[3] = divided(d[3], b, op, "width");
    }
    put(q, 0, x.dtype, out);
  };
}

// TopK: values (the input's type) and int64 indices, the input's shape with k along the axis.
ShapeFn top_k_rule(const Node& n, int64_t) {
  const int64_t axis = n.attr_int("axis", -1);
  return [axis](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    if (!x.shape) {
      put(q, 0, x.dtype, std::nullopt);
      return put(q, 1, DType::kInt64, std::nullopt);
    }
    if (x.shape->rank() == 0) throw InputError("TopK needs an input of rank >= 1");
    const size_t a = static_cast<size_t>(normalize_axis(axis, rank_of(x)));
    Shape out = *x.shape;
    out.dims[a] = unknown();
    if (const std::optional<std::vector<int64_t>> k = q.ints(1)) {
      if (k->size() != 1) throw InputError("TopK's k must be a single integer");
      const int64_t kv = (*k)[0];
      const Dim& extent = x.shape->dims[a];
      if (kv < 0 || (extent.value && kv > *extent.value))
        throw InputError("TopK's k " + std::to_string(kv) + " is out of range for an axis of " +
                         (extent.value ? std::to_string(*extent.value) : std::string("?")));
      out.dims[a] = known(kv);
    }
    put(q, 0, x.dtype, out);
    put(q, 1, DType::kInt64, out);
  };
}

// NonZero: int64 [rank, count]; the count when the input's contents are known (its value input).
void nonzero(ShapeQuery& q) {
  const TensorFacts& x = q.input(0);
  if (!x.shape) return put(q, 0, DType::kInt64, std::nullopt);
  Dim count;
  if (x.value) {
    int64_t n = 0;
    for (int64_t i = 0; i < x.value->numel(); ++i) n += x.value->element(i) != 0;
    count = known(n);
  }
  put(q, 0, DType::kInt64, Shape{{known(static_cast<int64_t>(x.shape->rank())), count}});
}

// Compress: the input's dims with the axis (or the flattened input) cut to the condition's count
// of true values (its value input), the condition no longer than that axis.
ShapeFn compress_rule(const Node& n, int64_t) {
  const bool has_axis = n.attr("axis") != nullptr;
  const int64_t axis = n.attr_int("axis", 0);
  return [has_axis, axis](ShapeQuery& q) {
    const TensorFacts &x = q.input(0), &cond = q.input(1);
    if (cond.dtype != DType::kUndefined && cond.dtype != DType::kBool)
      throw InputError("Compress's condition must be bool, not " + std::string(dtype_name(cond.dtype)));
    if (cond.shape && cond.shape->rank() != 1) throw InputError("Compress's condition must be 1-D, not " + shape_text(cond.shape));
    if (!x.shape) return put(q, 0, x.dtype, std::nullopt);
    const size_t a = has_axis ? static_cast<size_t>(normalize_axis(axis, rank_of(x))) : 0;
    const std::optional<int64_t> extent = has_axis ? x.shape->dims[a].value : numel(x);
    Dim count;
    if (cond.value) {
      if (extent && cond.value->numel() > *extent)
        throw InputError("Compress's condition has " + std::to_string(cond.value->numel()) + " values for an extent of " +
                         std::to_string(*extent));
      int64_t k = 0;
      for (int64_t i = 0; i < cond.value->numel(); ++i) k += cond.value->element(i) != 0;
      count = known(k);
    }
    Shape out = has_axis ? *x.shape : Shape{{Dim{}}};
    out.dims[a] = count;
    put(q, 0, x.dtype, out);
  };
}

// EyeLike: the input's 2-D shape, of the dtype attribute's type (the input's by default).
ShapeFn eye_like_rule(const Node& n, int64_t) {
  const DType dtype = static_cast<DType>(n.attr_int("dtype", 0));
  return [dtype](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    if (x.shape && x.shape->rank() != 2) throw InputError("EyeLike takes a 2-D input, not " + shape_text(x.shape));
    put(q, 0, dtype == DType::kUndefined ? x.dtype : dtype, x.shape);
  };
}

// RandomUniform / RandomNormal: the shape attribute, of the dtype attribute's type (float when
// absent). RandomUniformLike / RandomNormalLike / Bernoulli: the input's shape, of the dtype
// attribute's type or else the input's.
ShapeFn random_rule(const Node& n, int64_t) {
  const bool like = n.op_type() != "RandomUniform" && n.op_type() != "RandomNormal";
  const DType dtype = static_cast<DType>(n.attr_int("dtype", like ? 0 : 1));
  std::vector<int64_t> dims = n.attr_ints("shape");
  return [like, dtype, dims](ShapeQuery& q) {
    if (like) {
      const TensorFacts& x = q.input(0);
      return put(q, 0, dtype == DType::kUndefined ? x.dtype : dtype, x.shape);
    }
    Shape out;
    for (int64_t d : dims) {
      if (d < 0) throw InputError("a random op's shape has a negative dim");
      out.dims.push_back(known(d));
    }
    put(q, 0, dtype, out);
  };
}

// NonMaxSuppression: int64 [selected, 3]; how many are selected follows only from the data.
void non_max_suppression(ShapeQuery& q) { put(q, 0, DType::kInt64, Shape{{unknown(), known(3)}}); }

// Unique: Y of the input's type (1-D, or the input's dims with the axis' extent unknown), then
// int64 indices, inverse_indices and counts; the counts follow only from the data.
ShapeFn unique_rule(const Node& n, int64_t) {
  const bool has_axis = n.attr("axis") != nullptr;
  const int64_t axis = n.attr_int("axis", 0);
  return [has_axis, axis](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    std::optional<Shape> y = Shape{{unknown()}};
    if (has_axis) {
      y = x.shape;
      if (y) y->dims[static_cast<size_t>(normalize_axis(axis, rank_of(x)))] = unknown();
    }
    put(q, 0, x.dtype, y);
    for (size_t k = 1; k < 4; ++k) put(q, k, DType::kInt64, Shape{{unknown()}});
  };
}

// RoiAlign: [rois, C, output_height, output_width] of X's type.
ShapeFn roi_align_rule(const Node& n, int64_t) {
  const int64_t oh = n.attr_int("output_height", 1), ow = n.attr_int("output_width", 1);
  if (oh <= 0 || ow <= 0) throw InputError("RoiAlign's output_height and output_width must be positive");
  return [oh, ow](ShapeQuery& q) {
    const TensorFacts &x = q.input(0), &rois = q.input(1), &batch = q.input(2);
    if (x.shape && x.shape->rank() != 4) throw InputError("RoiAlign takes a 4-D X, not " + shape_text(x.shape));
    if (rois.shape && (rois.shape->rank() != 2 || (rois.shape->dims[1].value && *rois.shape->dims[1].value != 4)))
      throw InputError("RoiAlign's rois must be [num_rois, 4], not " + shape_text(rois.shape));
    if (batch.shape && batch.shape->rank() != 1)
      throw InputError("RoiAlign's batch_indices must be 1-D, not " + shape_text(batch.shape));
    if (rois.dtype != DType::kUndefined && x.dtype != DType::kUndefined && rois.dtype != x.dtype)
      throw InputError("RoiAlign's rois must have X's type");
    const Dim count = rois.shape ? rois.shape->dims[0] : unknown();
    put(q, 0, x.dtype, Shape{{count, x.shape ? x.shape->dims[1] : unknown(), known(oh), known(ow)}});
  };
}

// GridSample: X [N, C, H, W] sampled at grid [N, H_out, W_out, 2] gives [N, C, H_out, W_out] of X's type.
void grid_sample(ShapeQuery& q) {
  const TensorFacts &x = q.input(0), &grid = q.input(1);
  if (x.shape && x.shape->rank() != 4) throw InputError("GridSample takes a 4-D X, not " + shape_text(x.shape));
  if (grid.shape && (grid.shape->rank() != 4 || (grid.shape->dims[3].value && *grid.shape->dims[3].value != 2)))
    throw InputError("GridSample's grid must be [N, H_out, W_out, 2], not " + shape_text(grid.shape));
  const Dim n = x.shape ? x.shape->dims[0] : grid.shape ? grid.shape->dims[0] : unknown();
  put(q, 0, x.dtype,
      Shape{{n, x.shape ? x.shape->dims[1] : unknown(), grid.shape ? grid.shape->dims[1] : unknown(),
             grid.shape ? grid.shape->dims[2] : unknown()}});
}

// MaxUnpool: output_shape (input 2) when given, else per spatial dim (in - 1) · stride - pads + kernel.
ShapeFn max_unpool_rule(const Node& n, int64_t) {
  const std::vector<int64_t> kernel = n.attr_ints("kernel_shape"), strides = n.attr_ints("strides"), pads = n.attr_ints("pads");
  return [kernel, strides, pads](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    if (q.has(2)) {
      const std::optional<std::vector<int64_t>> shape = q.ints(2);
      return put(q, 0, x.dtype, shape ? std::optional<Shape>(Shape::of(*shape)) : std::nullopt);
    }
    if (!x.shape) return put(q, 0, x.dtype, std::nullopt);
    const size_t spatial = x.shape->rank() < 2 ? 0 : x.shape->rank() - 2;
    if (kernel.size() != spatial || (!strides.empty() && strides.size() != spatial) || (!pads.empty() && pads.size() != 2 * spatial))
      throw InputError("MaxUnpool's kernel_shape, strides and pads do not match X " + shape_text(x.shape));
    Shape out = *x.shape;
    for (size_t d = 0; d < spatial; ++d) {
      const Dim& in = x.shape->dims[d + 2];
      const int64_t stride = strides.empty() ? 1 : strides[d], pad = pads.empty() ? 0 : pads[d] + pads[d + spatial];
      out.dims[d + 2] = in.value ? known((*in.value - 1) * stride - pad + kernel[d]) : unknown();
    }
    put(q, 0, x.dtype, out);
  };
}

// Einsum: the output letters' extents; the first input's type.
ShapeFn einsum_rule(const Node& n, int64_t) {
  const std::string equation = n.attr_string("equation", "");
  const size_t operands = n.inputs().size();
  const EinsumEquation e = parse_einsum(equation, operands);
  return [e](ShapeQuery& q) {
    const TensorFacts& first = q.input(0);
    std::vector<std::vector<int64_t>> dims;
    for (size_t k = 0; k < q.in.size(); ++k) {
      const std::optional<std::vector<int64_t>> d = q.input(k).dims();
      if (!d) return put(q, 0, first.dtype, unknown_dims(e.output.size()));
      dims.push_back(*d);
    }
    put(q, 0, first.dtype, Shape::of(einsum_output_dims(e, einsum_extents(e, dims))));
  };
}

// ---- data movement

ShapeFn reshape_rule(const Node& n, int64_t) {
  const bool allow_zero = n.attr_int("allowzero", 0) != 0;
  return [allow_zero](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    const std::optional<std::vector<int64_t>> target = q.ints(1);
    if (!target) {
      // The shape's length is the rank, even when its values are computed at run time.
      const TensorFacts& s = q.input(1);
      if (s.shape && s.shape->rank() == 1 && s.shape->dims[0].value) put(q, 0, x.dtype, unknown_dims(*s.shape->dims[0].value));
      else put(q, 0, x.dtype, std::nullopt);
      return;
    }
    Shape out = unknown_dims(target->size());
    int64_t known_product = 1;  // of the dims known, when all but the -1 are
    bool all_known = true;
    int64_t infer_at = -1;
    for (size_t i = 0; i < target->size(); ++i) {
      const int64_t d = (*target)[i];
      if (d == 0 && !allow_zero) {
        if (x.shape && i >= x.shape->rank())
          throw InputError("Reshape shape " + dims_text(*target) + " copies a dim X " + shape_text(x.shape) + " lacks");
        out.dims[i] = x.shape ? x.shape->dims[i] : unknown();
      } else if (d == -1) {
        if (infer_at >= 0) throw InputError("Reshape shape " + dims_text(*target) + " has more than one -1");
        infer_at = static_cast<int64_t>(i);
        continue;
      } else if (d < 0) {
        throw InputError("Reshape shape " + dims_text(*target) + " has a negative dim");
      } else {
        out.dims[i] = known(d);
      }
      if (out.dims[i].value) known_product *= *out.dims[i].value;
      else all_known = false;
    }
    const std::optional<int64_t> total = numel(x);
    if (infer_at >= 0 && total && all_known)
      out.dims[static_cast<size_t>(infer_at)] = known(known_product == 0 ? 0 : *total / known_product);
    if (total && product(out.dims) && *product(out.dims) != *total)
      throw InputError("cannot reshape " + shape_text(x.shape) + " to " + dims_text(*target));
    put(q, 0, x.dtype, out);
  };
}

ShapeFn flatten_rule(const Node& n, int64_t) {
  const int64_t axis_attr = n.attr_int("axis", 1);
  return [axis_attr](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    if (!x.shape) return put(q, 0, x.dtype, unknown_dims(2));  // always 2-D
    const int64_t rank = rank_of(x);
    if (axis_attr < -rank || axis_attr > rank)
      throw InputError("Flatten axis " + std::to_string(axis_attr) + " is out of range");
    const size_t axis = static_cast<size_t>(axis_attr < 0 ? axis_attr + rank : axis_attr);
    const std::optional<int64_t> outer = product(x.shape->dims, 0, axis), inner = product(x.shape->dims, axis);
    put(q, 0, x.dtype, Shape{{outer ? known(*outer) : unknown(), inner ? known(*inner) : unknown()}});
  };
}

// Squeeze / Unsqueeze axes: input 1 (opset 13+) or the attribute; nullopt when computed at run time.
std::optional<std::vector<int64_t>> axes_of(const ShapeQuery& q, const std::vector<int64_t>& attr) {
  if (!q.has(1)) return attr;
  return q.ints(1);
}
// How many axes input 1 lists, from its shape, when their values are not known.
std::optional<int64_t> axes_count(const ShapeQuery& q) {
  if (!q.has(1) || !q.in[1]->shape || q.in[1]->shape->rank() != 1) return std::nullopt;
  return q.in[1]->shape->dims[0].value;
}

ShapeFn squeeze_rule(const Node& n, int64_t) {
  const std::vector<int64_t> attr = n.attr_ints("axes");
  return [attr](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    const std::optional<std::vector<int64_t>> axes = axes_of(q, attr);
    if (!x.shape) return put(q, 0, x.dtype, std::nullopt);
    const int64_t rank = rank_of(x);
    if (!axes) {
      const std::optional<int64_t> count = axes_count(q);
      put(q, 0, x.dtype, count ? std::optional<Shape>(unknown_dims(static_cast<size_t>(rank - *count))) : std::nullopt);
      return;
    }
    std::vector<bool> drop(static_cast<size_t>(rank), false);
    if (axes->empty()) {  // every dim of extent 1, so every dim must be known
      for (size_t i = 0; i < drop.size(); ++i) {
        if (!x.shape->dims[i].value) return put(q, 0, x.dtype, std::nullopt);
        drop[i] = *x.shape->dims[i].value == 1;
      }
    }
    for (int64_t a : *axes) {
      const size_t i = static_cast<size_t>(normalize_axis(a, rank));
      const std::optional<int64_t> d = x.shape->dims[i].value;
      if (d && *d != 1) throw InputError("cannot squeeze axis " + std::to_string(a) + " of " + shape_text(x.shape));
      drop[i] = true;
    }
    Shape out;
    for (size_t i = 0; i < drop.size(); ++i)
      if (!drop[i]) out.dims.push_back(x.shape->dims[i]);
    put(q, 0, x.dtype, out);
  };
}

ShapeFn unsqueeze_rule(const Node& n, int64_t) {
  const std::vector<int64_t> attr = n.attr_ints("axes");
  return [attr](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    const std::optional<std::vector<int64_t>> axes = axes_of(q, attr);
    if (!x.shape) return put(q, 0, x.dtype, std::nullopt);
    if (!axes) {
      const std::optional<int64_t> count = axes_count(q);
      put(q, 0, x.dtype, count ? std::optional<Shape>(unknown_dims(x.shape->rank() + static_cast<size_t>(*count))) : std::nullopt);
      return;
    }
    const int64_t rank = rank_of(x) + static_cast<int64_t>(axes->size());
    std::vector<bool> inserted(static_cast<size_t>(rank), false);
    for (int64_t a : *axes) {
      const size_t i = static_cast<size_t>(normalize_axis(a, rank));
      if (inserted[i]) throw InputError("Unsqueeze axes repeat " + std::to_string(a));
      inserted[i] = true;
    }
    Shape out;
    size_t next = 0;
    for (size_t i = 0; i < inserted.size(); ++i) out.dims.push_back(inserted[i] ? known(1) : x.shape->dims[next++]);
    put(q, 0, x.dtype, out);
  };
}

ShapeFn transpose_rule(const Node& n, int64_t) {
  const std::vector<int64_t> perm_attr = n.attr_ints("perm");
  return [perm_attr](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    if (!x.shape) return put(q, 0, x.dtype, perm_attr.empty() ? std::nullopt : std::optional<Shape>(unknown_dims(perm_attr.size())));
    const size_t rank = x.shape->rank();
    std::vector<int64_t> perm = perm_attr;
    if (perm.empty())
      for (size_t i = rank; i-- > 0;) perm.push_back(static_cast<int64_t>(i));
    if (perm.size() != rank)
      throw InputError("Transpose perm " + dims_text(perm) + " does not match rank " + std::to_string(rank));
    std::vector<bool> seen(rank, false);
    Shape out;
    for (int64_t d : perm) {
      if (d < 0 || d >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(d)])
        throw InputError("Transpose perm " + dims_text(perm) + " is not a permutation");
      seen[static_cast<size_t>(d)] = true;
      out.dims.push_back(x.shape->dims[static_cast<size_t>(d)]);
    }
    put(q, 0, x.dtype, out);
  };
}

// The number of elements a Slice of one axis of extent `dim` keeps (ONNX's clamping of starts and ends).
int64_t slice_count(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
  }
  const int64_t n = step > 0 ? (end - start + step - 1) / step : (start - end - step - 1) / -step;
  return std::max<int64_t>(0, n);
}

ShapeFn slice_rule(const Node& n, int64_t opset) {
  const bool attrs = opset < 10;
  const std::vector<int64_t> starts_attr = n.attr_ints("starts"), ends_attr = n.attr_ints("ends"), axes_attr = n.attr_ints("axes");
  return [=](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    if (!x.shape) return put(q, 0, x.dtype, std::nullopt);
    std::optional<std::vector<int64_t>> starts = starts_attr, ends = ends_attr, axes = axes_attr, steps;
    if (!attrs) {
      starts = q.ints(1);
      ends = q.ints(2);
      axes = q.has(3) ? q.ints(3) : std::vector<int64_t>{};
      steps = q.has(4) ? q.ints(4) : std::vector<int64_t>{};
    }
    if (!starts || !ends || !axes || (!attrs && !steps)) return put(q, 0, x.dtype, unknown_dims(x.shape->rank()));
    if (!steps) steps.emplace();
    if (axes->empty())
      for (size_t i = 0; i < starts->size(); ++i) axes->push_back(static_cast<int64_t>(i));
    if (steps->empty()) steps->assign(starts->size(), 1);
    if (ends->size() != starts->size() || axes->size() != starts->size() || steps->size() != starts->size())
      throw InputError("Slice starts, ends, axes and steps have different lengths");
    Shape out = *x.shape;
    for (size_t i = 0; i < starts->size(); ++i) {
      const size_t a = static_cast<size_t>(normalize_axis((*axes)[i], rank_of(x)));
      if ((*steps)[i] == 0) throw InputError("Slice step must not be 0");
      const std::optional<int64_t> dim = x.shape->dims[a].value;
      out.dims[a] = dim ? known(slice_count(*dim, (*starts)[i], (*ends)[i], (*steps)[i])) : unknown();
    }
    put(q, 0, x.dtype, out);
  };
}

void expand(ShapeQuery& q) {
  const TensorFacts& x = q.input(0);
  const std::optional<std::vector<int64_t>> to = q.ints(1);
  if (!to) {
    const std::optional<int64_t> count = axes_count(q);
    put(q, 0, x.dtype, x.shape && count ? std::optional<Shape>(unknown_dims(std::max(x.shape->rank(), static_cast<size_t>(*count))))
                                        : std::nullopt);
    return;
  }
  const std::optional<Shape> target = Shape::of(*to);
  put(q, 0, x.dtype, broadcast_shapes({&x.shape, &target}));
}

ShapeFn concat_rule(const Node& n, int64_t) {
  const int64_t axis_attr = n.attr_int("axis", 0);
  return [axis_attr](ShapeQuery& q) {
    const TensorFacts& first = q.input(0);
    require_same_types(q, q.in.size(), "Concat inputs");
    int64_t rank = -1;
    for (const TensorFacts* f : q.in)
      if (f && f->shape) rank = rank_of(*f);
    if (rank < 0) return put(q, 0, first.dtype, std::nullopt);
    if (rank == 0) throw InputError("Concat joins tensors along an axis; its inputs are scalars");
    const size_t axis = static_cast<size_t>(normalize_axis(axis_attr, rank));
    Shape out = unknown_dims(static_cast<size_t>(rank));
    std::optional<int64_t> extent = 0;
    const TensorFacts* seen = nullptr;
    for (const TensorFacts* f : q.in) {
      if (!f) continue;
      if (!f->shape) {
        extent.reset();
        continue;
      }
      if (rank_of(*f) != rank) throw InputError("Concat inputs " + shape_text(seen ? seen->shape : first.shape) + " and " + shape_text(f->shape) + " do not match");
      for (size_t d = 0; d < out.dims.size(); ++d) {
        const Dim& v = f->shape->dims[d];
        if (d == axis) continue;
        if (out.dims[d].value && v.value && *out.dims[d].value != *v.value)
          throw InputError("Concat inputs " + shape_text(seen->shape) + " and " + shape_text(f->shape) + " do not match");
        if (!out.dims[d].value && (v.value || (out.dims[d].param.empty() && !v.param.empty()))) out.dims[d] = v;
      }
      const std::optional<int64_t> along = f->shape->dims[axis].value;
      if (extent && along) *extent += *along;
      else extent.reset();
      seen = f;
    }
    out.dims[axis] = extent ? known(*extent) : unknown();
    put(q, 0, first.dtype, out);
  };
}

ShapeFn split_rule(const Node& n, int64_t) {
  const int64_t axis_attr = n.attr_int("axis", 0);
  const std::vector<int64_t> split_attr = n.attr_ints("split");
  return [axis_attr, split_attr](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    const int64_t parts = static_cast<int64_t>(q.out.size());
    if (!x.shape) {
      for (size_t k = 0; k < q.out.size(); ++k) put(q, k, x.dtype, std::nullopt);
      return;
    }
    const size_t axis = static_cast<size_t>(normalize_axis(axis_attr, rank_of(x)));
    const std::optional<int64_t> extent = x.shape->dims[axis].value;
    std::optional<std::vector<int64_t>> sizes = q.has(1) ? q.ints(1) : std::optional<std::vector<int64_t>>(split_attr);
    if (sizes && sizes->empty()) {
      sizes.reset();
      if (extent) {
        if (*extent % parts != 0)
          throw InputError("cannot split " + std::to_string(*extent) + " into " + std::to_string(parts) + " equal parts");
        sizes = std::vector<int64_t>(static_cast<size_t>(parts), *extent / parts);
      }
    }
    if (sizes) {
      int64_t total = 0;
      for (int64_t s : *sizes) total += s;
      if (static_cast<int64_t>(sizes->size()) != parts || (extent && total != *extent))
        throw InputError("split " + dims_text(*sizes) + " does not cover " + (extent ? std::to_string(*extent) : "?") + " in " +
                         std::to_string(parts) + " outputs");
    }
    for (size_t k = 0; k < q.out.size(); ++k) {
      Shape out = *x.shape;
      out.dims[axis] = sizes ? known((*sizes)[k]) : unknown();
      put(q, k, x.dtype, out);
    }
  };
}

ShapeFn gather_rule(const Node& n, int64_t) {
  const int64_t axis_attr = n.attr_int("axis", 0);
  return [axis_attr](ShapeQuery& q) {
    const TensorFacts &x = q.input(0), &idx = q.input(1);
    if (idx.dtype != DType::kUndefined && idx.dtype != DType::kInt64 && idx.dtype != DType::kInt32)
      throw InputError("Gather indices must be int32 or int64");
    if (!x.shape || !idx.shape) return put(q, 0, x.dtype, std::nullopt);
    const size_t axis = static_cast<size_t>(normalize_axis(axis_attr, rank_of(x)));
    Shape out;
    out.dims.assign(x.shape->dims.begin(), x.shape->dims.begin() + static_cast<long>(axis));
    out.dims.insert(out.dims.end(), idx.shape->dims.begin(), idx.shape->dims.end());
    out.dims.insert(out.dims.end(), x.shape->dims.begin() + static_cast<long>(axis) + 1, x.shape->dims.end());
    put(q, 0, x.dtype, out);
  };
}

ShapeFn shape_of_rule(const Node& n, int64_t) {
  const int64_t start = n.attr_int("start", 0), end = n.attr_int("end", std::numeric_limits<int64_t>::max());
  return [start, end](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    if (!x.shape) return put(q, 0, DType::kInt64, Shape{{unknown()}});
    const int64_t r = rank_of(x);
    auto clamp = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + r : v, 0, r); };
    const int64_t b = clamp(start), e = std::max(b, clamp(end));
    put(q, 0, DType::kInt64, Shape::of({e - b}));
    // The dims themselves, when known: shape arithmetic downstream (Reshape's target) reads them.
    std::vector<int64_t> dims;
    for (int64_t i = b; i < e; ++i) {
      const std::optional<int64_t> d = x.shape->dims[static_cast<size_t>(i)].value;
      if (!d) return;
      dims.push_back(*d);
    }
    if (q.out.empty()) return;
    Tensor value(DType::kInt64, {e - b});
    std::copy(dims.begin(), dims.end(), value.mutable_as<int64_t>());
    q.out[0].value = std::move(value);
  };
}

// ---- products and windows

// numpy matmul's result shape for A and B (the batch dims broadcast).
std::optional<Shape> matmul_shape(const TensorFacts& a, const TensorFacts& b) {
  if (!a.shape || !b.shape) return std::nullopt;
  const std::vector<Dim> &ad = a.shape->dims, &bd = b.shape->dims;
  if (ad.empty() || bd.empty()) throw InputError("MatMul operands must have rank >= 1");
  const Dim k = ad.back(), kb = bd.size() >= 2 ? bd[bd.size() - 2] : bd[0];
  if (k.value && kb.value && *k.value != *kb.value)
    throw InputError("MatMul shapes " + shape_text(a.shape) + " and " + shape_text(b.shape) + " do not multiply");
  const std::optional<Shape> a_batch = Shape{std::vector<Dim>(ad.begin(), ad.end() - std::min<long>(static_cast<long>(ad.size()), 2))};
  const std::optional<Shape> b_batch = Shape{std::vector<Dim>(bd.begin(), bd.end() - std::min<long>(static_cast<long>(bd.size()), 2))};
  Shape out = *broadcast_shapes({&a_batch, &b_batch});
  if (ad.size() >= 2) out.dims.push_back(ad[ad.size() - 2]);
  if (bd.size() >= 2) out.dims.push_back(bd.back());
  return out;
}

void matmul(ShapeQuery& q) {
  const TensorFacts &a = q.input(0), &b = q.input(1);
  if (a.dtype != DType::kUndefined && b.dtype != DType::kUndefined && a.dtype != b.dtype)
    throw InputError("MatMul operands have different element types");
  put(q, 0, a.dtype, matmul_shape(a, b));
}

// MatMulInteger(A, B, a_zero_point, b_zero_point): int32.
void matmul_integer(ShapeQuery& q) { put(q, 0, DType::kInt32, matmul_shape(q.input(0), q.input(1))); }

// QLinearMatMul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point): y_zero_point's type.
void qlinear_matmul(ShapeQuery& q) { put(q, 0, q.input(7).dtype, matmul_shape(q.input(0), q.input(3))); }

ShapeFn gemm_rule(const Node& n, int64_t) {
  const bool trans_a = n.attr_int("transA", 0) != 0, trans_b = n.attr_int("transB", 0) != 0;
  return [trans_a, trans_b](ShapeQuery& q) {
    const TensorFacts &a = q.input(0), &b = q.input(1);
    require_same_types(q, 3, "Gemm operands");
    if ((a.shape && a.shape->rank() != 2) || (b.shape && b.shape->rank() != 2)) throw InputError("Gemm operands must be 2-D");
    const Dim m = a.shape ? a.shape->dims[trans_a ? 1 : 0] : unknown(), k = a.shape ? a.shape->dims[trans_a ? 0 : 1] : unknown();
    const Dim kb = b.shape ? b.shape->dims[trans_b ? 1 : 0] : unknown(), nn = b.shape ? b.shape->dims[trans_b ? 0 : 1] : unknown();
    if (k.value && kb.value && *k.value != *kb.value)
      throw InputError("Gemm shapes " + shape_text(a.shape) + " and " + shape_text(b.shape) + " do not multiply");
    const std::optional<Shape> mn = Shape{{m, nn}};
    if (q.has(2)) {
      const std::optional<Shape> with_c = broadcast_shapes({&mn, &q.in[2]->shape});
      if (with_c && with_c->rank() != 2) throw InputError("Gemm C " + shape_text(q.in[2]->shape) + " does not broadcast to " + shape_text(mn));
      for (size_t d = 0; with_c && d < 2; ++d)
        if (mn->dims[d].value && with_c->dims[d].value && *mn->dims[d].value != *with_c->dims[d].value)
          throw InputError("Gemm C " + shape_text(q.in[2]->shape) + " does not broadcast to " + shape_text(mn));
    }
    put(q, 0, a.dtype, mn);
  };
}

// [N, C or M, output extents]: the extents when every input extent (and kernel) is known.
std::optional<Shape> windowed(const TensorFacts& x, Dim channels, const WindowAttrs& attrs,
                              const std::optional<std::vector<int64_t>>& kernel) {
  if (!x.shape) return std::nullopt;
  if (x.shape->rank() < 3) throw InputError("expected [N, C, spatial...], X is " + shape_text(x.shape));
  Shape out{{x.shape->dims[0], channels}};
  std::vector<int64_t> in;
  for (size_t d = 2; d < x.shape->rank(); ++d)
    if (x.shape->dims[d].value) in.push_back(*x.shape->dims[d].value);
  if (in.size() + 2 != x.shape->rank() || !kernel) {
    out.dims.resize(x.shape->rank());
    return out;
  }
  for (int64_t e : make_window(attrs, in, *kernel).out) out.dims.push_back(known(e));
  return out;
}

// Conv's output shape for X and W (and the bias B, when given).
std::optional<Shape> conv_shape(const WindowAttrs& attrs, int64_t groups, const TensorFacts& x, const TensorFacts& w,
                                const TensorFacts* bias) {
  if (x.shape && w.shape && w.shape->rank() != x.shape->rank())
    throw InputError("Conv W " + shape_text(w.shape) + " does not match X " + shape_text(x.shape));
  const std::optional<std::vector<int64_t>> wd = w.dims();
  const std::optional<int64_t> c = x.shape && x.shape->rank() > 1 ? x.shape->dims[1].value : std::nullopt;
  if (wd && c && (groups <= 0 || *c % groups != 0 || (*wd)[0] % groups != 0 || (*wd)[1] * groups != *c))
    throw InputError("Conv channels do not match: X " + shape_text(x.shape) + ", W " + shape_text(w.shape) + ", group " +
                     std::to_string(groups));
  if (wd && bias && numel(*bias) && *numel(*bias) != (*wd)[0]) throw InputError("Conv bias must have M elements");
  std::optional<std::vector<int64_t>> kernel;
  if (wd) {
    kernel.emplace(wd->begin() + 2, wd->end());
    if (!attrs.kernel.empty() && attrs.kernel != *kernel)
      throw InputError("kernel_shape " + dims_text(attrs.kernel) + " does not match W " + shape_text(w.shape));
  }
  const Dim m = w.shape && w.shape->rank() > 0 ? w.shape->dims[0] : unknown();
  return windowed(x, m, attrs, kernel);
}

ShapeFn conv_rule(const Node& n, int64_t) {
  const WindowAttrs attrs(n);
  const int64_t groups = n.attr_int("group", 1);
  return [attrs, groups](ShapeQuery& q) {
    require_same_types(q, 3, "Conv inputs");
    put(q, 0, q.input(0).dtype, conv_shape(attrs, groups, q.input(0), q.input(1), q.has(2) ? q.in[2] : nullptr));
  };
}

// ai.onnx_amp DeformConv (ONNX opset 19, 2-D): Conv's output shape for X and W; offset must be
// [N, offset_group * 2 * kH * kW, oH, oW] and mask [N, offset_group * kH * kW, oH, oW].
ShapeFn deform_conv_rule(const Node& n, int64_t) {
  const WindowAttrs attrs(n);
  const int64_t groups = n.attr_int("group", 1), offset_groups = n.attr_int("offset_group", 1);
  if (offset_groups <= 0) throw InputError("DeformConv's offset_group must be positive");
  return [attrs, groups, offset_groups](ShapeQuery& q) {
    require_same_types(q, 5, "DeformConv inputs");
    const TensorFacts &x = q.input(0), &w = q.input(1);
    if (x.shape && x.shape->rank() != 4) throw InputError("DeformConv runs on 2-D images: X must be 4-D, not " + shape_text(x.shape));
    const std::optional<int64_t> c = x.shape ? x.shape->dims[1].value : std::nullopt;
    if (c && *c % offset_groups != 0)
      throw InputError("DeformConv's X has " + std::to_string(*c) + " channels, not a multiple of offset_group " +
                       std::to_string(offset_groups));
    std::optional<Shape> y = conv_shape(attrs, groups, x, w, q.has(3) ? q.in[3] : nullptr);
    const std::optional<std::vector<int64_t>> wd = w.dims();
    auto check = [&](size_t k, const char* name, int64_t per_tap) {
      if (!q.has(k) || !q.input(k).shape || !y || !wd) return;
      const Shape& s = *q.input(k).shape;
      const Shape expected{{y->dims[0], known(offset_groups * per_tap * (*wd)[2] * (*wd)[3]), y->dims[2], y->dims[3]}};
      bool fits = s.rank() == 4;
      for (size_t d = 0; fits && d < 4; ++d)
        fits = !s.dims[d].value || !expected.dims[d].value || *s.dims[d].value == *expected.dims[d].value;
      if (!fits) throw InputError(std::string("DeformConv's ") + name + " must be " + expected.str() + ", not " + s.str());
    };
    check(2, "offset", 2);
    check(4, "mask", 1);
    put(q, 0, x.dtype, y);
  };
}

// ai.onnx_amp DeformConvGrad(dY, X, W, offset, [mask]) -> dX, dW, doffset, dB, dmask like X, W,
// offset, [oC] and the mask.
void deform_conv_grad(ShapeQuery& q) {
  for (size_t k = 0; k < 3; ++k) put_like(q, k, q.input(k + 1));
  const TensorFacts& w = q.input(2);
  put(q, 3, w.dtype, w.shape && w.shape->rank() > 0 ? std::optional<Shape>(Shape{{w.shape->dims[0]}}) : std::nullopt);
  if (q.has(4)) put_like(q, 4, q.input(4));
}

// The spatial extents of Col2Im's blocks (ONNX opset 18) and Im2Col's: where a block of
// block_shape slides over the padded image.
Window block_window(const WindowAttrs& attrs, const std::vector<int64_t>& image, const std::vector<int64_t>& block,
                    const char* op) {
  if (image.size() != block.size() || image.empty())
    throw InputError(std::string(op) + "'s image and block_shape " + dims_text(block) + " must have one positive rank");
  return make_window(attrs, image, block);
}

// ai.onnx_amp Col2Im(input [N, C * prod(block_shape), L], image_shape, block_shape): [N, C,
// image_shape...]; L must be the number of block places.
ShapeFn col2im_rule(const Node& n, int64_t) {
  const WindowAttrs attrs(n);
  return [attrs](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    if (x.shape && x.shape->rank() != 3) throw InputError("Col2Im's input must be [N, C * prod(block_shape), L], not " + shape_text(x.shape));
    const std::optional<std::vector<int64_t>> image = q.ints(1), block = q.ints(2);
    if (!image || !block) return put(q, 0, x.dtype, std::nullopt);
    const Window win = block_window(attrs, *image, *block, "Col2Im");
    int64_t size = 1, places = 1;
    for (int64_t b : *block) size *= b;
    for (int64_t o : win.out) places *= o;
    Shape y{{x.shape ? x.shape->dims[0] : unknown(), unknown()}};
    if (x.shape && x.shape->dims[1].value) {
      if (*x.shape->dims[1].value % size != 0)
        throw InputError("Col2Im's input has " + std::to_string(*x.shape->dims[1].value) +
                         " rows, not a multiple of prod(block_shape) " + std::to_string(size));
      y.dims[1] = known(*x.shape->dims[1].value / size);
    }
    if (x.shape && x.shape->dims[2].value && *x.shape->dims[2].value != places)
      throw InputError("Col2Im's input has " + std::to_string(*x.shape->dims[2].value) + " blocks, the image takes " +
                       std::to_string(places));
    for (int64_t e : *image) y.dims.push_back(known(e));
    put(q, 0, x.dtype, y);
  };
}

// ai.onnx_amp Im2Col(X [N, C, spatial...], block_shape): [N, C * prod(block_shape), L].
ShapeFn im2col_rule(const Node& n, int64_t) {
  const WindowAttrs attrs(n);
  return [attrs](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    const std::optional<std::vector<int64_t>> block = q.ints(1);
    const std::optional<std::vector<int64_t>> dims = x.dims();
    if (!block || !dims) return put(q, 0, x.dtype, Shape{{unknown(), unknown(), unknown()}});
    if (dims->size() < 3) throw InputError("Im2Col takes [N, C, spatial...], not " + dims_text(*dims));
    const Window win = block_window(attrs, std::vector<int64_t>(dims->begin() + 2, dims->end()), *block, "Im2Col");
    int64_t size = 1, places = 1;
    for (int64_t b : *block) size *= b;
    for (int64_t o : win.out) places *= o;
    put(q, 0, x.dtype, Shape::of({(*dims)[0], (*dims)[1] * size, places}));
  };
}

// ConvInteger(x, w, x_zero_point, w_zero_point): int32, Conv's shape.
ShapeFn conv_integer_rule(const Node& n, int64_t) {
  const WindowAttrs attrs(n);
  const int64_t groups = n.attr_int("group", 1);
  return [attrs, groups](ShapeQuery& q) {
    put(q, 0, DType::kInt32, conv_shape(attrs, groups, q.input(0), q.input(1), nullptr));
  };
}

// QLinearConv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B): y_zero_point's type.
ShapeFn qlinear_conv_rule(const Node& n, int64_t) {
  const WindowAttrs attrs(n);
  const int64_t groups = n.attr_int("group", 1);
  return [attrs, groups](ShapeQuery& q) {
    put(q, 0, q.input(7).dtype, conv_shape(attrs, groups, q.input(0), q.input(3), q.has(8) ? q.in[8] : nullptr));
  };
}

// ConvTranspose: W is [C, M/group, k...], Y is [N, M, extents by graph/ops/conv_transpose.h].
ShapeFn conv_transpose_rule(const Node& n, int64_t) {
  const ConvTransposeAttrs attrs(n);
  return [attrs](ShapeQuery& q) {
    const TensorFacts &x = q.input(0), &w = q.input(1);
    require_same_types(q, 3, "ConvTranspose inputs");
    if (x.shape && x.shape->rank() < 3) throw InputError("expected [N, C, spatial...], X is " + shape_text(x.shape));
    if (x.shape && w.shape && w.shape->rank() != x.shape->rank())
      throw InputError("ConvTranspose W " + shape_text(w.shape) + " does not match X " + shape_text(x.shape));
    const std::optional<std::vector<int64_t>> wd = w.dims();
    const std::optional<int64_t> c = x.shape ? x.shape->dims[1].value : std::nullopt;
    if (attrs.group <= 0 || (wd && c && (*c % attrs.group != 0 || (*wd)[0] != *c)))
      throw InputError("ConvTranspose channels do not match: X " + shape_text(x.shape) + ", W " + shape_text(w.shape) +
                       ", group " + std::to_string(attrs.group));
    if (wd && q.has(2) && numel(*q.in[2]) && *numel(*q.in[2]) != (*wd)[1] * attrs.group)
      throw InputError("ConvTranspose bias must have W[1] * group elements");
    if (!x.shape) return put(q, 0, x.dtype, std::nullopt);
    Shape out{{x.shape->dims[0], wd ? known((*wd)[1] * attrs.group) : unknown()}};
    std::vector<int64_t> in;
    for (size_t d = 2; d < x.shape->rank(); ++d)
      if (x.shape->dims[d].value) in.push_back(*x.shape->dims[d].value);
    if (!wd || in.size() + 2 != x.shape->rank()) {
      out.dims.resize(x.shape->rank());
      return put(q, 0, x.dtype, out);
    }
    for (int64_t e : make_transposed_window(attrs, in, std::vector<int64_t>(wd->begin() + 2, wd->end())).out)
      out.dims.push_back(known(e));
    put(q, 0, x.dtype, out);
  };
}

ShapeFn pool_rule(const Node& n, int64_t) {
  const WindowAttrs attrs(n);
  return [attrs](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    const std::optional<Shape> out = windowed(x, x.shape && x.shape->rank() > 1 ? x.shape->dims[1] : unknown(), attrs, std::vector<int64_t>{});
    put(q, 0, x.dtype, out);
    put(q, 1, DType::kInt64, out);  // MaxPool's Indices
  };
}

void global_pool(ShapeQuery& q) {
  const TensorFacts& x = q.input(0);
  if (x.shape && x.shape->rank() < 3) throw InputError("a global pool needs [N,C,...], X is " + shape_text(x.shape));
  std::optional<Shape> out = x.shape;
  if (out) std::fill(out->dims.begin() + 2, out->dims.end(), known(1));
  put(q, 0, x.dtype, out);
}

// ---- reductions and losses

ShapeFn reduce_rule(const Node& n, int64_t) {
  const std::vector<int64_t> axes_attr = n.attr_ints("axes");
  const bool keepdims = n.attr_int("keepdims", 1) != 0, noop_empty = n.attr_int("noop_with_empty_axes", 0) != 0;
  return [axes_attr, keepdims, noop_empty](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    const std::optional<std::vector<int64_t>> axes = q.has(1) ? q.ints(1) : std::optional<std::vector<int64_t>>(axes_attr);
    if (!x.shape) return put(q, 0, x.dtype, std::nullopt);
    const int64_t rank = rank_of(x);
    if (!axes) return put(q, 0, x.dtype, keepdims ? std::optional<Shape>(unknown_dims(static_cast<size_t>(rank))) : std::nullopt);
    std::vector<bool> reduced(static_cast<size_t>(rank), axes->empty() && !noop_empty);
    for (int64_t a : *axes) reduced[static_cast<size_t>(normalize_axis(a, rank))] = true;
    Shape out;
    for (size_t i = 0; i < reduced.size(); ++i) {
      if (!reduced[i]) out.dims.push_back(x.shape->dims[i]);
      else if (keepdims) out.dims.push_back(known(1));
    }
    put(q, 0, x.dtype, out);
  };
}

// ArgMax / ArgMin: int64 indices, X's shape with `axis` (default 0) kept as 1 or dropped.
ShapeFn arg_extremum_rule(const Node& n, int64_t) {
  const int64_t axis = n.attr_int("axis", 0);
  const bool keepdims = n.attr_int("keepdims", 1) != 0;
  return [axis, keepdims](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    if (!x.shape) return put(q, 0, DType::kInt64, std::nullopt);
    const size_t a = static_cast<size_t>(normalize_axis(axis, rank_of(x)));
    Shape out = *x.shape;
    if (keepdims) {
      out.dims[a] = known(1);
    } else {
      out.dims.erase(out.dims.begin() + static_cast<long>(a));
    }
    put(q, 0, DType::kInt64, out);
  };
}

ShapeFn loss_rule(const Node& n, int64_t) {
  const bool per_item = n.attr_string("reduction", "mean") == "none";
  return [per_item](ShapeQuery& q) {
    const TensorFacts &x = q.input(0), &labels = q.input(1);
    if (labels.dtype != DType::kUndefined && labels.dtype != DType::kInt64 && labels.dtype != DType::kInt32)
      throw InputError("labels must be int32 or int64");
    if (x.shape && x.shape->rank() < 2) throw InputError("scores must be [N, C, ...], got " + shape_text(x.shape));
    std::optional<Shape> items;
    if (x.shape) {
      items = x.shape;
      items->dims.erase(items->dims.begin() + 1);
    }
    const std::optional<std::vector<int64_t>> want = TensorFacts{DType::kUndefined, items, {}}.dims(), got = labels.dims();
    if (want && got && *want != *got)
      throw InputError("labels " + shape_text(labels.shape) + " do not match scores " + shape_text(x.shape));
    if (q.has(2)) {
      const std::optional<int64_t> c = x.shape ? x.shape->dims[1].value : std::nullopt;
      if ((c && numel(*q.in[2]) && *numel(*q.in[2]) != *c) ||
          (x.dtype != DType::kUndefined && q.in[2]->dtype != DType::kUndefined && q.in[2]->dtype != x.dtype))
        throw InputError("weights must be C elements of the scores' type");
    }
    put(q, 0, x.dtype, per_item ? (items ? items : labels.shape) : std::optional<Shape>(Shape{}));
    put_like(q, 1, x);  // SoftmaxCrossEntropyLoss's log_prob
  };
}

// ---- generators

// Constant's value, from whichever attribute holds it.
Tensor constant_value(const Node& n) {
  auto filled = [](DType t, const void* data, std::vector<int64_t> dims) {
    Tensor out(t, std::move(dims));
    if (out.nbytes()) std::memcpy(out.mutable_data(), data, out.nbytes());
    return out;
  };
  if (const Attribute* a = n.attr("value")) return a->t;
  if (const Attribute* f = n.attr("value_float")) return filled(DType::kFloat, &f->f, {});
  if (const Attribute* fs = n.attr("value_floats")) return filled(DType::kFloat, fs->floats.data(), {static_cast<int64_t>(fs->floats.size())});
  if (const Attribute* i = n.attr("value_int")) return filled(DType::kInt64, &i->i, {});
  if (const Attribute* is = n.attr("value_ints")) return filled(DType::kInt64, is->ints.data(), {static_cast<int64_t>(is->ints.size())});
  throw InputError("Constant has no value attribute this backend reads (value, value_float(s), value_int(s))");
}

ShapeFn constant_rule(const Node& n, int64_t) {
  Tensor value = constant_value(n);
  return [value](ShapeQuery& q) {
    put(q, 0, value.dtype, Shape::of(value.dims));
    if (!q.out.empty() && (value.dtype == DType::kInt64 || value.dtype == DType::kInt32)) q.out[0].value = value;
  };
}

ShapeFn constant_of_shape_rule(const Node& n, int64_t) {
  const Attribute* a = n.attr("value");
  const DType t = a ? a->t.dtype : DType::kFloat;
  return [t](ShapeQuery& q) {
    const std::optional<std::vector<int64_t>> dims = q.ints(0);
    if (!dims) {
      const TensorFacts& s = q.input(0);
      const bool count = s.shape && s.shape->rank() == 1 && s.shape->dims[0].value;
      return put(q, 0, t, count ? std::optional<Shape>(unknown_dims(static_cast<size_t>(*s.shape->dims[0].value))) : std::nullopt);
    }
    for (int64_t d : *dims)
      if (d < 0) throw InputError("ConstantOfShape shape " + dims_text(*dims) + " has a negative dim");
    put(q, 0, t, Shape::of(*dims));
  };
}

void range(ShapeQuery& q) {
  const DType t = q.input(0).dtype;
  double v[3];
  for (size_t i = 0; i < 3; ++i) {
    const TensorFacts& f = q.input(i);
    if (f.dtype != DType::kUndefined && f.dtype != t) throw InputError("Range start, limit and delta have different types");
    if (numel(f) && *numel(f) != 1) throw InputError("Range start, limit and delta must be scalars");
    if (!f.value) return put(q, 0, t, Shape{{unknown()}});
    v[i] = f.value->element(0);
  }
  if (v[2] == 0) throw InputError("Range delta must not be 0");
  put(q, 0, t, Shape::of({std::max<int64_t>(0, static_cast<int64_t>(std::ceil((v[1] - v[0]) / v[2])))}));
}

// Pad: pads from the attribute before opset 11, from input 1 (and axes from input 3) after.
ShapeFn pad_rule(const Node& n, int64_t opset) {
  const bool attrs = opset < 11;
  const std::vector<int64_t> pads_attr = n.attr_ints("pads");
  const PadMode mode = pad_mode(n);
  return [=](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    if (!attrs && q.has(2) && q.input(2).dtype != DType::kUndefined && x.dtype != DType::kUndefined &&
        q.input(2).dtype != x.dtype)
      throw InputError("Pad constant_value is " + std::string(dtype_name(q.input(2).dtype)) + " but the data is " +
                       std::string(dtype_name(x.dtype)));
    if (!x.shape) return put(q, 0, x.dtype, std::nullopt);
    std::optional<std::vector<int64_t>> pads = pads_attr, axes = std::vector<int64_t>{};
    if (!attrs) {
      pads = q.ints(1);
      if (q.has(3)) axes = q.ints(3);
    }
    if (!pads || !axes) return put(q, 0, x.dtype, unknown_dims(x.shape->rank()));
    const PadAmounts p = pad_amounts(*pads, *axes, x.shape->rank());
    Shape out = *x.shape;
    for (size_t a = 0; a < out.dims.size(); ++a) {
      if (p.begin[a] == 0 && p.end[a] == 0) continue;
      const std::optional<int64_t> d = x.shape->dims[a].value;
      if (!d) {
        out.dims[a] = unknown();
        continue;
      }
      std::vector<int64_t> one{*d};
      PadAmounts pa{{p.begin[a]}, {p.end[a]}};
      out.dims[a] = known(padded_dims(one, pa, mode)[0]);
    }
    put(q, 0, x.dtype, out);
  };
}

// Resize: scales (input 1 at opset 10, input 2 after) or sizes (input 3).
ShapeFn resize_rule(const Node& n, int64_t opset) {
  resize_attrs(n, opset);  // refuses the modes the kernels do not run
  return [opset](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    if (!x.shape) return put(q, 0, x.dtype, std::nullopt);
    const size_t scales_at = opset < 11 ? 1 : 2;
    std::vector<int64_t> sizes;
    std::vector<float> scales;
    if (opset >= 11 && q.has(3)) {
      const std::optional<std::vector<int64_t>> v = q.ints(3);
      if (!v) return put(q, 0, x.dtype, unknown_dims(x.shape->rank()));
      sizes = *v;
    }
    if (sizes.empty()) {
      if (!q.has(scales_at) || !q.input(scales_at).value) return put(q, 0, x.dtype, unknown_dims(x.shape->rank()));
      const Tensor& t = *q.input(scales_at).value;
      for (int64_t i = 0; i < t.numel(); ++i) scales.push_back(static_cast<float>(t.element(i)));
    }
    const std::optional<std::vector<int64_t>> in = x.dims();
    if (!in) {
      if (sizes.empty()) return put(q, 0, x.dtype, unknown_dims(x.shape->rank()));
      return put(q, 0, x.dtype, Shape::of(resize_output_dims(std::vector<int64_t>(sizes.size(), 1), {}, sizes)));
    }
    put(q, 0, x.dtype, Shape::of(resize_output_dims(*in, scales, sizes)));
  };
}

// ---- ops of third-party exporters' models (issue 31): LRN, quantization, Size, OneHot, the
// recurrent layers and Scan

// LRN: the input's type and shape.
void like_input(ShapeQuery& q) { put_like(q, 0, q.input(0)); }

// QuantizeLinear: x's shape in the zero point's type, uint8 without one.
void quantize_linear(ShapeQuery& q) {
  put(q, 0, q.has(2) ? q.input(2).dtype : DType::kUInt8, q.input(0).shape);
}

// DequantizeLinear: x's shape in the scale's type.
void dequantize_linear(ShapeQuery& q) {
  if (q.has(2) && q.input(2).dtype != DType::kUndefined && q.input(0).dtype != DType::kUndefined &&
      q.input(2).dtype != q.input(0).dtype)
    throw InputError("DequantizeLinear's zero point is " + std::string(dtype_name(q.input(2).dtype)) +
                     " but its input is " + std::string(dtype_name(q.input(0).dtype)));
  put(q, 0, q.input(1).dtype, q.input(0).shape);
}

// DynamicQuantizeLinear(x): y uint8 shaped like x, and the scalars y_scale (float) and y_zero_point (uint8).
void dynamic_quantize_linear(ShapeQuery& q) {
  put(q, 0, DType::kUInt8, q.input(0).shape);
  put(q, 1, DType::kFloat, Shape{});
  put(q, 2, DType::kUInt8, Shape{});
}

// Size: the element count as an int64 scalar (its value too, when every dim is known).
void size_of(ShapeQuery& q) {
  put(q, 0, DType::kInt64, Shape{});
  const std::optional<int64_t> n = numel(q.input(0));
  if (!n || q.out.empty()) return;
  Tensor value(DType::kInt64, {});
  value.mutable_as<int64_t>()[0] = *n;
  q.out[0].value = std::move(value);
}

// OneHot(indices, depth, values): the indices' dims with `depth` inserted at `axis`, the values' type.
ShapeFn one_hot_rule(const Node& n, int64_t) {
  const int64_t axis = n.attr_int("axis", -1);
  return [axis](ShapeQuery& q) {
    const TensorFacts& indices = q.input(0);
    const DType t = q.input(2).dtype;
    if (!indices.shape) return put(q, 0, t, std::nullopt);
    const int64_t rank = rank_of(indices) + 1;
    const size_t at = static_cast<size_t>(normalize_axis(axis, rank));
    Shape out = *indices.shape;
    Dim depth;
    if (q.has(1) && q.input(1).value) {  // any numeric type; a float depth is truncated, as ONNX Runtime does
      const Tensor& d = *q.input(1).value;
      if (d.numel() != 1) throw InputError("OneHot's depth must have one element");
      const int64_t n = static_cast<int64_t>(d.element(0));
      if (n <= 0) throw InputError("OneHot's depth must be positive, got " + std::to_string(n));
      depth = known(n);
    }
    out.dims.insert(out.dims.begin() + static_cast<std::ptrdiff_t>(at), depth);
    put(q, 0, t, out);
  };
}

// ai.onnx.ml's preprocessing ops as ONNX Runtime computes them (backends/cpu/classical_ml.cc):
// Scaler keeps X's dims in float; ArrayFeatureExtractor replaces X's last dim by the number of
// indices ([1, k] for a 1-D X); OneHotEncoder appends the category count to X's dims (X of at most 2
// dims); FeatureVectorizer makes [N, sum of inputdimensions], N the first input's first dim (1 for a
// 1-D input). Every output of these is float but ArrayFeatureExtractor's, X's type.
void scaler(ShapeQuery& q) { put(q, 0, DType::kFloat, q.input(0).shape); }

void array_feature_extractor(ShapeQuery& q) {
  const TensorFacts& x = q.input(0);
  const std::optional<int64_t> k = numel(q.input(1));
  if (!x.shape) return put(q, 0, x.dtype, std::nullopt);
  if (x.shape->rank() == 0) throw InputError("ArrayFeatureExtractor's X has no dims");
  Shape out = *x.shape;
  if (out.rank() == 1) out.dims.insert(out.dims.begin(), known(1));
  out.dims.back() = k ? known(*k) : unknown();
  put(q, 0, x.dtype, out);
}

ShapeFn one_hot_encoder_rule(const Node& n, int64_t) {
  const Attribute* strings = n.attr("cats_strings");
  const int64_t categories = static_cast<int64_t>(n.attr_ints("cats_int64s").size() + (strings ? strings->strings.size() : 0));
  return [categories](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    if (!x.shape) return put(q, 0, DType::kFloat, std::nullopt);
    if (x.shape->rank() > 2) throw InputError("OneHotEncoder takes at most 2 dims, got " + x.shape->str());
    Shape out = *x.shape;
    out.dims.push_back(known(categories));
    put(q, 0, DType::kFloat, out);
  };
}

ShapeFn feature_vectorizer_rule(const Node& n, int64_t) {
  int64_t total = 0;
  for (int64_t d : n.attr_ints("inputdimensions")) total += d;
  return [total](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    Dim batch;
    if (x.shape && x.shape->rank() == 1) batch = known(1);
    else if (x.shape && x.shape->rank() > 1) batch = x.shape->dims[0];
    put(q, 0, DType::kFloat, Shape{{batch, known(total)}});
  };
}

// LSTM, GRU and RNN: Y [seq, directions, batch, hidden] and Y_h (and LSTM's Y_c) [directions,
// batch, hidden]; with layout 1, batch first: [batch, seq, directions, hidden], [batch, directions,
// hidden]. X is [seq, batch, input] (layout 0) or [batch, seq, input].
ShapeFn recurrent_rule(const Node& n, int64_t) {
  const int64_t hidden = n.attr_int("hidden_size", 0);
  const int64_t directions = n.attr_string("direction", "forward") == "bidirectional" ? 2 : 1;
  const bool batch_first = n.attr_int("layout", 0) != 0;
  return [hidden, directions, batch_first](ShapeQuery& q) {
    const TensorFacts& x = q.input(0);
    Dim seq, batch;
    if (x.shape) {
      if (x.shape->rank() != 3) throw InputError("the input must be rank 3, got " + x.shape->str());
      seq = x.shape->dims[batch_first ? 1 : 0];
      batch = x.shape->dims[batch_first ? 0 : 1];
    }
    const Dim h = hidden > 0 ? known(hidden) : unknown(), d = known(directions);
    put(q, 0, x.dtype, batch_first ? Shape{{batch, seq, d, h}} : Shape{{seq, d, batch, h}});
    for (size_t k = 1; k < q.out.size(); ++k) put(q, k, x.dtype, batch_first ? Shape{{batch, d, h}} : Shape{{d, batch, h}});
  };
}

// ai.onnx_amp LSTMGrad (dY, dY_h, dY_c, then LSTM's inputs) and GRUGrad / RNNGrad (dY, dY_h, then
// the layer's inputs): each gradient like the forward input it belongs to (X, W, R, B, initial_h,
// initial_c, P).
template <bool kLstm>
void recurrent_grad(ShapeQuery& q) {
  constexpr size_t first = kLstm ? 3 : 2;
  const std::vector<size_t> like = kLstm ? std::vector<size_t>{0, 1, 2, 3, 5, 6, 7} : std::vector<size_t>{0, 1, 2, 3, 5};
  for (size_t k = 0; k < like.size(); ++k)
    if (q.has(first + like[k])) put_like(q, k, q.input(first + like[k]));
}

// Scan: the states' types and shapes, then each scan output: the body output's declared type and
// shape with the sequence length inserted at its scan_output_axes entry.
ShapeFn scan_rule(const Node& n, int64_t) {
  const int64_t scan_inputs = n.attr_int("num_scan_inputs", 0);
  const std::vector<int64_t> input_axes = n.attr_ints("scan_input_axes");
  const std::vector<int64_t> output_axes = n.attr_ints("scan_output_axes");
  std::vector<ValueType> body_outputs;
  if (const std::vector<Graph*> bodies = n.subgraphs(); !bodies.empty())
    for (const Value* v : bodies[0]->outputs()) body_outputs.push_back(v->type());
  return [scan_inputs, input_axes, output_axes, body_outputs](ShapeQuery& q) {
    const size_t states = q.in.size() - static_cast<size_t>(scan_inputs);
    for (size_t k = 0; k < states && k < q.out.size(); ++k) put_like(q, k, q.input(k));
    Dim length;
    if (scan_inputs > 0 && q.input(states).shape) {
      const TensorFacts& first = q.input(states);
      const int64_t axis = input_axes.empty() ? 0 : normalize_axis(input_axes[0], rank_of(first));
      length = first.shape->dims[static_cast<size_t>(axis)];
    }
    for (size_t k = states; k < q.out.size(); ++k) {
      const ValueType* body = k < body_outputs.size() ? &body_outputs[k] : nullptr;
      if (!body || !body->shape) {
        put(q, k, body ? body->elem : DType::kUndefined, std::nullopt);
        continue;
      }
      Shape out = *body->shape;
      const size_t j = k - states;
      const int64_t axis = j < output_axes.size() ? normalize_axis(output_axes[j], static_cast<int64_t>(out.rank()) + 1) : 0;
      out.dims.insert(out.dims.begin() + axis, length);
      put(q, k, body->elem, out);
    }
  };
}

// Loop and If: what their subgraphs declare, as far as it holds without running them (the CPU
// backend runs them while planning and takes the dims from the run). Loop: a carried value keeps
// its initial type, and its shape when the body declares the same one; a scan output is the body
// output's type with an axis of unknown length in front. If: a branch output's declared type, and
// its shape where both branches declare the same.
ShapeFn loop_rule(const Node& n, int64_t) {
  std::vector<ValueType> body_outputs;
  if (const std::vector<Graph*> bodies = n.subgraphs(); !bodies.empty())
    for (const Value* v : bodies[0]->outputs()) body_outputs.push_back(v->type());
  return [body_outputs](ShapeQuery& q) {
    const size_t carried = q.in.size() >= 2 ? q.in.size() - 2 : 0;
    for (size_t k = 0; k < q.out.size(); ++k) {
      const ValueType* body = k + 1 < body_outputs.size() ? &body_outputs[k + 1] : nullptr;
      if (k < carried) {
        if (!q.has(k + 2)) continue;
        const TensorFacts& initial = q.input(k + 2);
        put(q, k, initial.dtype, body && body->shape && initial.shape && *body->shape == *initial.shape ? initial.shape : std::nullopt);
        continue;
      }
      if (!body) continue;
      std::optional<Shape> shape;
      if (body->shape) {
        shape = *body->shape;
        shape->dims.insert(shape->dims.begin(), Dim{});
      }
      put(q, k, body->elem, shape);
    }
  };
}

ShapeFn if_rule(const Node& n, int64_t) {
  const Attribute* then_branch = n.attr("then_branch");
  const Attribute* else_branch = n.attr("else_branch");
  std::vector<ValueType> then_types, else_types;
  if (then_branch && then_branch->g)
    for (const Value* v : then_branch->g->outputs()) then_types.push_back(v->type());
  if (else_branch && else_branch->g)
    for (const Value* v : else_branch->g->outputs()) else_types.push_back(v->type());
  return [then_types, else_types](ShapeQuery& q) {
    for (size_t k = 0; k < q.out.size() && k < then_types.size(); ++k) {
      const ValueType& t = then_types[k];
      const bool same = k < else_types.size() && t.shape && else_types[k].shape && *t.shape == *else_types[k].shape;
      put(q, k, t.elem, same ? t.shape : std::nullopt);
    }
  };
}

// ---- the table of rules

const std::map<std::pair<std::string, std::string>, ShapeRule>& rules() {
  static const std::map<std::pair<std::string, std::string>, ShapeRule> table = [] {
    std::map<std::pair<std::string, std::string>, ShapeRule> t;
    for (int k = static_cast<int>(ElemOp::kConstant) + 1; k < kNumElemOps; ++k) {
      const ElemNode& node = elem_op_info(static_cast<ElemOp>(k)).node;
      t[{node.domain, node.op}] = ShapeRule{elementwise_rule, {}};
    }
    const std::pair<const char*, ShapeRule> onnx_rules[] = {
        {"Dropout", {plain<dropout>, {}}},
        {"CastLike", {plain<cast_like>, {}}},
        {"Mean", {plain<broadcast_same_type>, {}}},
        {"BitShift", {plain<broadcast_same_type>, {}}},
        {"IsNaN", {plain<float_class>, {}}},
        {"IsInf", {plain<float_class>, {}}},
        {"Softmax", {softmax_rule, {}}},
        {"LogSoftmax", {softmax_rule, {}}},
        {"LayerNormalization", {layer_norm_rule, {}}},
        {"BatchNormalization", {plain<batch_norm>, {}}},
        {"InstanceNormalization", {plain<instance_norm>, {}}},
        {"MeanVarianceNormalization", {mean_variance_norm_rule, {}}},
        {"Trilu", {plain<trilu>, {}}},
        {"Reshape", {reshape_rule, {1}}},
        {"Flatten", {flatten_rule, {}}},
        {"Squeeze", {squeeze_rule, {1}}},
        {"Unsqueeze", {unsqueeze_rule, {1}}},
        {"Transpose", {transpose_rule, {}}},
        {"Slice", {slice_rule, {1, 2, 3, 4}}},
        {"Pad", {pad_rule, {1, 3}}},
        {"Resize", {resize_rule, {1, 2, 3}}},
        {"ScatterND", {plain<scatter_nd>, {}}},
        {"ScatterElements", {plain<scatter_elements>, {}}},
        {"GatherElements", {plain<gather_elements>, {}}},
        {"GatherND", {gather_nd_rule, {}}},
        {"Tile", {plain<tile>, {1}}},
        {"CumSum", {plain<cumsum>, {}}},
        {"DepthToSpace", {depth_space_rule<true>, {}}},
        {"SpaceToDepth", {depth_space_rule<false>, {}}},
        {"TopK", {top_k_rule, {1}}},
        {"NonZero", {plain<nonzero>, {0}}},
        {"Compress", {compress_rule, {1}}},
        {"EyeLike", {eye_like_rule, {}}},
        {"RandomUniform", {random_rule, {}}},
        {"RandomNormal", {random_rule, {}}},
        {"RandomUniformLike", {random_rule, {}}},
        {"RandomNormalLike", {random_rule, {}}},
        {"Bernoulli", {random_rule, {}}},
        {"ReverseSequence", {plain<like_input>, {}}},
        {"Hardmax", {plain<like_input>, {}}},
        {"NonMaxSuppression", {plain<non_max_suppression>, {}}},
        {"MaxUnpool", {max_unpool_rule, {2}}},
        {"Unique", {unique_rule, {}}},
        {"RoiAlign", {roi_align_rule, {}}},
        {"GridSample", {plain<grid_sample>, {}}},
        {"Einsum", {einsum_rule, {}}},
        {"Expand", {plain<expand>, {1}}},
        {"Concat", {concat_rule, {}}},
        {"Split", {split_rule, {1}}},
        {"Gather", {gather_rule, {}}},
        {"Shape", {shape_of_rule, {}}},
        {"MatMul", {plain<matmul>, {}}},
        {"MatMulInteger", {plain<matmul_integer>, {}}},
        {"QLinearMatMul", {plain<qlinear_matmul>, {}}},
        {"Gemm", {gemm_rule, {}}},
        {"Conv", {conv_rule, {}}},
        {"ConvInteger", {conv_integer_rule, {}}},
        {"QLinearConv", {qlinear_conv_rule, {}}},
        {"ConvTranspose", {conv_transpose_rule, {}}},
        {"MaxPool", {pool_rule, {}}},
        {"AveragePool", {pool_rule, {}}},
        {"GlobalAveragePool", {plain<global_pool>, {}}},
        {"GlobalMaxPool", {plain<global_pool>, {}}},
        {"ReduceMax", {reduce_rule, {1}}},
        {"ReduceMin", {reduce_rule, {1}}},
        {"ReduceMean", {reduce_rule, {1}}},
        {"ReduceSum", {reduce_rule, {1}}},
        {"ReduceProd", {reduce_rule, {1}}},
        {"ReduceL1", {reduce_rule, {1}}},
        {"ReduceL2", {reduce_rule, {1}}},
        {"ReduceLogSum", {reduce_rule, {1}}},
        {"ReduceLogSumExp", {reduce_rule, {1}}},
        {"ReduceSumSquare", {reduce_rule, {1}}},
        {"ArgMax", {arg_extremum_rule, {}}},
        {"ArgMin", {arg_extremum_rule, {}}},
        {"LRN", {plain<like_input>, {}}},
        {"QuantizeLinear", {plain<quantize_linear>, {}}},
        {"DynamicQuantizeLinear", {plain<dynamic_quantize_linear>, {}}},
        {"DequantizeLinear", {plain<dequantize_linear>, {}}},
        {"Size", {plain<size_of>, {}}},
        {"OneHot", {one_hot_rule, {1}}},
        {"LSTM", {recurrent_rule, {}}},
        {"GRU", {recurrent_rule, {}}},
        {"RNN", {recurrent_rule, {}}},
        {"Scan", {scan_rule, {}}},
        {"Loop", {loop_rule, {}}},
        {"If", {if_rule, {}}},
        {"SoftmaxCrossEntropyLoss", {loss_rule, {}}},
        {"NegativeLogLikelihoodLoss", {loss_rule, {}}},
        {"Constant", {constant_rule, {}}},
        {"ConstantOfShape", {constant_of_shape_rule, {0}}},
        {"Range", {plain<range>, {0, 1, 2}}},
    };
    for (const auto& [op, rule] : onnx_rules) t[{"", op}] = rule;
    t[{kAmpDomain, "Attention"}] = {plain<attention>, {}};
    t[{kAmpDomain, "AttentionGrad"}] = {plain<attention_grad>, {}};
    t[{kAmpDomain, "LSTMGrad"}] = {plain<recurrent_grad<true>>, {}};
    t[{kAmpDomain, "GRUGrad"}] = {plain<recurrent_grad<false>>, {}};
    t[{kAmpDomain, "RNNGrad"}] = {plain<recurrent_grad<false>>, {}};
    // Ops of opsets 18+ the import carries into ai.onnx_amp (graph/onnx_newer_opsets.h).
    for (const char* op : {"BitwiseAnd", "BitwiseOr", "BitwiseXor"}) t[{kAmpDomain, op}] = {plain<broadcast_same_type>, {}};
    t[{kAmpDomain, "BitwiseNot"}] = {plain<like_input>, {}};
    t[{kAmpDomain, "ScatterElements"}] = {plain<scatter_elements>, {}};
    t[{kAmpDomain, "ScatterND"}] = {plain<scatter_nd>, {}};
    t[{kAmpDomain, "DeformConv"}] = {deform_conv_rule, {}};
    t[{kAmpDomain, "DeformConvGrad"}] = {plain<deform_conv_grad>, {}};
    t[{kAmpDomain, "Col2Im"}] = {col2im_rule, {1, 2}};
    t[{kAmpDomain, "Im2Col"}] = {im2col_rule, {1}};
    t[{kOnnxMlDomain, "Scaler"}] = {plain<scaler>, {}};
    t[{kOnnxMlDomain, "ArrayFeatureExtractor"}] = {plain<array_feature_extractor>, {}};
    t[{kOnnxMlDomain, "OneHotEncoder"}] = {one_hot_encoder_rule, {}};
    t[{kOnnxMlDomain, "FeatureVectorizer"}] = {feature_vectorizer_rule, {}};
    return t;
  }();
  return table;
}

}  // namespace

std::optional<Shape> broadcast_shapes(const std::vector<const std::optional<Shape>*>& shapes) {
  size_t rank = 0;
  for (const std::optional<Shape>* s : shapes) {
    if (!*s) return std::nullopt;
    rank = std::max(rank, (*s)->rank());
  }
  Shape out = unknown_dims(rank);
  for (size_t d = 0; d < rank; ++d) {
    std::optional<int64_t> extent;  // the known extent other than 1
    bool all_one = true;
    std::string param;              // the name every unknown extent shares, "" when they differ
    bool unnamed = false;
    for (const std::optional<Shape>* s : shapes) {
      const size_t shift = rank - (*s)->rank();
      if (d < shift) continue;
      const Dim& v = (*s)->dims[d - shift];
      if (v.value) {
        if (*v.value == 1) continue;
        if (extent && *extent != *v.value) {
          std::string text;
          for (const std::optional<Shape>* e : shapes) text += (text.empty() ? "" : " and ") + (*e)->str();
          throw InputError("shapes " + text + " do not broadcast");
        }
        extent = v.value;
        all_one = false;
      } else {
        all_one = false;
        if (v.param.empty() || (!param.empty() && param != v.param)) unnamed = true;
        else param = v.param;
      }
    }
    if (extent) out.dims[d] = known(*extent);
    else if (all_one) out.dims[d] = known(1);
    else if (!unnamed) out.dims[d] = Dim::symbol(param);
  }
  return out;
}

const ShapeRule* find_shape_rule(std::string_view domain, std::string_view op) {
  auto it = rules().find({std::string(domain), std::string(op)});
  return it == rules().end() ? nullptr : &it->second;
}

std::optional<std::vector<TensorFacts>> infer_output_facts(const Node& n, int64_t opset,
                                                           const std::vector<const TensorFacts*>& in,
                                                           std::vector<TensorFacts> out) {
  const ShapeRule* rule = find_shape_rule(n.domain(), n.op_type());
  if (!rule) return std::nullopt;
  ShapeQuery q{in, std::move(out)};
  rule->bind(n, opset)(q);
  return std::move(q.out);
}

}  // namespace amp
