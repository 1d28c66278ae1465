// The renderer of the page tree as Markdown-like text: headings, lists,
// fenced code blocks, data tables as Markdown tables, inline text with its
// whitespace folded.

#include "html_internal.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace quarry::extract::detail {

namespace {

class renderer {
public:
  std::string out;

  void render(const node* n) {
    tick();
    if (n->removed)
      return;
    if (n->text_node) {
      if (pre_ > 0)
        out += n->text;
      else
        inline_text(n->text);
      return;
    }
    if (is_skipped_tag(n->tag) || is_hidden(n))
      return;
    switch (n->tag) {
      case GUMBO_TAG_BR:
        if (pre_ > 0)
          out += '\n';
        else
          newline();
        return;
      case GUMBO_TAG_HR:
        blank();
        return;
      case GUMBO_TAG_H1:
      case GUMBO_TAG_H2:
      case GUMBO_TAG_H3:
      case GUMBO_TAG_H4:
      case GUMBO_TAG_H5:
      case GUMBO_TAG_H6: {
        auto text = inner_text(n);
        if (text.empty())
          return;
        blank();
        out.append(static_cast<size_t>(n->tag - GUMBO_TAG_H1 + 1), '#');
        out += ' ';
        out += text;
        blank();
        return;
      }
      case GUMBO_TAG_PRE:
        if (pre_ > 0)
          children(n);
        else
          code_block(n);
        return;
      case GUMBO_TAG_CODE:
        if (pre_ > 0) {
          children(n);
        } else if (is_multiline(n)) {
          code_block(n);
        } else {
          auto text = inner_text(n);
          if (!text.empty()) {
            auto fence = text.find('`') == std::string::npos ? "`" : "``";
            inline_text(fence + text + fence);
          }
        }
        return;
      case GUMBO_TAG_UL:
      case GUMBO_TAG_OL: {
        if (lists_.empty())
          blank();
        else
          newline();
        lists_.push_back(n->tag == GUMBO_TAG_OL ? 1 : 0);
        children(n);
        lists_.pop_back();
        if (lists_.empty())
          blank();
        else
          newline();
        return;
      }
      case GUMBO_TAG_LI: {
        newline();
        if (!lists_.empty()) {
          out.append((lists_.size() - 1) * 2, ' ');
          if (lists_.back() > 0)
            out += std::to_string(lists_.back()++) + ". ";
          else
            out += "- ";
        } else {
          out += "- ";
        }
        at_line_start_ = true;
        children(n);
        newline();
        return;
      }
      case GUMBO_TAG_TABLE:
        if (pre_ == 0 && table(n))
          return;
        break;
      default:
        break;
    }
    if (pre_ > 0) {
      // Inside a code block a block element is a line of its own.
      bool block = is_block(n->tag);
      if (block && !out.empty() && out.back() != '\n')
        out += '\n';
      children(n);
      if (block && !out.empty() && out.back() != '\n')
        out += '\n';
      return;
    }
    bool block = is_block(n->tag);
    if (block)
      paragraph_break(n->tag);
    children(n);
    if (block)
      paragraph_break(n->tag);
  }

  std::string finish() {
    while (!out.empty() && (out.back() == '\n' || out.back() == ' '))
      out.pop_back();
    size_t start = 0;
    while (start < out.size() && (out[start] == '\n' || out[start] == ' '))
      ++start;
    return out.substr(start);
  }

private:
  int pre_ = 0;
  bool at_line_start_ = true;
  bool pending_space_ = false;
  std::vector<int> lists_;

  void children(const node* n) {
    for (auto* c : n->children)
      render(c);
  }

  // Whether the text below `n` has a line break (a <code> used as a block).
  static bool is_multiline(const node* n) {
    std::vector<const node*> stack{n};
    while (!stack.empty()) {
      auto* cur = stack.back();
      stack.pop_back();
      if (cur->removed)
        continue;
      if (cur->text_node) {
        if (cur->text.find('\n') != std::string::npos)
          return true;
        continue;
      }
      if (cur->tag == GUMBO_TAG_BR)
        return true;
      for (auto* c : cur->children)
        stack.push_back(c);
    }
    return false;
  }

  // The language of a code block from a `language-x` or `lang-x` class on
  // it or on a <code> inside.
  static std::string code_language(const node* n) {
    for (int depth = 0; n != nullptr && depth < 3; ++depth) {
      auto cls = sdk::to_lower(n->attr("class"));
      for (std::string_view prefix : {"language-", "lang-"}) {
        auto pos = cls.find(prefix);
        if (pos == std::string::npos || (pos > 0 && !sdk::is_ascii_space(cls[pos - 1])))
          continue;
        pos += prefix.size();
        auto end = pos;
        while (end < cls.size()
               && (std::isalnum(static_cast<unsigned char>(cls[end])) || cls[end] == '+'
                   || cls[end] == '-' || cls[end] == '#' || cls[end] == '_'))
          ++end;
        return cls.substr(pos, end - pos);
      }
      const node* next = nullptr;
      for (auto* c : n->children)
        if (!c->text_node && c->tag == GUMBO_TAG_CODE) {
          next = c;
          break;
        }
      n = next;
    }
    return {};
  }

  // A fenced code block: the text verbatim (whitespace kept), fenced with
  // more backticks than any run inside it.
  void code_block(const node* n) {
    blank();
    std::string saved;
    std::swap(saved, out);
    ++pre_;
    children(n);
    --pre_;
    std::string code;
    std::swap(code, out);
    out = std::move(saved);
    while (
      !code.empty()
      && (code.back() == '\n' || code.back() == ' ' || code.back() == '\t' || code.back() == '\r'))
      code.pop_back();
    while (!code.empty() && code.front() == '\n')
      code.erase(0, 1);
    if (code.empty())
      return;
    size_t longest = 0;
    size_t run = 0;
    for (auto c : code) {
      run = c == '`' ? run + 1 : 0;
      longest = std::max(longest, run);
    }
    std::string fence(std::max<size_t>(3, longest + 1), '`');
    out += fence;
    out += code_language(n);
    out += '\n';
    out += code;
    out += '\n';
    out += fence;
    blank();
  }

  // A cell's content on one line, with `|` escaped.
  static std::string cell_text(const node* cell) {
    renderer r;
    r.children(cell);
    auto text = fold(r.finish());
    std::string out;
    out.reserve(text.size());
    for (auto c : text) {
      if (c == '|')
        out += '\\';
      out += c;
    }
    return out;
  }

  // The rows of a table (also inside thead/tbody/tfoot), not of nested ones.
  static void table_rows(const node* n, std::vector<const node*>& rows) {
    for (auto* c : n->children) {
      if (c->text_node || c->removed)
        continue;
      if (c->tag == GUMBO_TAG_TR)
        rows.push_back(c);
      else if (c->tag == GUMBO_TAG_THEAD || c->tag == GUMBO_TAG_TBODY || c->tag == GUMBO_TAG_TFOOT)
        table_rows(c, rows);
    }
  }

  // Renders a data table as a Markdown table and returns true; returns
  // false (rendering nothing) for a layout table: one with a table inside,
  // a single column or a cell of more than 400 characters.
  bool table(const node* n) {
    std::vector<const node*> rows;
    table_rows(n, rows);
    if (rows.empty() || count_tag(n, GUMBO_TAG_TABLE) > 0)
      return false;
    std::vector<std::vector<std::string>> cells;
    size_t columns = 0;
    for (auto* row : rows) {
      std::vector<std::string> line;
      for (auto* c : row->children) {
        if (c->text_node || c->removed || is_hidden(c)
            || (c->tag != GUMBO_TAG_TD && c->tag != GUMBO_TAG_TH))
          continue;
        auto text = cell_text(c);
        if (text.size() > 400)
          return false;
        line.push_back(std::move(text));
        // A cell spanning several columns is followed by empty ones.
        auto span = std::atoi(std::string{c->attr("colspan")}.c_str());
        for (int i = 1; i < std::min(span, 32); ++i)
          line.emplace_back();
      }
      bool empty = std::all_of(line.begin(), line.end(),
                               [](const std::string& x) { return x.empty(); });
      if (empty)
        continue;
      columns = std::max(columns, line.size());
      cells.push_back(std::move(line));
    }
    if (cells.empty())
      return true;
    if (columns < 2)
      return false;
    blank();
    for (auto* c : n->children)
      if (!c->text_node && !c->removed && c->tag == GUMBO_TAG_CAPTION) {
        auto caption = fold(cell_text(c));
        if (!caption.empty()) {
          out += caption;
          blank();
        }
      }
    for (size_t i = 0; i < cells.size(); ++i) {
      auto& line = cells[i];
      line.resize(columns);
      out += '|';
      for (auto& cell : line) {
        out += ' ';
        out += cell;
        out += cell.empty() ? "|" : " |";
      }
      out += '\n';
      if (i == 0) {
        out += '|';
        for (size_t k = 0; k < columns; ++k)
          out += " --- |";
        out += '\n';
      }
    }
    at_line_start_ = true;
    pending_space_ = false;
    blank();
    return true;
  }

  void paragraph_break(GumboTag t) {
    if (t == GUMBO_TAG_DIV || t == GUMBO_TAG_DT || t == GUMBO_TAG_DD || t == GUMBO_TAG_FIGCAPTION
        || t == GUMBO_TAG_SUMMARY)
      newline();
    else
      blank();
  }

  void newline() {
    pending_space_ = false;
    at_line_start_ = true;
    if (!out.empty() && out.back() != '\n')
      out += '\n';
  }

  void blank() {
    newline();
    if (out.size() >= 2 && out[out.size() - 2] == '\n')
      return;
    if (!out.empty())
      out += '\n';
  }

  void inline_text(std::string_view text) {
    if (text.empty())
      return;
    // A no-break space at either end separates words too ("mein&nbsp;<a>
    // Lieblingskleid</a>&nbsp;vereint").
    bool lead = sdk::is_ascii_space(text.front()) || nbsp_at(text, 0);
    bool trail = sdk::is_ascii_space(text.back())
                 || (text.size() >= 2 && nbsp_at(text, text.size() - 2));
    auto folded = fold(text);
    if (folded.empty()) {
      if (!at_line_start_)
        pending_space_ = true;
      return;
    }
    if ((lead || pending_space_) && !at_line_start_ && !out.empty() && out.back() != ' '
        && out.back() != '\n')
      out += ' ';
    out += folded;
    at_line_start_ = false;
    pending_space_ = trail;
  }
};

} // namespace

std::string render_nodes(const std::vector<node*>& nodes) {
  renderer r;
  for (auto* n : nodes)
    r.render(n);
  return r.finish();
}

std::string render_comments(const std::vector<node*>& sections) {
  renderer r;
  for (auto* c : sections) {
    for (auto* k : c->children)
      r.render(k);
    r.out += "\n\n";
  }
  return r.finish();
}

} // namespace quarry::extract::detail
