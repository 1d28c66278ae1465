// A SQLite VFS for tests that injects write and sync failures: it wraps the
// default VFS, counts what goes through, and fails (with SQLITE_FULL,
// SQLITE_IOERR_WRITE, ...) after a number of bytes or on the k-th write or
// sync. Registered under a name (open databases with it by that name);
// faults are armed and disarmed at run time.

#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace quarry::test {

/// When and how the faulty VFS fails.
struct fault_plan {
  enum class trigger {
    /// Never (counts only).
    none,
    /// A write that would take the bytes written since arming past `bytes`.
    after_bytes,
    /// The `nth` write since arming (1 for the first).
    on_write,
    /// The `nth` sync since arming.
    on_sync,
  };
  trigger when = trigger::none;
  int64_t bytes = 0;
  int64_t nth = 1;
  /// The SQLite result code returned, e.g. SQLITE_FULL (13) or
  /// SQLITE_IOERR_WRITE (778).
  int code = 13;
  /// The files affected: a mask of SQLITE_OPEN_MAIN_DB, SQLITE_OPEN_WAL,
  /// SQLITE_OPEN_MAIN_JOURNAL, ...; 0 for every file.
  int files = 0;
  /// Whether every later write (or sync) fails too once one failed, as on a
  /// full disk; otherwise only the one fails.
  bool sticky = true;
};

/// A fault-injecting VFS registered with SQLite (not the default one).
class faulty_vfs {
public:
  /// The VFS registered as `name`, registered on first use. Lives until
  /// the process ends.
  static faulty_vfs& get(const std::string& name = "quarry_faulty");

  ~faulty_vfs();
  faulty_vfs(const faulty_vfs&) = delete;
  faulty_vfs& operator=(const faulty_vfs&) = delete;

  /// The name to pass to sqlite3_open_v2 (or store's open_options::vfs).
  const std::string& name() const noexcept;

  /// Starts failing as `plan` says; resets the counters.
  void arm(const fault_plan& plan);

  /// Stops failing (the counters keep their values).
  void disarm();

  /// Failures injected since the last arm().
  int64_t faults() const;
  /// Bytes written (to the affected files) since the last arm().
  int64_t bytes_written() const;
  /// Writes and syncs (of the affected files) since the last arm().
  int64_t writes() const;
  int64_t syncs() const;
  /// Transactions committed to a write-ahead log (of any file) since the
  /// last arm(): the frames written that end one.
  int64_t commits() const;

  struct state;

private:
  explicit faulty_vfs(std::unique_ptr<state> st);
  std::unique_ptr<state> state_;
};

} // namespace quarry::test
