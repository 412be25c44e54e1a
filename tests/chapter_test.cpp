// The chapters' shared command line and CSV files (tiny/chapter.h): a --csv folder that cannot
// be written stops the chapter before its body runs, with the library's error, never a
// std::filesystem_error.
#include "tiny/chapter.h"
#include "tiny/timing.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "test_util.h"

using namespace tiny;
using namespace tiny::testing;

namespace {

// What run_chapter does before the chapter runs: csv_dir_from_args on `args`, as a program's
// argv (argv[0] first), then prepare_csv_dir on the folder it names.
std::optional<std::string> parse(std::vector<std::string> args) {
  args.insert(args.begin(), "chapter");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  const std::optional<std::string> dir =
      csv_dir_from_args(static_cast<int>(argv.size()), argv.data());
  if (dir) prepare_csv_dir(*dir);
  return dir;
}

// A regular file at `path`, for a --csv folder that is, or lies below, a file.
void write_file(const std::string& path) { std::ofstream(path) << "not a folder\n"; }

}  // namespace

TEST(Chapter, CsvFolderIsCreatedWhenTheArgumentsAreRead) {
  TempDir tmp;
  const std::string root = tmp.path().string();
  const std::string dir = root + "/figures/ch05";
  EXPECT_EQ(parse({}), std::nullopt);
  EXPECT_EQ(parse({"--csv", dir}), dir);
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  EXPECT_TRUE(std::filesystem::is_empty(dir));  // the write check leaves nothing behind
  EXPECT_EQ(parse({"--csv=" + dir}), dir);
}

TEST(Chapter, UnwritableCsvFolderIsRefusedWhenTheArgumentsAreRead) {
  TempDir tmp;
  const std::string root = tmp.path().string();
  const std::string file = root + "/figures.txt";
  write_file(file);
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] {
        parse({"--csv", file});
      },
      "cannot write CSV files to '" + file + "': Not a directory"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] {
        parse({"--csv", file + "/ch05"});
      },
      "cannot write CSV files to '" + file + "/ch05': Not a directory"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { parse({"--csv="}); },
                                        "cannot write CSV files to '': the folder name is empty"));
}

TEST(Chapter, RunChapterFailsBeforeTheBodyOnABadCsvFolder) {
  TempDir tmp;
  const std::string root = tmp.path().string();
  const std::string file = root + "/figures.txt";
  write_file(file);
  std::string arg0 = "chapter", arg1 = "--csv", arg2 = file + "/ch05";
  char* argv[] = {arg0.data(), arg1.data(), arg2.data()};
  bool ran = false;
  ::testing::internal::CaptureStderr();
  const int status = run_chapter(3, argv, [&](const std::optional<std::string>&) { ran = true; });
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(status, 1);
  EXPECT_FALSE(ran);
  EXPECT_EQ(err, "error: cannot write CSV files to '" + arg2 + "': Not a directory\n");
}

TEST(Chapter, HelpIsAskedForByEitherSpellingButNotByAFolderOfThatName) {
  auto asks = [](std::vector<std::string> args) {
    args.insert(args.begin(), "chapter");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    return help_requested(static_cast<int>(argv.size()), argv.data());
  };
  EXPECT_TRUE(asks({"--help"}));
  EXPECT_TRUE(asks({"-h"}));
  EXPECT_TRUE(asks({"--csv", "out", "--help"}));
  EXPECT_FALSE(asks({}));
  EXPECT_FALSE(asks({"--csv", "--help"}));  // a folder named --help
  EXPECT_FALSE(asks({"--helpful"}));
  EXPECT_TRUE(throws_with<ValueError>([] { parse({"--csv"}); },
                                      "--csv needs a folder: --csv DIR"));
  const std::string usage = chapter_usage("./build/ch05_floats");
  EXPECT_EQ(usage.rfind("usage: ch05_floats [--csv DIR]\n", 0), 0u) << usage;
  EXPECT_NE(usage.find("chapters/ch05_floats/README.md"), std::string::npos) << usage;
}

// A chapter's timings that contradict its text are measured again, at most `attempts` times,
// and what still contradicts is reported as a busy machine, never printed as a finding.
TEST(Chapter, TimingsThatContradictTheTextAreMeasuredAgainThenReported) {
  int measured = 0;
  EXPECT_TRUE(remeasure_while([&] { return measured < 2; }, [&] { ++measured; }));
  EXPECT_EQ(measured, 2);  // stopped as soon as the numbers agreed
  measured = 0;
  EXPECT_TRUE(remeasure_while([] { return false; }, [&] { ++measured; }));
  EXPECT_EQ(measured, 0);  // numbers that agree are not measured again
  EXPECT_FALSE(remeasure_while([] { return true; }, [&] { ++measured; }, 3));
  EXPECT_EQ(measured, 3);  // and a contradiction that stays is given up on
  EXPECT_EQ(busy_note(true, "more than 100%"), "");
  EXPECT_EQ(busy_note(false, "more than 100%"),
            " (more than 100%: the machine was busy while this was measured; run it again on a "
            "quiet machine)");
}

// A median of no trials has no value: timed() refuses it rather than read an empty list.
TEST(Chapter, TimedNeedsAtLeastOneTrial) {
  int calls = 0;
  (void)timed([&] { ++calls; }, 1);  // the time itself is not checked: only what was run
  EXPECT_EQ(calls, 2);                // the warm-up and the one trial
  for (int trials : {0, -3})
    EXPECT_TRUE(throws_with<ValueError>([&] { timed([] {}, trials); },
                                        "timed(): trials must be a positive number, got " +
                                            std::to_string(trials)));
}

TEST(Chapter, CsvFileRaisesTheLibrarysError) {
  TempDir tmp;
  const std::string root = tmp.path().string();
  const std::string file = root + "/figures.txt";
  write_file(file);
  // A folder below a file: std::filesystem::create_directories would throw filesystem_error.
  EXPECT_TRUE(
      throws_with<RuntimeError>([&] { CsvFile(file + "/sub", "a.csv", {"x"}); },
                                "cannot write CSV files to '" + file + "/sub': Not a directory"));
  // The file's name taken by a folder.
  std::filesystem::create_directory(root + "/a.csv");
  EXPECT_TRUE(throws_with<RuntimeError>([&] { CsvFile(root, "a.csv", {"x"}); },
                                        "cannot write " + root + "/a.csv: Is a directory"));
  CsvFile ok(root, "b.csv", {"x", "y"});
  ok.row(1.5, "two");
  EXPECT_EQ(ok.path(), root + "/b.csv");
}
