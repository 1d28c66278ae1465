// Languages of the local corpus: which language a document is written in
// and its stop words. Its words are stemmed with lexical::stemmer
// (quarry/lexical/stemmer.hpp), Quarry's one stemmer.

#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace quarry::corpus {

/// The languages whose words are stemmed and whose stop words are known:
/// English, German, French, Spanish, Italian, Dutch, Portuguese and Russian
/// (ISO 639-1 codes; lexical::stemmer has a Snowball algorithm for each). Chinese, Japanese and Korean ("zh", "ja", "ko") are
/// detected too; their text is indexed as overlapping pairs of characters
/// (see is_cjk), whatever the document's language.
const std::vector<std::string>& stemmed_languages();

/// The language a text is written in: a code of stemmed_languages(), or
/// "zh", "ja" or "ko", or empty when the text gives too little evidence
/// (fewer than `min_evidence` stop words and no telling script). Reads at
/// most the first 8 KB. Latin-script text is told apart by its stop words
/// (a tie goes to the language listed first); Cyrillic is taken as Russian;
/// Han, kana and Hangul as Chinese, Japanese and Korean.
std::string detect_language(std::string_view text, size_t min_evidence = 3);

/// The language of a page's `lang` attribute ("de-AT", "pt_BR", "EN"):
/// its code when it is one of stemmed_languages() or zh/ja/ko, else empty.
std::string normalize_language(std::string_view tag);

/// Whether `word` (lower-case UTF-8) is a stop word of `language`. Unknown
/// languages have none.
bool is_stop_word(std::string_view language, std::string_view word);

/// Lower-cases ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic letters
/// of UTF-8 text (other bytes are kept).
std::string fold_case(std::string_view text);

/// Replaces Latin letters with diacritics (U+00C0-U+017F, lower case) by
/// their base letters ("é" -> "e", "ß" -> "ss", "æ" -> "ae"); other bytes
/// are kept.
std::string strip_diacritics(std::string_view word);

/// Whether the code point is a CJK ideograph, kana or Hangul syllable (the
/// scripts written without spaces between words).
bool is_cjk(char32_t c);

} // namespace quarry::corpus
