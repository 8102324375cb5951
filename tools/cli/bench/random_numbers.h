// The bench's deterministic numbers: the ids of its batch and the values of its random
// models. tools/bench/bench_peer.py computes the same numbers by the same rules
// (source_ids, random_values), so that ordo and its PyTorch peer run the same model on
// the same batch: bench.sh compares the tokens both engines decode on every run ("same
// tokens in both engines"), and tests/test_bench_cli.cpp pins values the Python side
// computed. A change here is a change there.
//
// splitmix64(seed, j) = mix(seed + (j + 1) * G) mod 2^64: output j of Steele et al.'s
// SplitMix64 seeded with `seed` (G = 0x9E3779B97F4A7C15, mix in random_numbers.cpp).
// Random access, so a tensor or a batch can be generated in any order, and vectorized
// in numpy.
//
// Sources: token t of source b is 3 + splitmix64(0x6F72646F62656E63, b*S + t) % (vocab - 3),
// ids 0-2 being the usual specials (vocabularies of 3 or fewer use all ids).
//
// Weights: value j of tensor `name` is u = (splitmix64(fnv1a64(name), j) >> 40) / 2^24,
// v = (2u - 1) * 0.05 in double, then float32; norm weights (LayerNorm and RMSNorm) get
// 1 + v, so that a random model's activations neither vanish nor explode.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ordo::tools::bench {

std::uint64_t splitmix64(std::uint64_t seed, std::uint64_t j);

// FNV-1a, 64 bits, of the bytes of `text`: a tensor's name picks its seed.
std::uint64_t fnv1a64(std::string_view text);

// [batch * length] ids, source b in [b*length, (b+1)*length).
std::vector<int> random_sources(int batch, int length, int vocab);

// Ordo's and Marian's LayerNorms (*_layer_norm, layer_norm, layernorm_embedding) and
// LLaMA's RMSNorms (input_layernorm, post_attention_layernorm, model.norm).
bool is_norm_weight(std::string_view name);

// Values [first, first + out.size()) of tensor `name`.
void random_weights(const std::string& name, std::uint64_t first, std::span<float> out);

}  // namespace ordo::tools::bench
