/// @file chapter.h
/// @brief What every chapter program shares: its command line (`--csv DIR` writes the data
/// behind its figures, one CSV per figure) and how it reports a failure.
#pragma once
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "tiny/error.h"
#include "tiny/format.h"

namespace tiny {

/// The directory given as `--csv DIR` (or `--csv=DIR`; the last one wins), if any; any other
/// argument, and `--csv` without a folder, is a ValueError. Only reads the arguments:
/// run_chapter() then prepares the folder.
std::optional<std::string> csv_dir_from_args(int argc, char** argv);

/// True when the arguments ask for help (`--help` or `-h`; a folder after `--csv` is a name).
bool help_requested(int argc, char** argv);

/// What `--help` prints for the chapter program at `program` (its argv[0]): the command line
/// and where its README is.
std::string chapter_usage(const std::string& program);

/// Creates `dir` if it is missing and checks that a file can be written in it, so that a bad
/// `--csv` folder stops a chapter before it prints anything: RuntimeError "cannot write CSV
/// files to 'DIR': <reason>" otherwise (an empty name included).
void prepare_csv_dir(const std::string& dir);

/// A chapter's main(): reads the command line (`--help` prints chapter_usage() and returns 0
/// without running the chapter), runs `body` with the CSV directory (if any), and turns an
/// exception into "error: <message>" on stderr and exit status 1.
int run_chapter(int argc, char** argv,
                const std::function<void(const std::optional<std::string>& csv_dir)>& body);

/// A CSV file with a header row; each row() call writes one line. Floating-point numbers are
/// written as Python's repr writes them: the shortest digits that read back exactly; a text
/// holding a comma, a quote or a line break is quoted as Python's csv module writes it.
class CsvFile {
 public:
  /// Creates `dir`/`name` (and `dir` itself if needed) and writes the header; a folder or file
  /// that cannot be written raises RuntimeError.
  CsvFile(const std::string& dir, const std::string& name, const std::vector<std::string>& header);
  /// Writes one row; each value is a string or a number.
  template <typename... Values> void row(const Values&... values) {
    std::ostringstream line;
    size_t i = 0;
    auto field = [](const auto& v) {
      if constexpr (std::is_floating_point_v<std::decay_t<decltype(v)>>) return repr(v);
      else {
        std::ostringstream f;
        f << v;
        return quoted(f.str());
      }
    };
    ((line << (i++ ? "," : "") << field(values)), ...);
    if (i != columns_)
      throw ValueError("CSV row has " + std::to_string(i) + " values, header has " +
                       std::to_string(columns_));
    out_ << line.str() << '\n';
  }
  /// The path written.
  const std::string& path() const { return path_; }

 private:
  // `text` as one CSV field: in double quotes, its quotes doubled, when it needs them.
  static std::string quoted(const std::string& text) {
    if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
    std::string out = "\"";
    for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
  }
  std::string path_;
  std::ofstream out_;
  size_t columns_;
};

}  // namespace tiny
