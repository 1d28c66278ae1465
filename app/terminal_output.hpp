// Writes to a terminal through std::cout and std::cerr cleaned of escape
// sequences and control strings.

#pragma once

namespace quarry::app {

/// When standard output or standard error is a terminal, routes what the
/// program writes to it through `std::cout` / `std::cerr` (`std::clog`) through
/// @ref sdk::terminal_text_filter, so that no text from outside (a model's
/// streamed answer, a tool's result, a server's error message, a page title)
/// can move the cursor, clear the screen, set the window title or write the
/// clipboard, whatever command prints it. Pipes and files are left alone:
/// there the text is data. Writes through C stdio (the live research view,
/// which draws with its own escape sequences, and the log sink) do not pass
/// here. Call once, before any thread writes to the streams.
void guard_terminal_output();

/// Writes out what the filters hold back (the start of a sequence that never
/// ended), cleaned as the end of the text; call before the program ends.
void finish_terminal_output();

} // namespace quarry::app
