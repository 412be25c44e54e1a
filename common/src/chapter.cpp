// chapter.cpp: what chapter programs share: their command line, their error report, and the CSV
// files of their figures.
#include "tiny/chapter.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace tiny {

namespace {
// The library's error for a CSV folder that cannot be written, with the system's reason.
RuntimeError csv_dir_error(const std::string& dir, const std::string& reason) {
  std::string message("cannot write CSV files to '");
  message += dir;
  message += "': ";
  message += reason;
  return RuntimeError(message);
}

}  // namespace

// Proves the folder writable by creating (and removing) a file in it.
void prepare_csv_dir(const std::string& dir) {
  if (dir.empty()) throw csv_dir_error(dir, "the folder name is empty");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw csv_dir_error(dir, ec.message());
  if (!std::filesystem::is_directory(dir, ec)) throw csv_dir_error(dir, "Not a directory");
  const std::filesystem::path probe = std::filesystem::path(dir) / ".tiny_csv_write_check";
  if (std::FILE* f = std::fopen(probe.c_str(), "w")) {
    std::fclose(f);
    std::filesystem::remove(probe, ec);
  } else {
    throw csv_dir_error(dir, std::strerror(errno));
  }
}

std::optional<std::string> csv_dir_from_args(int argc, char** argv) {
  std::optional<std::string> dir;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--csv" && i + 1 < argc) dir = argv[++i];
    else if (arg == "--csv") throw ValueError("--csv needs a folder: --csv DIR");
    else if (arg.rfind("--csv=", 0) == 0) dir = arg.substr(6);
    else
      throw ValueError("unknown argument '" + arg +
                       "' (the only option is --csv DIR; --help says more)");
  }
  return dir;
}

bool help_requested(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") return true;
    if (arg == "--csv") ++i;  // the next argument is a folder, whatever its name
  }
  return false;
}

std::string chapter_usage(const std::string& program) {
  const std::string name = std::filesystem::path(program).filename().string();
  return "usage: " + name + " [--csv DIR]\n\n"
         "Runs the chapter and prints what it teaches; chapters/" + name +
         "/README.md reads alongside.\n\n"
         "  --csv DIR   also write the data behind the chapter's figures into DIR, one CSV file\n"
         "              per figure (make plots draws docs/images/ from them)\n"
         "  -h, --help  print this and exit\n";
}

int run_chapter(int argc, char** argv,
                const std::function<void(const std::optional<std::string>& csv_dir)>& body) {
  if (help_requested(argc, argv)) {
    std::fputs(chapter_usage(argc > 0 ? argv[0] : "chapter").c_str(), stdout);
    return 0;
  }
  try {
    const std::optional<std::string> dir = csv_dir_from_args(argc, argv);
    if (dir) prepare_csv_dir(*dir);
    body(dir);
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
  // The library's error, not std::filesystem_error, whatever is wrong with the folder.
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw csv_dir_error(dir, ec.message());
  errno = 0;
  out_.open(path_);
  if (!out_) {
    std::string message("cannot write ");
    message += path_;
    message += ": ";
    message += errno ? std::strerror(errno) : "the file could not be opened";
    throw RuntimeError(message);
  }
  for (size_t i = 0; i < header.size(); ++i) out_ << (i ? "," : "") << header[i];
  out_ << '\n';
}

}  // namespace tiny
