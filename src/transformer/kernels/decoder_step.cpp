// One incremental decoding step of a Transformer decoder, in C++ (transformer.kernels.native_step).
//
// The arithmetic is the Python decoder's (transformer/model/decoder.py; the int8 layers of
// transformer/model/quantization.py, the oneDNN fp32 layers of transformer/model/fp32_kernels.py, plain float32
// or bfloat16 layers otherwise), call for call through the same ATen kernels and the same packed weights; what
// this file removes is Python's cost per operation (the module calls, the argument parsing, the dispatch from
// Python), which at small batches is most of a CPU decoding step.

#include <torch/extension.h>
#include <ATen/ScalarOps.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <ATen/native/quantized/PackedParams.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace {

using PackedLinear = c10::intrusive_ptr<LinearPackedParamsBase>;

// The C++ object behind a Python ``torch.ScriptObject`` made by ``torch.ops.quantized.linear_prepack``.
PackedLinear unwrap_packed(py::handle script_object) {
  return torch::jit::toIValue(script_object, c10::AnyType::get()).toCustomClass<LinearPackedParamsBase>();
}

// oneDNN's fp32 linear on a weight packed by torch.ops.mkldnn._reorder_linear_weight (boxed: a private operator).
at::Tensor onednn_linear(const at::Tensor& input, const at::Tensor& packed_weight,
                         const std::optional<at::Tensor>& bias) {
  static const c10::OperatorHandle op =
      c10::Dispatcher::singleton().findSchemaOrThrow("mkldnn::_linear_pointwise", "");
  torch::jit::Stack stack;
  stack.reserve(6);
  stack.emplace_back(input);
  stack.emplace_back(packed_weight);
  stack.emplace_back(bias.has_value() ? c10::IValue(*bias) : c10::IValue());
  stack.emplace_back(std::string("none"));
  stack.emplace_back(c10::List<std::optional<c10::Scalar>>());
  stack.emplace_back(std::string(""));
  op.callBoxed(&stack);
  return stack[0].toTensor();
}

// A linear layer as the Python model holds it: int8 packed (FBGEMM or oneDNN), oneDNN-packed fp32, or dense.
struct Linear {
  std::string kind;  // "int8", "onednn" or "dense"
  PackedLinear packed;
  bool reduce_range = false;
  at::Tensor weight;
  std::optional<at::Tensor> bias;

  static Linear from_spec(py::handle spec) {
    py::tuple fields = spec.cast<py::tuple>();
    Linear linear;
    linear.kind = fields[0].cast<std::string>();
    if (linear.kind == "int8") {
      linear.packed = unwrap_packed(fields[1]);
      linear.reduce_range = fields[2].cast<bool>();
    } else if (linear.kind == "onednn" || linear.kind == "dense") {
      linear.weight = fields[1].cast<at::Tensor>();
      if (!fields[2].is_none()) linear.bias = fields[2].cast<at::Tensor>();
    } else {
      TORCH_CHECK(false, "unknown linear kind ", linear.kind);
    }
    return linear;
  }

  at::Tensor operator()(const at::Tensor& input) const {
    if (kind == "int8") return packed->apply_dynamic(input, reduce_range);
    if (kind == "onednn") return onednn_linear(input, weight, bias);
    return at::linear(input, weight, bias);
  }
};

// The most negative finite value of a floating dtype (torch.finfo(dtype).min), which masked scores get.
double lowest_of(at::ScalarType dtype) {
  switch (dtype) {
    case at::kBFloat16:
      return static_cast<double>(std::numeric_limits<c10::BFloat16>::lowest());
    case at::kHalf:
      return static_cast<double>(std::numeric_limits<c10::Half>::lowest());
    case at::kDouble:
      return std::numeric_limits<double>::lowest();
    default:
      return static_cast<double>(std::numeric_limits<float>::lowest());
  }
}

// Eq. (1) as transformer.model.scaled_dot_product_attention computes it without weights or dropout: the explicit
// formula while both lengths are at most explicit_max_length (unless the layer is set to "fused"), the fused
// kernel beyond; a query with no key to attend to gets zeros either way.
struct Attention {
  Attention(double attention_scale, const std::string& scaling, bool fused_attention, int64_t explicit_max_length)
      : attention_scale_(at::native::wrapped_scalar_tensor(attention_scale)),
        scale_queries_(scaling != "none"),
        fused_scale_(scaling == "sqrt" ? std::nullopt : std::optional<double>(attention_scale)),
        fused_attention_(fused_attention),
        explicit_max_length_(explicit_max_length) {}

  at::Tensor attend(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                    const std::optional<at::Tensor>& attend_mask) const {
    const bool is_short = std::max(query.size(-2), key.size(-2)) <= explicit_max_length_;
    if (!fused_attention_ || is_short) {
      at::Tensor scaled = scale_queries_ ? query * attention_scale_ : query;
      at::Tensor scores = at::matmul(scaled, key.transpose(-2, -1));
      const bool low_precision = scores.scalar_type() == at::kBFloat16 || scores.scalar_type() == at::kHalf;
      const std::optional<at::ScalarType> softmax_dtype =
          low_precision ? std::optional<at::ScalarType>(at::kFloat) : std::nullopt;
      if (attend_mask.has_value()) {
        at::Tensor blocked = attend_mask->logical_not();
        scores = scores.masked_fill(blocked, lowest_of(scores.scalar_type()));
        at::Tensor weights = at::softmax(scores, -1, softmax_dtype).to(value.scalar_type()).masked_fill(blocked, 0.0);
        return at::matmul(weights, value);
      }
      return at::matmul(at::softmax(scores, -1, softmax_dtype).to(value.scalar_type()), value);
    }
    if (!attend_mask.has_value()) {
      return at::scaled_dot_product_attention(query, key, value, std::nullopt, 0.0, false, fused_scale_);
    }
    at::Tensor query_has_key = attend_mask->any(-1, true);
    at::Tensor output = at::scaled_dot_product_attention(query, key, value, *attend_mask | query_has_key.logical_not(),
                                                         0.0, false, fused_scale_);
    return output.masked_fill(query_has_key.logical_not(), 0.0);
  }

  // Python multiplies by a float as a "wrapped number" tensor; a C++ Scalar rounds differently in bfloat16.
  at::Tensor attention_scale_;
  bool scale_queries_;
  std::optional<double> fused_scale_;
  bool fused_attention_;
  int64_t explicit_max_length_;
};

// The feed-forward network's activation (transformer/model/feed_forward.py).
at::Tensor activate(const at::Tensor& inner, const std::string& activation) {
  if (activation == "relu") return at::relu(inner);
  return activation == "gelu" ? at::gelu(inner) : at::silu(inner);
}

// What every layer of both stacks shares: the attention rule, pre- or post-norm, the activation. Built from the
// settings tuple of native_step._stack_settings: (num_heads, attention_scale, scaling, fused_attention,
// explicit_max_length, norm_first, layer_norm_eps, activation).
struct Rules {
  explicit Rules(const py::tuple& settings)
      : num_heads(settings[0].cast<int64_t>()),
        attention(settings[1].cast<double>(), settings[2].cast<std::string>(), settings[3].cast<bool>(),
                  settings[4].cast<int64_t>()),
        norm_first(settings[5].cast<bool>()),
        eps(settings[6].cast<double>()),
        activation(settings[7].cast<std::string>()) {
    TORCH_CHECK(activation == "relu" || activation == "gelu" || activation == "silu", "unknown activation ",
                activation);
  }

  // Pre-norm normalises a sub-layer's input; post-norm passes it through and normalises the sum instead.
  at::Tensor normalize(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& bias) const {
    return norm_first ? at::layer_norm(hidden, {hidden.size(-1)}, weight, bias, eps) : hidden;
  }

  at::Tensor residual(const at::Tensor& hidden, const at::Tensor& sublayer_output, const at::Tensor& weight,
                      const at::Tensor& bias) const {
    at::Tensor summed = hidden + sublayer_output;
    return norm_first ? summed : at::layer_norm(summed, {summed.size(-1)}, weight, bias, eps);
  }

  int64_t num_heads;
  Attention attention;
  bool norm_first;
  double eps;
  std::string activation;
};

struct DecoderLayerWeights {
  at::Tensor self_norm_weight, self_norm_bias, cross_norm_weight, cross_norm_bias, ff_norm_weight, ff_norm_bias;
  Linear qkv, self_out, cross_query, cross_out, ff_in, ff_out;
};

class DecoderStep {
 public:
  DecoderStep(py::list layers, std::optional<at::Tensor> final_norm_weight,
              std::optional<at::Tensor> final_norm_bias, py::object output_projection,
              std::optional<at::Tensor> output_bias, at::Tensor embedding, double embedding_scale,
              const py::tuple& settings)
      : final_norm_weight_(std::move(final_norm_weight)),
        final_norm_bias_(std::move(final_norm_bias)),
        output_projection_(Linear::from_spec(output_projection)),
        output_bias_(std::move(output_bias)),
        embedding_(std::move(embedding)),
        embedding_scale_(at::native::wrapped_scalar_tensor(embedding_scale)),
        rules_(settings) {
    for (py::handle item : layers) {
      py::tuple fields = item.cast<py::tuple>();
      TORCH_CHECK(fields.size() == 12, "a decoder layer needs 12 fields, got ", fields.size());
      layers_.push_back({fields[0].cast<at::Tensor>(), fields[1].cast<at::Tensor>(), fields[2].cast<at::Tensor>(),
                         fields[3].cast<at::Tensor>(), fields[4].cast<at::Tensor>(), fields[5].cast<at::Tensor>(),
                         Linear::from_spec(fields[6]), Linear::from_spec(fields[7]),
                         Linear::from_spec(fields[8]), Linear::from_spec(fields[9]),
                         Linear::from_spec(fields[10]), Linear::from_spec(fields[11])});
    }
  }

  // tokens (rows,) int64. position_table (positions, d_model) or None: row ``position`` is added to every row, or
  // row positions[r] to row r when ``positions`` (rows,) is given. self_keys/self_values per layer (rows, heads,
  // decoded_len, head_dim), replaced by the extended caches; self_mask (rows, 1, 1, decoded_len + 1) bool or
  // None (every key visible). cross_keys/cross_values per layer (sentences, heads, src_len, head_dim);
  // cross_mask (sentences, 1, 1, src_len) bool. Returns the logits (rows, 1, vocab) or, with ``project``
  // false, the final decoder states (rows, 1, d_model), in the model's dtype.
  at::Tensor step(const at::Tensor& tokens, const std::optional<at::Tensor>& position_table, int64_t position,
                  const std::optional<at::Tensor>& positions, std::vector<at::Tensor>& self_keys,
                  std::vector<at::Tensor>& self_values, const std::optional<at::Tensor>& self_mask,
                  const std::vector<at::Tensor>& cross_keys, const std::vector<at::Tensor>& cross_values,
                  const at::Tensor& cross_mask, int64_t rows_per_source, bool project) {
    at::InferenceMode inference_mode;
    const int64_t rows = tokens.size(0);
    const int64_t d_model = embedding_.size(1);
    const int64_t head_dim = d_model / rules_.num_heads;
    const int64_t sentences = rows / rows_per_source;
    TORCH_CHECK(self_keys.size() == layers_.size() && cross_keys.size() == layers_.size(),
                "one cache entry per decoder layer");
    // Shapes are the Python decoder's, (rows, 1, d_model), not (rows, d_model): some kernels (bf16 layer norm)
    // round differently by shape, and the point is the same bits.
    at::Tensor hidden = at::embedding(embedding_, tokens.unsqueeze(1)).mul_(embedding_scale_);
    if (position_table.has_value()) {
      hidden.add_(positions.has_value() ? position_table->index_select(0, *positions).unsqueeze(1)
                                        : position_table->select(0, position));
    }
    for (size_t index = 0; index < layers_.size(); ++index) {
      const DecoderLayerWeights& layer = layers_[index];
      // Masked self-attention over the cached positions and the new one.
      at::Tensor input = rules_.normalize(hidden, layer.self_norm_weight, layer.self_norm_bias);
      at::Tensor projected = layer.qkv(input).view({rows, 3, rules_.num_heads, 1, head_dim});
      at::Tensor query = projected.select(1, 0);
      at::Tensor key = projected.select(1, 1);
      at::Tensor value = projected.select(1, 2);
      if (self_keys[index].size(2) > 0) {
        key = at::cat({self_keys[index], key}, 2);
        value = at::cat({self_values[index], value}, 2);
      } else {
        key = key.contiguous();
        value = value.contiguous();
      }
      self_keys[index] = key;
      self_values[index] = value;
      at::Tensor attended = rules_.attention.attend(query, key, value, self_mask);  // (rows, heads, 1, head_dim)
      hidden = rules_.residual(hidden, layer.self_out(attended.view({rows, 1, d_model})),
                        layer.self_norm_weight, layer.self_norm_bias);
      // Encoder-decoder attention: the beams of one source folded into one query block.
      input = rules_.normalize(hidden, layer.cross_norm_weight, layer.cross_norm_bias);
      at::Tensor cross_query = layer.cross_query(input)
                                   .view({sentences, rows_per_source, rules_.num_heads, head_dim})
                                   .transpose(1, 2);  // (sentences, heads, rows_per_source, head_dim)
      attended = rules_.attention.attend(cross_query, cross_keys[index], cross_values[index], cross_mask);
      attended = attended.transpose(1, 2).reshape({rows, 1, d_model});
      hidden = rules_.residual(hidden, layer.cross_out(attended), layer.cross_norm_weight,
                        layer.cross_norm_bias);
      // Position-wise feed-forward network.
      input = rules_.normalize(hidden, layer.ff_norm_weight, layer.ff_norm_bias);
      at::Tensor inner = layer.ff_in(input);
      hidden = rules_.residual(hidden, layer.ff_out(activate(inner, rules_.activation)), layer.ff_norm_weight,
                        layer.ff_norm_bias);
    }
    if (final_norm_weight_.has_value()) {
      hidden = at::layer_norm(hidden, {d_model}, *final_norm_weight_, *final_norm_bias_, rules_.eps);
    }
    if (!project) {
      return hidden;  // (rows, 1, d_model)
    }
    at::Tensor logits = output_projection_(hidden);  // (rows, 1, vocab)
    return output_bias_.has_value() ? logits.add_(*output_bias_) : logits;
  }

 private:
  std::vector<DecoderLayerWeights> layers_;
  std::optional<at::Tensor> final_norm_weight_, final_norm_bias_;
  Linear output_projection_;
  std::optional<at::Tensor> output_bias_;
  at::Tensor embedding_;
  // Python multiplies by a float as a "wrapped number" tensor; a C++ Scalar rounds differently in bfloat16.
  at::Tensor embedding_scale_;
  Rules rules_;
};


struct EncoderLayerWeights {
  at::Tensor self_norm_weight, self_norm_bias, ff_norm_weight, ff_norm_bias;
  Linear qkv, self_out, ff_in, ff_out;
};

// The encoder (transformer/model/encoder.py) and the decoder's projection of its output into every layer's
// cross-attention keys and values (Decoder.init_cache), as the Python model runs them, op for op.
class EncoderForward {
 public:
  EncoderForward(py::list layers, py::list cross_projections, std::optional<at::Tensor> final_norm_weight,
                 std::optional<at::Tensor> final_norm_bias, at::Tensor embedding, double embedding_scale,
                 const py::tuple& settings)
      : final_norm_weight_(std::move(final_norm_weight)),
        final_norm_bias_(std::move(final_norm_bias)),
        embedding_(std::move(embedding)),
        embedding_scale_(at::native::wrapped_scalar_tensor(embedding_scale)),
        rules_(settings) {
    for (py::handle item : layers) {
      py::tuple fields = item.cast<py::tuple>();
      TORCH_CHECK(fields.size() == 8, "an encoder layer needs 8 fields, got ", fields.size());
      layers_.push_back({fields[0].cast<at::Tensor>(), fields[1].cast<at::Tensor>(), fields[2].cast<at::Tensor>(),
                         fields[3].cast<at::Tensor>(), Linear::from_spec(fields[4]), Linear::from_spec(fields[5]),
                         Linear::from_spec(fields[6]), Linear::from_spec(fields[7])});
    }
    for (py::handle item : cross_projections) {
      py::tuple fields = item.cast<py::tuple>();
      cross_projections_.emplace_back(Linear::from_spec(fields[0]), Linear::from_spec(fields[1]));
    }
  }

  // src_tokens (batch, src_len) int64; position_table (positions, d_model) or None; attend_mask (batch, 1, 1,
  // src_len) bool. Returns the memory (batch, src_len, d_model) and, per decoder layer, the cross-attention
  // keys (laid out so that key.transpose(-2, -1) is contiguous) and values (batch, heads, src_len, head_dim).
  std::tuple<at::Tensor, std::vector<at::Tensor>, std::vector<at::Tensor>> forward(
      const at::Tensor& src_tokens, const std::optional<at::Tensor>& position_table,
      const at::Tensor& attend_mask) const {
    at::InferenceMode inference_mode;
    const int64_t src_len = src_tokens.size(1);
    at::Tensor hidden = at::embedding(embedding_, src_tokens).mul_(embedding_scale_);  // (batch, src_len, d)
    if (position_table.has_value()) {
      hidden = hidden + position_table->slice(0, 0, src_len);
    }
    for (const EncoderLayerWeights& layer : layers_) {
      at::Tensor input = rules_.normalize(hidden, layer.self_norm_weight, layer.self_norm_bias);
      std::vector<at::Tensor> qkv = layer.qkv(input).chunk(3, -1);
      at::Tensor attended = rules_.attention.attend(split_heads(qkv[0]), split_heads(qkv[1]), split_heads(qkv[2]),
                                              attend_mask);
      hidden = rules_.residual(hidden, layer.self_out(merge_heads(attended)), layer.self_norm_weight,
                        layer.self_norm_bias);
      input = rules_.normalize(hidden, layer.ff_norm_weight, layer.ff_norm_bias);
      at::Tensor inner = activate(layer.ff_in(input), rules_.activation);
      hidden = rules_.residual(hidden, layer.ff_out(inner), layer.ff_norm_weight, layer.ff_norm_bias);
    }
    if (final_norm_weight_.has_value()) {
      hidden = at::layer_norm(hidden, {hidden.size(-1)}, *final_norm_weight_, *final_norm_bias_, rules_.eps);
    }
    std::vector<at::Tensor> keys, values;
    for (const auto& [key_projection, value_projection] : cross_projections_) {
      keys.push_back(split_heads(key_projection(hidden)).transpose(-2, -1).contiguous().transpose(-2, -1));
      values.push_back(split_heads(value_projection(hidden)).contiguous());
    }
    return {hidden, keys, values};
  }

 private:
  // (batch, len, d_model) -> (batch, heads, len, head_dim), a view (multihead_attention.split_heads).
  at::Tensor split_heads(const at::Tensor& hidden) const {
    return hidden.view({hidden.size(0), hidden.size(1), rules_.num_heads, -1}).transpose(1, 2);
  }

  static at::Tensor merge_heads(const at::Tensor& heads) {
    return heads.transpose(1, 2).reshape({heads.size(0), heads.size(2), heads.size(1) * heads.size(3)});
  }

  std::vector<EncoderLayerWeights> layers_;
  std::vector<std::pair<Linear, Linear>> cross_projections_;
  std::optional<at::Tensor> final_norm_weight_, final_norm_bias_;
  at::Tensor embedding_;
  at::Tensor embedding_scale_;
  Rules rules_;
};

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, module) {
  py::class_<DecoderStep>(module, "DecoderStep")
      .def(py::init<py::list, std::optional<at::Tensor>, std::optional<at::Tensor>, py::object,
                    std::optional<at::Tensor>, at::Tensor, double, const py::tuple&>())
      .def("step", [](DecoderStep& self, const at::Tensor& tokens, const std::optional<at::Tensor>& position_table,
                      int64_t position, const std::optional<at::Tensor>& positions,
                      std::vector<at::Tensor> self_keys, std::vector<at::Tensor> self_values,
                      const std::optional<at::Tensor>& self_mask, const std::vector<at::Tensor>& cross_keys,
                      const std::vector<at::Tensor>& cross_values, const at::Tensor& cross_mask,
                      int64_t rows_per_source, bool project) {
        at::Tensor output;
        {
          py::gil_scoped_release release;  // ATen does not need it: the server's other threads may run meanwhile
          output = self.step(tokens, position_table, position, positions, self_keys, self_values, self_mask,
                             cross_keys, cross_values, cross_mask, rows_per_source, project);
        }
        return py::make_tuple(output, self_keys, self_values);
      });
  py::class_<EncoderForward>(module, "EncoderForward")
      .def(py::init<py::list, py::list, std::optional<at::Tensor>, std::optional<at::Tensor>, at::Tensor, double,
                    const py::tuple&>())
      .def("forward", &EncoderForward::forward, py::call_guard<py::gil_scoped_release>());
}
