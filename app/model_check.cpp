// The check of the models' context windows (see model_check.hpp).

#include "model_check.hpp"

#include "quarry/sdk/strings.hpp"

#include <algorithm>

namespace quarry::app {

namespace {

// `llm.providers.NAME (MODEL)`.
std::string name_of(const model_window& m) {
  auto out = "llm.providers." + m.provider;
  if (!m.info.model.empty())
    out += " (" + m.info.model + ")";
  return out;
}

std::string roles_of(const model_window& m) {
  std::string out;
  for (size_t i = 0; i < m.roles.size(); ++i)
    out += (i == 0 ? "" : i + 1 == m.roles.size() ? " and " : ", ") + m.roles[i];
  return out;
}

bool starts_with(const std::string& x, const char* prefix) {
  return x.rfind(prefix, 0) == 0;
}

// What raises a window that `m`'s provider found too small.
std::string remedy_for(const model_window& m) {
  const auto& source = m.info.context_window_source;
  auto key = "llm.providers." + m.provider + ".context_window";
  if (source == "config")
    return "raise " + key + " if the model has more, or use a model with a larger window";
  if (starts_with(source, "ollama"))
    return "raise Ollama's context: start the server with OLLAMA_CONTEXT_LENGTH=65536, "
           "or create a model with `PARAMETER num_ctx 65536` in its Modelfile "
           "(`ollama create NAME -f Modelfile`)";
  return "load the model with a larger context (vLLM --max-model-len, llama.cpp -c, "
         "LM Studio's context length), or, if the server reports it wrong, set "
         + key + " or research.context_tokens";
}

std::string source_of(const model_window& m) {
  return m.info.context_window_source.empty() ? std::string{"reported by the plugin"}
                                              : m.info.context_window_source;
}

const char* reduced_mode_text = "research.allow_small_context is set: researching "
                                "anyway, with less history and fewer sources in each "
                                "call; reports may be cut";

} // namespace

std::string token_count(int64_t n) {
  return sdk::digit_groups(n);
}

std::string provider_for_role(const core::llm_settings& llm,
                              std::initializer_list<const char*> roles,
                              const std::string& fallback) {
  for (auto r : roles)
    if (auto i = llm.roles.find(r); i != llm.roles.end())
      if (llm.providers.count(i->second) > 0)
        return i->second;
  return fallback;
}

context_verdict check_context_windows(const core::research_settings& research,
                                      const std::vector<model_window>& models) {
  context_verdict out;
  const auto default_tokens = core::research_settings{}.context_tokens;
  const auto minimum = token_count(min_research_context);
  // The models that have a window at all (the extractive provider quotes
  // sources and has none).
  std::vector<const model_window*> checked;
  for (const auto& m : models)
    if (m.plugin != "extractive")
      checked.push_back(&m);
  if (research.context_tokens != default_tokens) {
    // The user's number is the window.
    out.context_tokens = research.context_tokens;
    for (const auto* m : checked)
      if (m->info.context_window > 0 && m->info.context_window < research.context_tokens)
        out.notes.push_back("research.context_tokens (" + token_count(research.context_tokens)
                            + ") is larger than the context window of " + name_of(*m) + ", "
                            + token_count(m->info.context_window) + " tokens (" + source_of(*m)
                            + "): its prompts may not fit");
    if (!checked.empty() && research.context_tokens < min_research_context) {
      auto what = "research.context_tokens is " + token_count(research.context_tokens)
                  + " tokens, below the " + minimum + " tokens deep research needs";
      if (research.allow_small_context)
        out.notes.push_back(what + "; " + reduced_mode_text);
      else
        out.refusal = what
                      + ": raise it if the models have more, or set "
                        "research.allow_small_context: true to research anyway "
                        "(less fits in each call, and reports may be cut)";
    }
    return out;
  }
  // The smallest known window decides.
  const model_window* smallest = nullptr;
  for (const auto* m : checked) {
    if (m->info.context_window <= 0) {
      auto why = m->info.context_window_source.empty() ? std::string{"the server does not say"}
                                                       : m->info.context_window_source;
      out.notes.push_back("the context window of " + name_of(*m) + " is unknown (" + why
                          + "); Quarry assumes research.context_tokens = "
                          + token_count(default_tokens) + " (set llm.providers." + m->provider
                          + ".context_window if it is smaller)");
      continue;
    }
    if (smallest == nullptr || m->info.context_window < smallest->info.context_window)
      smallest = m;
  }
  if (smallest == nullptr) {
    out.context_tokens = default_tokens;
    return out;
  }
  auto window = smallest->info.context_window;
  out.context_tokens = window;
  auto found = "the context window of " + name_of(*smallest) + " is " + token_count(window)
               + " tokens (" + source_of(*smallest) + ")";
  if (!smallest->roles.empty())
    found += " for the " + roles_of(*smallest);
  if (window < min_research_context) {
    if (research.allow_small_context) {
      out.notes.push_back(found + ", below the " + minimum + " tokens deep research needs; "
                          + reduced_mode_text);
    } else {
      out.refusal = found + ", below the " + minimum
                    + " tokens deep research needs: " + remedy_for(*smallest)
                    + "; or set research.allow_small_context: true to research with it "
                      "anyway (less fits in each call, and reports may be cut)";
    }
    return out;
  }
  out.notes.push_back(found + "; research uses it as its prompt budget");
  return out;
}

} // namespace quarry::app
