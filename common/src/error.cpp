// error.cpp: warn(), the one way the library tells a user something without stopping.
#include "tiny/error.h"

#include <iostream>
#include <mutex>
#include <set>

namespace tiny {

namespace {
std::mutex g_warn_mutex;
WarningCapture* g_capture = nullptr;  // the innermost live capture, if any
std::set<std::string>& shown() {
  static std::set<std::string> messages;
  return messages;
}
}  // namespace

void warn(const std::string& message) {
  const std::lock_guard<std::mutex> lock(g_warn_mutex);
  if (g_capture) {
    g_capture->messages_.push_back(message);
    return;
  }
  if (shown().insert(message).second) std::cerr << "UserWarning: " << message << "\n";
}

WarningCapture::WarningCapture() {
  const std::lock_guard<std::mutex> lock(g_warn_mutex);
  outer_ = g_capture;
  g_capture = this;
}

WarningCapture::~WarningCapture() {
  const std::lock_guard<std::mutex> lock(g_warn_mutex);
  g_capture = outer_;
}

}  // namespace tiny
