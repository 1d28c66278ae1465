// A fault-injecting SQLite VFS for tests (see faulty_vfs.hpp).

#include "support/faulty_vfs.hpp"

#include <sqlite3.h>

#include <map>
#include <mutex>
#include <stdexcept>

namespace quarry::test {

struct faulty_vfs::state {
  sqlite3_vfs vfs{};
  sqlite3_vfs* real = nullptr;
  std::string name;
  mutable std::mutex mtx;
  fault_plan plan;
  bool triggered = false;
  int64_t faults = 0;
  int64_t bytes = 0;
  int64_t writes = 0;
  int64_t syncs = 0;
  int64_t commits = 0;

  enum class op { write, sync };

  // A write-ahead log's frame header (24 bytes, written apart from its
  // page) whose second big-endian word, the database's size in pages, is
  // not 0 ends a transaction (SQLite's file format, "WAL Frame Format").
  void note_frame(int file_flags, const void* buf, int n) {
    if ((file_flags & SQLITE_OPEN_WAL) == 0 || n != 24)
      return;
    const auto* b = static_cast<const unsigned char*>(buf);
    if ((b[4] | b[5] | b[6] | b[7]) == 0)
      return;
    std::lock_guard<std::mutex> guard{mtx};
    ++commits;
  }

  // SQLITE_OK to go ahead, or the error to return.
  int decide(int file_flags, op what, int64_t amount) {
    std::lock_guard<std::mutex> guard{mtx};
    if (plan.files != 0 && (file_flags & plan.files) == 0)
      return SQLITE_OK;
    if (what == op::write)
      ++writes;
    else
      ++syncs;
    auto fault = [&] {
      triggered = true;
      ++faults;
      return plan.code;
    };
    if (plan.when == fault_plan::trigger::none)
      return SQLITE_OK;
    if (triggered && plan.sticky)
      return fault();
    switch (plan.when) {
      case fault_plan::trigger::after_bytes:
        if (what == op::write) {
          if (bytes + amount > plan.bytes)
            return fault();
          bytes += amount;
        }
        break;
      case fault_plan::trigger::on_write:
        if (what == op::write && writes == plan.nth)
          return fault();
        break;
      case fault_plan::trigger::on_sync:
        if (what == op::sync && syncs == plan.nth)
          return fault();
        break;
      case fault_plan::trigger::none:
        break;
    }
    if (what == op::write && plan.when != fault_plan::trigger::after_bytes)
      bytes += amount;
    return SQLITE_OK;
  }
};

namespace {

using state = faulty_vfs::state;

// Our file: SQLite's header, then the real VFS's file right after it.
struct faulty_file {
  sqlite3_file base;
  state* owner;
  int flags;

  sqlite3_file* real() {
    return reinterpret_cast<sqlite3_file*>(this + 1);
  }
};

static_assert(sizeof(faulty_file) % 8 == 0, "the real file stays aligned");

faulty_file* cast(sqlite3_file* f) {
  return reinterpret_cast<faulty_file*>(f);
}

const sqlite3_io_methods* real_methods(sqlite3_file* f) {
  return cast(f)->real()->pMethods;
}

int x_close(sqlite3_file* f) {
  return real_methods(f)->xClose(cast(f)->real());
}

int x_read(sqlite3_file* f, void* buf, int n, sqlite3_int64 off) {
  return real_methods(f)->xRead(cast(f)->real(), buf, n, off);
}

int x_write(sqlite3_file* f, const void* buf, int n, sqlite3_int64 off) {
  auto* ff = cast(f);
  auto rc = ff->owner->decide(ff->flags, state::op::write, n);
  if (rc != SQLITE_OK)
    return rc;
  ff->owner->note_frame(ff->flags, buf, n);
  return real_methods(f)->xWrite(ff->real(), buf, n, off);
}

int x_truncate(sqlite3_file* f, sqlite3_int64 size) {
  return real_methods(f)->xTruncate(cast(f)->real(), size);
}

int x_sync(sqlite3_file* f, int flags) {
  auto* ff = cast(f);
  auto rc = ff->owner->decide(ff->flags, state::op::sync, 0);
  if (rc != SQLITE_OK)
    return rc;
  return real_methods(f)->xSync(ff->real(), flags);
}

int x_file_size(sqlite3_file* f, sqlite3_int64* size) {
  return real_methods(f)->xFileSize(cast(f)->real(), size);
}

int x_lock(sqlite3_file* f, int level) {
  return real_methods(f)->xLock(cast(f)->real(), level);
}

int x_unlock(sqlite3_file* f, int level) {
  return real_methods(f)->xUnlock(cast(f)->real(), level);
}

int x_check_reserved_lock(sqlite3_file* f, int* out) {
  return real_methods(f)->xCheckReservedLock(cast(f)->real(), out);
}

int x_file_control(sqlite3_file* f, int op, void* arg) {
  return real_methods(f)->xFileControl(cast(f)->real(), op, arg);
}

int x_sector_size(sqlite3_file* f) {
  return real_methods(f)->xSectorSize(cast(f)->real());
}

int x_device_characteristics(sqlite3_file* f) {
  return real_methods(f)->xDeviceCharacteristics(cast(f)->real());
}

int x_shm_map(sqlite3_file* f, int region, int size, int extend, void volatile** out) {
  return real_methods(f)->xShmMap(cast(f)->real(), region, size, extend, out);
}

int x_shm_lock(sqlite3_file* f, int offset, int n, int flags) {
  return real_methods(f)->xShmLock(cast(f)->real(), offset, n, flags);
}

void x_shm_barrier(sqlite3_file* f) {
  real_methods(f)->xShmBarrier(cast(f)->real());
}

int x_shm_unmap(sqlite3_file* f, int delete_flag) {
  return real_methods(f)->xShmUnmap(cast(f)->real(), delete_flag);
}

// Version 2: WAL needs the shared-memory methods. xFetch/xUnfetch (memory
// mapping) are left out: every read goes through xRead.
const sqlite3_io_methods faulty_methods = {2,
                                           x_close,
                                           x_read,
                                           x_write,
                                           x_truncate,
                                           x_sync,
                                           x_file_size,
                                           x_lock,
                                           x_unlock,
                                           x_check_reserved_lock,
                                           x_file_control,
                                           x_sector_size,
                                           x_device_characteristics,
                                           x_shm_map,
                                           x_shm_lock,
                                           x_shm_barrier,
                                           x_shm_unmap,
                                           nullptr,
                                           nullptr};

sqlite3_vfs* real_vfs(sqlite3_vfs* vfs) {
  return static_cast<state*>(vfs->pAppData)->real;
}

int x_open(sqlite3_vfs* vfs, const char* name, sqlite3_file* file, int flags, int* out_flags) {
  auto* st = static_cast<state*>(vfs->pAppData);
  auto* ff = cast(file);
  ff->owner = st;
  ff->flags = flags;
  auto rc = st->real->xOpen(st->real, name, ff->real(), flags, out_flags);
  auto* methods = ff->real()->pMethods;
  if (methods == nullptr) {
    file->pMethods = nullptr;
    return rc;
  }
  if (methods->iVersion < 2) {
    // No shared memory to pass on: never happens with the unix VFS.
    methods->xClose(ff->real());
    file->pMethods = nullptr;
    return SQLITE_CANTOPEN;
  }
  file->pMethods = &faulty_methods;
  return rc;
}

int x_delete(sqlite3_vfs* vfs, const char* name, int sync_dir) {
  return real_vfs(vfs)->xDelete(real_vfs(vfs), name, sync_dir);
}

int x_access(sqlite3_vfs* vfs, const char* name, int flags, int* out) {
  return real_vfs(vfs)->xAccess(real_vfs(vfs), name, flags, out);
}

int x_full_pathname(sqlite3_vfs* vfs, const char* name, int n, char* out) {
  return real_vfs(vfs)->xFullPathname(real_vfs(vfs), name, n, out);
}

void* x_dl_open(sqlite3_vfs* vfs, const char* name) {
  return real_vfs(vfs)->xDlOpen(real_vfs(vfs), name);
}

void x_dl_error(sqlite3_vfs* vfs, int n, char* out) {
  real_vfs(vfs)->xDlError(real_vfs(vfs), n, out);
}

using dl_sym_fn = void (*)(void);

dl_sym_fn x_dl_sym(sqlite3_vfs* vfs, void* handle, const char* symbol) {
  return real_vfs(vfs)->xDlSym(real_vfs(vfs), handle, symbol);
}

void x_dl_close(sqlite3_vfs* vfs, void* handle) {
  real_vfs(vfs)->xDlClose(real_vfs(vfs), handle);
}

int x_randomness(sqlite3_vfs* vfs, int n, char* out) {
  return real_vfs(vfs)->xRandomness(real_vfs(vfs), n, out);
}

int x_sleep(sqlite3_vfs* vfs, int micros) {
  return real_vfs(vfs)->xSleep(real_vfs(vfs), micros);
}

int x_current_time(sqlite3_vfs* vfs, double* out) {
  return real_vfs(vfs)->xCurrentTime(real_vfs(vfs), out);
}

int x_get_last_error(sqlite3_vfs* vfs, int n, char* out) {
  return real_vfs(vfs)->xGetLastError(real_vfs(vfs), n, out);
}

int x_current_time_int64(sqlite3_vfs* vfs, sqlite3_int64* out) {
  return real_vfs(vfs)->xCurrentTimeInt64(real_vfs(vfs), out);
}

std::mutex registry_mtx;

std::map<std::string, std::unique_ptr<faulty_vfs>>& registry() {
  static std::map<std::string, std::unique_ptr<faulty_vfs>> instances;
  return instances;
}

} // namespace

faulty_vfs& faulty_vfs::get(const std::string& name) {
  std::lock_guard<std::mutex> guard{registry_mtx};
  auto& instances = registry();
  if (auto i = instances.find(name); i != instances.end())
    return *i->second;
  sqlite3_initialize();
  auto st = std::make_unique<state>();
  st->real = sqlite3_vfs_find(nullptr);
  if (st->real == nullptr)
    throw std::runtime_error("no default SQLite VFS");
  st->name = name;
  auto& v = st->vfs;
  v.iVersion = 2;
  v.szOsFile = static_cast<int>(sizeof(faulty_file)) + st->real->szOsFile;
  v.mxPathname = st->real->mxPathname;
  v.zName = st->name.c_str();
  v.pAppData = st.get();
  v.xOpen = x_open;
  v.xDelete = x_delete;
  v.xAccess = x_access;
  v.xFullPathname = x_full_pathname;
  v.xDlOpen = x_dl_open;
  v.xDlError = x_dl_error;
  v.xDlSym = x_dl_sym;
  v.xDlClose = x_dl_close;
  v.xRandomness = x_randomness;
  v.xSleep = x_sleep;
  v.xCurrentTime = x_current_time;
  v.xGetLastError = x_get_last_error;
  v.xCurrentTimeInt64 = x_current_time_int64;
  if (sqlite3_vfs_register(&st->vfs, 0) != SQLITE_OK)
    throw std::runtime_error("cannot register the VFS " + name);
  std::unique_ptr<faulty_vfs> instance{new faulty_vfs(std::move(st))};
  auto& result = *instance;
  instances.emplace(name, std::move(instance));
  return result;
}

faulty_vfs::faulty_vfs(std::unique_ptr<state> st) : state_(std::move(st)) {
  // nop
}

faulty_vfs::~faulty_vfs() {
  sqlite3_vfs_unregister(&state_->vfs);
}

const std::string& faulty_vfs::name() const noexcept {
  return state_->name;
}

void faulty_vfs::arm(const fault_plan& plan) {
  std::lock_guard<std::mutex> guard{state_->mtx};
  state_->plan = plan;
  state_->triggered = false;
  state_->faults = 0;
  state_->bytes = 0;
  state_->writes = 0;
  state_->syncs = 0;
  state_->commits = 0;
}

void faulty_vfs::disarm() {
  std::lock_guard<std::mutex> guard{state_->mtx};
  state_->plan.when = fault_plan::trigger::none;
  state_->triggered = false;
}

int64_t faulty_vfs::faults() const {
  std::lock_guard<std::mutex> guard{state_->mtx};
  return state_->faults;
}

int64_t faulty_vfs::bytes_written() const {
  std::lock_guard<std::mutex> guard{state_->mtx};
  return state_->bytes;
}

int64_t faulty_vfs::writes() const {
  std::lock_guard<std::mutex> guard{state_->mtx};
  return state_->writes;
}

int64_t faulty_vfs::syncs() const {
  std::lock_guard<std::mutex> guard{state_->mtx};
  return state_->syncs;
}

int64_t faulty_vfs::commits() const {
  std::lock_guard<std::mutex> guard{state_->mtx};
  return state_->commits;
}

} // namespace quarry::test
