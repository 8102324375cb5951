// The test suite's own scratch space: the model directories tests write must not
// outlive the tests (CTest runs each test in a process of its own, hundreds a run).
#include <gtest/gtest.h>

#include <fstream>

#include "tests/model_factory.h"

namespace fs = std::filesystem;
using ordo::testing_support::TempDirs;
using ordo::testing_support::tiny_config;
using ordo::testing_support::write_random_model;

TEST(TempDirs, MakesFreshDirectoriesAndRemovesThemWithTheirFiles) {
  fs::path first, second;
  {
    TempDirs dirs;
    first = dirs.make("factory");
    second = dirs.make("factory");
    EXPECT_NE(first, second);
    EXPECT_TRUE(fs::is_directory(first));
    EXPECT_TRUE(fs::is_empty(first));
    write_random_model(first, tiny_config());
    fs::create_directories(second / "nested");
    std::ofstream(second / "nested" / "file") << "x";
    fs::remove_all(second);  // a test that cleaned up after itself
  }
  EXPECT_FALSE(fs::exists(first));
  EXPECT_FALSE(fs::exists(second));
}
