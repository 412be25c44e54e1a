// file_io.h: the few POSIX file calls data.cpp and checkpoint.cpp share, each turning a failure
// into an exception that names the file and the reason, as Python does ("[Errno 2] No such file
// or directory: 'data.bin'"). A read or write may move fewer bytes than asked (a signal, a pipe,
// a full disk), so each one loops until all of them are moved or the system says why not.
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "tiny/error.h"

namespace tiny::detail {

/// Python's text for an OSError: "[Errno 2] No such file or directory: 'path'", with `what` (the
/// function that failed) in front when given.
inline std::string os_error_message(int err, const std::string& path, const std::string& what) {
  std::string message = what.empty() ? "" : what + ": ";
  return message + "[Errno " + std::to_string(err) + "] " + std::strerror(err) + ": '" + path + "'";
}

/// An open file descriptor that closes itself.
class File {
 public:
  /// Opens `path` with open(2)'s `flags` (and `mode` for a new file); RuntimeError on failure.
  File(const std::string& path, int flags, mode_t mode = 0644, const std::string& what = "")
      : path_(path), what_(what) {
    do fd_ = ::open(path.c_str(), flags | O_CLOEXEC, mode);
    while (fd_ < 0 && errno == EINTR);
    if (fd_ < 0) throw RuntimeError(os_error_message(errno, path, what));
  }
  /// Takes over a descriptor opened elsewhere (mkstemp's), closing it when done.
  File(int fd, const std::string& path, const std::string& what)
      : path_(path), what_(what), fd_(fd) {}
  ~File() {
    if (fd_ >= 0) ::close(fd_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  /// The descriptor, for calls this class does not wrap (mmap, fsync).
  int fd() const { return fd_; }
  /// The path it was opened with.
  const std::string& path() const { return path_; }

  /// Size in bytes; RuntimeError unless it is a regular file (a directory cannot be read as data).
  uint64_t size() const {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw RuntimeError(os_error_message(errno, path_, what_));
    if (S_ISDIR(st.st_mode)) throw RuntimeError(os_error_message(EISDIR, path_, what_));
    if (!S_ISREG(st.st_mode))
      throw RuntimeError(prefix() + "'" + path_ + "' is not a regular file");
    return static_cast<uint64_t>(st.st_size);
  }

  /// Reads exactly `n` bytes at `offset`; RuntimeError (naming what was missing) if the file
  /// ends first.
  void read_at(void* out, size_t n, uint64_t offset) const {
    auto* p = static_cast<char*>(out);
    while (n > 0) {
      const ssize_t got = ::pread(fd_, p, n, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw RuntimeError(os_error_message(errno, path_, what_));
      if (got == 0)
        throw RuntimeError(prefix() + "'" + path_ + "' ended at byte " + std::to_string(offset) +
                           ", " + std::to_string(n) + " bytes short of what it must hold");
      p += got;
      n -= static_cast<size_t>(got);
      offset += static_cast<uint64_t>(got);
    }
  }

  /// Writes all `n` bytes at the current position; RuntimeError (a full disk, say) otherwise.
  void write_all(const void* data, size_t n) {
    const auto* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t put = ::write(fd_, p, n);
      if (put < 0 && errno == EINTR) continue;
      if (put < 0) throw RuntimeError(os_error_message(errno, path_, what_));
      p += put;
      n -= static_cast<size_t>(put);
    }
  }

  /// Forces the written bytes to the disk (fsync), so they survive a power cut, not just a
  /// killed process.
  void sync() {
    if (::fsync(fd_) != 0) throw RuntimeError(os_error_message(errno, path_, what_));
  }

  /// Closes now, reporting an error a deferred write may only show at close.
  void close() {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0 && errno != EINTR)
      throw RuntimeError(os_error_message(errno, path_, what_));
  }

 private:
  std::string prefix() const { return what_.empty() ? "" : what_ + ": "; }

  std::string path_;
  std::string what_;
  int fd_ = -1;
};

}  // namespace tiny::detail
