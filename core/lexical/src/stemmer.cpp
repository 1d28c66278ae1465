// Snowball stemmers through libstemmer, and the cached English stem of
// lexical matching.

#include "quarry/lexical/stemmer.hpp"

#include <libstemmer.h>

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

namespace quarry::lexical {

namespace {

// The languages Quarry stems: ISO 639-1 code and libstemmer's algorithm.
struct algorithm {
  std::string_view code;
  const char* snowball;
};

constexpr std::array<algorithm, 8> algorithms{{
  {"en", "english"},
  {"de", "german"},
  {"fr", "french"},
  {"es", "spanish"},
  {"it", "italian"},
  {"nl", "dutch"},
  {"pt", "portuguese"},
  {"ru", "russian"},
}};

// The English stems this thread gave, direct mapped by the word's FNV-1a
// hash (a slot keeps the last word that hashed to it).
struct english_cache {
  static constexpr size_t slots = 1 << 12;
  stemmer impl{"en"};
  std::vector<std::string> words = std::vector<std::string>(slots);
  std::vector<std::string> stems = std::vector<std::string>(slots);
};

english_cache& this_thread_cache() {
  thread_local english_cache cache;
  return cache;
}

} // namespace

stemmer::stemmer(std::string_view language) {
  for (const auto& a : algorithms)
    if (language == a.code)
      impl_ = sb_stemmer_new(a.snowball, "UTF_8");
}

stemmer::~stemmer() {
  if (impl_ != nullptr)
    sb_stemmer_delete(impl_);
}

std::string stemmer::stem(std::string_view word) {
  if (impl_ == nullptr || word.empty() || word.size() > max_stemmed_bytes)
    return std::string{word};
  const auto* out = sb_stemmer_stem(impl_, reinterpret_cast<const sb_symbol*>(word.data()),
                                    static_cast<int>(word.size()));
  if (out == nullptr) // out of memory
    return std::string{word};
  return std::string{reinterpret_cast<const char*>(out),
                     static_cast<size_t>(sb_stemmer_length(impl_))};
}

std::string stem(std::string_view word) {
  auto& cache = this_thread_cache();
  uint64_t h = 1469598103934665603ull;
  for (auto c : word)
    h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  auto slot = static_cast<size_t>(h ^ (h >> 32)) & (english_cache::slots - 1);
  // A slot never holds an empty stem, so an empty one is free.
  if (!cache.stems[slot].empty() && cache.words[slot] == word)
    return cache.stems[slot];
  auto out = cache.impl.stem(word);
  if (out.empty()) // never cached, never given as a word's stem
    return std::string{word};
  cache.words[slot].assign(word.data(), word.size());
  cache.stems[slot] = out;
  return out;
}

} // namespace quarry::lexical
