// Model families as data: for each family, one table from tensor roles to names,
// shapes and the condition under which the tensor exists.
//
// A role is what a tensor does (the token embedding, layer i's query projection, the
// feed-forward's input linear, ...), independent of how a family spells it. The binder
// (models/build_transformer.cpp) asks for a role, a stack and a layer; loading checks
// the file against expected_tensors(). No tensor name is spelled anywhere else.
//
//   ordo (BART/Marian style): model.{encoder,decoder}.layers.{i}.self_attn.q_proj.weight, ...
//   llama (Hugging Face):     model.layers.{i}.self_attn.q_proj.weight, ...
//   marian (Hugging Face):    as ordo, with optional sinusoid tables (MarianMTModel)
//   t5 (Hugging Face):        shared.weight, {encoder,decoder}.block.{i}.layer.{j}.*
//   m2m_100 (Hugging Face):   as ordo, pre-norm, one shared embedding (M2M100, NLLB-200)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "models/config.h"
#include "ordo/positions.hpp"  // Stack

namespace ordo {

enum class Role {
  // Once per stack.
  TokenEmbedding,   // [vocab, d]
  Positions,        // learned position table
  RelativeBias,     // T5's [buckets, heads] table, shared by the stack's self-attentions
  EmbeddingNorm,    // a norm right after the embedding
  FinalNorm,        // the norm after the last layer (pre-norm stacks)
  OutputHead,       // the decoder's logits projection, when not tied to the embedding
  FinalLogitsBias,  // a bias on the logits, [1, vocab]
  Unread,           // a tensor some files hold that the family's model never reads (T5's tied copies)
  // Once per layer.
  SelfQuery,
  SelfKey,
  SelfValue,
  SelfOutput,
  SelfNorm,  // the norm around self-attention
  CrossQuery,
  CrossKey,
  CrossValue,
  CrossOutput,
  CrossNorm,
  FeedForwardIn,    // fc1, or the gate of a gated feed-forward
  FeedForwardUp,    // the up projection of a gated feed-forward
  FeedForwardOut,   // fc2, or down
  FeedForwardNorm,  // the norm around the feed-forward
};

enum class Part { Weight, Bias };

struct TensorSpec {
  std::string name;
  Shape shape;
  std::string shape_meaning;  // e.g. "[decoder_ffn_dim=32, d_model=16]", for error messages
  bool required = true;
  // A weight matrix that may be stored in half precision or quantized (a linear layer's
  // weight, the token embedding, the output head); every other tensor is float.
  bool matrix = false;
  // A matrix only ever read a row at a time (a token embedding that is not also the
  // output head): read from its file a row at a time, never arranged for products
  // (models/stored_matrix.h).
  bool lookup_only = false;
};

// True for the roles whose weight is a matrix the kernels read in its stored format (a
// linear layer's weight, the token embedding, the output head): TensorSpec::matrix.
bool is_matrix(Role role, Part part);

// Every tensor the config's model needs (or may have), with its expected shape.
std::vector<TensorSpec> expected_tensors(const ModelConfig& config);

// The name of a role's weight or bias in layer `layer` of `stack` (ignored for
// once-per-stack roles), or nullopt when this config has no such tensor.
std::optional<std::string> tensor_name(const ModelConfig& config, Stack stack, Role role, Part part,
                                       Index layer = 0);

}  // namespace ordo
