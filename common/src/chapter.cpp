// chapter.cpp: what chapter programs share: their command line, their error report, and the CSV
// files of their figures.
#include "tiny/chapter.h"

#include <cstdio>
#include <filesystem>

namespace tiny {

std::optional<std::string> csv_dir_from_args(int argc, char** argv) {
  std::optional<std::string> dir;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--csv" && i + 1 < argc) dir = argv[++i];
    else if (arg.rfind("--csv=", 0) == 0) dir = arg.substr(6);
    else throw ValueError("unknown argument '" + arg + "' (the only option is --csv DIR)");
  }
  return dir;
}

int run_chapter(int argc, char** argv,
                const std::function<void(const std::optional<std::string>& csv_dir)>& body) {
  try {
    body(csv_dir_from_args(argc, argv));
  } catch (const std::exception& e) {
    std::fflush(stdout);  // what the chapter printed so far comes first
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}

CsvFile::CsvFile(const std::string& dir, const std::string& name,
                 const std::vector<std::string>& header)
    : path_((std::filesystem::path(dir) / name).string()), columns_(header.size()) {
  std::filesystem::create_directories(dir);
  out_.open(path_);
  if (!out_) throw RuntimeError("cannot write " + path_);
  for (size_t i = 0; i < header.size(); ++i) out_ << (i ? "," : "") << header[i];
  out_ << '\n';
}

}  // namespace tiny
