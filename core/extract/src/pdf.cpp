// PDF text extraction with poppler-cpp (placeholder until implemented).
#include "quarry/extract/pdf.hpp"

namespace quarry::extract {

pdf_extraction extract_pdf(std::string_view, std::chrono::milliseconds) {
  pdf_extraction result;
  result.failure = sdk::make_error(sdk::errc::internal,
                                   "PDF extraction is not implemented yet");
  return result;
}

} // namespace quarry::extract
