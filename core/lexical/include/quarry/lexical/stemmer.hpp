// Quarry's one stemmer: the Snowball stemmers of libstemmer, for the local
// corpus's index (a stemmer per language) and for lexical matching (English,
// through lexical::stem and lexical::tokenize).

#pragma once

#include <string>
#include <string_view>

struct sb_stemmer;

namespace quarry::lexical {

/// A Snowball stemmer (libstemmer) of one language. Not thread-safe: use
/// one per thread.
class stemmer {
public:
  /// A stemmer of `language`, an ISO 639-1 code: "en", "de", "fr", "es",
  /// "it", "nl", "pt" or "ru" (Snowball's english, german, french, spanish,
  /// italian, dutch, portuguese and russian algorithms). One of any other
  /// language, or one libstemmer cannot make, returns words unchanged.
  explicit stemmer(std::string_view language);
  ~stemmer();

  stemmer(const stemmer&) = delete;
  stemmer& operator=(const stemmer&) = delete;

  /// The stem of `word` (lower-case UTF-8). Empty words and words longer
  /// than @ref max_stemmed_bytes are returned unchanged, and so is every
  /// word when libstemmer runs out of memory.
  std::string stem(std::string_view word);

  /// Whether a Snowball algorithm backs this stemmer.
  bool stems() const noexcept {
    return impl_ != nullptr;
  }

  /// The longest word stemmed, in bytes: longer ones are no words of any
  /// language (a URL, a hash, a run of digits) and cost Snowball time.
  static constexpr size_t max_stemmed_bytes = 256;

private:
  ::sb_stemmer* impl_ = nullptr;
};

/// The English Snowball stem of `word` (lower-case UTF-8; see
/// stemmer::stem), through a cache of this thread (4,096 words, direct
/// mapped by the word's hash: texts repeat their words, and Snowball would be
/// most of the cost of tokenize). Thread-safe.
std::string stem(std::string_view word);

} // namespace quarry::lexical
