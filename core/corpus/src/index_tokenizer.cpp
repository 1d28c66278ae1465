// The `quarry` FTS5 tokenizer of the corpus index: words split as unicode61
// does, stemmed with Snowball in the document's language (a query word in
// every language of the corpus), CJK text as pairs of characters; and the
// recorder that tokenizes passages on an update's reading thread.

#include "index_internal.hpp"

#include "quarry/corpus/language.hpp"
#include "quarry/lexical/stemmer.hpp"
#include "quarry/sdk/strings.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace quarry::corpus::detail {

// The FTS5 API of a connection.
fts5_api* fts5_of(sqlite3* db) {
  fts5_api* api = nullptr;
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &st, nullptr) != SQLITE_OK)
    return nullptr;
  sqlite3_bind_pointer(st, 1, static_cast<void*>(&api), "fts5_api_ptr", nullptr);
  sqlite3_step(st);
  sqlite3_finalize(st);
  return api;
}

// -- stems --------------------------------------------------------------------

// A language's stemmer and the stems it gave (without diacritics), in a
// direct-mapped cache by the word's hash: text repeats its words, and
// Snowball would be most of the tokenizer's cost.
struct language_context::cached_stemmer {
  static constexpr size_t slots = 1 << 15;
  explicit cached_stemmer(const std::string& language)
    : impl(language), words(slots), stems(slots) {
    // nop
  }
  lexical::stemmer impl;
  std::vector<std::string> words;
  std::vector<std::string> stems;
};

language_context::language_context() = default;

language_context::~language_context() = default;

// The stem of `word` in `language`, without diacritics.
const std::string& language_context::stem(const std::string& language, std::string_view word) {
  if (last == nullptr || last_language != language) {
    auto& s = stemmers[language];
    if (!s)
      s = std::make_unique<cached_stemmer>(language);
    last = s.get();
    last_language = language;
  }
  auto& s = *last;
  uint64_t h = 1469598103934665603ull;
  for (auto c : word)
    h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  auto slot = static_cast<size_t>(h ^ (h >> 32)) & (cached_stemmer::slots - 1);
  if (!s.stems[slot].empty() && s.words[slot] == word)
    return s.stems[slot];
  auto out = s.impl.stem(word);
  bool ascii = std::all_of(out.begin(), out.end(),
                           [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  if (!ascii)
    out = strip_diacritics(out);
  if (out.empty()) // never cached as empty (an empty slot)
    out.assign(word.data(), word.size());
  s.words[slot].assign(word.data(), word.size());
  s.stems[slot] = std::move(out);
  return s.stems[slot];
}

// The language whose stemmer indexes a document of `language`: its own
// when Snowball has one, English otherwise (undetected text, and the Latin
// words of Chinese, Japanese and Korean text).
std::string stem_language(const std::string& language) {
  const auto& known = stemmed_languages();
  return std::find(known.begin(), known.end(), language) != known.end() ? language
                                                                        : std::string{"en"};
}

// -- the tokenizer ------------------------------------------------------------

namespace {

struct token_pass {
  quarry_tokenizer* self;
  void* ctx;
  int (*emit)(void*, int, const char*, int, int, int);
  bool query;
  // Added to the byte offsets of the tokens unicode61 reports (it is given
  // pieces of the text).
  int offset = 0;
};

int emit_word(token_pass& p, std::string_view word, int start, int end) {
  auto& t = *p.self;
  start += p.offset;
  end += p.offset;
  auto& languages = *t.languages;
  if (!p.query) {
    const auto& stem = languages.stem(languages.document_language, word);
    return p.emit(p.ctx, 0, stem.data(), static_cast<int>(stem.size()), start, end);
  }
  t.variants.clear();
  for (const auto& language : languages.query_languages) {
    const auto& stem = languages.stem(language, word);
    if (std::find(t.variants.begin(), t.variants.end(), stem) == t.variants.end())
      t.variants.push_back(stem);
  }
  for (size_t i = 0; i < t.variants.size(); ++i) {
    auto rc = p.emit(p.ctx, i == 0 ? 0 : FTS5_TOKEN_COLOCATED, t.variants[i].data(),
                     static_cast<int>(t.variants[i].size()), start, end);
    if (rc != SQLITE_OK)
      return rc;
  }
  return SQLITE_OK;
}

int on_token(void* pass, int flags, const char* token, int n, int start, int end) {
  auto& p = *static_cast<token_pass*>(pass);
  if ((flags & FTS5_TOKEN_COLOCATED) != 0 || n <= 0)
    return SQLITE_OK;
  std::string_view word{token, static_cast<size_t>(n)};
  bool ascii = std::all_of(word.begin(), word.end(),
                           [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  if (ascii)
    return emit_word(p, word, start, end);
  // Split the token into runs of CJK characters (indexed as pairs) and of
  // other characters (words).
  size_t i = 0;
  while (i < word.size()) {
    size_t run = i;
    bool cjk = is_cjk(sdk::decode_utf8(word, i).code_point);
    std::vector<size_t> starts;
    while (i < word.size()) {
      auto d = sdk::decode_utf8(word, i);
      if (is_cjk(d.code_point) != cjk)
        break;
      starts.push_back(i);
      i += d.length;
    }
    int rc = SQLITE_OK;
    if (!cjk) {
      rc = emit_word(p, word.substr(run, i - run), start, end);
    } else if (starts.size() == 1) {
      rc = p.emit(p.ctx, 0, word.data() + run, static_cast<int>(i - run), start + p.offset,
                  end + p.offset);
    } else {
      for (size_t k = 0; k + 1 < starts.size() && rc == SQLITE_OK; ++k) {
        auto to = k + 2 < starts.size() ? starts[k + 2] : i;
        rc = p.emit(p.ctx, 0, word.data() + starts[k], static_cast<int>(to - starts[k]),
                    start + p.offset, end + p.offset);
      }
    }
    if (rc != SQLITE_OK)
      return rc;
  }
  return SQLITE_OK;
}

int tokenizer_create(void* user, const char**, int, Fts5Tokenizer** out) {
  auto* ctx = static_cast<std::pair<fts5_api*, language_context*>*>(user);
  auto t = std::make_unique<quarry_tokenizer>();
  t->languages = ctx->second;
  void* base_user = nullptr;
  if (ctx->first->xFindTokenizer(ctx->first, "unicode61", &base_user, &t->base_module) != SQLITE_OK)
    return SQLITE_ERROR;
  const char* args[] = {"remove_diacritics", "0"};
  if (t->base_module.xCreate(base_user, args, 2, &t->base) != SQLITE_OK)
    return SQLITE_ERROR;
  *out = reinterpret_cast<Fts5Tokenizer*>(t.release());
  return SQLITE_OK;
}

void tokenizer_delete(Fts5Tokenizer* tok) {
  auto* t = reinterpret_cast<quarry_tokenizer*>(tok);
  if (t->base != nullptr)
    t->base_module.xDelete(t->base);
  delete t;
}

bool ascii_alnum(unsigned char c) {
  return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
}

// Splits the text as unicode61 does (ASCII letters and digits are token
// characters, other ASCII is a separator), lower-casing ASCII words itself
// (most words of most text, at a fraction of unicode61's cost) and giving
// unicode61 only the runs with non-ASCII characters.
int tokenizer_run(Fts5Tokenizer* tok, void* ctx, int flags, const char* text, int n,
                  int (*emit)(void*, int, const char*, int, int, int)) {
  auto* t = reinterpret_cast<quarry_tokenizer*>(tok);
  if ((flags & FTS5_TOKENIZE_DOCUMENT) != 0 && n >= 0) {
    auto& languages = *t->languages;
    for (size_t r = 0; r < languages.replay_count; ++r) {
      const auto& rec = languages.replay[r];
      if (rec.text.size() != static_cast<size_t>(n)
          || (n > 0 && std::memcmp(rec.text.data(), text, rec.text.size()) != 0))
        continue;
      const auto& recording = *rec.recording;
      for (auto k = rec.first; k < rec.last; ++k) {
        const auto& x = recording.tokens[k];
        auto rc = emit(ctx, x.flags, recording.bytes.data() + x.at, static_cast<int>(x.size),
                       x.start, x.end);
        if (rc != SQLITE_OK)
          return rc;
      }
      return SQLITE_OK;
    }
  }
  token_pass pass{t, ctx, emit, (flags & FTS5_TOKENIZE_QUERY) != 0};
  char lower[64];
  int i = 0;
  while (i < n) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80 && !ascii_alnum(c)) {
      ++i;
      continue;
    }
    auto start = i;
    bool ascii = true;
    for (; i < n; ++i) {
      c = static_cast<unsigned char>(text[i]);
      if (c >= 0x80)
        ascii = false;
      else if (!ascii_alnum(c))
        break;
    }
    int rc = SQLITE_OK;
    if (ascii && i - start <= static_cast<int>(sizeof(lower))) {
      for (int k = start; k < i; ++k) {
        auto b = static_cast<unsigned char>(text[k]);
        lower[k - start] = static_cast<char>(b >= 'A' && b <= 'Z' ? b | 0x20 : b);
      }
      pass.offset = 0;
      rc = on_token(&pass, 0, lower, i - start, start, i);
    } else {
      pass.offset = start;
      rc = t->base_module.xTokenize(t->base, &pass, flags, text + start, i - start, &on_token);
    }
    if (rc != SQLITE_OK)
      return rc;
  }
  return SQLITE_OK;
}

} // namespace

// -- the recorder -------------------------------------------------------------

token_recorder::token_recorder() = default;

token_recorder::~token_recorder() {
  if (tokenizer_.base != nullptr)
    tokenizer_.base_module.xDelete(tokenizer_.base);
}

// Sets up the unicode61 instance from `db`'s FTS5 (on the connection's
// thread).
bool token_recorder::init(sqlite3* db) {
  auto* api = fts5_of(db);
  void* base_user = nullptr;
  if (api == nullptr
      || api->xFindTokenizer(api, "unicode61", &base_user, &tokenizer_.base_module) != SQLITE_OK)
    return false;
  const char* args[] = {"remove_diacritics", "0"};
  if (tokenizer_.base_module.xCreate(base_user, args, 2, &tokenizer_.base) != SQLITE_OK) {
    tokenizer_.base = nullptr;
    return false;
  }
  tokenizer_.languages = &languages_;
  return true;
}

// Records the tokens of every passage of `text`, stemmed in `language`.
void token_recorder::record(const std::string& language, std::string_view text,
                            const std::vector<passage>& passages, token_recording& out) {
  if (tokenizer_.base == nullptr)
    return;
  languages_.document_language = language;
  auto add = [](void* ctx, int flags, const char* token, int n, int start, int end) -> int {
    auto* r = static_cast<token_recording*>(ctx);
    r->tokens.push_back(
      {static_cast<uint32_t>(r->bytes.size()), static_cast<uint32_t>(n), start, end, flags});
    r->bytes.append(token, static_cast<size_t>(n));
    return SQLITE_OK;
  };
  auto* tok = reinterpret_cast<Fts5Tokenizer*>(&tokenizer_);
  for (const auto& p : passages) {
    std::array<uint32_t, 3> b{};
    b[0] = static_cast<uint32_t>(out.tokens.size());
    tokenizer_run(tok, &out, FTS5_TOKENIZE_DOCUMENT, p.heading.data(),
                  static_cast<int>(p.heading.size()), add);
    b[1] = static_cast<uint32_t>(out.tokens.size());
    auto body = text.substr(p.offset, p.length);
    tokenizer_run(tok, &out, FTS5_TOKENIZE_DOCUMENT, body.data(), static_cast<int>(body.size()),
                  add);
    b[2] = static_cast<uint32_t>(out.tokens.size());
    out.bounds.push_back(b);
  }
}

// Registers the `quarry` tokenizer on `db` and returns the context its
// instances share (owned by the connection), or nullptr.
language_context* register_tokenizer(sqlite3* db) {
  auto* api = fts5_of(db);
  if (api == nullptr)
    return nullptr;
  using user_data = std::pair<fts5_api*, language_context*>;
  auto user = std::make_unique<user_data>(api, new language_context);
  auto* languages = user->second;
  fts5_tokenizer module{&tokenizer_create, &tokenizer_delete, &tokenizer_run};
  auto rc = api->xCreateTokenizer(api, "quarry", user.get(), &module, [](void* p) {
    auto* u = static_cast<user_data*>(p);
    delete u->second;
    delete u;
  });
  if (rc != SQLITE_OK) {
    delete user->second;
    return nullptr;
  }
  user.release();
  return languages;
}

} // namespace quarry::corpus::detail
