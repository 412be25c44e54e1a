// cpu_compiler.cpp: generated C++ turned into a loaded function, through the host compiler and
// a disk cache, as PyTorch's inductor does with its C++ kernels.
//
// The kernel's source goes to <cache>/<hash>.cpp, the compiler writes <hash>.so beside it, and
// dlopen loads it. The hash covers the source, the compiler and its flags, and the processor's
// vector extensions (the code is compiled for this processor: -march=native), so a second run of
// the same program, or of another program that fuses the same graph, finds the shared object and
// skips the compiler. The cache is $TINY_FUSION_CACHE, or /tmp/tiny_fusion_<uid>.
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>

#include "fusion/graph.h"

#ifndef TINY_CXX_COMPILER
#define TINY_CXX_COMPILER "c++"
#endif

namespace tiny::detail::fusion {

namespace {

// No contraction of a * b + c into one fused multiply-add, so that every op rounds where the
// eager kernel rounds; no errno, so sqrt vectorises; no trapping, so selects vectorise; the
// widest vectors the processor has (GCC stays at 256 bits on AVX-512 machines unless told, and
// an erf-heavy loop runs twice as fast at 512: 82 -> 43 ms for the GELU chain here).
constexpr const char* kFlags =
    "-std=c++17 -O3 -march=native -mprefer-vector-width=512 -fPIC -shared -ffp-contract=off "
    "-fno-math-errno -fno-trapping-math -w";

// The compiler to run: $TINY_FUSION_CXX if set (empty: none), else the library's own.
std::string compiler_path() {
  if (const char* env = std::getenv("TINY_FUSION_CXX")) return env;
  return TINY_CXX_COMPILER;
}

// `text` quoted for the shell.
std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool executable(const std::string& path) {
  if (path.find('/') != std::string::npos) return access(path.c_str(), X_OK) == 0;
  // A bare name: look along PATH, as the shell would.
  const char* env = std::getenv("PATH");
  std::stringstream dirs(env ? env : "");
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (!dir.empty() && access((dir + "/" + path).c_str(), X_OK) == 0) return true;
  return false;
}

std::string cache_dir() {
  if (const char* env = std::getenv("TINY_FUSION_CACHE"); env && *env) return env;
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/tiny_fusion_" + std::to_string(getuid());
}

// FNV-1a, 64 bits: a stable name for a source text (not a security measure).
uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The processor's vector extensions, which -march=native compiles for.
std::string cpu_features() {
  std::string f;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) f += "avx2 ";
  if (__builtin_cpu_supports("fma")) f += "fma ";
  if (__builtin_cpu_supports("avx512f")) f += "avx512f ";
#endif
  return f;
}

std::mutex g_mutex;  // compiles and loads, one at a time
}  // namespace

bool cpp_compiler_available(std::string& why) {
  const std::string cxx = compiler_path();
  if (cxx.empty()) {
    why = "TINY_FUSION_CXX is set to nothing";
    return false;
  }
  if (!executable(cxx)) {
    why = "no compiler at " + cxx;
    return false;
  }
  return true;
}

std::string cpp_compiler_name() {
  static std::mutex m;
  static std::string cached_for, name;
  const std::lock_guard lock(m);
  const std::string cxx = compiler_path();
  if (cached_for == cxx && !name.empty()) return name;
  std::string version;
  if (FILE* p = popen((quoted(cxx) + " -dumpfullversion -dumpversion 2>/dev/null").c_str(), "r")) {
    char buf[64] = {};
    if (std::fgets(buf, sizeof buf, p)) version = buf;
    pclose(p);
  }
  while (!version.empty() && (version.back() == '\n' || version.back() == '\r')) version.pop_back();
  const size_t slash = cxx.rfind('/');
  name = (slash == std::string::npos ? cxx : cxx.substr(slash + 1)) +
         (version.empty() ? "" : " " + version);
  cached_for = cxx;
  return name;
}

CppKernel load_cpp_kernel(const std::string& source, const std::string& name) {
  const std::lock_guard lock(g_mutex);
  std::string why;
  if (!cpp_compiler_available(why))
    throw RuntimeError("compile(): cannot build a C++ kernel: " + why);
  const std::string cxx = compiler_path();
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx",
                static_cast<unsigned long long>(
                    fnv1a(source + '\n' + cxx + '\n' + kFlags + '\n' +
                          cpu_features())));
  const std::string dir = cache_dir();
  const std::string base = dir + "/" + name + "_" + hash;
  const std::string so = base + ".so";
  CppKernel k;
  k.compiler = cpp_compiler_name();
  k.from_disk_cache = access(so.c_str(), R_OK) == 0;
  if (!k.from_disk_cache) {
    // mkdir -p of one level is enough: the cache's parent is /tmp or the user's choice.
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      throw RuntimeError("compile(): cannot create the kernel cache " + dir);
    const std::string cpp = base + ".cpp";
    {
      std::ofstream out(cpp);
      out << source;
      if (!out) throw RuntimeError("compile(): cannot write " + cpp);
    }
    // The compiler writes a private name, renamed into place when complete, so that another
    // process never loads half a file.
    const std::string tmp = base + ".so.tmp." + std::to_string(getpid());
    const std::string log = base + ".log";
    const std::string command = quoted(cxx) + " " + kFlags +
                                " -o " +
                                quoted(tmp) + " " + quoted(cpp) + " > " + quoted(log) + " 2>&1";
    const int status = std::system(command.c_str());
    if (status != 0) {
      std::remove(tmp.c_str());
      throw RuntimeError("compile(): the generated kernel " + cpp + " did not compile (" + cxx +
                         "):\n" + read_file(log));
    }
    if (std::rename(tmp.c_str(), so.c_str()) != 0)
      throw RuntimeError("compile(): cannot move the compiled kernel to " + so);
  }
  // Loaded once and kept for the life of the process: compiled functions hold its entry point.
  void* handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw RuntimeError(std::string("compile(): cannot load ") + so + ": " + dlerror());
  k.entry = reinterpret_cast<CppKernel::Entry>(dlsym(handle, name.c_str()));
  if (!k.entry) throw RuntimeError("compile(): " + so + " has no function " + name);
  return k;
}

}  // namespace tiny::detail::fusion
