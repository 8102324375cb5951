// Attention weights for the public API: the engine's AttentionRecorder (its attention
// observer, engine/attention_recorder.h) attached to one teacher-forced pass, and what
// it recorded copied out as plain matrices labelled with their tokens.
#include "engine/attention_recorder.h"
#include "engine/decode_inputs.h"
#include "engine/search.h"
#include "models/api/internal.h"

namespace ordo::detail {

Attention record_attention(const LoadedModel& model, const std::vector<int>& source,
                           const std::vector<int>& decoder_input) {
  const Transformer& transformer = model.transformer();
  // Ids may come from a program (Translator::attention_ids): checked as a decode checks them.
  if (!transformer.decoder_only()) check_source(transformer, source);
  for (const int id : decoder_input)
    if (id < 0 || id >= transformer.decoder.vocab_size())
      throw Error("attention", "target id " + std::to_string(id) + " is outside the vocabulary of " +
                                   std::to_string(transformer.decoder.vocab_size()) + " tokens");
  transformer.decoder.check_length(static_cast<Index>(decoder_input.size()));
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
    EncodedBatch memory;
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
    m.kind = key.kind;
    m.layer = static_cast<int>(key.layer);
    m.head = static_cast<int>(key.head);
    m.rows = static_cast<int>(p.rows());
    m.cols = static_cast<int>(p.cols());
    m.values.assign(p.data(), p.data() + p.rows() * p.cols());
    result.matrices.push_back(std::move(m));
  }
  return result;
}

}  // namespace ordo::detail
