// This file is part of the Quarry plugin SDK.
// The common base of everything a plugin factory creates.

#pragma once

#include "quarry/sdk/version.hpp"

namespace quarry::sdk {

/// Base class of @ref llm_provider and @ref tool. The host keeps the plugin's
/// library loaded while any object created by it lives.
class QUARRY_SDK_API plugin_object {
public:
  virtual ~plugin_object() = default;
};

} // namespace quarry::sdk
