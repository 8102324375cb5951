// Attention weights for the public API: the engine's AttentionRecorder (its attention
// observer, engine/attention_recorder.h) attached to one teacher-forced pass, and what
// it recorded copied out as plain matrices labelled with their tokens.
#include "engine/attention_recorder.h"
#include "engine/search.h"
// The engine's headers before internal.h, which includes the public API (see there).
#include "models/api/internal.h"

namespace ordo::api::detail {

namespace {

AttentionKind to_public(ordo::AttentionKind kind) {
  switch (kind) {
    case ordo::AttentionKind::Encoder: return AttentionKind::Encoder;
    case ordo::AttentionKind::Decoder: return AttentionKind::Decoder;
    case ordo::AttentionKind::Cross: return AttentionKind::Cross;
  }
  throw Error("attention", "an attention kind the public API does not know");
}

}  // namespace

Attention record_attention(const ordo::Model& model, const std::vector<int>& source,
                           const std::vector<int>& decoder_input) {
  const Transformer& transformer = model.transformer();
  AttentionRecorder recorder;
  const std::vector<Index> source_of{0};
  DecoderState state;
  const auto steps = static_cast<Index>(decoder_input.size());
  if (transformer.decoder_only()) {
    transformer.decoder.start(state, source_of, 1, steps);
  } else {
    const auto length = static_cast<Index>(source.size());
    const std::vector<Index> first_steps{0}, lengths{length};
    EncoderWorkspace workspace;
    workspace.attention.observer = &recorder;
    ordo::EncoderOutput memory;
    transformer.encoder->encode(source, BatchRows{length, first_steps, lengths}, workspace, memory.states);
    memory.lengths = lengths;
    memory.rows_per_source = length;
    transformer.decoder.start(state, memory, source_of, 1, steps);
  }
  state.set_attention_observer(&recorder);
  const std::vector<Index> lengths{steps};
  Matrix logits;
  transformer.decoder.feed(state, decoder_input, steps, lengths, logits, Decoder::Logits::LastRow);

  Attention result;
  if (!source.empty()) result.source_tokens = model.source_pieces(source);
  result.target_tokens = model.target_pieces(decoder_input);
  for (const AttentionRecorder::Key& key : recorder.keys()) {
    const Matrix& p = recorder.at(key);
    AttentionMatrix m;
    m.kind = to_public(key.kind);
    m.layer = static_cast<int>(key.layer);
    m.head = static_cast<int>(key.head);
    m.rows = static_cast<int>(p.rows());
    m.cols = static_cast<int>(p.cols());
    m.values.assign(p.data(), p.data() + p.rows() * p.cols());
    result.matrices.push_back(std::move(m));
  }
  return result;
}

}  // namespace ordo::api::detail
