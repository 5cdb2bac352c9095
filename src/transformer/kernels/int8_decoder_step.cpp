// One incremental decoding step of an int8 Transformer decoder, in C++ (transformer.kernels.native_step).
//
// The arithmetic is the Python decoder's (transformer/model/decoder.py, with the int8 layers of
// transformer/model/quantization.py), call for call through the same ATen kernels and the same packed FBGEMM or
// oneDNN weights; what this file removes is Python's cost per operation (the module calls, the argument
// parsing, the dispatch from Python), which at small batches is most of a CPU decoding step.

#include <torch/extension.h>
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

struct DecoderLayerWeights {
  at::Tensor self_norm_weight, self_norm_bias, cross_norm_weight, cross_norm_bias, ff_norm_weight, ff_norm_bias;
  PackedLinear qkv, self_out, cross_query, cross_out, ff_in, ff_out;
};

class Int8DecoderStep {
 public:
  Int8DecoderStep(py::list layers, std::optional<at::Tensor> final_norm_weight,
                  std::optional<at::Tensor> final_norm_bias, py::object output_projection,
                  std::optional<at::Tensor> output_bias, at::Tensor embedding, double embedding_scale,
                  int64_t num_heads, double attention_scale, std::string scaling, bool fused_attention,
                  int64_t explicit_max_length, bool norm_first, double layer_norm_eps, std::string activation,
                  bool reduce_range)
      : final_norm_weight_(std::move(final_norm_weight)),
        final_norm_bias_(std::move(final_norm_bias)),
        output_projection_(unwrap_packed(output_projection)),
        output_bias_(std::move(output_bias)),
        embedding_(std::move(embedding)),
        embedding_scale_(embedding_scale),
        num_heads_(num_heads),
        attention_scale_(attention_scale),
        scale_queries_(scaling != "none"),
        fused_scale_(scaling == "sqrt" ? std::nullopt : std::optional<double>(attention_scale)),
        fused_attention_(fused_attention),
        explicit_max_length_(explicit_max_length),
        norm_first_(norm_first),
        eps_(layer_norm_eps),
        activation_(std::move(activation)),
        reduce_range_(reduce_range) {
    for (py::handle item : layers) {
      py::tuple fields = item.cast<py::tuple>();
      TORCH_CHECK(fields.size() == 12, "a decoder layer needs 12 fields, got ", fields.size());
      layers_.push_back({fields[0].cast<at::Tensor>(), fields[1].cast<at::Tensor>(), fields[2].cast<at::Tensor>(),
                         fields[3].cast<at::Tensor>(), fields[4].cast<at::Tensor>(), fields[5].cast<at::Tensor>(),
                         unwrap_packed(fields[6]), unwrap_packed(fields[7]), unwrap_packed(fields[8]),
                         unwrap_packed(fields[9]), unwrap_packed(fields[10]), unwrap_packed(fields[11])});
    }
    TORCH_CHECK(activation_ == "relu" || activation_ == "gelu" || activation_ == "silu",
                "unknown activation ", activation_);
  }

  // tokens (rows,) int64; position_table (positions, d_model) or None, row ``position`` added; self_keys/self_values per layer (rows, heads, decoded_len, head_dim), replaced by the
  // extended caches; cross_keys/cross_values per layer (sentences, heads, src_len, head_dim); cross_mask
  // (sentences, 1, 1, src_len) bool. Returns the logits (rows, vocab), float32.
  at::Tensor step(const at::Tensor& tokens, const std::optional<at::Tensor>& position_table, int64_t position,
                  std::vector<at::Tensor>& self_keys,
                  std::vector<at::Tensor>& self_values, const std::vector<at::Tensor>& cross_keys,
                  const std::vector<at::Tensor>& cross_values, const at::Tensor& cross_mask,
                  int64_t rows_per_source) {
    at::InferenceMode inference_mode;
    const int64_t rows = tokens.size(0);
    const int64_t d_model = embedding_.size(1);
    const int64_t head_dim = d_model / num_heads_;
    const int64_t sentences = rows / rows_per_source;
    TORCH_CHECK(self_keys.size() == layers_.size() && cross_keys.size() == layers_.size(),
                "one cache entry per decoder layer");
    at::Tensor hidden = at::embedding(embedding_, tokens).mul_(embedding_scale_);  // (rows, d_model)
    if (position_table.has_value()) {
      hidden.add_(position_table->select(0, position));
    }
    for (size_t index = 0; index < layers_.size(); ++index) {
      const DecoderLayerWeights& layer = layers_[index];
      // Masked self-attention over the cached positions and the new one.
      at::Tensor input = normalize(hidden, layer.self_norm_weight, layer.self_norm_bias);
      at::Tensor projected = layer.qkv->apply_dynamic(input, reduce_range_).view({rows, 3, num_heads_, 1, head_dim});
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
      at::Tensor attended = attend(query, key, value, std::nullopt);  // (rows, heads, 1, head_dim)
      hidden = residual(hidden, layer.self_out->apply_dynamic(attended.view({rows, d_model}), reduce_range_),
                        layer.self_norm_weight, layer.self_norm_bias);
      // Encoder-decoder attention: the beams of one source folded into one query block.
      input = normalize(hidden, layer.cross_norm_weight, layer.cross_norm_bias);
      at::Tensor cross_query = layer.cross_query->apply_dynamic(input, reduce_range_)
                                   .view({sentences, rows_per_source, num_heads_, head_dim})
                                   .transpose(1, 2);  // (sentences, heads, rows_per_source, head_dim)
      attended = attend(cross_query, cross_keys[index], cross_values[index], cross_mask);
      attended = attended.transpose(1, 2).reshape({rows, d_model});
      hidden = residual(hidden, layer.cross_out->apply_dynamic(attended, reduce_range_), layer.cross_norm_weight,
                        layer.cross_norm_bias);
      // Position-wise feed-forward network.
      input = normalize(hidden, layer.ff_norm_weight, layer.ff_norm_bias);
      at::Tensor inner = layer.ff_in->apply_dynamic(input, reduce_range_);
      inner = activation_ == "relu" ? inner.relu_() : (activation_ == "gelu" ? at::gelu(inner) : at::silu(inner));
      hidden = residual(hidden, layer.ff_out->apply_dynamic(inner, reduce_range_), layer.ff_norm_weight,
                        layer.ff_norm_bias);
    }
    if (final_norm_weight_.has_value()) {
      hidden = at::layer_norm(hidden, {d_model}, *final_norm_weight_, *final_norm_bias_, eps_);
    }
    at::Tensor logits = output_projection_->apply_dynamic(hidden, reduce_range_);
    return output_bias_.has_value() ? logits.add_(*output_bias_) : logits;
  }

 private:
  // Eq. (1) as transformer.model.scaled_dot_product_attention computes it without weights or dropout: the
  // explicit formula while both lengths are at most explicit_max_length (unless the layer is set to "fused"),
  // the fused kernel beyond; a query with no key to attend to gets zeros either way.
  at::Tensor attend(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                    const std::optional<at::Tensor>& attend_mask) const {
    const bool is_short = std::max(query.size(-2), key.size(-2)) <= explicit_max_length_;
    if (!fused_attention_ || is_short) {
      at::Tensor scaled = scale_queries_ ? query * attention_scale_ : query;
      at::Tensor scores = at::matmul(scaled, key.transpose(-2, -1));
      if (attend_mask.has_value()) {
        at::Tensor blocked = attend_mask->logical_not();
        scores = scores.masked_fill(blocked, std::numeric_limits<float>::lowest());
        at::Tensor weights = at::softmax(scores, -1).masked_fill(blocked, 0.0);
        return at::matmul(weights, value);
      }
      return at::matmul(at::softmax(scores, -1), value);
    }
    if (!attend_mask.has_value()) {
      return at::scaled_dot_product_attention(query, key, value, std::nullopt, 0.0, false, fused_scale_);
    }
    at::Tensor query_has_key = attend_mask->any(-1, true);
    at::Tensor output = at::scaled_dot_product_attention(query, key, value, *attend_mask | query_has_key.logical_not(),
                                                         0.0, false, fused_scale_);
    return output.masked_fill(query_has_key.logical_not(), 0.0);
  }

  // Pre-norm normalises a sub-layer's input; post-norm passes it through and normalises the sum instead.
  at::Tensor normalize(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& bias) const {
    return norm_first_ ? at::layer_norm(hidden, {hidden.size(-1)}, weight, bias, eps_) : hidden;
  }

  at::Tensor residual(const at::Tensor& hidden, const at::Tensor& sublayer_output, const at::Tensor& weight,
                      const at::Tensor& bias) const {
    at::Tensor summed = hidden + sublayer_output;
    return norm_first_ ? summed : at::layer_norm(summed, {summed.size(-1)}, weight, bias, eps_);
  }

  std::vector<DecoderLayerWeights> layers_;
  std::optional<at::Tensor> final_norm_weight_, final_norm_bias_;
  PackedLinear output_projection_;
  std::optional<at::Tensor> output_bias_;
  at::Tensor embedding_;
  double embedding_scale_;
  int64_t num_heads_;
  double attention_scale_;
  bool scale_queries_;
  std::optional<double> fused_scale_;
  bool fused_attention_;
  int64_t explicit_max_length_;
  bool norm_first_;
  double eps_;
  std::string activation_;
  bool reduce_range_;
};

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, module) {
  py::class_<Int8DecoderStep>(module, "Int8DecoderStep")
      .def(py::init<py::list, std::optional<at::Tensor>, std::optional<at::Tensor>, py::object,
                    std::optional<at::Tensor>, at::Tensor, double, int64_t, double, std::string, bool, int64_t,
                    bool, double, std::string, bool>())
      .def("step", [](Int8DecoderStep& self, const at::Tensor& tokens,
                      const std::optional<at::Tensor>& position_table, int64_t position,
                      std::vector<at::Tensor> self_keys, std::vector<at::Tensor> self_values,
                      const std::vector<at::Tensor>& cross_keys, const std::vector<at::Tensor>& cross_values,
                      const at::Tensor& cross_mask, int64_t rows_per_source) {
        at::Tensor logits = self.step(tokens, position_table, position, self_keys, self_values, cross_keys, cross_values, cross_mask,
                                      rows_per_source);
        return py::make_tuple(logits, self_keys, self_values);
      });
}
