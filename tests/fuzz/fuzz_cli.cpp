// fuzz_cli: the chapters' command line (csv_dir_from_args and help_requested in tiny/chapter.h,
// which every chapter's main() calls through run_chapter). The fuzzer's bytes, split at NUL
// bytes, are the arguments. The parser must give what this file's own reading of the rule gives
// ("--csv DIR" or "--csv=DIR", the last one winning; anything else a ValueError), and
// run_chapter must turn a refusal into exit status 1, never let it escape, and answer a request
// for help ("--help" or "-h" anywhere but as the folder after "--csv") with status 0 without
// running the chapter.
#include <optional>

#include "fuzz_util.h"
#include "tiny/chapter.h"

namespace {

// The rule, written out independently: nullopt with `refused` set for a bad command line.
std::optional<std::string> expected(const std::vector<std::string>& args, bool& refused) {
  std::optional<std::string> dir;
  refused = false;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--csv" && i + 1 < args.size()) {
      dir = args[++i];
    } else if (a.size() >= 6 && a.compare(0, 6, "--csv=") == 0) {
      dir = a.substr(6);
    } else {
      refused = true;
      return std::nullopt;
    }
  }
  return dir;
}

// The help rule, written out independently.
bool wants_help(const std::vector<std::string>& args) {
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") return true;
    if (args[i] == "--csv") ++i;  // what follows is a folder's name
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  std::vector<std::string> args{"ch00_fuzz"};
  std::string current;
  for (size_t i = 0; i < size && args.size() < 64; ++i) {
    if (bytes[i] == 0) {
      args.push_back(current);
      current.clear();
    } else {
      current.push_back(static_cast<char>(bytes[i]));
    }
  }
  if (!current.empty()) args.push_back(current);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int argc = static_cast<int>(args.size());

  bool refused = false;
  const std::optional<std::string> want = expected(args, refused);
  std::optional<std::string> got;
  const bool ok = fuzz::accepted([&] { got = tiny::csv_dir_from_args(argc, argv.data()); });
  fuzz::require(ok != refused, ok ? "a bad command line was accepted" : "a good one was refused");
  fuzz::require(got == want, "the --csv directory differs from the rule's");

  const bool help = wants_help(args);
  fuzz::require(tiny::help_requested(argc, argv.data()) == help, "help_requested differs");

  // run_chapter creates the folder a good command line names; a fuzzer must not make folders
  // wherever its bytes point, so it runs the chapter only on command lines that name none (or
  // ask for help, which creates nothing).
  if (want && !help) return 0;
  std::optional<std::string> seen;
  bool ran = false;
  const int status = tiny::run_chapter(argc, argv.data(), [&](const auto& dir) {
    ran = true;
    seen = dir;
  });
  fuzz::require(status == (refused && !help ? 1 : 0), "run_chapter's exit status is wrong");
  fuzz::require(ran == !(help || refused),
                "run_chapter ran the chapter when it should not, or not");
  fuzz::require(seen == (help ? std::nullopt : want),
                "run_chapter passed another directory to the chapter");
  return 0;
}
