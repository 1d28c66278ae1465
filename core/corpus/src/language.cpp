// Languages of the local corpus: detection by stop words and script, stop
// word lists, and case and diacritic folding.

#include "quarry/corpus/language.hpp"

#include "quarry/sdk/strings.hpp"
#include "quarry/sdk/text.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>

namespace quarry::corpus {

namespace {

// The most frequent function words of each language (lower case, with
// their diacritics): the stop words dropped from queries, and the evidence
// language detection counts. They are short lists on purpose: a word that
// carries meaning in a query must never be among them.
struct language_info {
  const char* code;
  const char* stop_words;
};

const std::array<language_info, 8> languages{{
  {"en", "a about above after again against all am an and any are as at be "
         "because been before being below between both but by can could did do "
         "does doing down during each few for from further had has have having he "
         "her here hers herself him himself his how i if in into is it its itself "
         "just me more most my myself no nor not now of off on once only or other "
         "our ours ourselves out over own same she should so some such than that "
         "the their theirs them themselves then there these they this those "
         "through to too under until up very was we were what when where which "
         "while who whom why will with would you your yours yourself yourselves"},
  {"de", "aber alle allem allen aller alles als also am an ander andere anderem "
         "anderen anderer anderes auch auf aus bei bin bis bist da damit dann das "
         "dass dasselbe dazu dein deine dem den denn der des desselben dessen "
         "dich die dies diese dieselbe diesem diesen dieser dieses dir doch dort "
         "du durch ein eine einem einen einer eines einig einige er es etwas euch "
         "euer für gegen gewesen hab habe haben hat hatte hatten hier hin hinter "
         "ich ihm ihn ihnen ihr ihre ihrem ihren ihrer im in indem ins ist jede "
         "jedem jeden jeder jedes jene jenem jenen jener jenes jetzt kann kein "
         "keine können könnte machen man manche mein meine mich mir mit muss "
         "musste nach nicht nichts noch nun nur ob oder ohne sehr sein seine "
         "seinem seinen seiner sich sie sind so solche soll sollte sondern sonst "
         "über um und uns unser unter viel vom von vor während war waren warum "
         "was weil welche welchem welchen welcher welches wenn werde werden wie "
         "wieder will wir wird wo wollen würde würden zu zum zur zwar zwischen"},
  {"fr", "ai aie alors au aux avec avait avez avoir c ce ceci cela celle ces cet "
         "cette comme d dans de des donc du elle elles en encore est et été être "
         "eu il ils j je l la le les leur leurs lui m ma mais me même mes moi mon "
         "n ne ni nos notre nous on ont ou où par pas peu peut plus pour pourquoi "
         "qu quand que quel quelle quelles quels qui s sa sans se sera ses si son "
         "sont sous sur t ta te tes toi ton tous tout toute toutes très tu un une "
         "vos votre vous y"},
  {"es", "a al algo algunas algunos ante antes como con contra cual cuando de del "
         "desde donde durante e el ella ellas ellos en entre era es esa esas ese "
         "eso esos esta está están estas este esto estos fue fueron ha había han "
         "hasta hay la las le les lo los más me mi mis mucho muy nada ni no nos "
         "nosotros o otra otras otro otros para pero poco por porque qué que "
         "quien se sea ser si sí sin sobre son su sus también tanto te tiene "
         "tienen todo todos tu tus un una uno unos y ya yo"},
  {"it", "a ad al alla alle allo ai agli anche avere aveva c che chi ci come con "
         "contro cui da dal dalla dalle dai degli dei del della delle dello di e "
         "è ed era erano essere gli ha hanno i il in io la le lei lo loro lui ma "
         "mi mia mio molto ne negli nei nel nella nelle no noi non o per perché "
         "più poi quale quali quando quella quelle quello questa queste questo "
         "se sei si sia siamo sono su sua sue sui sul sulla suo suoi tra tu tutti "
         "tutto un una uno vi voi"},
  {"nl", "aan al alles als altijd andere ben bij daar dan dat de der deze die dit "
         "doch doen door dus een eens en er ge geen geweest haar had heb hebben "
         "heeft hem het hier hij hoe hun iemand iets ik in is ja je kan kon kunnen "
         "maar me meer men met mij mijn moet na naar niet niets nog nu of om omdat "
         "ons ook op over reeds te tegen toch toen tot u uit uw van veel voor want "
         "waren was wat we wel werd wezen wie wij wil worden wordt zal ze zei "
         "zelf zich zij zijn zo zonder zou"},
  {"pt", "a à ao aos as às até com como da das de dela dele deles depois do dos e "
         "é ela elas ele eles em entre era eram essa essas esse esses esta está "
         "estão estas este estes eu foi foram há isso isto já la lhe lhes mais "
         "mas me mesmo meu minha muito na não nas nem no nos nós num numa o os ou "
         "para pela pelas pelo pelos por porque quais qual quando que quem se "
         "sem ser seu seus sua suas também te tem têm ter tu um uma umas uns você"},
  {"ru", "а без более бы был была были было быть в вам вас весь во вот все всего "
         "всех вы где да даже для до его ее ей ему если есть еще же за здесь и из "
         "или им их к как ко когда кто ли либо мне может мы на над нам нас не него "
         "нее нет ни них но ну о об один он она они оно от очень по под после при "
         "с со так также такой там те тем то того тоже той только том ты у уже "
         "хотя чего чей чем что чтобы чье чья эта эти это я"},
}};

// The stop words of all languages, each with the set of languages (bit k
// for languages[k]) it is a stop word of; built once.
const std::unordered_map<std::string_view, uint32_t>& stop_lists() {
  static const auto lists = [] {
    std::unordered_map<std::string_view, uint32_t> out;
    for (size_t k = 0; k < languages.size(); ++k) {
      std::string_view words = languages[k].stop_words;
      size_t i = 0;
      while (i < words.size()) {
        auto j = words.find(' ', i);
        if (j == std::string_view::npos)
          j = words.size();
        if (j > i)
          out[words.substr(i, j - i)] |= uint32_t{1} << k;
        i = j + 1;
      }
    }
    return out;
  }();
  return lists;
}

// The bit of a language in stop_lists(), or 0.
uint32_t language_bit(std::string_view code) {
  for (size_t k = 0; k < languages.size(); ++k)
    if (code == languages[k].code)
      return uint32_t{1} << k;
  return 0;
}

// Decodes the UTF-8 character at `i` and advances `i` past it (an invalid
// byte counts as one U+FFFD).
char32_t next_char(std::string_view s, size_t& i) {
  auto c = sdk::decode_utf8(s, i);
  i += c.length;
  return c.code_point;
}

char32_t lower(char32_t c) {
  if (c >= 'A' && c <= 'Z')
    return c + 32;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7))
    return c + 32;
  if (c >= 0x100 && c <= 0x17F) {
    // Latin Extended-A pairs upper/lower on even/odd code points, except
    // for the ranges that pair odd/even.
    bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (odd_upper)
      return (c % 2 == 1) ? c + 1 : c;
    if (c == 0x130 || c == 0x131 || c == 0x138 || c == 0x149 || c == 0x17F)
      return c;
    return (c % 2 == 0) ? c + 1 : c;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2)
    return c + 32;
  if (c >= 0x410 && c <= 0x42F)
    return c + 32;
  if (c >= 0x400 && c <= 0x40F)
    return c + 80;
  return c;
}

// The base letters of U+00E0-U+00FF (lower case Latin-1), "" where the
// letter has none.
const char* latin1_base[32] = {"a", "a", "a", "a", "a", "a", "ae", "c", "e",  "e", "e",
                               "e", "i", "i", "i", "i", "d", "n",  "o", "o",  "o", "o",
                               "o", "",  "o", "u", "u", "u", "u",  "y", "th", "y"};

// The base letter of a Latin Extended-A letter (U+0100-U+017F, either case).
const char* latin_a_base(char32_t c) {
  static const char* bases[128] = {
    "a", "a", "a",  "a",  "a", "a", "c", "c", "c", "c", "c", "c", "c", "c", "d", "d",
    "d", "d", "e",  "e",  "e", "e", "e", "e", "e", "e", "e", "e", "g", "g", "g", "g",
    "g", "g", "g",  "g",  "h", "h", "h", "h", "i", "i", "i", "i", "i", "i", "i", "i",
    "i", "i", "ij", "ij", "j", "j", "k", "k", "k", "l", "l", "l", "l", "l", "l", "l",
    "l", "l", "l",  "n",  "n", "n", "n", "n", "n", "n", "n", "n", "o", "o", "o", "o",
    "o", "o", "oe", "oe", "r", "r", "r", "r", "r", "r", "s", "s", "s", "s", "s", "s",
    "s", "s", "t",  "t",  "t", "t", "t", "t", "u", "u", "u", "u", "u", "u", "u", "u",
    "u", "u", "u",  "u",  "w", "w", "y", "y", "y", "z", "z", "z", "z", "z", "z", "s"};
  return bases[c - 0x100];
}

} // namespace

const std::vector<std::string>& stemmed_languages() {
  static const std::vector<std::string> codes = [] {
    std::vector<std::string> out;
    for (const auto& l : languages)
      out.emplace_back(l.code);
    return out;
  }();
  return codes;
}

std::string fold_case(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      out += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
      ++i;
      continue;
    }
    auto start = i;
    auto cp = next_char(text, i);
    if (cp == 0xFFFD) {
      out.append(text.substr(start, i - start));
      continue;
    }
    sdk::append_utf8(out, lower(cp));
  }
  return out;
}

std::string strip_diacritics(std::string_view word) {
  std::string out;
  out.reserve(word.size());
  size_t i = 0;
  while (i < word.size()) {
    auto c = static_cast<unsigned char>(word[i]);
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    auto start = i;
    auto cp = next_char(word, i);
    if (cp == 0xDF) {
      out += "ss";
    } else if (cp >= 0xC0 && cp <= 0xFF && cp != 0xD7 && cp != 0xF7) {
      const char* base = latin1_base[lower(cp) - 0xE0];
      if (*base != '\0')
        out += base;
      else
        out.append(word.substr(start, i - start));
    } else if (cp >= 0x100 && cp <= 0x17F) {
      out += latin_a_base(cp);
    } else {
      out.append(word.substr(start, i - start));
    }
  }
  return out;
}

bool is_cjk(char32_t c) {
  return (c >= 0x3040 && c <= 0x30FF)    // hiragana, katakana
         || (c >= 0x3400 && c <= 0x4DBF) // CJK extension A
         || (c >= 0x4E00 && c <= 0x9FFF) // CJK unified ideographs
         || (c >= 0xAC00 && c <= 0xD7AF) // Hangul syllables
         || (c >= 0xF900 && c <= 0xFAFF) // compatibility ideographs
         || (c >= 0x20000 && c <= 0x2FA1F);
}

bool is_stop_word(std::string_view language, std::string_view word) {
  const auto& lists = stop_lists();
  auto it = lists.find(word);
  return it != lists.end() && (it->second & language_bit(language)) != 0;
}

std::string normalize_language(std::string_view tag) {
  if (tag.size() < 2)
    return {};
  std::string code = fold_case(tag.substr(0, 2));
  if (tag.size() > 2 && tag[2] != '-' && tag[2] != '_')
    return {};
  if (code == "zh" || code == "ja" || code == "ko")
    return code;
  for (const auto& l : languages)
    if (code == l.code)
      return code;
  return {};
}

std::string detect_language(std::string_view text, size_t min_evidence) {
  constexpr size_t max_bytes = 8 * 1024;
  if (text.size() > max_bytes) {
    // Cut at a character boundary.
    size_t cut = max_bytes;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
      --cut;
    text = text.substr(0, cut);
  }
  const auto& lists = stop_lists();
  std::array<size_t, languages.size()> hits{};
  size_t latin = 0;
  size_t cyrillic = 0;
  size_t han = 0;
  size_t kana = 0;
  size_t hangul = 0;
  std::string word;
  auto count_word = [&] {
    if (word.empty())
      return;
    if (auto it = lists.find(word); it != lists.end())
      for (size_t k = 0; k < languages.size(); ++k)
        if ((it->second & (uint32_t{1} << k)) != 0)
          ++hits[k];
    word.clear();
  };
  size_t i = 0;
  while (i < text.size()) {
    auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {
      // ASCII, the common case.
      ++i;
      if ((byte | 0x20) >= 'a' && (byte | 0x20) <= 'z') {
        ++latin;
        word += static_cast<char>(byte | 0x20);
      } else {
        count_word();
      }
      continue;
    }
    auto cp = lower(next_char(text, i));
    bool letter = (cp >= 'a' && cp <= 'z') || (cp >= 0xDF && cp <= 0x24F)
                  || (cp >= 0x430 && cp <= 0x45F);
    if (cp >= 'a' && cp <= 'z')
      ++latin;
    else if (cp >= 0xDF && cp <= 0x24F)
      ++latin;
    else if (cp >= 0x400 && cp <= 0x4FF)
      ++cyrillic;
    else if (cp >= 0x3040 && cp <= 0x30FF)
      ++kana;
    else if (cp >= 0xAC00 && cp <= 0xD7AF)
      ++hangul;
    else if (is_cjk(cp))
      ++han;
    if (letter)
      sdk::append_utf8(word, cp);
    else
      count_word();
  }
  count_word();
  // Scripts first: a text mostly in CJK characters or Cyrillic.
  auto cjk = han + kana + hangul;
  if (cjk > 0 && cjk * 2 >= latin + cyrillic) {
    if (kana * 10 >= cjk)
      return "ja";
    if (hangul * 2 >= cjk)
      return "ko";
    return "zh";
  }
  if (cyrillic > latin)
    return "ru";
  size_t best = 0;
  for (size_t k = 1; k < languages.size(); ++k)
    if (hits[k] > hits[best])
      best = k;
  if (hits[best] < std::max<size_t>(min_evidence, 1))
    return {};
  return languages[best].code;
}

} // namespace quarry::corpus
